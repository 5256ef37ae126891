"""Two arguments of a fast rule that hold one array. The engine tells the rule which arguments
are one traced value; one buffer must not decide it. For every fast rule with two float
arguments of one shape, a table row names the pair, and each row is differentiated

    - with the same array as two differentiated arguments      f(a, b) at a = b = x
    - with the second argument a constant of the same array    f(a, stop_gradient(a)), f(a, x)
    - with the second argument a constant view of that array   f(a, x[...])
    - with one traced value in both places                      f(a, a)

and held against PyTorch (two leaves, or a detached copy) and against the composition of the
library's own ops (the function with `ag.fast_rules(False)`), in float64, to 1e-12. The rule
must run in each case (a hook on the trace sees its name), or the row would test only the
composition."""
from typing import NamedTuple

import numpy as np
import pytest

import autograd_lite as ag
from helpers.fused import fused_calls, rules_off
from helpers.references import assert_close, to_tensor
from models import attention, layers
from models.attention import MultiHeadAttention
from models.layers import Dense, FeedForward, LayerNorm

B, T, D, H = 2, 3, 4, 2
RTOL = 1e-12


def _dense(seed):
    rng = np.random.default_rng(seed)
    return Dense(rng.standard_normal((D, D)) / 2, rng.standard_normal(D))


ATTENTION = MultiHeadAttention(_dense(1), _dense(2), _dense(3), _dense(4), H)
FEED_FORWARD = FeedForward(_dense(5), _dense(6))
NORM = LayerNorm(1 + np.random.default_rng(7).standard_normal(D) / 4,
                 np.random.default_rng(8).standard_normal(D))
EPS = 1e-5


class Row(NamedTuple):
    """f(a, b) with a and b of `shape`; `op`: the rule's node name in a trace; `twin(torch,
    a, b)`: PyTorch's. The composition is f with the rules off."""
    name: str
    op: str
    shape: tuple
    f: object
    twin: object


def _torch_heads(t):
    return t.reshape(B, -1, H, D // H).transpose(1, 2)  # (B, H, T, d_head)


def _torch_merge(t):
    return t.transpose(1, 2).reshape(B, -1, D)  # (B, T, D)


def _torch_dense(torch, p, x):
    return x @ to_tensor(torch, p.w) + to_tensor(torch, p.b)


def torch_multihead_attention(torch, x_q, x_kv):
    p = ATTENTION
    q, k, v = (_torch_heads(_torch_dense(torch, w, x))
               for w, x in ((p.wq, x_q), (p.wk, x_kv), (p.wv, x_kv)))
    heads = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    return _torch_dense(torch, p.wo, _torch_merge(heads))


def torch_attention_over(torch, keys, values):
    p, x_q = ATTENTION, to_tensor(torch, QUERIES)
    q = _torch_heads(_torch_dense(torch, p.wq, x_q))
    heads = torch.nn.functional.scaled_dot_product_attention(q, keys, values)
    return _torch_dense(torch, p.wo, _torch_merge(heads))


def torch_add_and_norm(torch, x, y):
    return torch.nn.functional.layer_norm(x + y, (D,), to_tensor(torch, NORM.scale),
                                          to_tensor(torch, NORM.bias), EPS)


def torch_feed_forward(torch, w1, w2):
    x, ((_, b1), (_, b2)) = to_tensor(torch, ACTIVATIONS), FEED_FORWARD
    hidden = torch.relu(x @ w1 + to_tensor(torch, b1))
    return hidden @ w2 + to_tensor(torch, b2)


QUERIES = np.random.default_rng(9).standard_normal((B, T, D))
ACTIVATIONS = np.random.default_rng(10).standard_normal((B, T, D))
BIAS = np.random.default_rng(11).standard_normal(D)


def _feed_forward_of_weights(w1, w2):
    (_, b1), (_, b2) = FEED_FORWARD
    return layers.feed_forward(FeedForward(Dense(w1, b1), Dense(w2, b2)), ACTIVATIONS)


ROWS = [
    Row("multihead_attention: queries and keys' source", "multihead_attention", (B, T, D),
        lambda x_q, x_kv: attention.multihead_attention(ATTENTION, x_q, x_kv),
        torch_multihead_attention),
    Row("cross_attention: the decoder's rows and the memory", "multihead_attention", (B, T, D),
        lambda x, memory: attention.cross_attention(ATTENTION, x, memory),
        torch_multihead_attention),
    Row("attention_over: keys and values", "attention_over", (B, H, T, D // H),
        lambda k, v: attention.attention_over(ATTENTION, QUERIES, (k, v)),
        torch_attention_over),
    Row("add_and_norm: the residual and the sublayer's output", "add_and_norm",
        (B, T, D), lambda x, y: layers.add_and_norm(NORM, x, y, EPS), torch_add_and_norm),
    Row("feed_forward: W1 and W2 (d_ff = d_model)", "feed_forward", (D, D),
        _feed_forward_of_weights, torch_feed_forward),
    Row("linear: x and W", "linear", (D, D), lambda x, w: ag.linear(x, w, BIAS),
        lambda torch, x, w: x @ w + to_tensor(torch, BIAS)),
    Row("layer_norm: scale and bias", "layer_norm", (D,),
        lambda scale, bias: ag.layer_norm(ACTIVATIONS, scale, bias, EPS),
        lambda torch, scale, bias: torch.nn.functional.layer_norm(
            to_tensor(torch, ACTIVATIONS), (D,), scale, bias, EPS)),
]

WEIGHT = {shape: np.random.default_rng(12).standard_normal(shape)  # w of Σ f(...) ⊙ w
          for shape in ((B, T, D), (D, D))}


CASES = ["two differentiated arguments", "stop_gradient", "the same array as a constant",
         "a view as a constant", "one traced value"]


def case_call(case, f, x):
    """(function, arguments): f(a, b) in one case at the array x; the function's arguments are
    what is differentiated."""
    if case == "two differentiated arguments":
        return f, (x, x)
    second = {"stop_gradient": ag.stop_gradient, "the same array as a constant": lambda a: x,
              "a view as a constant": lambda a: x[...], "one traced value": lambda a: a}[case]
    return (lambda a: f(a, second(a))), (x,)


def our_gradients(case, f, x, weight):
    """The gradients of Σ f(a, b) ⊙ w in one case at x, one per differentiated argument."""
    g, args = case_call(case, f, x)
    return ag.gradient(lambda *a: ag.sum(g(*a) * weight), *args)


def torch_gradients(torch, case, twin, x, weight):
    """PyTorch's gradients of the same case: two leaves, a detached copy, or one leaf."""
    a = to_tensor(torch, x, requires_grad=True)
    if case == "two differentiated arguments":
        b = to_tensor(torch, x, requires_grad=True)
        leaves, out = (a, b), twin(torch, a, b)
    else:
        b = a if case == "one traced value" else a.detach()
        leaves, out = (a,), twin(torch, a, b)
    (out * torch.from_numpy(weight)).sum().backward()
    return tuple(t.grad.numpy() for t in leaves)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("row", ROWS, ids=[r.name.split(":")[0] + "-" + str(i)
                                            for i, r in enumerate(ROWS)])
def test_a_fast_rule_with_one_array_in_two_arguments_matches_torch_and_its_composition(
        row, case, torch):
    x = np.random.default_rng(13).standard_normal(row.shape)
    function, args = case_call(case, row.f, x)
    assert row.op in fused_calls(function, *args), f"{row.name}: no fast rule ran"
    weight = WEIGHT[np.shape(row.f(x, x))]
    ours = our_gradients(case, row.f, x, weight)
    composed = our_gradients(case, rules_off(row.f), x, weight)
    reference = torch_gradients(torch, case, row.twin, x, weight)
    assert len(ours) == len(reference)
    for i, (g, want, c) in enumerate(zip(ours, reference, composed)):
        assert_close(g, want, RTOL, f"{row.name}, {case}: argument {i} against torch")
        assert_close(g, c, RTOL, f"{row.name}, {case}: argument {i} against the composition")


def test_one_array_as_query_and_as_keys_gives_each_argument_its_own_cotangent():
    """Σ multihead_attention(p, x, x) at this seed: the query's Σ|∂/∂x_q| and the keys and
    values' Σ|∂/∂x_kv| differ (30.12 and 135.36), each its own argument's, not their sum."""
    r = np.random.default_rng(0)
    x = r.standard_normal((B, T, D))
    ws = [r.standard_normal((D, D)) if i % 2 == 0 else r.standard_normal(D) for i in range(8)]
    p = MultiHeadAttention(*(Dense(ws[i], ws[i + 1]) for i in (0, 2, 4, 6)), H)
    grads = ag.gradient(lambda q, kv: ag.sum(attention.multihead_attention(p, q, kv)), x, x)
    np.testing.assert_allclose([np.abs(g).sum() for g in grads], [30.12, 135.36], atol=5e-3)
