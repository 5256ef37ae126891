"""This checkout against another (an earlier commit), each measured against the same PyTorch
twin: did a change make any workload slower? A script, not a test:

    git worktree add ../base <commit>
    python3 tests/benchmarks/bench_ab.py --base ../base [--pairs 8] [--threads 2] [--rounds 3]
        [--only w1,w2,w3,lm]

Runs bench_models.py of this checkout and of --base in alternating processes (which goes
first alternates pair by pair), each timing ours against PyTorch in blocks. Two versions of
our code cannot share a process, so PyTorch, unchanged between them, is the yardstick: for
each workload and pair, (this checkout's ratio to PyTorch) / (the base's ratio to PyTorch),
and the median over the pairs with its quartiles and range. Below 1: this checkout is faster
(8 pairs or more for a difference of a few per cent: tests/benchmarks/README.md, "Measuring a
small difference"). The
environment (AUTOGRAD_LITE_KERNELS, say) is the same for both sides; a base that predates a
variable ignores it.
"""
import argparse
import os
import pathlib
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import timing  # noqa: E402


def ratios(checkout, args):
    """{(workload, "train" | "infer"): ours / PyTorch} from bench_models.py of `checkout`."""
    command = [sys.executable, str(checkout / "tests" / "benchmarks" / "bench_models.py"),
               "--threads", str(args.threads), "--rounds", str(args.rounds), "--only", args.only]
    out = subprocess.run(command, cwd=checkout, capture_output=True, text=True, check=True)
    rows = timing.read_result(out.stdout)["rows"]
    return {(row["key"], what): row[what]["ratio"] for row in rows for what in ("train", "infer")}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=pathlib.Path, required=True,
                        help="a checkout of the commit to compare with")
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="w1,w2,w3,lm")
    args = parser.parse_args()
    sides = {"this": timing.ROOT, "base": args.base.resolve()}
    print(f"CPU: {timing.cpu_model()}; this checkout {timing.ROOT.name} against {sides['base']}; "
          f"AUTOGRAD_LITE_KERNELS="
          f"{os.environ.get('AUTOGRAD_LITE_KERNELS', '')!r}; load average "
          f"{timing.load_average():.2f}", flush=True)
    measured = {"this": [], "base": []}
    for pair in range(args.pairs):
        order = ("this", "base") if pair % 2 == 0 else ("base", "this")
        for side in order:
            measured[side].append(ratios(sides[side], args))
            print(f"pair {pair + 1}, {side}: " + ", ".join(
                f"{key} {what} {r:.2f}" for (key, what), r in measured[side][-1].items()),
                flush=True)
    print(f"\n{'workload':12s} {'this / base (median)':>22s} {'quartiles':>13s} {'range':>13s}")
    for case in measured["this"][0]:
        relative = [t[case] / b[case] for t, b in zip(measured["this"], measured["base"])]
        low, median, high = timing.quartiles(relative)
        print(f"{case[0] + ' ' + case[1]:12s} {median:22.2f} {low:6.2f} - {high:.2f} "
              f"{min(relative):6.2f} - {max(relative):.2f}")
    print(f"load average at the end: {timing.load_average():.2f}")


if __name__ == "__main__":
    main()
