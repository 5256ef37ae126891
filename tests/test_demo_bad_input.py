"""The bad inputs that once ended in a traceback, a silent answer or the wrong reason
(issue 33), each ending with one clear line: a run of another demo is named as such, a
diverging run names its step and where the gradient went wrong and what to try, a sampling
length has an upper bound, and a prediction from words the model never saw says so."""
import contextlib
import io
import os
import re
import signal

import pytest

import autograd_lite as ag
from demos import classify, generate, translate

DEMOS = {"translate": translate, "classify": classify, "generate": generate}


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
