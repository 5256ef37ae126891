"""generate --gpt2 DIR (demos/support/gpt2_demo.py) on GPT-2's four files made small and
offline (helpers/gpt2_files.py: a BPE vocabulary learnt from a text, a 2-layer GPT-2 saved by
transformers): sampling equals lm.generate's with the same settings and seed and the beam
equals lm.beam_search's; fine-tuning trains, saves a run that --model reads, and a run
stopped by Ctrl-C and resumed by the command its last line gives ends with the bits of the
run that was not stopped; options of the other modes are refused by name."""
import contextlib
import io
import shlex

import numpy as np
import pytest

import autograd_lite as ag
from conftest import missing
from demos import generate
from demos.support import program
from helpers.gpt2_files import write_bpe_files, write_tiny_gpt2
from helpers.stopping import stopping_fit
from models import gpt2, lm, train
from models.inputs import bpe

TEXT = ("The quick brown fox jumps over the lazy dog. A plain function over named tuples "
        "reads like the paper's equations; its gradient is the engine's work.\n") * 12


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    try:
        import torch
        import transformers
    except ImportError:
        missing("TRANSFORMERS", "transformers (and torch) are not installed")
    transformers.logging.set_verbosity_error()
    folder = tmp_path_factory.mktemp("gpt2-files")
    write_tiny_gpt2(folder, transformers, torch, write_bpe_files(folder, TEXT, 60))
    (folder / "text.txt").write_text(TEXT, encoding="utf-8")
    return folder


def run(*argv):
    """generate.main(argv) -> (exit line or None, stdout)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            generate.main([str(a) for a in argv])
            code = None
        except program.Ended as stop:
            code = stop.line
        except SystemExit as stop:
            code = stop.code
    return code, out.getvalue()


def test_sampling_prints_lm_generates_tokens_with_top_k_and_top_p(files):
    code, out = run("--gpt2", files, "--prompt", "The quick", "--length", 12,
                    "--temperature", 0.8, "--top-k", 20, "--top-p", 0.9, "--seed", 4)
    assert code is None
    p, tokenizer = gpt2.load(files), bpe.GPT2Tokenizer.load(files)
    prompt = np.array([tokenizer.encode("The quick")])
    want = lm.generate(p, prompt, 12, 0.8, 20, np.random.default_rng(4), top_p=0.9)
    assert out == tokenizer.decode(want[0]) + "\n"


def test_beam_prints_lm_beam_searchs_continuation(files):
    code, out = run("--gpt2", files, "--prompt", "The lazy", "--length", 8, "--beam", 3,
                    "--no-repeat-ngram", 2)
    assert code is None
    p, tokenizer = gpt2.load(files), bpe.GPT2Tokenizer.load(files)
    want = lm.beam_search(p, np.array([tokenizer.encode("The lazy")]), 8, beam_size=3,
                          eos=tokenizer.end_of_text, no_repeat_ngram=2)
    assert out == tokenizer.decode(want[0]) + "\n"


FINE_TUNE = ("--steps", 6, "--eval-every", 3, "--context", 16, "--batch-size", 2,
             "--lr", 3e-3, "--warmup", 1)


def test_fine_tuning_lowers_the_loss_and_model_reads_the_run(files, tmp_path):
    code, out = run("--gpt2", files, "--data", files / "text.txt", "--out", tmp_path / "run",
                    *FINE_TUNE)
    assert code is None, code
    assert "held-out loss:" in out.splitlines()[-1]
    params = ag.load(tmp_path / "run" / "model.npz",
                     like=gpt2.shaped(gpt2.read_config(files)))
    before = gpt2.load(files)
    assert any(not np.array_equal(a, b) for a, b in zip(ag.tree_leaves(params),
                                                        ag.tree_leaves(before)))
    code, out = run("--model", tmp_path / "run", "--prompt", "The quick", "--length", 5,
                    "--temperature", 0.7)
    tokenizer = bpe.GPT2Tokenizer.load(files)
    want = lm.generate(params, np.array([tokenizer.encode("The quick")]), 5, 0.7,
                       rng=np.random.default_rng(0))
    assert (code, out) == (None, tokenizer.decode(want[0]) + "\n")


def test_a_run_stopped_by_ctrl_c_resumes_to_the_same_bits(files, tmp_path, monkeypatch):
    whole, stopped = tmp_path / "whole", tmp_path / "stopped"
    assert run("--gpt2", files, "--data", files / "text.txt", "--out", whole, *FINE_TUNE)[0] \
        is None

    def ctrl_c():
        raise KeyboardInterrupt
    real_fit = train.fit
    monkeypatch.setattr(train, "fit", stopping_fit(real_fit, 1, 1, ctrl_c))
    line, _ = run("--gpt2", files, "--data", files / "text.txt", "--out", stopped, *FINE_TUNE)
    assert line.startswith("generate: stopped at epoch 1, step 1 ("), line
    command = shlex.split(line.rsplit(": ", 1)[1])
    assert command[:3] == ["python", "-m", "demos.generate"]
    monkeypatch.setattr(train, "fit", real_fit)
    assert run(*command[3:])[0] is None
    for a, b in zip(ag.tree_leaves(ag.load(whole / "model.npz")),
                    ag.tree_leaves(ag.load(stopped / "model.npz"))):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("flags, message", [
    (["--prompt", "x", "--layers", "2"], "--layers sets the character model"),
    (["--prompt", "x", "--steps", "5"], "--steps is for fine-tuning"),
    (["--prompt", "x", "--beam", "2", "--top-p", "0.5"], "--top-p is for sampling"),
    (["--prompt", "x", "--top-p", "1.5"], "--top-p must lie in (0, 1], got 1.5"),
    (["--data", "t.txt", "--top-k", "3"], "--top-k is for --prompt TEXT (sampling)"),
    ([], "--gpt2 DIR needs --prompt TEXT (to sample) or --data FILE"),
])
def test_options_of_another_mode_are_refused_by_name(flags, message, tmp_path, capsys):
    with pytest.raises(SystemExit):
        generate.parse_args(["--gpt2", str(tmp_path), *flags])
    assert message in capsys.readouterr().err


def test_top_k_and_top_p_are_refused_for_the_character_model(capsys):
    with pytest.raises(SystemExit):
        generate.parse_args(["--quick", "--top-k", "3"])
    assert "--top-k is for GPT-2 (--gpt2 DIR)" in capsys.readouterr().err


def test_files_that_are_not_gpt2s_end_in_one_line(files, tmp_path):
    code, _ = run("--gpt2", tmp_path, "--prompt", "x")
    assert code.startswith("generate: ") and "config.json" in code and "\n" not in code
