"""A reference PyTorch module for models.transformer, and the parameter mapping both ways.

    module = torch_module_for(p)            # a TorchTransformer holding p's weights, in p's dtype
    sd = to_torch(p)                        # state_dict keys of TorchTransformer (for a
                                            # classifier or LM: classifier_to_torch's, lm_to_torch's)
    p = from_torch(sd, like=p)              # back to our NamedTuple tree, any of the three
    block_to_torch(prefix, block)           # one block's keys: nn.TransformerEncoderLayer's
                                            # (also the LM's blocks) or ...DecoderLayer's
    attention_to_torch(prefix, attention)   # nn.MultiheadAttention's keys
    sd = classifier_to_torch(p)             # a classifier's tensors, named in torch's layout
    sd = lm_to_torch(p)                     # a language model's tensors, likewise

The same mapping converts gradient trees: to_torch(grads) holds, under each key,
what torch puts in that parameter's .grad. Torch stores Linear weights as
(d_out, d_in), the transpose of our Dense.w (d_in, d_out), and packs attention's
W_Q, W_K, W_V into one in_proj_weight (3D, D) = [W_Qᵀ; W_Kᵀ; W_Vᵀ].
torch is imported here only (models/__init__.py loads this module lazily).
"""
import math
import warnings

import numpy as np
import torch
from torch import nn

from .attention import MultiHeadAttention
from .blocks import DecoderBlock
from .classifier import Classifier
from .layers import Dense, Embedding, FeedForward, LayerNorm, position_encoding
from .lm import LM
from .transformer import Transformer, check_sharing, sharing, source_embedding


class TorchTransformer(nn.Module):
    """nn.Transformer between embeddings (scaled by √d_model, plus the sinusoidal position
    encoding) and an output Linear, with models.transformer.apply's masks. share_embeddings
    as transformer.init's: True or "target" makes out.weight tgt_embed.weight, "all" makes
    src_embed.weight that one Parameter too (torch sums the .grad of its uses)."""

    def __init__(self, src_vocab, tgt_vocab, d_model=512, n_heads=8, d_ff=2048, n_encoder=6,
                 n_decoder=6, max_len=512, norm="post", dropout=0.1, share_embeddings=False):
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model)
        with warnings.catch_warnings():  # "enable_nested_tensor is True, but ... norm_first"
            warnings.simplefilter("ignore", UserWarning)
            self.transformer = nn.Transformer(d_model, n_heads, n_encoder, n_decoder, d_ff,
                                              dropout, activation="relu", batch_first=True,
                                              norm_first=(norm == "pre"))
        # The nested-tensor fast path zeroes padded outputs under no_grad: keep the plain path.
        self.transformer.encoder.use_nested_tensor = False
        self.out = nn.Linear(d_model, tgt_vocab)
        tied = check_sharing("TorchTransformer", share_embeddings, src_vocab, tgt_vocab)
        if tied:
            self.out.weight = self.tgt_embed.weight
        if tied == "all":
            self.src_embed.weight = self.tgt_embed.weight
        self.dropout = dropout  # a float, not a module: the children are exactly the four above
        pe = torch.from_numpy(np.array(position_encoding(max_len, d_model, np.float64)))
        self.register_buffer("pe", pe, persistent=False)  # (max_len, D); not in state_dict

    def embed(self, table, ids):
        """Dropout(E[ids] · √d_model + PE[:T]).  ids: (B, T) -> (B, T, D)"""
        x = table(ids) * math.sqrt(self.d_model)  # (B, T, D)
        x = x + self.pe[:ids.shape[1]].to(x.dtype)
        return nn.functional.dropout(x, self.dropout, self.training)

    def forward(self, src, tgt, src_pad=None):
        """src: (B, S), tgt: (B, T) long tensors -> logits (B, T, tgt_vocab)."""
        length = tgt.shape[1]
        causal = torch.triu(torch.ones(length, length, dtype=torch.bool), 1)  # True = masked
        pad = None if src_pad is None else src == src_pad  # (B, S), True = masked
        encoder, decoder = self.transformer.encoder, self.transformer.decoder
        memory = _stack(encoder, self.embed(self.src_embed, src), src_key_padding_mask=pad)
        y = _stack(decoder, self.embed(self.tgt_embed, tgt), memory, tgt_mask=causal,
                   memory_key_padding_mask=pad, tgt_is_causal=True)  # (B, T, D)
        return self.out(y)  # (B, T, V)


def _stack(stack, x, *args, **kwargs):
    """An nn.TransformerEncoder or ...Decoder on x, as nn.Transformer calls it; with no
    layers, its final norm alone (torch's stacks index their first layer, so they cannot
    run empty), as models.transformer computes it."""
    return stack(x, *args, **kwargs) if len(stack.layers) else stack.norm(x)


def torch_module_for(p):
    """A TorchTransformer of p's sizes holding p's weights, in p's float dtype (no block at
    all: heads and feed-forward sizes that nothing uses)."""
    blocks = p.encoder or p.decoder
    n_heads, d_ff = (blocks[0].self_attn.n_heads, blocks[0].ff.linear1.w.shape[1]) if blocks \
        else (1, 1)
    module = TorchTransformer(
        source_embedding(p).table.shape[0], p.tgt_embed.table.shape[0], p.d_model, n_heads,
        d_ff, len(p.encoder), len(p.decoder), p.max_len, p.norm, p.dropout,
        share_embeddings=sharing(p))
    module = module.to(torch.from_numpy(np.zeros(0, p.out.b.dtype)).dtype)
    module.load_state_dict(to_torch(p))
    return module


# ---- our tree -> state_dict ------------------------------------------------------------

def _tensor(a):
    return torch.from_numpy(np.array(a))  # a copy: torch must not share our buffers


def _linear(prefix, d):
    return {prefix + "weight": _tensor(d.w.T), prefix + "bias": _tensor(d.b)}


def _norm(prefix, n):
    return {prefix + "weight": _tensor(n.scale), prefix + "bias": _tensor(n.bias)}


def attention_to_torch(prefix, a):
    """A MultiHeadAttention (or its gradients) -> nn.MultiheadAttention's state_dict keys:
    W_Q, W_K, W_V packed as torch's in_proj (3D, D), and out_proj."""
    return {prefix + "in_proj_weight": _tensor(np.concatenate([a.wq.w.T, a.wk.w.T, a.wv.w.T])),
            prefix + "in_proj_bias": _tensor(np.concatenate([a.wq.b, a.wk.b, a.wv.b])),
            **_linear(prefix + "out_proj.", a.wo)}


def block_to_torch(prefix, b):
    """An EncoderBlock (or DecoderOnlyBlock) or DecoderBlock; torch's names match ours but for
    ff and cross_attn."""
    sd = {**attention_to_torch(prefix + "self_attn.", b.self_attn)}
    if isinstance(b, DecoderBlock):
        sd.update(attention_to_torch(prefix + "multihead_attn.", b.cross_attn))
    sd.update(_linear(prefix + "linear1.", b.ff.linear1))
    sd.update(_linear(prefix + "linear2.", b.ff.linear2))
    norms = ("norm1", "norm2", "norm3") if isinstance(b, DecoderBlock) else ("norm1", "norm2")
    for name in norms:
        sd.update(_norm(f"{prefix}{name}.", getattr(b, name)))
    return sd


def to_torch(tree):
    """Our model's tree (parameters or gradients) -> a dict of torch tensors: a Transformer's
    with exactly the keys of TorchTransformer(...).state_dict() (transformer_to_torch), a
    Classifier's as classifier_to_torch, an LM's as lm_to_torch."""
    return _mapping("to_torch", tree)[0](tree)


def transformer_to_torch(tree):
    """A Transformer tree -> TorchTransformer's state_dict keys. With tied embeddings (out.w
    None; src_embed.table None too when all three are shared), out.weight (and src_embed.weight)
    is tgt_embed's table, as it is one parameter in torch; for a gradient tree, that table's
    gradient is the sum over its uses, which is torch's .grad of the one Parameter."""
    tgt_embed = _tensor(tree.tgt_embed.table)
    src_embed = tgt_embed if sharing(tree) == "all" else _tensor(tree.src_embed.table)
    sd = {"src_embed.weight": src_embed, "tgt_embed.weight": tgt_embed}
    for i, block in enumerate(tree.encoder):
        sd.update(block_to_torch(f"transformer.encoder.layers.{i}.", block))
    sd.update(_norm("transformer.encoder.norm.", tree.encoder_norm))
    for i, block in enumerate(tree.decoder):
        sd.update(block_to_torch(f"transformer.decoder.layers.{i}.", block))
    sd.update(_norm("transformer.decoder.norm.", tree.decoder_norm))
    if tree.out.w is None:
        sd.update({"out.weight": sd["tgt_embed.weight"], "out.bias": _tensor(tree.out.b)})
    else:
        sd.update(_linear("out.", tree.out))
    return sd


def classifier_to_torch(tree):
    """A models.classifier tree (parameters or gradients) -> {name: tensor} in torch's layout:
    embed.weight, encoder.{i}.<block_to_torch's keys>, agg.* (pool="flatten"), head.*. No
    torch module has these names: a functional model (F.linear, F.layer_norm) reads them."""
    sd = {"embed.weight": _tensor(tree.embed.table)}
    for i, block in enumerate(tree.encoder):
        sd.update(block_to_torch(f"encoder.{i}.", block))
    if tree.agg is not None:
        sd.update(_linear("agg.", tree.agg))
    sd.update(_linear("head.", tree.head))
    return sd


def lm_to_torch(tree):
    """A models.lm tree (parameters or gradients) -> {name: tensor} in torch's layout:
    embed.weight, blocks.{i}.<block_to_torch's keys>, norm.*, head.*."""
    sd = {"embed.weight": _tensor(tree.embed.table)}
    for i, block in enumerate(tree.blocks):
        sd.update(block_to_torch(f"blocks.{i}.", block))
    sd.update(_norm("norm.", tree.norm))
    sd.update(_linear("head.", tree.head))
    return sd


# ---- state_dict -> our tree -------------------------------------------------------------

def _array(sd, key, like, shape=None):
    """sd[key] as an array of like's dtype; its shape must be `shape` (default like's, in
    torch's layout), else a ValueError names the key and both shapes."""
    a = sd[key].detach().cpu().numpy()
    want = like.shape if shape is None else shape
    if a.shape != want:
        raise ValueError(f"from_torch: {key} has shape {tuple(a.shape)} but a model shaped like "
                         f"`like` needs {tuple(want)}")
    return np.array(a, dtype=like.dtype)


def _from_linear(sd, prefix, like):
    return Dense(_array(sd, prefix + "weight", like.w.T).T.copy(),
                 _array(sd, prefix + "bias", like.b))


def _from_norm(sd, prefix, like):
    return LayerNorm(_array(sd, prefix + "weight", like.scale),
                     _array(sd, prefix + "bias", like.bias))


def _from_attention(sd, prefix, like):
    """Unpack in_proj (3D, D) into W_Q, W_K, W_V (each (D, D), ours = torch's transposed)."""
    d_in, d_out = like.wq.w.shape
    packed = _array(sd, prefix + "in_proj_weight", like.wq.w, (3 * d_out, d_in))  # (3D, D)
    w = np.split(packed, 3)  # 3 x (D, D)
    b = np.split(_array(sd, prefix + "in_proj_bias", like.wq.b, (3 * d_out,)), 3)  # 3 x (D,)
    wq, wk, wv = (Dense(wi.T.copy(), bi.copy()) for wi, bi in zip(w, b))
    return MultiHeadAttention(wq, wk, wv, _from_linear(sd, prefix + "out_proj.", like.wo),
                              like.n_heads)


def _from_block(sd, prefix, like):
    self_attn = _from_attention(sd, prefix + "self_attn.", like.self_attn)
    ff = FeedForward(_from_linear(sd, prefix + "linear1.", like.ff.linear1),
                     _from_linear(sd, prefix + "linear2.", like.ff.linear2))
    norm1, norm2 = (_from_norm(sd, f"{prefix}{n}.", getattr(like, n)) for n in ("norm1", "norm2"))
    if not isinstance(like, DecoderBlock):  # an EncoderBlock (or the LM's DecoderOnlyBlock)
        return type(like)(self_attn, norm1, ff, norm2)
    cross = _from_attention(sd, prefix + "multihead_attn.", like.cross_attn)
    return DecoderBlock(self_attn, norm1, cross, norm2, ff,
                        _from_norm(sd, prefix + "norm3.", like.norm3))


def _tied_table(sd, keys, like):
    """The one table that sd holds under each of `keys` (tied weights), as _array reads it;
    a ValueError naming the keys if their values differ (a state_dict of an untied model);
    a NaN in one table is the same as a NaN in the same place of the other (one tensor)."""
    table = _array(sd, keys[0], like)
    for key in keys[1:]:
        other = _array(sd, key, like)
        if not np.array_equal(other, table, equal_nan=True):
            raise ValueError(f"from_torch: `like` ties {', '.join(keys)} into one table, but the "
                             f"state_dict's {key} differs from its {keys[0]} (largest difference "
                             f"{np.max(np.abs(other - table)):.3g}): it comes from a model that "
                             f"does not share them")
    return table


def _from_transformer(sd, like):
    tied = sharing(like)
    keys = {False: ["tgt_embed.weight"], "target": ["tgt_embed.weight", "out.weight"],
            "all": ["tgt_embed.weight", "src_embed.weight", "out.weight"]}[tied]
    tgt_embed = Embedding(_tied_table(sd, keys, like.tgt_embed.table))
    if tied == "all":
        src_embed = like.src_embed  # Embedding(None): the source reads tgt_embed's table
    else:
        src_embed = Embedding(_array(sd, "src_embed.weight", like.src_embed.table))
    if tied:
        out = Dense(None, _array(sd, "out.bias", like.out.b))
    else:
        out = _from_linear(sd, "out.", like.out)
    return like._replace(
        src_embed=src_embed, tgt_embed=tgt_embed,
        encoder=tuple(_from_block(sd, f"transformer.encoder.layers.{i}.", b)
                      for i, b in enumerate(like.encoder)),
        encoder_norm=_from_norm(sd, "transformer.encoder.norm.", like.encoder_norm),
        decoder=tuple(_from_block(sd, f"transformer.decoder.layers.{i}.", b)
                      for i, b in enumerate(like.decoder)),
        decoder_norm=_from_norm(sd, "transformer.decoder.norm.", like.decoder_norm),
        out=out)


def _from_classifier(sd, like):
    return like._replace(
        embed=Embedding(_array(sd, "embed.weight", like.embed.table)),
        encoder=tuple(_from_block(sd, f"encoder.{i}.", b) for i, b in enumerate(like.encoder)),
        agg=None if like.agg is None else _from_linear(sd, "agg.", like.agg),
        head=_from_linear(sd, "head.", like.head))


def _from_lm(sd, like):
    return like._replace(
        embed=Embedding(_array(sd, "embed.weight", like.embed.table)),
        blocks=tuple(_from_block(sd, f"blocks.{i}.", b) for i, b in enumerate(like.blocks)),
        norm=_from_norm(sd, "norm.", like.norm), head=_from_linear(sd, "head.", like.head))


def _mapping(caller, tree):
    """(tree -> state_dict, (state_dict, like) -> tree) for tree's model; TypeError if none."""
    mappings = {Transformer: (transformer_to_torch, _from_transformer),
                Classifier: (classifier_to_torch, _from_classifier), LM: (lm_to_torch, _from_lm)}
    if type(tree) not in mappings:
        raise TypeError(f"{caller}: expected a models.transformer, classifier or lm tree, got "
                        f"{type(tree).__name__}")
    return mappings[type(tree)]


def from_torch(state_dict, like):
    """A state_dict with to_torch(like)'s keys (TorchTransformer's for a Transformer) -> a
    tree shaped like `like` (a Transformer, Classifier or LM), with like's dtypes and
    hyperparameters. Raises KeyError naming a missing key, ValueError naming a key whose shape
    differs from like's."""
    to, back = _mapping("from_torch", like)
    missing = sorted(set(to(like)) - set(state_dict))
    if missing:
        raise KeyError(f"from_torch: the state_dict lacks {len(missing)} keys of a model shaped "
                       f"like `like`, e.g. {missing[:3]}")
    return back(state_dict, like)
