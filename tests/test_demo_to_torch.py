"""demos.to_torch: steps in torch after the move continue exactly the steps here (Adam's
state carried over), the quick run ends with a lower held-out loss and agreeing logits, and
without torch the demo says how to install it and exits 0."""
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

import autograd_lite as ag
from demos import number_words as nw
from demos import to_torch, translate

ROOT = pathlib.Path(__file__).resolve().parent.parent


def trained_a_little(steps=5):
    """A --quick translate model after `steps` Adam steps here: (params, optimizer, state,
    schedule, held_out)."""
    settings = to_torch.model_settings(to_torch.parse_args(["--quick"]))
    held_out = nw.held_out_values(to_torch.HELD_OUT, translate.HELD_OUT_SEED)
    params = translate.build_model(settings, np.random.default_rng(0))
    optimizer, schedule = translate.adam(settings, 100)
    batches = translate.EpochBatches(0, 0, steps, 16, held_out)
    params, state, _ = to_torch.train_here(params, optimizer, optimizer.init(params), batches, 1)
    return params, optimizer, state, schedule, held_out


def torch_copy(torch, params, state=None):
    """A torch module holding params and its Adam, with our Adam's state when given."""
    from models import torch_bridge
    module = torch_bridge.torch_module_for(params)
    adam = torch.optim.Adam(module.parameters(), betas=translate.ADAM_BETAS,
                            eps=translate.ADAM_EPS)
    if state is not None:
        to_torch.adam_state_to_torch(torch, adam, module, state)
    return module, adam


def test_steps_in_torch_continue_the_steps_here(torch):
    from models import torch_bridge
    params, optimizer, state, schedule, held_out = trained_a_little()
    more = translate.EpochBatches(0, 1, 3, 16, held_out)
    ours, _, our_losses = to_torch.train_here(params, optimizer, state, more, 6)
    module, adam = torch_copy(torch, params, state)
    their_losses = to_torch.train_in_torch(torch, module, adam, schedule, more, 6)
    np.testing.assert_allclose(their_losses, our_losses, rtol=1e-5)
    theirs = torch_bridge.from_torch(module.state_dict(), like=params)
    for path, x, y in zip(ag.tree_paths(ours), ag.tree_leaves(ours), ag.tree_leaves(theirs)):
        # A key bias adds the same q·b to every score of a query: softmax ignores it, so its
        # gradient is 0 but for rounding, which Adam's g / √v magnifies to full-size steps.
        if ag.is_differentiable(x) and not path.endswith("wk.b"):
            np.testing.assert_allclose(y, x, rtol=1e-4, atol=2e-6, err_msg=path)
    # the moments matter: a fresh torch Adam takes other steps from the same weights
    module, adam = torch_copy(torch, params)
    to_torch.train_in_torch(torch, module, adam, schedule, more, 6)
    fresh = torch_bridge.from_torch(module.state_dict(), like=params)
    assert np.max(np.abs(fresh.out.w - ours.out.w)) > 100 * 2e-6


def test_moved_weights_give_the_same_logits_and_a_broken_move_is_caught(torch):
    params, *_, held_out = trained_a_little(steps=1)
    module, _ = torch_copy(torch, params)
    assert to_torch.logits_difference(torch, module, params, held_out[:20]) < to_torch.AGREE
    wrong = params._replace(out=params.out._replace(b=params.out.b + 1e-3))
    with pytest.raises(SystemExit, match=r"to_torch: the logits differ by \d\.\d\de-0[34] of "
                                         r"the largest \(> 1e-05\)"):
        to_torch.logits_difference(torch, module, wrong, held_out[:20])


def test_quick_run_learns_in_both_places_and_ends_with_its_result(torch, tmp_path, capsys):
    to_torch.main(["--quick", "--out", str(tmp_path)])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    found = re.fullmatch(r"held-out loss ([\d.]+) untrained, ([\d.]+) after 30 steps here, "
                         r"([\d.]+) after 30 in torch; exact match ([\d.]+)% \(500 values\); "
                         r"logits agreed to ([\d.e+-]+) of the largest", last)
    assert found, last
    untrained, here, there, _, agreed = map(float, found.groups())
    assert untrained > np.log(len(nw.TARGET_VOCAB)) - 0.5  # about uniform over the words
    assert there < here < 0.8 * untrained and there < 0.6 * untrained
    assert agreed < to_torch.AGREE
    assert (tmp_path / "attention.png").stat().st_size > 0
    assert ag.load(tmp_path / "model.npz").out.w.dtype == np.float32


def test_without_torch_it_says_how_to_install_it_and_exits_0(tmp_path):
    hide_torch = ("import sys, runpy; sys.modules['torch'] = None; "
                  f"sys.argv = ['to_torch', '--quick', '--out', {str(tmp_path)!r}]; "
                  "runpy.run_module('demos.to_torch', run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", hide_torch], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "pip install torch" in done.stdout and "not installed" in done.stdout
