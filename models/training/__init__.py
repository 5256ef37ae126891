"""What trains a model and shows the run, apart from the models themselves, and the two
launchers of several processes.

    train.py       fit: the training loop, its history, checkpoints and exact resume
    run_files.py   the files of a run in its out_dir, each written atomically
    progress.py    the progress line of an epoch, on stderr
    health.py      gradient norms and update ratios by parameter group
    plots.py       curves, health, confusion matrices and attention maps (matplotlib)
    side_by_side.py  several runs at once, one process each, stopped together by Ctrl-C
    torch_distributed.py  one function on N PyTorch processes in a gloo group, watched

`from models import train, plots` reaches the first six; so does `models.training.train`.
torch_distributed, which only the torch bridge's demo uses, is `models.training.torch_distributed`.
"""
