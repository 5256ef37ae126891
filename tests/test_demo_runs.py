"""The run lifecycle of the three training demos (translate, classify, generate): a run
stopped by Ctrl-C, or killed, resumes from `--out DIR --resume` alone (its options read from
its hyperparameters.json) and ends with the bits of an uninterrupted run; a resume refuses
an option that contradicts the run's; the trained model answers from the command line."""
import json
import re
import signal

import numpy as np
import pytest
from helpers.stopping import ctrl_c, run_until_killed, stopping_fit

import autograd_lite as ag
from demos import classify, generate, translate
from models import train


def assert_same_run(*folders):
    """The folders hold the same trained model (bit for bit) and the same history."""
    first = ag.load(folders[0] / "model.npz")
    history = json.loads((folders[0] / "history.json").read_text())
    for folder in folders[1:]:
        for x, y in zip(ag.tree_leaves(first), ag.tree_leaves(ag.load(folder / "model.npz"))):
            np.testing.assert_array_equal(x, y)
        assert json.loads((folder / "history.json").read_text()) == history, folder


def stop_resume_and_kill(demo, settings, tmp_path, monkeypatch):
    """A run of `settings` in a/, the same stopped by Ctrl-C before batch 1 of epoch 1 in c/
    and resumed by `--out c --resume`, and the same killed there in k/ and resumed so: -> the
    Ctrl-C line. Each folder ends with the same model and history."""
    a, c, k = tmp_path / "a", tmp_path / "c", tmp_path / "k"
    demo.main([*settings, "--out", str(a)])
    monkeypatch.setattr(train, "fit", stopping_fit(train.fit, 1, 1, ctrl_c))
    with pytest.raises(SystemExit) as stop:
        demo.main([*settings, "--out", str(c)])
    monkeypatch.undo()
    demo.main(["--out", str(c), "--resume"])
    name = demo.__name__.rsplit(".", 1)[1]
    assert run_until_killed(name, [*settings, "--out", k], 1, 1,
                            tmp_path / "blocked") == -signal.SIGKILL
    assert (k / "last.npz").is_file() and not (k / "model.npz").exists()
    demo.main(["--out", str(k), "--resume"])
    assert_same_run(a, c, k)
    assert stop.value.code == 130  # a Ctrl-C's status; its line is the exception's text
    return str(stop.value)


def test_translate_resumes_bit_identically_after_ctrl_c_and_after_a_kill(tmp_path, monkeypatch,
                                                                         capsys):
    settings = ["--quick", "--epochs", "2", "--epoch-size", "3", "--held-out", "8", "--seed", "2"]
    line = stop_resume_and_kill(translate, settings, tmp_path, monkeypatch)
    c = tmp_path / "c"
    assert line == (f"translate: stopped at epoch 1, step 1 (saved in {c / 'last.npz'}); to "
                    f"continue: python -m demos.translate --out {c} --resume")
    capsys.readouterr()
    with pytest.raises(SystemExit):  # a resume refuses an option that contradicts the run's
        translate.main(["--out", str(c), "--resume", "--epochs", "3"])
    assert (f"--resume: --epochs 3 differs from the run's 2 (in {c / 'hyperparameters.json'})"
            in capsys.readouterr().err)


def test_classify_resumes_bit_identically_after_ctrl_c_and_after_a_kill(tmp_path, monkeypatch,
                                                                        capsys):
    settings = ["--quick", "--generated", "200", "--epochs", "2", "--d-model", "16", "--seed", "1"]
    line = stop_resume_and_kill(classify, settings, tmp_path, monkeypatch)
    assert line == (f"classify: stopped at epoch 1, step 1 (saved in {tmp_path / 'c' / 'last.npz'})"
                    f"; to continue: python -m demos.classify --out {tmp_path / 'c'} --resume")
    out = capsys.readouterr().out.splitlines()
    finals = [row for row in out if row.startswith("test accuracy: ")]
    assert len(finals) == 3 and len(set(finals)) == 1, finals  # a, c resumed, k resumed


def test_generate_resumes_bit_identically_after_ctrl_c_and_after_a_kill(tmp_path, monkeypatch):
    path = tmp_path / "tiny.txt"
    path.write_text("the cat sat on the mat. " * 100, encoding="utf-8")
    settings = ["--quick", "--data", str(path), "--steps", "8", "--eval-every", "4",
                "--sample-length", "10", "--seed", "4"]
    line = stop_resume_and_kill(generate, settings, tmp_path, monkeypatch)
    assert line == (f"generate: stopped at epoch 1, step 1 (saved in {tmp_path / 'c' / 'last.npz'})"
                    f"; to continue: python -m demos.generate --out {tmp_path / 'c'} --resume")


def resume_line(demo, out):
    """The one line (status 1) that `--out OUT --resume` ends with."""
    with pytest.raises(SystemExit) as stop:
        demo.main(["--out", str(out), "--resume"])
    assert isinstance(stop.value.code, str) and "\n" not in stop.value.code, stop.value.code
    return stop.value.code


def test_a_resume_after_the_data_changed_names_the_settings_that_differ(tmp_path):
    """classify's settings hold what it made of the data (the vocabulary's size): a resume
    on a changed file names that setting and its two values, not the two whole settings."""
    data = tmp_path / "reviews.tsv"
    rows = [f"{'good fine nice' if i % 2 else 'bad dull poor'} item{i % 7}\t{i % 2}\n"
            for i in range(60)]
    data.write_text("".join(rows))
    settings = ["--data", str(data), "--epochs", "1", "--d-model", "16", "--heads", "2",
                "--min-df", "1"]
    classify.main([*settings, "--out", str(tmp_path / "run")])
    data.write_text("".join(rows) + "".join(f"new words here{i}\t{i % 2}\n" for i in range(9)))
    line = resume_line(classify, tmp_path / "run")
    assert re.fullmatch(
        rf"classify: fit: resume=True with settings that differ from the run's "
        rf"\({re.escape(str(tmp_path / 'run' / 'hyperparameters.json'))}\): "
        rf"hyperparameters.vocab_size (\d+) now, (\d+) in the run; the resumed run would not "
        rf"continue the same one", line), line
    assert len(line) < 300


def test_a_resume_after_its_settings_file_was_edited_ends_in_one_line(tmp_path):
    out = tmp_path / "run"
    translate.main(["--quick", "--epochs", "1", "--epoch-size", "2", "--held-out", "8",
                    "--out", str(out)])
    path = out / "hyperparameters.json"
    saved = json.loads(path.read_text())
    saved["hyperparameters"]["options"]["d_ff"] = 128  # was 64 (--quick)
    path.write_text(json.dumps(saved))
    line = resume_line(translate, out)
    assert line.startswith(f"translate: fit: resume=True, but {out / 'last.npz'} does not hold "
                           f"parameters of the model given (another model, or a run whose "
                           f"hyperparameters.json was changed?): load: "), line
    assert "(32, 64) float32 in the file, but (32, 128) float32 in `like`" in line
    # a value of the wrong kind, or not one of the option's choices, is named with the file
    for name, value, what in (("d_model", "big", "a whole number"), ("lr", [1], "a number"),
                              ("norm", "middle", "one of post, pre")):
        edited = json.loads(json.dumps(saved))
        edited["hyperparameters"]["options"][name] = value
        path.write_text(json.dumps(edited))
        assert resume_line(translate, out) == (
            f"translate: {path}: the option {name!r} is {json.dumps(value)}, not {what}: the "
            f"file was changed; restore its value, or start the run again")


def test_a_resumed_option_out_of_range_is_refused_by_name(tmp_path, capsys):
    out = tmp_path / "run"
    translate.main(["--quick", "--epochs", "1", "--epoch-size", "2", "--held-out", "8",
                    "--out", str(out)])
    path = out / "hyperparameters.json"
    saved = json.loads(path.read_text())
    saved["hyperparameters"]["options"]["epochs"] = 0
    path.write_text(json.dumps(saved))
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        translate.main(["--out", str(out), "--resume"])
    assert stop.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == \
        "python -m demos.translate: error: --epochs must be at least 1, got 0"
