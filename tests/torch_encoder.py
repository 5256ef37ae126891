"""Independent PyTorch counterparts for the classifier and LM tests: a
torch.nn.TransformerEncoderLayer holding our block's weights, its gradients mapped back
to our parameter paths, the sinusoids written out afresh, and a relative comparison.

Layouts: our Dense.w is (d_in, d_out), torch's Linear.weight is its transpose;
MultiheadAttention.in_proj_weight is concat(W_Q^T, W_K^T, W_V^T) (and the biases alike).
"""
import numpy as np

import autograd_lite as ag


def torch_dtype(torch, array):
    return torch.float64 if array.dtype == np.float64 else torch.float32


def leaf(torch, array):
    """A torch leaf tensor holding a copy of `array`, recording its gradient."""
    return torch.tensor(np.array(array), requires_grad=True)


def sinusoids(length, d_model):
    """PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(...), pos from 0 (a loop)."""
    table = np.zeros((length, d_model))
    for pos in range(length):
        for i in range(0, d_model, 2):
            table[pos, i] = np.sin(pos / 10000 ** (i / d_model))
            if i + 1 < d_model:
                table[pos, i + 1] = np.cos(pos / 10000 ** (i / d_model))
    return table


def encoder_layer(torch, block, norm_first):
    """nn.TransformerEncoderLayer (batch_first, dropout 0, relu) with `block`'s weights."""
    a, ff = block.self_attn, block.ff
    d_model, d_ff = ff.linear1.w.shape
    layer = torch.nn.TransformerEncoderLayer(d_model, a.n_heads, d_ff, dropout=0.0,
                                             batch_first=True, norm_first=norm_first,
                                             dtype=torch_dtype(torch, ff.linear1.w))
    copies = {
        layer.self_attn.in_proj_weight: np.concatenate([a.wq.w.T, a.wk.w.T, a.wv.w.T]),
        layer.self_attn.in_proj_bias: np.concatenate([a.wq.b, a.wk.b, a.wv.b]),
        layer.self_attn.out_proj.weight: a.wo.w.T, layer.self_attn.out_proj.bias: a.wo.b,
        layer.linear1.weight: ff.linear1.w.T, layer.linear1.bias: ff.linear1.b,
        layer.linear2.weight: ff.linear2.w.T, layer.linear2.bias: ff.linear2.b,
        layer.norm1.weight: block.norm1.scale, layer.norm1.bias: block.norm1.bias,
        layer.norm2.weight: block.norm2.scale, layer.norm2.bias: block.norm2.bias,
    }
    with torch.no_grad():
        for parameter, value in copies.items():
            parameter.copy_(torch.from_numpy(np.ascontiguousarray(value)))
    return layer.train()  # train mode with dropout 0: eval mode may take the fused fast path


def encoder_layer_grads(layer, prefix):
    """{our parameter path: gradient} for a layer built by `encoder_layer`."""
    sa = layer.self_attn
    wq, wk, wv = np.split(sa.in_proj_weight.grad.numpy(), 3)
    bq, bk, bv = np.split(sa.in_proj_bias.grad.numpy(), 3)
    grads = {"self_attn.wq.w": wq.T, "self_attn.wk.w": wk.T, "self_attn.wv.w": wv.T,
             "self_attn.wq.b": bq, "self_attn.wk.b": bk, "self_attn.wv.b": bv,
             "self_attn.wo.w": sa.out_proj.weight.grad.numpy().T,
             "self_attn.wo.b": sa.out_proj.bias.grad.numpy(),
             "ff.linear1.w": layer.linear1.weight.grad.numpy().T,
             "ff.linear1.b": layer.linear1.bias.grad.numpy(),
             "ff.linear2.w": layer.linear2.weight.grad.numpy().T,
             "ff.linear2.b": layer.linear2.bias.grad.numpy(),
             "norm1.scale": layer.norm1.weight.grad.numpy(),
             "norm1.bias": layer.norm1.bias.grad.numpy(),
             "norm2.scale": layer.norm2.weight.grad.numpy(),
             "norm2.bias": layer.norm2.bias.grad.numpy()}
    return {f"{prefix}.{path}": g for path, g in grads.items()}


def float_leaves(tree):
    """{path: array} for the floating arrays of a tree (the parameters or their gradients)."""
    return {path: x for path, x in zip(ag.tree_paths(tree), ag.tree_leaves(tree))
            if isinstance(x, np.ndarray) and x.dtype.kind == "f"}


def relative_error(ours, reference):
    reference = np.asarray(reference, dtype=np.float64)
    ours = np.asarray(ours, dtype=np.float64)
    return np.max(np.abs(ours - reference)) / np.max(np.abs(reference))


def assert_grads_match(ours, reference, rtol):
    """Every path in both, each within rtol of the largest entry of its reference; returns
    the worst relative error. The key biases' gradients are zero in exact arithmetic
    (q·(k + b) adds q·b to a whole row of scores, which softmax ignores): there, both
    sides must be below rtol times the largest gradient entry anywhere."""
    assert sorted(ours) == sorted(reference)
    scale = max(np.max(np.abs(g)) for g in reference.values())
    errors = {}
    for path, ref in reference.items():
        if path.endswith("self_attn.wk.b"):
            assert max(np.max(np.abs(ours[path])), np.max(np.abs(ref))) < rtol * scale, path
        else:
            errors[path] = relative_error(ours[path], ref)
    worst = max(errors, key=errors.get)
    assert errors[worst] < rtol, f"{worst}: relative error {errors[worst]:.3g} >= {rtol}"
    return errors[worst]
