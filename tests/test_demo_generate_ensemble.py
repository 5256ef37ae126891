"""generate --ensemble N: N models trained at once in processes of their own, each exactly the
run of its seed; the reported bits are those of the mean of their probabilities (against one
forward pass per position and model); Ctrl-C while they train, or while the results are
written, ends with one line whose command finishes the same run bit for bit; --model samples
from the ensemble."""
import concurrent.futures
import json
import math
import re
import time

import numpy as np
import pytest
from test_demo_ctrl_c import ctrl_c, on_call, printed_command, run, saving

import autograd_lite as ag
from demos import generate
from models import lm, text

TINY = ["--quick", "--eval-every", "4", "--sample-length", "10", "--d-model", "16",
        "--d-ff", "32", "--context", "16"]  # and --steps, --seed, --data
RESULT = re.compile(r"held-out bits per character: transformer ([\d.]+) \(the mean of 2 models' "
                    r"probabilities; alone ([\d.]+), ([\d.]+)\), 3-gram baseline [\d.]+ \(last "
                    r"10% of the text\)")


ALONE = [*TINY, "--steps", "24"]  # and --seed, --data, --out
ARGV = [*ALONE, "--seed", "4", "--ensemble", "2"]  # and --data, --out


@pytest.fixture(scope="module")
def tiny_text(tmp_path_factory):
    path = tmp_path_factory.mktemp("text") / "tiny.txt"
    path.write_text("the cat sat on the mat; the dog sat on the log. " * 30, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def whole(tiny_text, tmp_path_factory):
    """(the folder, the printout) of an ensemble run of ARGV, uninterrupted."""
    out = tmp_path_factory.mktemp("whole") / "run"
    code, stdout, _ = run(generate, [*ARGV, "--data", tiny_text, "--out", out])
    assert code is None
    return out, stdout


def test_held_out_bits_of_an_ensemble_average_the_probabilities_of_each_position():
    rng = np.random.default_rng(0)
    members = tuple(lm.init(np.random.default_rng(k), vocab_size=5, d_model=8, n_heads=2,
                            d_ff=16, n_layers=1, max_len=4) for k in range(2))
    ids = rng.integers(0, 5, size=12)
    window_of = {1: 0, 2: 0, 3: 0, 4: 0, 5: 2, 6: 2, 7: 4, 8: 4, 9: 6, 10: 6, 11: 7}
    nats = []
    for position, start in window_of.items():
        probabilities = []
        for params in members:
            logits = lm.apply(params, ids[None, start:position])[0, -1].astype(np.float64)
            probabilities.append(np.exp(logits[ids[position]]) / np.sum(np.exp(logits)))
        nats.append(-np.log(np.mean(probabilities)))
    expected = np.mean(nats) / math.log(2)
    assert generate.held_out_bits(members, ids) == pytest.approx(expected, rel=1e-6)
    assert generate.held_out_bits(members, ids, batch_windows=3) == pytest.approx(expected,
                                                                                rel=1e-6)
    alone = [generate.held_out_bits(params, ids) for params in members]
    assert expected < np.mean(alone)  # log of a mean beats the mean of the logs (Jensen)


def test_each_model_is_the_run_of_its_seed_and_the_result_is_their_mean(
        whole, tiny_text, tmp_path):
    both, stdout = whole
    found = RESULT.fullmatch(stdout.strip().splitlines()[-1])
    assert found, stdout.strip().splitlines()[-1]
    members = ag.load(both / "model.npz")
    result = json.loads((both / "result.json").read_text())
    for k in range(2):
        alone = tmp_path / f"seed-{4 + k}"
        assert run(generate, [*ALONE, "--data", tiny_text, "--seed", 4 + k,
                              "--out", alone])[0] is None
        for x, y in zip(ag.tree_leaves(members[k]), ag.tree_leaves(ag.load(alone / "model.npz"))):
            np.testing.assert_array_equal(x, y)
        assert (json.loads((both / f"member-{k}" / "history.json").read_text())
                == json.loads((alone / "history.json").read_text()))
        reported = json.loads((alone / "result.json").read_text())["transformer_bits"]
        assert result["member_bits"][k] == pytest.approx(reported, rel=1e-12)
        assert float(found.group(2 + k)) == pytest.approx(reported, abs=0.005)
        for picture in ("curves.png", "health.png"):
            assert (both / f"member-{k}" / picture).is_file()
    tokenizer = text.CharTokenizer.load(both / "tokenizer.txt")
    _, held_out = generate.split_text(tokenizer.encode(tiny_text.read_text()), 16)
    bits = generate.held_out_bits(members, held_out)
    assert result["transformer_bits"] == pytest.approx(bits, rel=1e-12)
    assert bits < np.mean(result["member_bits"])
    assert float(found.group(1)) == pytest.approx(bits, abs=0.005)


def test_a_trained_ensemble_continues_a_prompt_from_its_mean(whole, capsys):
    out, _ = whole
    members = ag.load(out / "model.npz")
    tokenizer = text.CharTokenizer.load(out / "tokenizer.txt")
    prompt = tokenizer.encode("the cat")
    generate.main(["--model", str(out), "--prompt", "the cat", "--length", "6", "--beam", "3"])
    expected = lm.ensemble_beam_search(members, prompt[None], 6, beam_size=3)[0]
    assert capsys.readouterr().out == tokenizer.decode(expected) + "\n"
    generate.main(["--model", str(out), "--prompt", "the cat", "--length", "30", "--seed", "2"])
    sampled = generate.continue_text(members, prompt, 30, 0.8, np.random.default_rng(2))
    assert capsys.readouterr().out == tokenizer.decode(sampled) + "\n"


def assert_same_ensembles(first, second):
    """The two ensemble runs hold the same models (bit for bit), histories, pictures and
    samples, and no partly written file."""
    for x, y in zip(ag.tree_leaves(ag.load(first / "model.npz")),
                    ag.tree_leaves(ag.load(second / "model.npz"))):
        np.testing.assert_array_equal(x, y)
    assert (second / "samples.txt").read_text() == (first / "samples.txt").read_text()
    for k in range(2):
        member = f"member-{k}"
        for name in ("history.json", "curves.png", "health.png"):
            assert (second / member / name).read_bytes() == (first / member / name).read_bytes()
        assert not [p.name for p in (second / member).iterdir() if ".partial-" in p.name]


def first_epoch_saved(out):
    """Future.result that waits until the first model has written its first epoch's files,
    then sends Ctrl-C: the models stop somewhere in their training."""
    real = concurrent.futures.Future.result

    def result(future, timeout=None):
        deadline = time.monotonic() + 120
        while not (out / "member-0" / "history.json").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        ctrl_c()
        return real(future, timeout)
    return result


def test_ctrl_c_while_the_models_train_or_write_ends_in_one_line_and_resumes_alike(
        whole, tiny_text, tmp_path, monkeypatch):
    argv = [*ARGV, "--data", tiny_text]
    points = {
        "the models' first step": lambda out: on_call(concurrent.futures.Future.result, 1),
        "mid-training": first_epoch_saved,
        "writing the model": lambda out: saving("model.npz"),
    }
    for i, (point, hook) in enumerate(points.items()):
        out = tmp_path / f"stopped-{i}"
        target = ag if point == "writing the model" else concurrent.futures.Future
        name = "save" if point == "writing the model" else "result"
        with monkeypatch.context() as patch:
            patch.setattr(target, name, hook(out))
            line, _, err = run(generate, [*argv, "--out", out])
        assert isinstance(line, str), (point, line)
        assert "Traceback" not in err and "Exception ignored" not in err, (point, err)
        resume = f"to continue: python -m demos.generate --out {out} --resume"
        checkpoints = out / "member-*" / "last.npz"
        if point == "the models' first step":
            assert line == (f"generate: stopped at epoch 0, step 0 (saved in {checkpoints}); "
                            f"{resume}")
        elif point == "mid-training":
            assert re.fullmatch(rf"generate: stopped at epoch \d+, step \d+ \(saved in "
                                rf"{re.escape(str(checkpoints))}\); {re.escape(resume)}", line)
        else:
            assert line == (f"generate: stopped after training, while writing its results (the "
                            f"trained model is in {checkpoints}); {resume}")
        code, _, err = run(generate, printed_command(line, generate))
        assert code is None, (point, err)
        assert_same_ensembles(whole[0], out)


@pytest.mark.parametrize("value, message", [
    ("0", "--ensemble: must be greater than 0, got 0"),
    ("65", "--ensemble must be at most 64 (a process for each model), got 65")])
def test_the_number_of_models_is_checked(value, message, capsys):
    with pytest.raises(SystemExit):
        generate.parse_args(["--quick", "--ensemble", value])
    assert message in capsys.readouterr().err
