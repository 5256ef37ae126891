"""demos.logistic_regression: its loss and gradient against torch's binary cross-entropy, and
the demo run with --quick: the learned line is the labels' diagonal, the accuracy above a floor."""
import re

import numpy as np
import pytest

import autograd_lite as ag
from demos import logistic_regression as demo


def test_loss_and_gradient_equal_torchs_binary_cross_entropy(torch):
    rng = np.random.default_rng(0)
    x, y = demo.points(rng, 50)
    p = demo.Logistic(rng.standard_normal(2) * 30, np.array(4.0))  # large |z|: the stable form
    value, (grads, _, _) = ag.value_and_gradient(demo.loss, p, x, y)
    w, b = (torch.tensor(a, requires_grad=True) for a in p)
    want = torch.nn.functional.binary_cross_entropy_with_logits(torch.from_numpy(x) @ w + b,
                                                                torch.from_numpy(y))
    want.backward()
    assert float(value) == pytest.approx(want.item(), rel=1e-12)
    np.testing.assert_allclose(grads.w, w.grad.numpy(), rtol=1e-10)
    assert float(grads.b) == pytest.approx(b.grad.item(), rel=1e-10)


def test_points_are_labelled_by_the_diagonal():
    x, y = demo.points(np.random.default_rng(1), 2000)
    assert x.shape == (2000, 2) and y.shape == (2000,) and 0 <= x.min() and x.max() < 1
    np.testing.assert_array_equal(y, [1.0 if a + b < 1 else 0.0 for a, b in x])
    assert 0.45 < y.mean() < 0.55  # half the square lies below the diagonal


def test_quick_run_learns_the_diagonal_and_ends_with_its_accuracy(tmp_path, capsys):
    demo.main(["--quick", "--out", str(tmp_path)])
    lines = capsys.readouterr().out.strip().splitlines()
    found = re.fullmatch(r"test accuracy: ([\d.]+)% \(1,000 fresh points; a constant guess gets "
                         r"([\d.]+)%\)", lines[-1])
    assert found, lines[-1]
    accuracy, constant = float(found.group(1)), float(found.group(2))
    assert constant < 60.0 and accuracy >= 95.0  # an untrained model scores about half
    p = ag.load(tmp_path / "model.npz")
    np.testing.assert_allclose(-p.w / p.b, [1.0, 1.0], atol=0.05)  # w·x + b = 0 is x1 + x2 = 1
    assert "learned line" in lines[-2]


def test_untrained_model_scores_about_half():
    x, y = demo.points(np.random.default_rng(2), 1000)
    assert demo.accuracy(demo.Logistic(np.zeros(2), np.array(0.0)), x, y) == 1 - y.mean()
