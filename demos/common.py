"""What every demo shares: the options --quick, --out and --seed, the output directory, and
the final line, which holds the measured result.

    parser = argparse.ArgumentParser(prog="python -m demos.classify", description=...)
    common.add_options(parser)
    args = parser.parse_args(argv)
    out = common.output_directory(args, "classify")     # runs/classify-<timestamp>/, made
    ...
    common.print_result("test accuracy: transformer 89.4%, ...")
"""
import datetime
import pathlib


def add_options(parser):
    """--quick, --out DIR and --seed N on an argparse parser."""
    parser.add_argument("--quick", action="store_true",
                        help="a tiny run of a few seconds, for CI; other options override it")
    parser.add_argument("--out", type=pathlib.Path, default=None, metavar="DIR",
                        help="where the run's files go (default: runs/<demo>-<timestamp>/)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seeds the data, the initial weights, the batches and dropout (0)")


def output_directory(args, name):
    """args.out, or runs/<name>-<YYYYmmdd-HHMMSS>/ when not given; created if missing."""
    out = args.out
    if out is None:
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        out = pathlib.Path("runs") / f"{name}-{stamp}"
    out.mkdir(parents=True, exist_ok=True)
    return out


def print_result(line):
    """The run's last line: its measured result."""
    print(line, flush=True)
