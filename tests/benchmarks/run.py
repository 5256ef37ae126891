"""Every benchmark of the README's speed section, each in its own process, and the section's
tables. A script, not a test:

    python3 tests/benchmarks/run.py [--threads 2,1] [--rounds 7] [--quick] [--write-readme]

Runs, for each thread count (a separate process per count, since OpenBLAS fixes its threads
when numpy loads): bench_models.py (parity, then training steps and inference of w1, w2, w3
and the LM against their PyTorch twins), bench_ops.py (per-op overhead) and
bench_generation.py (per token, with and without the KV cache); then bench_rss.py (peak RSS
of a w3 step, ours and PyTorch's, in fresh processes) at the first thread count. Prints the
environment (CPU, numpy's BLAS and its core type, threads, the load average at the start and
the end) and the tables in markdown; --write-readme puts them into tests/benchmarks/README.md
(the root README's speed section links there) between the
markers <!-- speed:start --> and <!-- speed:end -->. --quick (3 rounds) checks the
machinery; figures for the README want the default rounds on a quiet machine.
"""
import argparse
import pathlib
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import timing  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
README = timing.ROOT / "tests" / "benchmarks" / "README.md"  # the full tables; the root README links to them
START, END = "<!-- speed:start -->", "<!-- speed:end -->"


def run_script(name, *options, result=True):
    """Run a benchmark script of this folder, echoing its output; -> the result it emitted
    (None with result=False: a script that emits none, such as profile_step.py)."""
    command = [sys.executable, str(HERE / name), *map(str, options)]
    print(f"\n$ {name} {' '.join(map(str, options))}", flush=True)
    process = subprocess.Popen(command, cwd=timing.ROOT, stdout=subprocess.PIPE, text=True)
    lines = []
    for line in process.stdout:
        lines.append(line)
        if not line.startswith(timing.RESULT_PREFIX):
            print("  " + line, end="", flush=True)
    if process.wait():
        raise SystemExit(f"run.py: {name} failed (exit {process.returncode})")
    return timing.read_result("".join(lines)) if result else None


def plural(n, noun):
    return f"{n} {noun}{'s' * (n != 1)}"


def ratio_cell(r):
    return f"{r['ratio']:.2f} ({r['ratio_q1']:.2f} – {r['ratio_q3']:.2f})"


def ms_cell(r):
    return f"{r['ms_a']:.1f} / {r['ms_b']:.1f}"


def workload_table(kind, models, threads):
    """Markdown: one row per workload, ratio and ms at each thread count. kind: train or infer."""
    header = "| workload |" + "".join(f" {plural(n, 'thread')}: ours / PyTorch | ms ours / "
                                      f"PyTorch |" for n in threads)
    lines = [header, "|---|" + "---|---|" * len(threads)]
    for i, row in enumerate(models[threads[0]]["rows"]):
        cells = "".join(f" {ratio_cell(models[n]['rows'][i][kind])} | "
                        f"{ms_cell(models[n]['rows'][i][kind])} |" for n in threads)
        lines.append(f"| {row['key']}: {row['title']} |{cells}")
    return "\n".join(lines)


def environment_line(env, start_load, end_load):
    b = env["blas"]
    return (f"{env['cpu']}, {env['cores']} cores; Python {env['python']}, numpy {env['numpy']} "
            f"with {b['name']} {b['version']} (core {b['core']}), autograd_lite kernels "
            f"{env.get('kernels', 'numpy')}, torch {env['torch']}; load "
            f"average {start_load:.2f} at the start, {end_load:.2f} at the end "
            f"({time.strftime('%Y-%m-%d')})")


def section(results, threads, start_load, end_load):
    """The README's figures, in markdown."""
    models, ops, generation, rss = (results[k] for k in ("models", "ops", "generation", "rss"))
    env = models[threads[0]]["environment"]
    parity = {dtype: max(row["parity"][dtype]["error"] for n in threads
                         for row in models[n]["rows"]) for dtype in ("float64", "float32")}
    out = [f"Measured on: {environment_line(env, start_load, end_load)}.", "",
           "A training step (forward, cross-entropy, backward, Adam; float32), median ratio over "
           "rounds (quartiles), and median ms per step of each side:", "",
           workload_table("train", models, threads), "",
           "Inference, a forward pass (ours on plain arrays, PyTorch under `torch.no_grad()`):",
           "", workload_table("infer", models, threads), "",
           f"Before timing, the twin's loss and every gradient agreed with ours: the worst "
           f"gradient to {parity['float64']:.0e} norm-wise in float64, {parity['float32']:.0e} "
           f"in float32 (tests/benchmarks/workloads.py: check_parity)."]
    for n in threads:
        tiny, wide = ops[n]["rows"]
        g = generation[n]
        out += ["", f"{plural(n, 'thread')}: per op (a chain of {ops[n]['n_ops']} ops, forward "
                f"and backward), {tiny['ours_us']:.1f} µs on (4, 4) arrays, {tiny['ratio']:.2f} "
                f"of PyTorch's time (a bare numpy op: {tiny['numpy_us']:.1f} µs); on (64, 64), "
                f"{wide['ours_us']:.1f} µs, {wide['ratio']:.2f}. Generation (the LM, one "
                f"sequence, greedy): {g['cached_ms']:.2f} ms a token with the KV cache, "
                f"{g['uncached_ms']:.2f} ms without (cached / uncached {g['cache_ratio']:.2f}); "
                f"without a cache ours / PyTorch's {g['uncached_vs_twin_ratio']:.2f}."]
    sides = {r["side"]: r for r in rss["rows"]}
    out += ["", f"Peak RSS over a w3 training step ({plural(rss['threads'], 'thread')}, each "
            f"in a fresh process): ours {sides['ours']['peak_mib']:.0f} MiB, PyTorch's "
            f"{sides['torch']['peak_mib']:.0f} MiB."]
    return "\n".join(out)


def write_readme(text):
    readme = README.read_text()
    if START not in readme or END not in readme:
        raise SystemExit(f"run.py: {README.name} lacks the markers {START} and {END}")
    head, rest = readme.split(START, 1)
    _, tail = rest.split(END, 1)
    README.write_text(f"{head}{START}\n{text}\n{END}{tail}")
    print(f"\n{README}: the speed figures replaced between {START} and {END}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="2,1", help="thread counts, comma-separated")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="3 rounds: checks the machinery")
    parser.add_argument("--only", default="w1,w2,w3,lm", help="workloads of bench_models.py")
    parser.add_argument("--write-readme", action="store_true")
    args = parser.parse_args()
    threads = [int(n) for n in args.threads.split(",")]
    rounds = 3 if args.quick else args.rounds
    start_load = timing.load_average()
    print(f"run.py: threads {threads}, {rounds} rounds; CPU {timing.cpu_model()}; load average "
          f"at the start {start_load:.2f}")
    results = {"models": {}, "ops": {}, "generation": {}}
    for n in threads:
        results["models"][n] = run_script("bench_models.py", "--threads", n, "--rounds", rounds,
                                          "--only", args.only)
        results["ops"][n] = run_script("bench_ops.py", "--threads", n, "--rounds", rounds + 2)
        results["generation"][n] = run_script("bench_generation.py", "--threads", n,
                                              "--rounds", rounds)
    results["rss"] = run_script("bench_rss.py", "--threads", threads[0])
    end_load = timing.load_average()
    text = section(results, threads, start_load, end_load)
    print("\n" + text)
    if args.write_readme:
        write_readme(text)


if __name__ == "__main__":
    main()
