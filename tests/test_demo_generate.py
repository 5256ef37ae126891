"""demos.generate: its n-gram baselines (the model itself is tested in test_demo_ngram.py),
the held-out scoring of the transformer against one forward pass per position, the demo run
end to end with --quick, and on Tiny Shakespeare a short training run that beats the trigram."""
import json
import math
import os
import pathlib
import re
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest
from helpers.data_folder import DATA, needs_data

import autograd_lite as ag
from demos import generate
from models import lm, text

ROOT = pathlib.Path(__file__).resolve().parent.parent
RESULT = re.compile(r"held-out bits per character: transformer ([\d.]+), (\d)-gram baseline "
                    r"([\d.]+) \(last 10% of the text\)")


def test_baselines_leave_out_the_orders_without_int64_codes():
    rng = np.random.default_rng(0)
    train_ids, held_out_ids = rng.integers(0, 2000, 500), rng.integers(0, 2000, 50)
    # 2000 ** 5 = 3.2e16 fits in int64 (9.2e18), 2000 ** 6 = 6.4e19 does not
    baselines = generate.ngram_baselines(train_ids, held_out_ids, 2000, order=3)
    assert list(baselines) == [1, 2, 3, 4, 5]
    with pytest.raises(ValueError, match="ngram.fit: 6-grams over 2000 characters do not fit"):
        generate.ngram_baselines(train_ids, held_out_ids, 2000, order=6)


# --- the transformer's held-out score --------------------------------------------------------

def test_window_starts_cover_every_position_up_to_the_last():
    assert generate.window_starts(10, 4, 2) == [0, 2, 4, 6]
    assert generate.window_starts(11, 4, 2) == [0, 2, 4, 6, 7]
    assert generate.window_starts(4, 4, 2) == [0]


def test_held_out_bits_equal_one_forward_pass_per_position():
    rng = np.random.default_rng(0)
    params = lm.init(rng, vocab_size=5, d_model=8, n_heads=2, d_ff=16, n_layers=1, max_len=4)
    ids = rng.integers(0, 5, size=12)  # 11 positions to predict, windows of 4 every 2
    # windows start at 0, 2, 4, 6, 7: the first scores positions 1-4, the next ones 5-6, 7-8,
    # 9-10 and 11; each position is predicted from the ids of its window before it
    window_of = {1: 0, 2: 0, 3: 0, 4: 0, 5: 2, 6: 2, 7: 4, 8: 4, 9: 6, 10: 6, 11: 7}
    nats = []
    for position, start in window_of.items():
        logits = lm.apply(params, ids[None, start:position])[0, -1].astype(np.float64)  # (V,)
        nats.append(np.log(np.sum(np.exp(logits))) - logits[ids[position]])
    expected = np.mean(nats) / math.log(2)
    assert generate.held_out_bits(params, ids) == pytest.approx(expected, rel=1e-6)
    # windows in batches of any size give the same sum
    assert generate.held_out_bits(params, ids, batch_windows=2) == pytest.approx(expected,
                                                                               rel=1e-6)


def test_continue_text_samples_past_max_len_in_chunks():
    params = lm.init(np.random.default_rng(0), 5, 8, 2, 16, 1, max_len=6)
    prompt = np.array([1, 2, 3, 4])
    first = generate.continue_text(params, prompt, 11, 1.0, np.random.default_rng(1))
    again = generate.continue_text(params, prompt, 11, 1.0, np.random.default_rng(1))
    assert first.shape == (15,) and np.array_equal(first[:4], prompt)
    np.testing.assert_array_equal(first, again)
    greedy = generate.continue_text(params, prompt, 11, 0.0, None)
    # at temperature 0 each chunk continues the last max_len // 2 = 3 ids greedily
    window = greedy[:4][-3:]
    expected = lm.generate(params, window[None], 3, temperature=0.0)[0, 3:]
    np.testing.assert_array_equal(greedy[4:7], expected)


# --- the demo, run as a program ---------------------------------------------------------------

def run_demo(*flags):
    done = subprocess.run([sys.executable, "-m", "demos.generate", *flags], cwd=ROOT,
                          env=dict(os.environ), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout


def result_of(stdout):
    """(transformer bits, n-gram order, baseline bits) from the run's last line."""
    last = stdout.strip().splitlines()[-1]
    found = RESULT.fullmatch(last)
    assert found, last
    return float(found.group(1)), int(found.group(2)), float(found.group(3))


def unigram_entropy(s):
    """Bits per character of the text's own character frequencies: no model that knows only
    which characters are common (and nothing of their order) can do better on it."""
    counts = np.array(list(Counter(s).values()), dtype=np.float64)
    p = counts / counts.sum()
    return float(-np.sum(p * np.log2(p)))


def test_quick_run_learns_saves_and_ends_with_its_measured_result(tmp_path):
    out = run_demo("--quick", "--out", str(tmp_path))
    bits, order, _ = result_of(out)
    corpus = generate.read_corpus(None)[1]
    held_out = corpus[len(corpus) - round(0.1 * len(corpus)):]
    # untrained: about log2(103) = 6.7 bits; character frequencies alone: about 4.7
    assert bits < unigram_entropy(held_out) - 0.5, out
    assert order == 3
    for label in ("temperature 0.5", "temperature 0.8", "temperature 1.0", "beam search"):
        assert f"--- {label}" in out
    # the demo's own beam repeats no NO_REPEAT_NGRAM characters (its prompt included): the
    # most probable continuation of a character model was the prompt and ~100 spaces
    n = generate.NO_REPEAT_NGRAM
    prompt = min(generate.PROMPT_LENGTH, generate.QUICK["context"] // 2)  # its characters
    samples = (tmp_path / "samples.txt").read_text(encoding="utf-8")  # "--- label\ntext\n\n"
    beam = samples.split(f"--- beam search (4 beams, no {n} characters repeated)\n")[1][:-2]
    assert not repeats_after(beam, prompt, n) and len(beam) > prompt + n, beam
    for name in ("model.npz", "tokenizer.txt", "last.npz", "history.json", "samples.txt",
                 "result.json"):
        assert (tmp_path / name).is_file(), name
    assert (tmp_path / "curves.png").is_file() or "curves.png: not drawn" in out
    assert (tmp_path / "health.png").is_file() or "curves.png: not drawn" in out
    history = json.loads((tmp_path / "history.json").read_text())
    assert len(history["step_loss"]) == generate.QUICK["steps"]
    assert len(history["health"]) == generate.QUICK["steps"] // 10  # health_every 10
    # the saved model and tokenizer are the ones measured
    tokenizer = text.CharTokenizer.load(tmp_path / "tokenizer.txt")
    params = ag.load(tmp_path / "model.npz")
    ids = tokenizer.encode(held_out)
    assert generate.held_out_bits(params, ids) == pytest.approx(bits, abs=0.005)


def repeated_ngrams(text, n):
    """The n-grams of characters that occur more than once in text."""
    grams = Counter(text[i:i + n] for i in range(len(text) - n + 1))
    return [gram for gram, count in grams.items() if count > 1]


def repeats_after(text, start, n):
    """The n-grams of characters that end at or after text[start] and occur earlier too (a
    repeat the prompt, text[:start], holds already is not the continuation's)."""
    return [text[i - n + 1:i + 1] for i in range(max(start, n - 1), len(text))
            if text[i - n + 1:i + 1] in {text[j:j + n] for j in range(i - n + 1)}]


def samples_in(stdout):
    """The printed samples: from the first '--- ' line to the line naming the saved files."""
    return stdout[stdout.index("--- "):stdout.index("saved the model")]


def test_a_file_of_the_users_and_same_seed_same_bits(tmp_path, capsys):
    path = tmp_path / "tiny.txt"
    path.write_text("the cat sat on the mat. " * 200, encoding="utf-8")
    outputs = []
    for run in "ab":  # in this process: a second interpreter would double the time
        generate.main(["--quick", "--data", str(path), "--out", str(tmp_path / run)])
        outputs.append(capsys.readouterr().out)
    assert f"generate: {path}, 4,800 characters, 11 distinct" in outputs[0]
    bits, _, baseline = result_of(outputs[0])
    # a window of 32 characters holds the whole sentence, which two characters do not: after
    # "the " comes "c" or "m", after "at" a space or "."
    assert bits < 0.1 < baseline
    first, second = (ag.load(tmp_path / run / "model.npz") for run in "ab")
    for x, y in zip(ag.tree_leaves(first), ag.tree_leaves(second)):
        np.testing.assert_array_equal(x, y)
    assert samples_in(outputs[0]) == samples_in(outputs[1])
    assert result_of(outputs[1]) == (bits, 3, baseline)
    # the folder of a finished run: refused without --resume; with it, nothing left to train,
    # and the run's settings, text and seed are read from its folder
    with pytest.raises(SystemExit, match="holds a generate run already: add --resume to continue"):
        generate.main(["--quick", "--data", str(path), "--out", str(tmp_path / "a")])
    generate.main(["--out", str(tmp_path / "a"), "--resume"])
    resumed = capsys.readouterr().out
    assert result_of(resumed) == (bits, 3, baseline)
    assert "trained 0 steps in" in resumed and "trained 120 steps in" in outputs[0]
    # the trained model answers from the command line (finding 3): the text it learned goes on
    # "the cat sat on the mat. the cat ...", by beam search and by sampling at a low temperature
    for flags in (["--beam", "2"], ["--temperature", "0.2", "--seed", "5"]):
        generate.main(["--model", str(tmp_path / "a"), "--prompt", "sat on the ", "--length",
                       "16", *flags])
        assert capsys.readouterr().out == "sat on the mat. the cat sat\n", flags
    # where the most probable text repeats itself, --no-repeat-ngram N forbids it (prompt too)
    generate.main(["--model", str(tmp_path / "a"), "--prompt", "sat on the ", "--length", "16",
                   "--beam", "2", "--no-repeat-ngram", "4"])
    answer = capsys.readouterr().out[:-1]
    assert answer.startswith("sat on the ") and len(answer) == 27, answer
    assert repeated_ngrams("sat on the mat. the cat sat", 4) and not repeated_ngrams(answer, 4)
    assert not repeats_after(answer, len("sat on the "), 4)
    # a beam stays in the model's context (32 characters): asked for more, it says so
    generate.main(["--model", str(tmp_path / "a"), "--prompt", "sat on the ", "--length", "50",
                   "--beam", "2"])
    printed = capsys.readouterr()
    assert len(printed.out) == 32 + 1 and printed.err == (
        "generate: a beam search reads and writes within the model's context of 32 characters: "
        "it continues the prompt's last 11 by 21 (not 50); sampling goes on past it\n")
    # its files are checked against each other (finding 5): a tokenizer cut short
    tokenizer = tmp_path / "a" / "tokenizer.txt"
    lines = tokenizer.read_text(encoding="utf-8").split("\n")
    tokenizer.write_text("\n".join(lines[:5]), encoding="utf-8")
    with pytest.raises(SystemExit) as stop:
        generate.main(["--model", str(tmp_path / "a"), "--prompt", "the"])
    assert stop.value.code.startswith(f"generate: {tmp_path / 'a' / 'model.npz'} is not the model "
                                      f"that hyperparameters.json and tokenizer.txt (")
    assert "'embed" in stop.value.code and "in the file, but" in stop.value.code


@pytest.mark.parametrize("flags, message", [
    (["--steps", "0"], "argument --steps: must be greater than 0, got 0"),
    (["--lr=-0.001"], "argument --lr: must be greater than 0, got -0.001"),
    (["--layers", "two"], "argument --layers: invalid int value: 'two'"),
    (["--quick", "--d-model", "30", "--heads", "4"], "--d-model 30 must be a multiple of "
                                                     "--heads 4"),
    (["--resume"], "--resume needs --out DIR"),
    (["--dropout", "1"], "--dropout must lie in [0, 1), got 1.0"),
    (["--dropout=-0.1"], "--dropout must lie in [0, 1), got -0.1"),
])
def test_bad_settings_are_refused_by_name(flags, message, capsys):
    with pytest.raises(SystemExit):
        generate.parse_args(flags)
    assert message in capsys.readouterr().err


def test_dropout_is_the_models_and_acts_in_training_steps_only():
    """--dropout sets the model's rate; loss_fn drops with a step's rng (fit passes one) and
    not in validation (rng None), where it equals the plain forward pass."""
    args = generate.parse_args(["--quick", "--dropout", "0.5"])
    params = generate.build_model(args, 11, np.random.default_rng(0))
    assert params.dropout == 0.5
    ids = np.random.default_rng(1).integers(0, 11, (2, 9))
    batch = ids[:, :-1], ids[:, 1:]
    plain = ag.cross_entropy(lm.apply(params, batch[0]), batch[1])
    assert generate.loss_fn(params, batch, None) == plain
    dropped = ag.cross_entropy(lm.apply(params, batch[0], training=True,
                                        rng=np.random.default_rng(7)), batch[1])
    assert generate.loss_fn(params, batch, np.random.default_rng(7)) == dropped != plain


def test_resume_takes_the_runs_settings_and_refuses_others(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    options = dict(generate.QUICK, data=str(tmp_path / "tiny.txt"), seed=3)
    (run / "hyperparameters.json").write_text(json.dumps({"fit": {}, "hyperparameters": {
        "options": options}}))
    ag.save(run / "last.npz", {"w": np.zeros(2)})  # a checkpoint (its content is fit's concern)
    classify_run = tmp_path / "classify"
    classify_run.mkdir()
    classify_settings = classify_run / "hyperparameters.json"
    classify_settings.write_text('{"hyperparameters": {"d_model": 32}}')
    args = generate.parse_args(["--out", str(run), "--resume"])
    assert {name: getattr(args, name) for name in generate.QUICK} == generate.QUICK
    assert (args.data, args.seed) == (tmp_path / "tiny.txt", 3)
    for flags, message in ((["--steps", "500"], "--resume: --steps 500 differs from the run's "
                                                "120"),
                           (["--seed", "0"], "--resume: --seed 0 differs from the run's 3"),
                           (["--data", "other.txt"], f"--resume: --data other.txt differs from "
                                                     f"the run's {tmp_path / 'tiny.txt'}")):
        with pytest.raises(SystemExit):
            generate.parse_args(["--out", str(run), "--resume", *flags])
        assert message in capsys.readouterr().err
    # a folder that holds no generate run ends with one line naming it
    for folder, message in ((tmp_path, f"generate: {tmp_path} holds no generate run (no "
                                       f"hyperparameters.json)"),
                            (classify_run, f"generate: {classify_settings} is not the settings "
                                           f"of a generate run (KeyError: 'options')"),
                            (tmp_path / "tiny.txt", f"generate: {tmp_path / 'tiny.txt'} is not "
                                                    f"there, not the folder of a generate run")):
        with pytest.raises(SystemExit) as stop:
            generate.parse_args(["--out", str(folder), "--resume"])
        assert stop.value.code == message
    (run / "last.npz").write_bytes(b"cut short")  # a corrupt checkpoint is named
    with pytest.raises(SystemExit) as stop:
        generate.parse_args(["--out", str(run), "--resume"])
    assert stop.value.code == (f"generate: load: {run / 'last.npz'}: it is not an .npz file "
                               f"written by ag.save (File is not a zip file)")


def test_help_explains_each_option_and_shows_the_docstring(capsys):
    with pytest.raises(SystemExit):
        generate.parse_args(["--help"])
    shown = " ".join(capsys.readouterr().out.split())
    for name in generate.FULL:
        assert f"{generate.flag(name)} " in shown and " ".join(generate.HELP[name].split()) in \
            shown, name
    assert " ".join(generate.__doc__.split("\n\n")[1].split()) in shown


@pytest.mark.parametrize("content, flags, message", [
    ("short text", [], "generate: a text of 10 characters is too short for windows of "
                       "--context 32: its first 90% (9) and last 10% (1) must each hold more "
                       "than 33"),
    ("", [], "generate: read_text: {path} is empty"),
    (b"caf\xe9 au lait\n" * 40, [], "generate: read_text: {path}, line 1: not UTF-8 "
                                    "(byte 0xe9 at offset 3)"),
    ("".join(map(chr, range(33, 133))) * 10, ["--ngram", "12"],
     "generate: --ngram 12: 12-grams over the text's 100 distinct characters do not fit in "
     "int64 codes; the largest order that does is 9"),
    (None, [], "generate: {path}: No such file or directory"),
], ids=["too-short", "empty", "not-utf8", "ngram-too-large", "missing"])
def test_bad_input_is_one_line_and_leaves_no_folder(tmp_path, content, flags, message):
    path = tmp_path / "text.txt"
    if content is not None:
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(SystemExit) as stop:
        generate.main(["--quick", "--data", str(path), "--out", str(tmp_path / "run"), *flags])
    assert stop.value.code == message.format(path=path)
    assert not (tmp_path / "run").exists()


def test_a_text_too_short_for_the_windows_is_refused():
    with pytest.raises(ValueError, match=r"generate: a text of 300 characters is too short for "
                                         r"windows of --context 32"):
        generate.split_text(np.zeros(300, dtype=np.int64), 32)


# --- Tiny Shakespeare (a text no one here wrote) -----------------------------------------------

SHAKESPEARE = DATA / "tinyshakespeare" / "input.txt"


@needs_data
def test_a_short_run_beats_the_trigram_on_tiny_shakespeare(tmp_path):
    out = run_demo("--data", str(SHAKESPEARE), "--out", str(tmp_path), *SHORT_SHAKESPEARE_RUN)
    bits, order, baseline = result_of(out)
    assert order == 3 and baseline == pytest.approx(2.95, abs=0.01)
    assert bits < baseline, out


SHORT_SHAKESPEARE_RUN = ("--steps", "600", "--d-model", "64", "--heads", "4", "--d-ff", "128",
                         "--layers", "1", "--context", "8", "--batch-size", "128", "--lr", "1e-2",
                         "--warmup", "20", "--eval-every", "200", "--ngram", "3",
                         "--sample-length", "40")
