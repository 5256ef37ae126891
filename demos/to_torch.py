"""python -m demos.to_torch: train the translate model here, go on training it in PyTorch,
and bring it back.

    python -m demos.to_torch            # 200 steps here, 200 in torch
    python -m demos.to_torch --quick    # 30 + 30 steps (CI)
    python -m demos.to_torch --workers 2 --quick    # the torch steps on 2 processes (DDP)

How a user who outgrows one machine goes on with PyTorch (its distributed training, its
GPUs) and comes back for pictures and decoding: models.torch_bridge maps our parameter
tree to the state_dict of an equivalent torch module (TorchTransformer: nn.Transformer
between embeddings and an output layer) and back. The steps:

1. train the translate demo's model (demos.translate, its --quick sizes and recipe) for
   --steps-here steps, with a plain loop over ag.value_and_gradient and ag.optim.adam;
2. move the parameters, and Adam's moments and step count, to torch, and check that both
   compute the same logits on held-out numbers;
3. train --steps-torch more steps with torch.optim.Adam on the next batches; with
   --workers N > 1, on N processes first (DistributedDataParallel over gloo on 127.0.0.1,
   --port, default a free one; demos.support.to_torch_ddp), each on its rows of every batch, then
   the same steps in one process here, to show that both give the same weights; the model
   goes on with rank 0's;
4. bring the weights back with from_torch, check the logits again, and decode and draw
   with this project's tools: greedy translations, and attention.png in --out.

The last line is the held-out result: the loss under teacher forcing, the exact match of
greedy decoding, and how closely the logits agreed (with --workers, also how closely N
processes and one agreed, and the time of a step of each). Without torch it says how to
install it and exits normally. Like every demo it runs on one thread, numpy's BLAS and torch
alike, unless --threads or OPENBLAS_NUM_THREADS / OMP_NUM_THREADS say otherwise: as for
demos.translate, a second thread does not help at these sizes, and on a busy machine it hurts
(tests/benchmarks/README.md, "The demos' BLAS threads").
"""
import sys
import time

if __name__ == "__main__":  # a program's choice, made before numpy and torch load; not on import
    from .support import program
    program.start("to_torch")


import numpy as np  # noqa: E402

import autograd_lite as ag  # noqa: E402
from models import transformer  # noqa: E402
from models.training import torch_distributed  # noqa: E402

from .support import common, program  # noqa: E402
from .support import number_words as nw  # noqa: E402
from .support import to_torch_ddp  # noqa: E402
from .support.torch_steps import adam_state_to_torch, report, train_in_torch  # noqa: E402,F401
from . import translate  # noqa: E402

INSTALL = ("demos.to_torch needs PyTorch, which is not installed. Install it with\n"
           "  pip install torch\n"
           "(CPU only, a smaller download: pip install torch --index-url "
           "https://download.pytorch.org/whl/cpu), then run python -m demos.to_torch again.")
FULL = dict(steps_here=200, steps_torch=200)
QUICK = dict(steps_here=30, steps_torch=30)
HELD_OUT = 500
AGREE = 1e-5  # relative to the largest logit: float32 sums of the same terms in other orders
DDP_AGREE = 1e-4  # relative to a tensor's largest weight, after CHECK_STEPS Adam steps
CHECK_STEPS = 30  # weights compared after so many: rounding then moves them about 1e-6


def parse_args(argv=None):
    parser = common.argument_parser("to_torch", __doc__)
    for name, value in FULL.items():
        parser.add_argument(common.flag(name), type=int, default=None,
                            help=f"full run: {value}, --quick: {QUICK[name]}")
    parser.add_argument("--workers", type=int, default=1,
                        help="PyTorch processes for the steps in torch (1): more train with "
                             "DistributedDataParallel, each on its share of every batch")
    parser.add_argument("--port", type=int, default=0,
                        help="the workers' rendezvous port on 127.0.0.1 (0: a free one)")
    args = parser.parse_args(argv)
    for name, value in (QUICK if args.quick else FULL).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
        elif getattr(args, name) < 1:
            parser.error(f"{common.flag(name)} must be at least 1, got {getattr(args, name)}")
    check_workers(parser, args)
    common.check_output_folder(parser, common.output_path(args, "to_torch"))
    return args


def check_workers(parser, args):
    """--workers: at least 1, at most a batch's rows; past the cores a warning on stderr.
    --port (with workers): free, or 0."""
    batch_size = model_settings(args).batch_size
    try:
        warning = torch_distributed.check_workers(args.workers)
        if args.workers > 1:
            torch_distributed.choose_port(args.port)
    except ValueError as error:
        parser.error(str(error))
    if args.workers > batch_size:
        parser.error(f"--workers {args.workers} is more than the {batch_size} rows of a batch: "
                     f"every worker needs at least one")
    if warning:
        print(f"to_torch: {warning}", file=sys.stderr)


def model_settings(args):
    """demos.translate's --quick settings: its model sizes, batch size and learning rate."""
    return translate.parse_args(["--quick", "--seed", str(args.seed)])


def held_out_loss(params, held_out):
    """The mean next-word cross-entropy under teacher forcing on the held-out values."""
    batch = (translate.trim_padding(nw.encode_sources(held_out)),
             translate.trim_padding(nw.encode_targets(held_out)))
    return float(translate.loss_fn(params, batch, None))


def logits_difference(torch, module, params, held_out):
    """max |our logits - torch's| / max |our logits| on the held-out values under teacher
    forcing; a SystemExit above AGREE."""
    src = translate.trim_padding(nw.encode_sources(held_out))  # (B, S)
    tgt = translate.trim_padding(nw.encode_targets(held_out))[:, :-1]  # (B, T)
    ours = transformer.apply(params, src, tgt, src_pad=nw.PAD)  # (B, T, V)
    module.eval()
    with torch.no_grad():
        theirs = module(torch.from_numpy(src), torch.from_numpy(tgt), nw.PAD).numpy()
    difference = float(np.max(np.abs(ours - theirs)) / np.max(np.abs(ours)))
    if not difference <= AGREE:
        raise SystemExit(f"to_torch: the logits differ by {difference:.2e} of the largest "
                         f"(> {AGREE:.0e}): the bridge did not carry the model over")
    return difference


def train_here(params, optimizer, state, batches, first_step):
    """Adam steps here on `batches`, with translate's loss and clipping.
    -> (params, optimizer state, the loss of each step)"""
    losses = []
    for step, batch in enumerate(batches, first_step):
        loss, (grads, *_) = ag.value_and_gradient(translate.loss_fn, params, batch, None)
        grads = ag.optim.clip_by_global_norm(grads, translate.CLIP_NORM)
        params, state = optimizer.update(params, grads, state)
        losses.append(float(loss))
        report("here ", step, first_step, len(batches), losses)
    return params, state, losses


def steps_in_torch(args, torch, module, adam, schedule, start, settings, held_out):
    """Step 3: args.steps_torch steps on module with adam, in this process or, with --workers
    N > 1, on N processes from start = (params, Adam state) (steps_on_workers).
    -> for the last line: how the N processes agreed with one, and their times ("" for one)"""
    if args.workers > 1:
        return steps_on_workers(args, torch, module, adam, to_torch_ddp.Job(
            *start, to_torch_ddp.Schedule(settings.lr, settings.warmup,
                                          args.steps_here + args.steps_torch),
            args.seed, args.steps_torch, settings.batch_size, held_out, args.steps_here + 1,
            check=min(CHECK_STEPS, args.steps_torch)))
    batches = translate.EpochBatches(args.seed, 1, args.steps_torch, settings.batch_size,
                                     held_out)
    train_in_torch(torch, module, adam, schedule, batches, args.steps_here + 1)
    return ""


def steps_on_workers(args, torch, module, adam, job):
    """job on args.workers processes (demos.support.to_torch_ddp), then the same steps on module
    here in one; their weights after job.check steps compared (a SystemExit past DDP_AGREE),
    module goes on with rank 0's. -> the last line's words on the agreement and the times"""
    try:
        workers = to_torch_ddp.train(job, args.workers, args.port)
    except (ValueError, torch_distributed.WorkerFailed) as error:
        raise SystemExit(f"to_torch: {error}") from None
    print(f"  {args.workers} processes: {1000 * workers.seconds_per_step:.0f} ms a step")
    clock = time.perf_counter()
    losses, checked = to_torch_ddp.train_checked(torch, module, adam, job)
    one = (time.perf_counter() - clock) / job.steps
    print(f"  one process: {1000 * one:.0f} ms a step")
    difference = to_torch_ddp.parameter_difference(workers.checked, checked)
    if not difference <= DDP_AGREE:
        raise SystemExit(f"to_torch: after {job.check} steps the weights of {args.workers} "
                         f"processes and of one differ by {difference:.2e} of the largest "
                         f"(> {DDP_AGREE:.0e})")
    drift = np.max(np.abs(np.array(losses) - workers.losses))
    print(f"  the weights of {args.workers} processes and of one differ by {difference:.1e} of "
          f"the largest after {job.check} steps; the losses by at most {drift:.0e} over all "
          f"{job.steps} (float32 sums in another order, which training amplifies); the model "
          f"goes on with rank 0's")
    module.load_state_dict(workers.state_dict)
    return (f"; {args.workers} workers and one process agreed to {difference:.0e} of the "
            f"largest weight after {job.check} steps, {1000 * workers.seconds_per_step:.0f} "
            f"and {1000 * one:.0f} ms a step")


def main(argv=None):
    args = parse_args(argv)
    common.use_threads(args)
    try:
        import torch
        from models import torch_bridge
    except ImportError:
        common.print_result(INSTALL)
        return
    if args.threads is not None:  # as the BLAS's (common.use_threads)
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    ag.memory.keep_freed_memory()
    out = common.output_directory(args, "to_torch")
    settings = model_settings(args)
    held_out = nw.held_out_values(HELD_OUT, translate.HELD_OUT_SEED)
    params = translate.build_model(settings, np.random.default_rng(args.seed))
    untrained = held_out_loss(params, held_out)
    optimizer, schedule = translate.adam(settings, args.steps_here + args.steps_torch)

    print(f"1. {args.steps_here} steps here")
    batches = translate.EpochBatches(args.seed, 0, args.steps_here, settings.batch_size, held_out)
    params, state, _ = train_here(params, optimizer, optimizer.init(params), batches, 1)
    trained_here = held_out_loss(params, held_out)

    print("2. to torch: the parameters and Adam's state")
    module = torch_bridge.torch_module_for(params)
    torch_adam = torch.optim.Adam(module.parameters(), betas=translate.ADAM_BETAS,
                                  eps=translate.ADAM_EPS)
    adam_state_to_torch(torch, torch_adam, module, state)
    there = logits_difference(torch, module, params, held_out)
    print(f"  the logits agree: they differ by {there:.1e} of the largest, on {HELD_OUT} "
          f"held-out numbers")

    print(f"3. {args.steps_torch} steps in torch" + (
        f" on {args.workers} processes (DistributedDataParallel), then the same steps in one"
        if args.workers > 1 else ""))
    workers = steps_in_torch(args, torch, module, torch_adam, schedule, (params, state),
                             settings, held_out)

    print("4. back here: decoding and a picture")
    params = torch_bridge.from_torch(module.state_dict(), like=params)
    back = logits_difference(torch, module, params, held_out)
    print(f"  the logits agree: they differ by {back:.1e} of the largest")
    ag.save(out / "model.npz", params)
    translate.show_examples(params, held_out[::100][:3])
    translate.draw_attention(out / "attention.png", params, held_out[-1])
    print(f"  saved {out / 'model.npz'} and {out / 'attention.png'}")
    match = translate.exact_match(params, held_out)
    common.print_result(
        f"held-out loss {untrained:.2f} untrained, {trained_here:.2f} after {args.steps_here} "
        f"steps here, {held_out_loss(params, held_out):.2f} after {args.steps_torch} in torch; "
        f"exact match {100 * match:.1f}% ({HELD_OUT} values); logits agreed to "
        f"{max(there, back):.0e} of the largest{workers}")


if __name__ == "__main__":
    program.run("to_torch", main)
