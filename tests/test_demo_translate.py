"""demos.translate and its task, demos/support/number_words.py: the English of numbers against
hand-written facts, the held-out split, and the demo run end to end with --quick."""
import importlib
import io
import json
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

import autograd_lite as ag
from demos import translate
from demos.support import common
from demos.support import number_words as nw

ROOT = pathlib.Path(__file__).resolve().parent.parent

# Written by hand, not by the code under test.
ENGLISH = {
    0: "zero", 7: "seven", 10: "ten", 11: "eleven", 13: "thirteen", 19: "nineteen",
    20: "twenty", 21: "twenty one", 40: "forty", 99: "ninety nine", 100: "one hundred",
    101: "one hundred one", 110: "one hundred ten", 115: "one hundred fifteen",
    999: "nine hundred ninety nine", 1000: "one thousand", 1001: "one thousand one",
    1010: "one thousand ten", 4721: "four thousand seven hundred twenty one",
    10000: "ten thousand", 12345: "twelve thousand three hundred forty five",
    100000: "one hundred thousand", 100001: "one hundred thousand one",
    999999: "nine hundred ninety nine thousand nine hundred ninety nine",
    1000000: "one million", 1000001: "one million one", 12000005: "twelve million five",
    100010000: "one hundred million ten thousand",
    80017090: "eighty million seventeen thousand ninety",
    999999999: "nine hundred ninety nine million nine hundred ninety nine thousand "
               "nine hundred ninety nine",
}


@pytest.mark.parametrize("value, english", ENGLISH.items())
def test_words_of_tricky_values(value, english):
    assert nw.to_words(value) == english.split()


@pytest.mark.parametrize("bad", [-1, 10 ** 9, 1.5, True, "12"])
def test_to_words_refuses_what_it_cannot_write(bad):
    with pytest.raises(ValueError, match=r"number_words: expected an integer in \[0, 999999999\]"):
        nw.to_words(bad)


def test_the_longest_number_fits_the_target_length():
    assert len(nw.to_words(777_777_777)) == nw.MAX_WORDS == 14


def test_sources_are_the_digits_then_padding():
    rows = nw.encode_sources(np.array([4721, 0, 999_999_999]))
    assert rows.shape == (3, 9) and rows.dtype == np.int64
    assert [nw.SOURCE_VOCAB[i] for i in rows[0]] == list("4721") + ["<pad>"] * 5
    assert [nw.SOURCE_VOCAB[i] for i in rows[1]] == ["0"] + ["<pad>"] * 8
    assert [nw.SOURCE_VOCAB[i] for i in rows[2]] == list("999999999")


def test_one_vocabulary_holds_the_words_then_the_digits():
    """JOINT_VOCAB, for a model that shares its embeddings and output (§3.4): the target's ids
    unchanged, the digits after them; a digit a model writes is shown, not dropped."""
    assert nw.JOINT_VOCAB[:len(nw.TARGET_VOCAB)] == nw.TARGET_VOCAB
    assert len(nw.JOINT_VOCAB) == len(set(nw.JOINT_VOCAB)) == 3 + 31 + 10
    rows = nw.encode_sources(np.array([4721, 0]), nw.JOINT_IDS)
    assert [nw.JOINT_VOCAB[i] for i in rows[0]] == list("4721") + ["<pad>"] * 5
    assert rows[1, 0] == len(nw.TARGET_VOCAB)  # "0", the first id after the words
    assert nw.decode_words([nw.BOS, nw.TARGET_IDS["six"], nw.JOINT_IDS["7"], nw.EOS]) == [
        "six", "7"]


def test_targets_are_bos_words_eos_and_decode_back():
    rows = nw.encode_targets(np.array([4721, 100]))
    assert rows.shape == (2, nw.MAX_WORDS + 2)
    tokens = [nw.TARGET_VOCAB[i] for i in rows[1]]
    assert tokens[:4] == ["<bos>", "one", "hundred", "<eos>"] and set(tokens[4:]) == {"<pad>"}
    assert nw.decode_words(rows[0]) == ENGLISH[4721].split()
    # decoding stops at the first EOS, as greedy and beam outputs are padded with EOS
    assert nw.decode_words([nw.BOS, nw.TARGET_IDS["six"], nw.EOS, nw.TARGET_IDS["two"]]) == ["six"]


def test_held_out_values_are_distinct_sorted_seeded_and_in_range():
    held_out = nw.held_out_values(2000, seed=0)
    assert held_out.shape == (2000,) and len(np.unique(held_out)) == 2000
    assert np.all(np.diff(held_out) > 0) and 0 <= held_out[0] and held_out[-1] <= nw.LARGEST
    np.testing.assert_array_equal(held_out, nw.held_out_values(2000, seed=0))
    assert not np.array_equal(held_out, nw.held_out_values(2000, seed=1))


def test_is_member_agrees_with_isin():
    rng = np.random.default_rng(0)
    sorted_set = np.unique(rng.integers(0, 1000, size=300))
    values = rng.integers(-5, 1005, size=2000)
    np.testing.assert_array_equal(nw.is_member(values, sorted_set), np.isin(values, sorted_set))


def test_training_draws_never_hit_the_held_out_values():
    # a held-out set dense enough that a sampler ignoring it would hit it at once:
    # every number below 1000 and every even number below a million
    held_out = np.union1d(np.arange(1000), np.arange(0, 10 ** 6, 2))
    values = nw.sample_values(np.random.default_rng(0), 20_000, held_out)
    assert values.shape == (20_000,)
    assert not np.isin(values, held_out).any()
    assert values.min() >= 1000 and np.all(values[values < 10 ** 6] % 2 == 1)


def test_training_draws_are_uniform_over_digit_counts():
    values = nw.sample_values(np.random.default_rng(0), 90_000, nw.held_out_values(10))
    digits = np.array([len(str(v)) for v in values])
    counts = np.bincount(digits, minlength=10)[1:]  # 1..9 digits, 10,000 expected each
    assert np.all(np.abs(counts - 10_000) < 400), counts  # ~4 standard deviations


def test_zeroed_groups_are_right_of_the_leading_group():
    values, digits = np.array([608_613_503, 613_503, 503, 12_345_678]), np.array([9, 6, 3, 8])
    always = nw.zero_some_groups(np.random.default_rng(0), values, digits, rate=1.0)
    np.testing.assert_array_equal(always, [608_000_000, 613_000, 503, 12_000_000])
    never = nw.zero_some_groups(np.random.default_rng(0), values, digits, rate=0.0)
    np.testing.assert_array_equal(never, values)


def test_training_draws_zero_a_group_at_the_stated_rate():
    values = nw.sample_values(np.random.default_rng(0), 90_000, nw.held_out_values(10))
    nine_digits = values[values >= 10 ** 8]  # about 10,000
    thousands_zero = np.mean(nine_digits // 1000 % 1000 == 0)
    expected = nw.ZERO_GROUP_RATE + (1 - nw.ZERO_GROUP_RATE) / 1000  # zeroed, or drawn as 000
    assert abs(thousands_zero - expected) < 0.015  # ~4 standard deviations


def test_an_epoch_draws_the_same_batches_again_and_none_held_out():
    held_out = nw.held_out_values(500)
    first, again, next_epoch = (list(translate.EpochBatches(3, epoch, 5, 16, held_out))
                                for epoch in (2, 2, 3))
    assert len(translate.EpochBatches(3, 2, 5, 16, held_out)) == len(first) == 5
    for (src, tgt), (src_again, tgt_again) in zip(first, again):
        np.testing.assert_array_equal(src, src_again)
        np.testing.assert_array_equal(tgt, tgt_again)
    assert not np.array_equal(first[0][0], next_epoch[0][0])
    for src, tgt in first:
        assert src.shape[0] == tgt.shape[0] == 16 and np.all(tgt[:, 0] == nw.BOS)
        values = np.array([int("".join(nw.SOURCE_VOCAB[i] for i in row if i != nw.PAD))
                           for row in src])
        assert not np.isin(values, held_out).any()
        for value, row in zip(values, tgt):  # the target is the source's English
            assert nw.decode_words(row) == nw.to_words(int(value))


def test_default_output_directory_is_timestamped_under_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = common.output_directory(translate.parse_args([]), "translate")
    assert re.fullmatch(r"runs/translate-\d{8}-\d{6}", out.as_posix()) and out.is_dir()
    quick = translate.parse_args(["--quick", "--layers", "3"])
    assert quick.layers == 3 and quick.d_model == translate.QUICK["d_model"]


@pytest.mark.parametrize("flags, message", [
    (["--epochs", "0"], "--epochs must be at least 1, got 0"),
    (["--quick", "--batch-size", "-4"], "--batch-size must be at least 1, got -4"),
    (["--norm", "middle"], "invalid choice: 'middle'"),
    (["--resume"], "--resume needs --out DIR"),
])
def test_bad_settings_are_refused_by_name(flags, message, capsys):
    with pytest.raises(SystemExit):
        translate.parse_args(flags)
    assert message in capsys.readouterr().err


def run_program(*arguments, env=None):
    """python *arguments from the checkout's root: -> stdout; the run must succeed."""
    done = subprocess.run([sys.executable, *arguments], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


AS_PROGRAM = """
import os, runpy, sys
sys.argv = ["demos.translate", "--help"]
try:
    runpy.run_module("demos.translate", run_name="__main__")
except SystemExit:
    pass
print("threads", os.environ.get("OPENBLAS_NUM_THREADS"))
"""


@pytest.mark.parametrize("preset, expected", [(None, "1"), ("2", "2")])
def test_help_names_the_knobs_and_a_program_uses_one_blas_thread_unless_told(preset, expected):
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if preset is not None:
        env["OPENBLAS_NUM_THREADS"] = preset
    out = run_program("-c", AS_PROGRAM, env=env)
    assert out.splitlines()[-1] == f"threads {expected}"
    for flag in ("--quick", "--out", "--seed", "--resume", "--epochs", "--epoch-size",
                 "--d-model", "--layers", "--batch-size", "--lr"):
        assert flag in out


def test_importing_the_demo_leaves_the_threads_alone(monkeypatch):
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    importlib.reload(translate)
    assert "OPENBLAS_NUM_THREADS" not in os.environ


def run_demo(capsys, *flags):
    """demos.translate.main(flags) in this process: -> its stdout."""
    translate.main(list(flags))
    return capsys.readouterr().out


def ctrl_c_at_epoch_1_batch_3(monkeypatch):
    """Make translate's run raise KeyboardInterrupt while drawing epoch 1's 3rd batch (TINY:
    5 batches an epoch, after the validation batches). -> the `ids` argument of each draw."""
    real_batch, drawn = translate.training_batch, []

    def interrupted_batch(rng, size, held_out, ids):
        drawn.append(ids)
        if len(drawn) == translate.VALIDATION_BATCHES + 5 + 3:
            raise KeyboardInterrupt
        return real_batch(rng, size, held_out, ids)
    monkeypatch.setattr(translate, "training_batch", interrupted_batch)
    return drawn


def test_quick_run_learns_saves_and_ends_with_its_measured_result(tmp_path, capsys, monkeypatch):
    out = run_demo(capsys, "--quick", "--out", str(tmp_path))
    last = out.strip().splitlines()[-1]
    found = re.fullmatch(r"held-out exact match: ([\d.]+)% \(500 values never seen in "
                         r"training\), greedy", last)
    assert found, last
    # the held-out numbers are mostly nine digits long: an untrained model writes none of them
    # right (test_an_untrained_model_writes_no_number_right); --quick gets about two thirds
    assert float(found.group(1)) >= 20.0, out
    history = json.loads((tmp_path / "history.json").read_text())
    quick = translate.QUICK
    assert len(history["step_loss"]) == quick["epochs"] * quick["epoch_size"]
    assert np.mean(history["step_loss"][-50:]) < 0.25 * np.mean(history["step_loss"][:50])
    assert [r["epoch"] for r in history["epochs"]] == list(range(quick["epochs"]))
    assert all({"val_loss", "held_out_exact_match"} <= set(r) for r in history["epochs"])
    assert len(history["health"]) == len(history["step_loss"]) // 10  # health_every 10
    for name in ("last.npz", "best.npz", "hyperparameters.json", "curves.png",
                 "attention.png", "health.png"):
        assert (tmp_path / name).stat().st_size > 0, name
    # the saved model is the model that was measured
    params = ag.load(tmp_path / "model.npz")
    held_out = nw.held_out_values(500, translate.HELD_OUT_SEED)
    assert 100 * translate.exact_match(params, held_out) == pytest.approx(float(found.group(1)),
                                                                          abs=0.05)
    # the trained model answers from the command line (finding 3): its words for the held-out
    # numbers are right as often as the run measured; to_words (checked by hand above) judges
    answers = run_demo(capsys, "--model", str(tmp_path), "--number", *map(str, held_out))
    pairs = [line.split("\t") for line in answers.splitlines()]
    assert [int(number) for number, _ in pairs] == held_out.tolist()
    right = np.mean([words.split() == nw.to_words(int(n)) for n, words in pairs])
    assert 100 * right == pytest.approx(float(found.group(1)), abs=0.05)
    monkeypatch.setattr(sys, "stdin", io.StringIO("4721\n\n1,000,000\n"))  # or one a line
    answers = run_demo(capsys, "--model", str(tmp_path), "--beam", "4")
    assert [line.split("\t")[0] for line in answers.splitlines()] == ["4721", "1000000"]
    with pytest.raises(SystemExit) as stop:
        run_demo(capsys, "--model", str(tmp_path), "--number", "1000000000")
    assert stop.value.code == ("translate: --number 1000000000 is outside 0..999,999,999, the "
                               "numbers the model learned")
    # the run's files are checked against each other (finding 5)
    settings = json.loads((tmp_path / "hyperparameters.json").read_text())
    settings["hyperparameters"]["options"]["d_ff"] = 128
    (tmp_path / "hyperparameters.json").write_text(json.dumps(settings))
    with pytest.raises(SystemExit) as stop:
        run_demo(capsys, "--model", str(tmp_path), "--number", "7")
    assert stop.value.code == (
        f"translate: {tmp_path / 'model.npz'} is not the model its hyperparameters.json "
        f"describes, the files are not of one run (load: {tmp_path / 'model.npz'}: "
        f"'encoder[0].ff.linear1.w' is (32, 64) float32 in the file, but (32, 128) float32 in "
        f"`like`)")


def test_an_untrained_model_writes_no_number_right():
    params = translate.build_model(translate.parse_args(["--quick"]), np.random.default_rng(0))
    assert translate.exact_match(params, nw.held_out_values(500, translate.HELD_OUT_SEED)) == 0.0


TINY = ("--quick", "--epochs", "2", "--epoch-size", "5", "--held-out", "8")


def test_same_seed_same_bits_and_a_resumed_run_ends_as_an_uninterrupted_one(tmp_path, capsys,
                                                                            monkeypatch):
    run_demo(capsys, *TINY, "--out", str(tmp_path / "a"))
    run_demo(capsys, *TINY, "--out", str(tmp_path / "b"))
    ctrl_c_at_epoch_1_batch_3(monkeypatch)
    with pytest.raises(SystemExit, match=r"^translate: stopped at epoch 1, step 2 \(saved in "
                                         r".*c/last.npz\); to continue: python -m "
                                         r"demos.translate --out .*c --resume$"):
        run_demo(capsys, *TINY, "--out", str(tmp_path / "c"))
    monkeypatch.undo()
    with pytest.raises(SystemExit, match=r"^translate: --out .*c holds a translate run already: "
                                         r"add --resume to continue it, or choose another --out$"):
        run_demo(capsys, *TINY, "--out", str(tmp_path / "c"))
    # the options given again must be the run's (--quick, which sets no option of a resumed
    # run, is refused with --resume: tests/test_demo_options.py)
    run_demo(capsys, *TINY[1:], "--out", str(tmp_path / "c"), "--resume")
    first, second, resumed = (ag.load(tmp_path / name / "model.npz") for name in "abc")
    for x, y, z in zip(*map(ag.tree_leaves, (first, second, resumed))):
        np.testing.assert_array_equal(x, y)
        np.testing.assert_array_equal(x, z)


def test_the_demos_are_packaged():
    """pip install '.[demos]' installs demos/ and its support modules, so python -m
    demos.translate runs anywhere."""
    import configparser

    import setuptools
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    include = config["options.packages.find"]["include"].split()
    assert {"demos", "demos.support", "models", "models.training", "autograd_lite"} <= set(
        setuptools.find_packages(ROOT, include=include))


@pytest.mark.parametrize("share, vocabs, n_matrices", [("none", (13, 34), 3),
                                                       ("target", (13, 34), 2),
                                                       ("all", (44, 44), 1)])
def test_share_embeddings_builds_the_model_of_its_vocabularies(share, vocabs, n_matrices):
    from models import transformer
    args = translate.parse_args(["--quick", "--share-embeddings", share])
    p = translate.build_model(args, np.random.default_rng(0))
    assert transformer.sharing(p) == (False if share == "none" else share)
    assert (transformer.source_embedding(p).table.shape[0], p.out.b.shape[0]) == vocabs
    tables = [p.src_embed.table, p.tgt_embed.table, p.out.w]
    assert sum(t is not None for t in tables) == n_matrices
    src, _ = translate.training_batch(np.random.default_rng(1), 8, nw.held_out_values(10),
                                      translate.source_ids(share))
    assert src.max() < vocabs[0] and (src.max() >= len(nw.TARGET_VOCAB)) == (share == "all")


def test_a_run_sharing_all_three_trains_saves_resumes_and_answers(tmp_path, capsys,
                                                                  monkeypatch):
    """The one table survives the run's files: model.npz, and last.npz that a --resume
    (which reads --share-embeddings all back from the run) continues bit for bit."""
    from models import transformer
    run_demo(capsys, *TINY, "--share-embeddings", "all", "--out", str(tmp_path / "a"))
    drawn = ctrl_c_at_epoch_1_batch_3(monkeypatch)
    with pytest.raises(SystemExit, match=r"^translate: stopped at epoch"):
        run_demo(capsys, *TINY, "--share-embeddings", "all", "--out", str(tmp_path / "b"))
    monkeypatch.undo()
    assert all(ids is nw.JOINT_IDS for ids in drawn)  # each batch's token ids
    run_demo(capsys, "--out", str(tmp_path / "b"), "--resume")
    whole, resumed = (ag.load(tmp_path / name / "model.npz") for name in "ab")
    assert transformer.sharing(whole) == transformer.sharing(resumed) == "all"
    for x, y in zip(ag.tree_leaves(whole), ag.tree_leaves(resumed)):
        np.testing.assert_array_equal(x, y)
    answers = run_demo(capsys, "--model", str(tmp_path / "a"), "--number", "4721", "12")
    lines = [line for line in answers.splitlines() if "\t" in line]  # not "compiling ..."
    assert [line.split("\t")[0] for line in lines] == ["4721", "12"]
