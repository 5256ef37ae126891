"""Bad inputs, each ending with one clear line (no traceback, no silent answer, the right reason):
a run of another demo is named as such, a diverging run names its step and where the gradient
went wrong and what to try (and one that diverged without a NaN says so too), a sampling length
has an upper bound, a prediction from words the model never saw says so, empty standard input
and degenerate data are refused, and a full disk names the file and the checkpoint that holds,
with the command that goes on from it."""
import contextlib
import errno
import io
import json
import os
import pathlib
import re
import signal

import numpy as np
import pytest

import autograd_lite as ag
from demos import classify, generate, graphs, logistic_regression, translate

DEMOS = {"translate": translate, "classify": classify, "generate": generate, "graphs": graphs,
         "logistic_regression": logistic_regression}


def run(name, *argv):
    """demos.<name>.main(argv): -> (its exit message or None, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            DEMOS[name].main([str(a) for a in argv])
            code = None
        except SystemExit as stop:
            code = stop.code
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def finished_runs(tmp_path_factory):
    """{demo: the folder of a tiny finished run of it}."""
    folder = tmp_path_factory.mktemp("runs")
    (folder / "tiny.txt").write_text("the cat sat on the mat. " * 40, encoding="utf-8")
    argv = {"translate": ["--quick", "--epochs", "1", "--epoch-size", "2", "--held-out", "8",
                          "--d-model", "16", "--d-ff", "32"],
            "classify": ["--quick", "--generated", "200", "--epochs", "1", "--d-model", "16"],
            "generate": ["--quick", "--steps", "2", "--eval-every", "2", "--sample-length", "5",
                         "--d-model", "16", "--d-ff", "32", "--context", "16", "--data",
                         folder / "tiny.txt"]}
    for name, options in argv.items():
        code, _, err = run(name, *options, "--out", folder / name)
        assert code is None, err
    return {name: folder / name for name in argv}


@pytest.mark.parametrize("program, other, use", [
    ("translate", "classify", ["--number", "5"]), ("translate", "generate", ["--number", "5"]),
    ("generate", "translate", ["--prompt", "The"]), ("classify", "translate", ["--predict", "ok"]),
    ("translate", "classify", ["--resume"]), ("classify", "generate", ["--resume"]),
    ("generate", "translate", ["--resume"])])
def test_a_run_of_another_demo_is_named_as_such(finished_runs, program, other, use):
    folder = finished_runs[other]
    option = "--out" if use == ["--resume"] else "--model"
    code, out, _ = run(program, option, folder, *use)
    assert code == (f"{program}: {folder} is a run of demos.{other}, not of demos.{program}: "
                    f"use it with python -m demos.{other}")
    assert out == ""


def test_a_prediction_from_words_the_model_never_saw_says_so(finished_runs):
    folder = finished_runs["classify"]
    code, out, err = run("classify", "--model", folder, "--predict", "zzz qqq", "not bad at all")
    assert code is None
    answers = out.splitlines()  # stdout: one answer a text, nothing else
    assert len(answers) == 2 and answers[0].endswith("'zzz qqq'"), answers
    assert err == ("classify: none of the words of 'zzz qqq' is in the model's vocabulary: the "
                   "prediction above is its answer to a review it cannot read\n")


@pytest.mark.parametrize("program, argv", [
    ("translate", ["--quick", "--lr", "1e6", "--epoch-size", "5", "--held-out", "8"]),
    ("classify", ["--quick", "--lr", "1e9", "--generated", "300"])])
def test_a_diverging_run_ends_with_its_step_where_and_a_lower_lr(program, argv, tmp_path):
    code, _, err = run(program, *argv, "--out", tmp_path / "run")
    assert isinstance(code, str) and "Traceback" not in err and "Warning" not in err, err
    lr = argv[argv.index("--lr") + 1]
    assert re.fullmatch(
        rf"{program}: (the loss is (nan|inf)|the gradient is not finite|the gradient is too "
        rf"large \(its squared norm overflows its precision\)) at step \d+ \(epoch 0\); "
        rf"([\d,]+ of the gradient's [\d,]+ entries are NaN or infinite, in [\w\[\]., ]+|every "
        rf"gradient entry is finite; the largest group's norm is \S+'s, [\d.e+]+); stopped "
        rf"before that update: try a lower --lr than {re.escape(f'{float(lr):g}')}", code), code


@pytest.mark.parametrize("program, argv, message", [
    ("generate", ["--model", "x", "--prompt", "The", "--length", "1000000000"],
     "--length must be at most 100,000 (about a minute of sampling), got 1,000,000,000"),
    ("generate", ["--quick", "--sample-length", "200000"],
     "--sample-length must be at most 100,000 (about a minute of sampling each), got 200,000"),
    ("generate", ["--model", "x", "--prompt", "The", "--beam", "65"],
     "--beam must be at most 64 (a wider beam finds hardly anything better), got 65"),
    ("translate", ["--model", "x", "--number", "5", "--beam", "1000"],
     "--beam must be at most 64 (a wider beam finds hardly anything better), got 1,000"),
    ("classify", ["--generated", "100000000"],
     "--generated must be at most 10,000,000 (a few GB of reviews), got 100,000,000")])
def test_sizes_have_upper_bounds(program, argv, message):
    code, _, err = run(program, *argv)
    assert code == 2 and err.splitlines()[-1] == f"python -m demos.{program}: error: {message}"


@pytest.mark.parametrize("program, use", [
    ("translate", ["--number", "5"]), ("classify", ["--predict", "ok"]),
    ("generate", ["--prompt", "The"])])
def test_ctrl_c_while_a_model_answers_ends_in_one_line(finished_runs, program, use, monkeypatch):
    """A SIGINT while the trained model is read (every demo's --model mode loads it with
    ag.load) ends the program with status 130 and one line, not a KeyboardInterrupt."""
    real_load = ag.load

    def load_then_ctrl_c(*args, **kwargs):
        loaded = real_load(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)
        return loaded
    monkeypatch.setattr(ag, "load", load_then_ctrl_c)
    code, out, err = run(program, "--model", finished_runs[program], *use)
    assert (code, out, err.strip()) == (130, "", f"{program}: stopped")


def test_ctrl_c_while_translate_reads_numbers_from_stdin(finished_runs, monkeypatch):
    """translate --model DIR answers the numbers of standard input until it ends; a Ctrl-C
    there, the usual way to stop it at a terminal, ends it quietly after the answers so far."""
    class Terminal(io.StringIO):
        def __iter__(self):
            yield "5\n"
            os.kill(os.getpid(), signal.SIGINT)
            yield "6\n"
    monkeypatch.setattr("sys.stdin", Terminal())
    code, out, err = run("translate", "--model", finished_runs["translate"])
    assert (code, err.strip()) == (130, "translate: stopped")
    assert out == ""  # the numbers are read first, then answered: none was answered yet


def test_translate_says_so_when_standard_input_holds_no_number(finished_runs, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("\n  \n"))
    code, out, _ = run("translate", "--model", finished_runs["translate"])
    assert code == ("translate: standard input held no numbers: give them one a line (printf "
                    "'12\\n345\\n' | python -m demos.translate --model DIR), or as --number N ...")
    assert out == ""


def test_a_text_of_one_character_is_refused_with_its_reason(tmp_path):
    (tmp_path / "a.txt").write_text("a" * 500, encoding="utf-8")
    code, _, _ = run("generate", "--quick", "--data", tmp_path / "a.txt", "--out", tmp_path / "g")
    assert code == (f"generate: {tmp_path / 'a.txt'} holds one distinct character ('a') and "
                    f"nothing else: there is nothing to predict; give a text of more than one "
                    f"character")
    assert not (tmp_path / "g").exists()


def test_labels_that_differ_only_in_case_are_refused_naming_both(tmp_path):
    rows = [("good film", "positive"), ("bad film", "negative")] * 10 + [("fine", " Positive")]
    (tmp_path / "r.csv").write_text("text,label\n" + "".join(f"{t},{y}\n" for t, y in rows))
    code, _, _ = run("classify", "--data", tmp_path / "r.csv", "--out", tmp_path / "c")
    assert code == (f"classify: read_csv: {tmp_path / 'r.csv'}, line 22: the label 'Positive' "
                    f"is 'positive' (line 2) written another way (only in case): write them "
                    f"one way, or they are two classes")
    assert not (tmp_path / "c").exists()


def test_a_run_that_diverges_without_a_nan_says_so_and_what_to_try(tmp_path):
    """generate --lr 10 ends far above where it started without any loss being NaN: the run
    ends with one line saying it diverged and naming a lower --lr to try."""
    (tmp_path / "tiny.txt").write_text("the cat sat on the mat. " * 40, encoding="utf-8")
    code, _, err = run("generate", "--quick", "--lr", "10", "--steps", "40", "--eval-every",
                       "20", "--data", tmp_path / "tiny.txt", "--out", tmp_path / "g")
    assert re.fullmatch(r"generate: the training loss ended at [\d.]+ nats, more than 2 times "
                        r"the [\d.]+ it started at: the run diverged; try a lower --lr than 10",
                        code), code
    history = json.loads((tmp_path / "g" / "history.json").read_text())
    assert all(np.isfinite(history["step_loss"]))  # no NaN: the NaN check could not tell
    assert not (tmp_path / "g" / "model.npz").exists()  # and no result is reported


def test_divergence_is_judged_by_the_end_against_the_start_and_a_uniform_guess():
    from demos.support import runs
    def steps(first, *rest):  # a history of 10 steps: the first, 6 more, then 3 (the last)
        return {"step_loss": [first] * 7 + list(rest) * 3}
    assert runs.divergence(steps(4.0, 4.1), 34, "words") is None  # untrained, not diverged
    assert runs.divergence(steps(0.69, 0.71), 2, "classes") is None  # noise near log 2
    assert runs.divergence(steps(4.0, 9.0), 34, "words") == (
        "ended at 9 nats, more than 2 times the 4 it started at")
    assert runs.divergence(steps(0.7, 1.0), 2, "classes") == (
        "ended at 1 nats, above the 0.7 it started at and above a uniform guess's 0.6931 (the "
        "log of 2 classes)")
    assert runs.divergence({"step_loss": [0.7, 9.0]}, 2, "classes") is None  # too short to say


def disk_full_at(name, nth=1):
    """os.fsync that fails as a full disk does (ENOSPC, naming no file) at the nth sync of a
    file written as `name` (atomically: <name>.partial-<pid>)."""
    real, seen = os.fsync, []

    def fsync(fd):
        written = os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))
        if written.startswith(f"{name}.partial-"):
            seen.append(written)
            if len(seen) == nth:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd)
    return fsync


FULL = os.strerror(errno.ENOSPC)
TINY = {"translate": ["--quick", "--epochs", "2", "--epoch-size", "2", "--held-out", "8",
                      "--d-model", "16", "--d-ff", "32"],
        "classify": ["--quick", "--generated", "200", "--epochs", "2", "--d-model", "16"],
        "generate": ["--quick", "--steps", "4", "--eval-every", "2", "--sample-length", "5",
                     "--d-model", "16", "--d-ff", "32", "--context", "16"]}


@pytest.mark.parametrize("program", ["translate", "classify", "generate"])
def test_a_full_disk_names_the_file_and_the_checkpoint_that_holds(program, tmp_path,
                                                                   monkeypatch):
    """The disk fills while the run writes its settings (nothing to continue), the second
    epoch's history (last.npz of that epoch holds) or the trained model; each ends in one line
    and status 1, and the run then goes on from the line's command as after a Ctrl-C."""
    (tmp_path / "tiny.txt").write_text("the cat sat on the mat. " * 40, encoding="utf-8")
    argv = TINY[program] + (["--data", tmp_path / "tiny.txt"] if program == "generate" else [])
    for i, (name, nth) in enumerate((("hyperparameters.json", 1), ("history.json", 2),
                                     ("model.npz", 1))):
        out = tmp_path / f"run-{i}"
        with monkeypatch.context() as patch:
            patch.setattr(os, "fsync", disk_full_at(name, nth))
            code, _, err = run(program, *argv, "--out", out)
        assert "Traceback" not in err, err
        head = f"{program}: could not write {out / name} ({FULL}); "
        resume = f"to continue: python -m demos.{program} --out {out} --resume"
        if name == "hyperparameters.json":
            again = " ".join(str(a) for a in [*argv, "--out", out])
            assert code == (f"{head}there is no checkpoint yet: once there is space, to start "
                            f"again: python -m demos.{program} {again}")
            continue
        if name == "history.json":
            assert code == (f"{head}the last checkpoint that holds is {out / 'last.npz'} (epoch "
                            f"2, step 0): once there is space, {resume}")
        else:
            assert code == (f"{head}the trained model is in {out / 'last.npz'}: once there is "
                            f"space, {resume}")
        assert not [p.name for p in out.iterdir() if ".partial-" in p.name]
        code, _, err = run(program, "--out", out, "--resume")  # space again
        assert code is None, err
        assert (out / "model.npz").is_file()


def test_a_full_disk_ends_graphs_and_logistic_regression_in_one_line(tmp_path, monkeypatch,
                                                                     dot):
    real = pathlib.Path.write_bytes

    def full_at_the_classifier(path, data):
        if path.name == "classifier-depth3.png":
            raise OSError(errno.ENOSPC, FULL)  # a write on a full disk names no file
        return real(path, data)
    monkeypatch.setattr(pathlib.Path, "write_bytes", full_at_the_classifier)
    code, _, err = run("graphs", "--quick", "--out", tmp_path / "g")
    assert code == (f"graphs: could not write {tmp_path / 'g' / 'classifier-depth3.png'} "
                    f"({FULL}); the pictures before it are in {tmp_path / 'g'}")
    monkeypatch.setattr(os, "fsync", disk_full_at("model.npz"))
    code, _, _ = run("logistic_regression", "--quick", "--out", tmp_path / "l")
    assert code == f"logistic_regression: {tmp_path / 'l' / 'model.npz'}: save: {FULL}"
