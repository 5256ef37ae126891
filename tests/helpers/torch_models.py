"""PyTorch layers holding our layers' weights, and gradients compared under torch's names.

The layout mapping (transposed Linear weights, W_Q, W_K, W_V packed into in_proj) is
models.torch_bridge's, the only one: the tests load torch modules through it and map our
gradient trees through it. A packed in_proj is compared whole, so the key bias's gradient
(zero in exact arithmetic: softmax ignores a shift of every score in a row) is judged at
the scale of the others rather than against its own rounding noise.

    torch_attention(torch, p)          nn.MultiheadAttention holding MultiHeadAttention p
    torch_block(torch, block, norm)    nn.TransformerEncoderLayer / DecoderLayer holding block
    torch_gradients(modules, prefix)   {"prefix[i].name": .grad} of each module's parameters
    our_gradients(blocks, prefix)      the same keys for our gradient trees of those blocks
    assert_gradients_match(ours, reference, rtol)
    assert_model_gradients_match(grads, leaves, layers, rtol)
                                       a whole model's: its blocks against torch layers, every
                                       other parameter against a torch leaf tensor
"""
import numpy as np

from helpers.references import float_leaves, relative_error


def torch_dtype(torch, array):
    return getattr(torch, array.dtype.name)


def torch_attention(torch, p):
    """nn.MultiheadAttention (batch_first) holding p's weights, in p's dtype."""
    from models.torch_bridge import attention_to_torch
    module = torch.nn.MultiheadAttention(p.wq.w.shape[0], p.n_heads, batch_first=True,
                                         dtype=torch_dtype(torch, p.wq.w))
    module.load_state_dict(attention_to_torch("", p))
    return module


def torch_block(torch, block, norm="post"):
    """nn.TransformerDecoderLayer for a DecoderBlock, nn.TransformerEncoderLayer for the
    others (relu, batch_first, dropout 0), holding block's weights in its dtype. Train mode:
    in eval mode torch may take a fused path."""
    from models.blocks import DecoderBlock
    from models.torch_bridge import block_to_torch
    d_model, d_ff = block.ff.linear1.w.shape
    layer = (torch.nn.TransformerDecoderLayer if isinstance(block, DecoderBlock)
             else torch.nn.TransformerEncoderLayer)
    module = layer(d_model, block.self_attn.n_heads, d_ff, dropout=0.0, batch_first=True,
                   norm_first=(norm == "pre"), dtype=torch_dtype(torch, block.ff.linear1.w))
    module.load_state_dict(block_to_torch("", block))
    return module.train()


def torch_gradients(modules, prefix):
    return {f"{prefix}[{i}].{name}": parameter.grad.numpy()
            for i, module in enumerate(modules) for name, parameter in module.named_parameters()}


def our_gradients(blocks, prefix):
    from models.torch_bridge import block_to_torch
    return {f"{prefix}[{i}].{name}": tensor.numpy()
            for i, block in enumerate(blocks) for name, tensor in block_to_torch("", block).items()}


def assert_gradients_match(ours, reference, rtol):
    """The same keys, and each of our gradients of the reference's dtype and within rtol of
    it relative to its largest entry."""
    assert sorted(ours) == sorted(reference)
    for key, want in reference.items():
        got = np.asarray(ours[key])
        assert got.dtype == want.dtype, f"{key}: {got.dtype} != {want.dtype}"
        assert relative_error(got, want) < rtol, f"{key}: {relative_error(got, want):.3g}"


def assert_model_gradients_match(grads, leaves, layers, rtol, blocks="encoder"):
    """Our gradient tree of a model against a torch model built of `leaves` ({our path: leaf
    tensor}, for every parameter outside the blocks) and `layers` (one per block of
    grads.<blocks>), after its backward pass."""
    outside = {path: g for path, g in float_leaves(grads).items()
               if not path.startswith(blocks + "[")}
    assert sorted(outside) == sorted(leaves)  # every parameter has its reference
    assert_gradients_match({**outside, **our_gradients(getattr(grads, blocks), blocks)},
                           {**{path: t.grad.numpy() for path, t in leaves.items()},
                            **torch_gradients(layers, blocks)}, rtol)
