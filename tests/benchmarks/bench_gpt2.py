"""GPT-2 small (124M) in lm.py's functions against transformers' GPT2LMHeadModel: a forward
over one sequence of 64 tokens, and the time and memory gpt2.load takes. A script, not a test:

    python3 tests/benchmarks/bench_gpt2.py [--threads 1] [--rounds 7] [--folder DIR]

Both sides read one folder written by GPT2LMHeadModel.save_pretrained: GPT-2 small's
sizes and transformers' random init (the published file's format and size; a folder of the
real files, --folder, works the same), made in a temporary folder unless --folder is given.
The forward: lm.apply on plain numpy arrays, and GPT2LMHeadModel under torch.no_grad() in
eval mode; the logits must agree to 1e-3 (asserted). Timed in alternating blocks
(timing.alternating_blocks), with the same thread count on both sides.

The load: gpt2.load in a fresh process (run as `--load-only DIR`): its wall time, the
growth of the process's peak RSS over the load, and tracemalloc's peak of what the load
allocated (numpy's arrays count there), against the weights' own bytes.
"""
import argparse
import pathlib
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import timing  # noqa: E402  (standard library only: numpy is not loaded yet)

THREADS = timing.pin_threads(timing.threads_from_argv())
import numpy as np  # noqa: E402

import autograd_lite as ag  # noqa: E402
from models import gpt2, lm  # noqa: E402

TOKENS = 64


def write_random_gpt2(folder):
    """GPT-2 small's sizes, transformers' random init, saved by save_pretrained."""
    import torch
    import transformers
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(transformers.GPT2Config()).save_pretrained(folder)


def measure_load(folder):
    """gpt2.load(folder) in this (fresh) process -> {seconds, rss_growth_mib,
    traced_peak_mib, weights_mib}."""
    import resource
    import tracemalloc
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    tracemalloc.start()
    start = time.perf_counter()
    p = gpt2.load(folder)
    seconds = time.perf_counter() - start
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    weights = sum(leaf.nbytes for leaf in ag.tree_leaves(p) if hasattr(leaf, "nbytes"))
    mib = 2 ** 20
    return {"seconds": seconds, "rss_growth_mib": (rss_after - rss_before) * 1024 / mib,
            "traced_peak_mib": traced_peak / mib, "weights_mib": weights / mib}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="threads for each library")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--folder", type=pathlib.Path, default=None,
                        help="GPT-2's files (default: a random GPT-2 small, written first)")
    parser.add_argument("--load-only", type=pathlib.Path, default=None, metavar="DIR",
                        help=argparse.SUPPRESS)  # the fresh process of the load's measure
    args = parser.parse_args()
    if args.load_only is not None:
        print(timing.RESULT_PREFIX + __import__("json").dumps(measure_load(args.load_only)))
        return
    with tempfile.TemporaryDirectory() as temporary:
        folder = args.folder or pathlib.Path(temporary)
        if args.folder is None:
            write_random_gpt2(folder)
        run(args, folder)


def run(args, folder):
    import json

    import torch
    import transformers
    timing.torch_threads(torch, THREADS)
    env = timing.environment(torch)
    print(timing.describe_environment(env))
    done = subprocess.run([sys.executable, __file__, "--threads", str(THREADS), "--load-only",
                           str(folder)], capture_output=True, text=True, check=True)
    load = json.loads(done.stdout.split(timing.RESULT_PREFIX, 1)[1])
    print(f"gpt2.load: {load['seconds']:.2f} s; peak RSS grew {load['rss_growth_mib']:.0f} MiB "
          f"and tracemalloc's peak was {load['traced_peak_mib']:.0f} MiB, for weights of "
          f"{load['weights_mib']:.0f} MiB")

    ag.memory.keep_freed_memory()
    p = gpt2.load(folder)
    model = transformers.GPT2LMHeadModel.from_pretrained(folder).eval()
    ids = np.random.default_rng(0).integers(0, lm.vocab_size(p), (1, TOKENS))
    torch_ids = torch.from_numpy(ids)

    def ours():
        return lm.apply(p, ids)

    def theirs():
        with torch.no_grad():
            return model(torch_ids).logits
    np.testing.assert_allclose(ours(), theirs().numpy(), atol=1e-3, rtol=0)
    timed = timing.alternating_blocks(ours, theirs, args.rounds, block_seconds=1.0)
    summary = timed.summary()
    print(f"forward of {TOKENS} tokens at {THREADS} threads: ours {summary['ms_a']:.1f} ms, "
          f"transformers {summary['ms_b']:.1f} ms; ours / theirs {summary['ratio']:.2f} "
          f"(quartiles {summary['ratio_q1']:.2f} to {summary['ratio_q3']:.2f}, "
          f"{summary['rounds']} rounds of {summary['k']}); load average "
          f"{timing.load_average():.2f} after")
    print(timing.RESULT_PREFIX + json.dumps({"env": env, "load": load, "forward": summary}))


if __name__ == "__main__":
    main()
