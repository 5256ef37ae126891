"""Ctrl-C at any moment of a training demo's run (translate, classify, generate): a real
SIGINT, sent from a hook at a chosen point (making the data, the first step, a step in the
middle of an epoch, writing the epoch's checkpoint or history, writing the final model, drawing
the plots), ends the program with one line, no traceback and status 130; the command that line
gives then ends with the model, history and pictures of an uninterrupted run, bit for bit.
As a program (python -m demos.<name>), a Ctrl-C while Python still imports ends in one line
and status 130 too."""
import contextlib
import io
import json
import os
import shlex
import signal
import subprocess
import sys

import numpy as np
import pytest

import autograd_lite as ag
from demos import classify, generate, translate
from demos.support import number_words, program, review_files
from models import plots, run_files

TRANSLATE = ["--quick", "--epochs", "2", "--epoch-size", "3", "--held-out", "8", "--d-model",
             "16", "--d-ff", "32", "--seed", "3"]
CLASSIFY = ["--quick", "--generated", "200", "--epochs", "2", "--d-model", "16", "--seed", "1"]
GENERATE = ["--quick", "--steps", "6", "--eval-every", "3", "--sample-length", "10", "--seed",
            "4", "--d-model", "16", "--d-ff", "32", "--context", "16"]  # and --data FILE
PICTURES = {translate: ("curves.png", "attention.png", "health.png"),
            classify: ("curves.png", "health.png", "confusion.png", "probabilities.png"),
            generate: ("curves.png", "health.png")}


def ctrl_c():
    """A real SIGINT to this process, as a terminal's Ctrl-C sends it."""
    os.kill(os.getpid(), signal.SIGINT)


def on_call(function, n, before=True):
    """`function`, sending Ctrl-C at its n-th call (from 1), before or after the call."""
    calls = []

    def hooked(*args, **kwargs):
        calls.append(1)
        if before and len(calls) == n:
            ctrl_c()
        result = function(*args, **kwargs)
        if not before and len(calls) == n:
            ctrl_c()
        return result
    return hooked


def saving(name):
    """ag.save that sends Ctrl-C before writing a file called `name`."""
    real = ag.save

    def save(path, tree):
        if os.path.basename(path) == name:
            ctrl_c()
        return real(path, tree)
    return save


def data_of(demo):
    """(module, name) of the function that makes the demo's data."""
    return {translate: (number_words, "held_out_values"), classify: (review_files, "load"),
            generate: (generate, "read_corpus")}[demo]


def hooks(demo):
    """{point: (module, attribute, replacement)}: where each Ctrl-C comes."""
    module, name = data_of(demo)
    return {
        "making the data": (module, name, on_call(getattr(module, name), 1, before=False)),
        "the first step": (demo, "loss_fn", on_call(demo.loss_fn, 1)),
        "a step mid-epoch": (demo, "loss_fn", on_call(demo.loss_fn, 2)),
        "writing the epoch's checkpoint": (run_files, "save_checkpoint",
                                           on_call(run_files.save_checkpoint, 1)),
        "writing the epoch's history": (run_files, "write_history",
                                        on_call(run_files.write_history, 1)),
        "writing the model": (ag, "save", saving("model.npz")),
        "drawing the plots": (plots, "_save", on_call(plots._save, 2)),
    }


def run(demo, argv):
    """demo.main(argv), its printout captured: -> (exit message or None, stdout, stderr).
    A Ctrl-C's message is the line on stderr, and its status must be 130."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            demo.main([str(a) for a in argv])
            code = None
        except program.Ended as stop:
            assert stop.code == 130, stop.code
            code = stop.line
        except SystemExit as stop:
            code = stop.code
    if isinstance(code, str) and code.startswith(f"{demo.__name__.rsplit('.', 1)[1]}: stopped"):
        assert err.getvalue().splitlines()[-1] == code  # printed as the last line
    return code, out.getvalue(), err.getvalue()


def printed_command(line, demo):
    """The argv of the command the line ends with (python -m demos.<name> ...)."""
    command = shlex.split(line.rsplit(": ", 1)[1])
    assert command[:3] == ["python", "-m", demo.__name__], line
    return command[3:]


def assert_same_results(first, second, demo):
    """The two folders hold the same model (bit for bit), history and pictures."""
    for x, y in zip(ag.tree_leaves(ag.load(first / "model.npz")),
                    ag.tree_leaves(ag.load(second / "model.npz"))):
        np.testing.assert_array_equal(x, y)
    history = json.loads((first / "history.json").read_text())
    assert json.loads((second / "history.json").read_text()) == history
    for name in PICTURES[demo]:
        assert (second / name).read_bytes() == (first / name).read_bytes(), name
    assert not [p.name for p in second.iterdir() if ".partial-" in p.name]


@pytest.mark.parametrize("demo, argv", [(translate, TRANSLATE), (classify, CLASSIFY),
                                        (generate, GENERATE)],
                         ids=["translate", "classify", "generate"])
def test_ctrl_c_anywhere_ends_with_one_line_whose_command_finishes_the_same_run(
        demo, argv, tmp_path, monkeypatch):
    name = demo.__name__.rsplit(".", 1)[1]
    if demo is generate:
        (tmp_path / "tiny.txt").write_text("the cat sat on the mat. " * 40, encoding="utf-8")
        argv = [*argv, "--data", str(tmp_path / "tiny.txt")]
    whole = tmp_path / "whole"
    code, _, _ = run(demo, [*argv, "--out", whole])
    assert code is None
    for i, (point, (module, attribute, hooked)) in enumerate(hooks(demo).items()):
        out = tmp_path / f"stopped-{i}"
        with monkeypatch.context() as patch:
            patch.setattr(module, attribute, hooked)
            line, _, err = run(demo, [*argv, "--out", out])
        assert isinstance(line, str), (point, line)
        assert "Traceback" not in err and "Exception ignored" not in err, (point, err)
        if point == "making the data":
            assert line == (f"{name}: stopped before its first checkpoint, so there is nothing "
                            f"to continue; to start again: python -m demos.{name} "
                            f"{shlex.join([*argv, '--out', str(out)])}"), point
        elif point in ("writing the model", "drawing the plots"):
            assert line == (f"{name}: stopped after training, while writing its results (the "
                            f"trained model is in {out / 'last.npz'}); to continue: python -m "
                            f"demos.{name} --out {out} --resume"), point
        else:
            where = {"the first step": (0, 0), "a step mid-epoch": (0, 1)}.get(point, (1, 0))
            assert line == (f"{name}: stopped at epoch {where[0]}, step {where[1]} (saved in "
                            f"{out / 'last.npz'}); to continue: python -m demos.{name} --out "
                            f"{out} --resume"), point
        code, _, err = run(demo, printed_command(line, demo))
        assert code is None, (point, code, err)
        assert_same_results(whole, out, demo)


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl"])
def test_a_run_on_a_csv_tsv_or_json_lines_file_resumes_from_the_line_it_prints(
        suffix, tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    good, bad = ("great", "lovely", "superb"), ("awful", "broken", "dull")
    rows = [(" ".join(rng.choice(good if label else bad, 3)) + " kettle lamp", int(label))
            for label in rng.permutation(np.arange(120) % 2)]
    path = tmp_path / f"reviews{suffix}"
    if suffix == ".csv":
        path.write_text("text,label\n" + "".join(f"{t},{'pos' if y else 'neg'}\n"
                                                 for t, y in rows))
    elif suffix == ".tsv":
        path.write_text("".join(f"{t}\t{y}\n" for t, y in rows))
    else:
        path.write_text("".join(json.dumps({"review_body": t, "stars": 5 if y else 1}) + "\n"
                                for t, y in rows))
    argv = ["--data", path, "--epochs", "2", "--d-model", "16", "--heads", "2", "--max-len",
            "8", "--min-df", "1"]
    assert run(classify, [*argv, "--out", tmp_path / "whole"])[0] is None
    with monkeypatch.context() as patch:
        patch.setattr(classify, "loss_fn", on_call(classify.loss_fn, 3))
        line, _, _ = run(classify, [*argv, "--out", tmp_path / "stopped"])
    assert line.endswith(f"to continue: python -m demos.classify --out {tmp_path / 'stopped'} "
                         f"--resume"), line
    code, _, err = run(classify, printed_command(line, classify))
    assert code is None, err
    assert_same_results(tmp_path / "whole", tmp_path / "stopped", classify)


IMPORTING = """
import builtins, os, runpy, signal, sys
real_import = builtins.__import__

def import_then_ctrl_c(name, *args, **kwargs):
    if name == "numpy":  # the demo's first heavy import: Ctrl-C as Python starts loading it
        os.kill(os.getpid(), signal.SIGINT)
    return real_import(name, *args, **kwargs)

builtins.__import__ = import_then_ctrl_c
sys.argv = ["{demo}", "--help"]
runpy.run_module("demos.{demo}", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("demo", ["translate", "classify", "generate", "graphs",
                                  "logistic_regression", "to_torch"])
def test_ctrl_c_while_python_imports_the_demo_ends_in_one_line_and_status_130(demo):
    """`python -m demos.<demo>` as runpy runs it, with a SIGINT sent as the demo starts to
    import numpy (before any of its code but the first lines has run)."""
    done = subprocess.run([sys.executable, "-c", IMPORTING.format(demo=demo)],
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout, done.stderr.strip()) == (130, "", f"{demo}: stopped")
