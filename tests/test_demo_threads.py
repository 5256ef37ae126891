"""The demos' one thread policy (demos/support/program.py, common.py): --threads N as read
before numpy loads, the environment each demo starts with as a program (the option, else the
environment's count, else one thread, for numpy's BLAS and torch alike), and main(argv) with
--threads setting the library's count in a process where numpy is loaded already."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

import autograd_lite as ag
from demos import logistic_regression
from demos.support import program

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEMOS = ("translate", "classify", "generate", "to_torch", "graphs", "logistic_regression")


@pytest.mark.parametrize("args, asked", [
    ([], None), (["--quick"], None), (["--threads", "3"], 3), (["--threads=2"], 2),
    (["--threads", "2", "--threads", "5"], 5),  # argparse keeps the last one too
    (["--threads", "0"], None), (["--threads", "x"], None), (["--threads"], None),
    (["--threadsx", "2"], None)])
def test_threads_asked_reads_the_option_before_argparse(args, asked):
    assert program.threads_asked(args) == asked


@pytest.mark.parametrize("asked, environment, expected", [
    (None, {}, ("1", "1")),
    (None, {"OPENBLAS_NUM_THREADS": "2"}, ("2", "2")),
    (None, {"OMP_NUM_THREADS": "3"}, ("3", "3")),
    (None, {"OPENBLAS_NUM_THREADS": "2", "OMP_NUM_THREADS": "4"}, ("2", "4")),
    (None, {"OPENBLAS_NUM_THREADS": " "}, ("1", "1")),  # blank: unset
    (3, {"OPENBLAS_NUM_THREADS": "2", "OMP_NUM_THREADS": "4"}, ("3", "3")),
])
def test_use_threads_sets_the_blas_and_torch_counts(asked, environment, expected, monkeypatch):
    for name in program.THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    count = program.use_threads(asked)
    assert tuple(os.environ[name] for name in program.THREAD_VARIABLES) == expected
    assert count == int(expected[0])


AS_PROGRAMS = """
import json, os, runpy, sys
seen = {}
for demo, threads in json.loads(sys.argv[1]):
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ.pop(name, None)
    sys.argv = [f"demos.{demo}", "--help"] + (["--threads", threads] if threads else [])
    try:
        runpy.run_module(f"demos.{demo}", run_name="__main__")
    except SystemExit:
        pass
    seen[demo] = [os.environ.get("OPENBLAS_NUM_THREADS"), os.environ.get("OMP_NUM_THREADS")]
print(json.dumps(seen))
"""


def test_every_demo_as_a_program_starts_with_one_thread_or_the_threads_asked():
    """Each demo's start, before its imports: one thread for numpy's BLAS and torch, or
    --threads N for both; and its --help names --threads."""
    runs = [(demo, str(k + 2) if k % 2 else None) for k, demo in enumerate(DEMOS)]
    env = {k: v for k, v in os.environ.items() if k not in program.THREAD_VARIABLES}
    done = subprocess.run([sys.executable, "-c", AS_PROGRAMS, json.dumps(runs)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    for demo, threads in runs:
        assert seen[demo] == [threads or "1"] * 2, demo
    help_text = "--threads N threads for numpy's BLAS and the library's kernels"
    assert " ".join(done.stdout.split()).count(help_text) == len(DEMOS)


def test_main_with_threads_sets_the_librarys_count(tmp_path, capsys):
    before = ag.thread_count()
    try:
        logistic_regression.main(["--quick", "--threads", "3", "--out", str(tmp_path)])
        assert ag.thread_count() == 3
    finally:
        ag.set_threads(before)
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("test accuracy:")


def test_a_bad_thread_count_is_refused_by_its_option():
    with pytest.raises(SystemExit) as stop:
        logistic_regression.parse_args(["--threads", "0"])
    assert stop.value.code == 2
