"""demos.to_torch: steps in torch after the move continue exactly the steps here (Adam's
state carried over), the quick run ends with a lower held-out loss and agreeing logits (on
one process and, as CI runs it, on two), bad --workers and --port are refused by name, and
without torch the demo says how to install it and exits 0."""
import pathlib
import argparse
import re
import socket
import subprocess
import sys

import numpy as np
import pytest

import autograd_lite as ag
from demos import to_torch, translate
from demos.support import number_words as nw
from demos.support import to_torch_ddp
from helpers.to_torch import torch_copy, trained_a_little
from models.training import torch_distributed

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_steps_in_torch_continue_the_steps_here(torch):
    from models import torch_bridge
    params, optimizer, state, schedule, held_out = trained_a_little()
    more = translate.EpochBatches(0, 1, 3, 16, held_out)
    ours, _, our_losses = to_torch.train_here(params, optimizer, state, more, 6)
    module, adam = torch_copy(torch, params, state)
    their_losses = to_torch.train_in_torch(torch, module, adam, schedule, more, 6)
    np.testing.assert_allclose(their_losses, our_losses, rtol=1e-5)
    theirs = torch_bridge.from_torch(module.state_dict(), like=params)
    for path, x, y in zip(ag.tree_paths(ours), ag.tree_leaves(ours), ag.tree_leaves(theirs)):
        # A key bias adds the same q·b to every score of a query: softmax ignores it, so its
        # gradient is 0 but for rounding, which Adam's g / √v magnifies to full-size steps.
        if ag.is_differentiable(x) and not path.endswith("wk.b"):
            np.testing.assert_allclose(y, x, rtol=1e-4, atol=2e-6, err_msg=path)
    # the moments matter: a fresh torch Adam takes other steps from the same weights
    module, adam = torch_copy(torch, params)
    to_torch.train_in_torch(torch, module, adam, schedule, more, 6)
    fresh = torch_bridge.from_torch(module.state_dict(), like=params)
    assert np.max(np.abs(fresh.out.w - ours.out.w)) > 100 * 2e-6


def test_moved_weights_give_the_same_logits_and_a_broken_move_is_caught(torch):
    params, *_, held_out = trained_a_little(steps=1)
    module, _ = torch_copy(torch, params)
    assert to_torch.logits_difference(torch, module, params, held_out[:20]) < to_torch.AGREE
    wrong = params._replace(out=params.out._replace(b=params.out.b + 1e-3))
    with pytest.raises(SystemExit, match=r"to_torch: the logits differ by \d\.\d\de-0[34] of "
                                         r"the largest \(> 1e-05\)"):
        to_torch.logits_difference(torch, module, wrong, held_out[:20])


def test_quick_run_learns_in_both_places_and_ends_with_its_result(torch, tmp_path, capsys):
    to_torch.main(["--quick", "--out", str(tmp_path)])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    found = re.fullmatch(r"held-out loss ([\d.]+) untrained, ([\d.]+) after 30 steps here, "
                         r"([\d.]+) after 30 in torch; exact match ([\d.]+)% \(500 values\); "
                         r"logits agreed to ([\d.e+-]+) of the largest", last)
    assert found, last
    untrained, here, there, _, agreed = map(float, found.groups())
    assert untrained > np.log(len(nw.TARGET_VOCAB)) - 0.5  # about uniform over the words
    assert there < here < 0.8 * untrained and there < 0.6 * untrained
    assert agreed < to_torch.AGREE
    assert (tmp_path / "attention.png").stat().st_size > 0
    assert ag.load(tmp_path / "model.npz").out.w.dtype == np.float32


def test_quick_run_on_two_workers_as_ci_runs_it(torch, tmp_path):
    """python -m demos.to_torch --workers 2 --quick: DDP on two processes, then the same steps
    in one; the last line says how closely the two agreed and what a step took."""
    done = subprocess.run([sys.executable, "-m", "demos.to_torch", "--workers", "2", "--quick",
                           "--out", str(tmp_path)], capture_output=True, text=True, cwd=ROOT,
                          timeout=600)  # about 15 s on 2 idle cores; 90 s at load 11
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Warning" not in done.stderr, done.stderr[-3000:]  # no deprecated DDP keyword
    last = done.stdout.strip().splitlines()[-1]
    found = re.fullmatch(r"held-out loss ([\d.]+) untrained, ([\d.]+) after 30 steps here, "
                         r"([\d.]+) after 30 in torch; exact match [\d.]+% \(500 values\); "
                         r"logits agreed to ([\d.e+-]+) of the largest; 2 workers and one "
                         r"process agreed to ([\d.e+-]+) of the largest weight after 30 "
                         r"steps, (\d+) and (\d+) ms a step", last)
    assert found, last
    untrained, here, there, logits, weights, two, one = map(float, found.groups())
    assert there < here < 0.8 * untrained
    assert logits < to_torch.AGREE and weights < to_torch.DDP_AGREE
    assert two > 0 and one > 0
    assert "2 processes:" in done.stdout and "one process:" in done.stdout
    assert (tmp_path / "attention.png").stat().st_size > 0


@pytest.mark.parametrize("argv,message", [
    (["--workers", "0"], r"--workers must be at least 1, got 0"),
    (["--workers", "-1"], r"--workers must be at least 1, got -1"),
    (["--workers", "65"], r"--workers 65 is more than the 64 rows of a batch: every worker "
                          r"needs at least one")])
def test_too_few_or_too_many_workers_are_refused(capsys, argv, message):
    with pytest.raises(SystemExit) as stop:
        to_torch.parse_args(argv)
    assert stop.value.code == 2
    assert re.search(r"error: " + message, capsys.readouterr().err)


def test_more_workers_than_cores_are_allowed_with_a_warning(capsys, monkeypatch):
    monkeypatch.setattr(torch_distributed, "cores", lambda: 2)
    assert to_torch.parse_args(["--workers", "3"]).workers == 3
    assert ("to_torch: warning: --workers 3 starts 3 processes on 2 cores"
            in capsys.readouterr().err)
    to_torch.parse_args(["--workers", "2"])
    assert capsys.readouterr().err == ""


def test_a_port_in_use_is_refused_by_name(capsys):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with pytest.raises(SystemExit):
            to_torch.parse_args(["--workers", "2", "--port", str(port)])
        assert re.search(rf"error: --port {port} on 127\.0\.0\.1 is in use \(.+\): pass "
                         r"another, or --port 0 to choose a free one", capsys.readouterr().err)
        assert to_torch.parse_args(["--port", str(port)]).workers == 1  # no workers: unused


def test_a_worker_that_dies_ends_the_demo_with_its_message(torch, monkeypatch):
    """The launcher's failure (tested in test_torch_distributed.py by killing a worker) ends
    the demo with one line, before any step in one process."""
    def dies(job, workers, port):
        raise torch_distributed.WorkerFailed("worker 1 of 2 was killed by SIGKILL after 3.0 s; "
                                             "the others were stopped")
    monkeypatch.setattr(to_torch_ddp, "train", dies)
    args = argparse.Namespace(workers=2, port=0, seed=0, steps_here=1, steps_torch=3)
    params, _, state, schedule, held_out = trained_a_little(steps=1)
    module, adam = torch_copy(torch, params, state)
    before = module.state_dict()["out.weight"].clone()
    settings = to_torch.model_settings(args)
    with pytest.raises(SystemExit, match=r"^to_torch: worker 1 of 2 was killed by SIGKILL "
                                         r"after 3\.0 s; the others were stopped$"):
        to_torch.steps_in_torch(args, torch, module, adam, schedule, (params, state), settings,
                                held_out)
    assert torch.equal(module.state_dict()["out.weight"], before)


def test_without_torch_it_says_how_to_install_it_and_exits_0(tmp_path):
    hide_torch = ("import sys, runpy; sys.modules['torch'] = None; "
                  f"sys.argv = ['to_torch', '--quick', '--out', {str(tmp_path)!r}]; "
                  "runpy.run_module('demos.to_torch', run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", hide_torch], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "pip install torch" in done.stdout and "not installed" in done.stdout
