"""Every option of the demos is checked before anything is read or written: each bad value
below ends the program through its main(argv) with a last line naming the option or the
file, no traceback, and no output folder left behind."""
import os

import pytest

from demos import classify, generate, graphs, logistic_regression, translate

DEMOS = {"translate": translate, "classify": classify, "generate": generate,
         "logistic_regression": logistic_regression, "graphs": graphs}


def last_line(demo, argv, capsys):
    """The line demos.<demo>.main(argv) ends with: its one-line exit message, or the last
    line argparse writes on an option error."""
    with pytest.raises(SystemExit) as stop:
        DEMOS[demo].main([str(a) for a in argv])
    if isinstance(stop.value.code, str):
        assert "\n" not in stop.value.code
        return stop.value.code
    assert stop.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.parametrize("demo, argv, message", [
    # finding 6: options that failed silently
    ("translate", ["--lr", "-1"], "python -m demos.translate: error: --lr must be a finite "
                                  "number above 0, got -1.0"),
    ("logistic_regression", ["--lr", "nan"], "python -m demos.logistic_regression: error: --lr "
                                             "must be a finite number above 0, got nan"),
    ("generate", ["--lr", "inf"], "python -m demos.generate: error: --lr must be a finite "
                                  "number above 0, got inf"),
    ("classify", ["--quick", "--min-df", "100000"], "classify: --min-df 100000: no word is in "
                                                    "that many of the 4,800 training reviews, "
                                                    "so the model would read nothing"),
    ("translate", ["--dropout", "1.5"], "python -m demos.translate: error: --dropout must lie "
                                        "in [0, 1), got 1.5"),
    ("translate", ["--warmup", "-3"], "python -m demos.translate: error: --warmup must be at "
                                      "least 0, got -3"),
    # finding 7: what ended in a traceback
    ("translate", ["--held-out", "2000000000"], "python -m demos.translate: error: --held-out "
                                                "must be at most 100,000 (numbers kept from "
                                                "training), got 2,000,000,000"),
    ("translate", ["--resume", "--out", "empty"], "translate: empty holds no translate run (no "
                                                  "hyperparameters.json)"),
    ("translate", ["--quick", "--out", "a_file"], "translate: --out a_file is a file, not a "
                                                  "folder"),
    ("classify", ["--quick", "--out", "a_file"], "classify: --out a_file is a file, not a "
                                                 "folder"),
    ("generate", ["--quick", "--data", "empty", "--out", "g"], "generate: empty: Is a directory"),
    ("classify", ["--quick", "--data", "empty", "--format", "csv", "--out", "c"],
     "classify: empty: Is a directory"),
    ("generate", ["--resume", "--out", "corrupt"], "generate: corrupt/hyperparameters.json is not "
                                                   "the settings of a generate run "
                                                   "(JSONDecodeError: Expecting property name "
                                                   "enclosed in double quotes: line 1 column 2 "
                                                   "(char 1))"),
])
def test_a_bad_option_ends_with_one_line_naming_it_and_leaves_no_folder(
        demo, argv, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty").mkdir()
    (tmp_path / "a_file").write_text("not a folder")
    (tmp_path / "corrupt").mkdir()
    (tmp_path / "corrupt" / "hyperparameters.json").write_text("{cut short")
    before = sorted(os.walk(tmp_path))
    assert last_line(demo, argv, capsys) == message
    assert sorted(os.walk(tmp_path)) == before


SEED = "must be at least 0, got -1"
BLOCKED = "--out a_file/run: a_file is a file, not a folder"
TRAINING = "is for training: --model DIR uses the model trained in DIR"


@pytest.mark.parametrize("demo, argv, message", [
    # --seed: numpy's generators take none below 0 (their error named no option)
    *[(demo, ["--quick", "--seed", "-1"], f"argument --seed: {SEED}") for demo in DEMOS],
    # --out where no folder can be made: refused before anything is drawn or trained
    *[(demo, ["--quick", "--out", "a_file/run"], BLOCKED) for demo in DEMOS],
    ("graphs", ["--quick", "--readme-picture", "x.jpg"],
     "--readme-picture x.jpg: the picture is written as .svg or .png, so its name must end in "
     "one of them"),
    ("graphs", ["--quick", "--readme-picture", "missing/x.svg"],
     "--readme-picture missing/x.svg: there is no folder missing"),
    ("graphs", ["--quick", "--readme-screenshot", "x.txt"],
     "--readme-screenshot x.txt: the picture is written as .png, so its name must end in one "
     "of them"),
    # options that a mode does not use are refused, not ignored
    ("translate", ["--model", "m", "--epochs", "3"], f"--epochs {TRAINING}"),
    ("translate", ["--model", "m", "--out", "o"], f"--out {TRAINING}"),
    ("translate", ["--model", "m", "--number", "5", "--quick"], f"--quick {TRAINING}"),
    ("translate", ["--model", "m", "--seed", "3"], f"--seed {TRAINING}"),
    ("translate", ["--quick", "--beam", "4"], "--beam is for --model DIR (the trained model's "
                                              "answers); a run measures beam 4 itself"),
    ("classify", ["--model", "m", "--predict", "ok", "--epochs", "2"],
     "--epochs is for training: --model DIR --predict TEXT answers with the model trained in "
     "DIR, on the CPU"),
    ("classify", ["--model", "m", "--predict", "ok", "--data", "d.csv"],
     "--data is for training: --model DIR --predict TEXT answers with the model trained in "
     "DIR, on the CPU"),
    ("generate", ["--model", "m", "--prompt", "The", "--quick"],
     f"--quick {TRAINING}, on the CPU"),
    ("generate", ["--model", "m", "--prompt", "The", "--steps", "9"],
     f"--steps {TRAINING}, on the CPU"),
    ("generate", ["--model", "m", "--prompt", "The", "--beam", "4", "--temperature", "0.5"],
     "--temperature is for sampling: --beam N searches, drawing nothing"),
    ("generate", ["--model", "m", "--prompt", "The", "--beam", "4", "--seed", "1"],
     "--seed is for sampling: --beam N searches, drawing nothing"),
    ("generate", ["--model", "m", "--prompt", "The", "--no-repeat-ngram", "3"],
     "--no-repeat-ngram is for --beam N"),
    ("generate", ["--quick", "--temperature", "0.5"],
     "--temperature is for --model DIR --prompt TEXT (a trained model's answers)"),
    ("classify", ["--data", "r.csv", "--text-column", "y", "--label-column", "y"],
     "--text-column and --label-column both name 'y': the model would read the label it is to "
     "tell"),
    ("classify", ["--data", "r.tsv", "--text-column", "text"],
     "--text-column and --label-column name a TSV's columns by its header line: give both "
     "(without them, the label follows the last TAB)"),
    # and options that contradict a resume's own
    *[(demo, ["--resume", "--out", "o", "--quick"],
       "--quick with --resume: the run goes on with its own options")
      for demo in ("translate", "classify", "generate")],
])
def test_a_misused_option_is_refused_by_name_before_anything_is_done(
        demo, argv, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a_file").write_text("not a folder")
    before = sorted(os.walk(tmp_path))
    with pytest.raises(SystemExit) as stop:
        DEMOS[demo].main([str(a) for a in argv])
    assert stop.value.code == 2  # argparse's status for a bad option
    assert capsys.readouterr().err.strip().splitlines()[-1] == \
        f"python -m demos.{demo}: error: {message}"
    assert sorted(os.walk(tmp_path)) == before


def test_an_out_folder_that_cannot_be_made_is_refused_and_none_is_left(tmp_path, capsys,
                                                                       monkeypatch):
    """A folder the system refuses (here: mkdir fails as on a read-only disk) is refused by
    --out before any work, and the folders made to see it are removed again."""
    real_mkdir = os.mkdir

    def refusing(path, *args, **kwargs):
        if os.path.basename(path) == "deep":
            raise OSError(30, "Read-only file system", str(path))
        return real_mkdir(path, *args, **kwargs)
    monkeypatch.setattr(os, "mkdir", refusing)
    out = tmp_path / "new" / "deep" / "run"
    with pytest.raises(SystemExit):
        translate.main(["--quick", "--out", str(out)])
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"python -m demos.translate: error: --out {out}: cannot make the folder "
        f"{tmp_path / 'new' / 'deep'} (Read-only file system)")
    assert os.listdir(tmp_path) == []


def test_a_step_that_would_not_fit_in_memory_is_refused_with_the_estimate(tmp_path, monkeypatch,
                                                                           capsys):
    """classify --max-len 1000000000 ran 20 s, then a 238 GiB MemoryError, leaving a folder."""
    monkeypatch.chdir(tmp_path)
    line = last_line("classify", ["--max-len", "1000000000"], capsys)
    assert line.startswith("python -m demos.classify: error: --max-len 1000000000 --batch-size 32 "
                           "--d-model 64 need about ")
    # the position table alone, 10⁹ x 64 float32, is 238 GiB; the attention scores of a batch
    # of 32 sequences of 10⁹ words, 4 heads, are 32 · 4 · 10¹⁸ numbers
    estimate = float(line.split("need about ")[1].split(" GiB")[0].replace(",", ""))
    assert estimate >= 4 * 32 * 4 * 1e18 / 2 ** 30
    assert os.listdir(tmp_path) == []
    # the default run's step is far below it: about 150 MiB
    from demos.support import common
    assert common.transformer_bytes(32, 200, 64, 256, 4, 1, 20_000, 200, 2) < 2 ** 28


@pytest.mark.parametrize("demo", ["translate", "classify", "generate"])
def test_device_cuda_without_cupy_ends_with_one_line_and_leaves_no_folder(
        demo, tmp_path, capsys, monkeypatch):
    """Where CuPy does not import (blocked here, as on a machine without the `gpu` extra),
    --device cuda stops before anything is read or written, saying to install the extra."""
    monkeypatch.setitem(__import__("sys").modules, "cupy", None)
    out = tmp_path / "run"
    line = last_line(demo, ["--quick", "--device", "cuda", "--out", out], capsys)
    assert line.startswith(f"{demo}: --device cuda: device 'cuda' needs CuPy"), line
    assert "`gpu` extra" in line and "cupy-cuda12x" in line
    assert not out.exists()
