"""A decoder-only (GPT-style) language model: pre-LN self-attention blocks under a causal
mask, a final layer norm, and a linear map to the vocabulary; with sampling that reuses
each layer's keys and values, so that every new token costs one query row.

    p = lm.init(rng, vocab_size, d_model=64, n_heads=4, d_ff=256, n_layers=2, max_len=128)
    logits = lm.apply(p, ids)                                       # (B, T, V)
    ids = lm.generate(p, prompt, n_new=20, temperature=0.8, top_k=10, rng=rng)

    x_0 = E[ids] · √d_model + PE[:T]                                (DESIGN.md convention)
    x_l = x_{l-1} + MHA(LN(x_{l-1}), causal);  x_l += FFN(LN(x_l))    (blocks.py, norm="pre")
    logits = LN(x_L) W + b

Axis convention: tokens (B, T), activations (B, T, D), per-head keys and values
(B, H, T, d_head); masks True = may attend. Sequences are limited to max_len (the
position table): generating past it is an error, not a sliding window.
"""
from typing import NamedTuple

import numpy as np

import autograd_lite as ag

from .attention import cached_self_attention, causal_mask
from .blocks import encoder_block, encoder_block_init
from .layers import (Dense, Embedding, LayerNorm, dense, dense_init, dropout_setting,
                     embed_with_positions, embedding_init, feed_forward, layer_norm, layer_norm_init)


class LM(NamedTuple):
    embed: Embedding  # (V, D)
    blocks: tuple  # n_layers EncoderBlocks, used pre-LN under a causal mask
    norm: LayerNorm  # (D,) the final layer norm
    head: Dense  # (D, V)
    max_len: int
    dropout: ag.Hyper  # the rate: a float setting, static in the tree (no gradient, no update)


def init(rng, vocab_size, d_model, n_heads, d_ff, n_layers, max_len, dropout=0.0,
         dtype=np.float32):
    """Glorot-uniform weights, zero biases, unit layer-norm scales, from `rng`."""
    if not 0 <= dropout < 1:
        raise ValueError(f"lm.init: dropout must lie in [0, 1), got {dropout}")
    table = embedding_init(rng, vocab_size, d_model, dtype)
    blocks = tuple(encoder_block_init(rng, d_model, n_heads, d_ff, dtype) for _ in range(n_layers))
    return LM(table, blocks, layer_norm_init(d_model, dtype), dense_init(rng, d_model, vocab_size,
              dtype), max_len, ag.Hyper(dropout))


def check_ids(caller, p, ids, start=0):
    """Integer tokens (B, T) at positions start .. start + T - 1 < max_len; `caller` names
    the function in the error."""
    ids = np.asarray(ids)
    if ids.ndim != 2 or ids.dtype.kind not in "iu":
        raise ValueError(f"{caller}: ids must be integer tokens (B, T), got {ids.dtype} "
                         f"{ids.shape}")
    if start + ids.shape[1] > p.max_len:
        raise ValueError(f"{caller}: positions {start}..{start + ids.shape[1] - 1} "
                         f"(ids {ids.shape}) run past max_len={p.max_len}")
    return ids


def apply(p, ids, training=False, rng=None):
    """Next-token logits (B, T, V) for ids (B, T); position t sees tokens 0..t only."""
    ids = check_ids("lm.apply", p, ids)
    rate, rng = dropout_setting("lm.apply", p.dropout, training, rng)
    x = ag.dropout(embed_with_positions(p.embed, ids, p.max_len), rate, rng)  # (B, T, D)
    mask = causal_mask(ids.shape[1])  # (1, 1, T, T)
    for block in p.blocks:
        x = encoder_block(block, x, mask, "pre", rate, rng)  # (B, T, D)
    return dense(p.head, layer_norm(p.norm, x))  # (B, T, V)


# --- inference with a key/value cache -------------------------------------------------------

class Cache(NamedTuple):
    layers: tuple  # one (keys, values) pair per block, each (B, H, length, d_head)
    length: int  # tokens seen so far: the next token's position


def empty_cache(p, batch):
    """Nothing seen yet: per block, keys and values (B, H, 0, d_head)."""
    d_model = p.embed.table.shape[1]
    layers = []
    for block in p.blocks:
        h = block.self_attn.n_heads
        empty = np.zeros((batch, h, 0, d_model // h), dtype=p.embed.table.dtype)
        layers.append((empty, empty))
    return Cache(tuple(layers), 0)


def cached_block(block, x, kv):
    """encoder_block(norm="pre") for new rows x (B, t, D) whose predecessors' keys and
    values are kv ((B, H, s, d_head) each). Returns (out (B, t, D), kv with s + t rows)."""
    a, kv = cached_self_attention(block.self_attn, layer_norm(block.norm1, x), kv)  # (B, t, D)
    x = x + a  # (B, t, D)
    return x + feed_forward(block.ff, layer_norm(block.norm2, x)), kv  # (B, t, D)


def forward_cached(p, ids, cache):
    """Logits (B, t, V) for ids (B, t) that follow the cache.length tokens whose keys and
    values are in `cache`; returns (logits, new cache). Equals apply(p, all tokens)[:, -t:]."""
    ids = check_ids("lm.forward_cached", p, ids, cache.length)
    x = embed_with_positions(p.embed, ids, p.max_len, cache.length)  # (B, t, D)
    layers = []
    for block, kv in zip(p.blocks, cache.layers):
        x, kv = cached_block(block, x, kv)  # (B, t, D)
        layers.append(kv)
    logits = dense(p.head, layer_norm(p.norm, x))  # (B, t, V)
    return logits, Cache(tuple(layers), cache.length + ids.shape[1])


def check_sampling(caller, temperature, top_k, vocab_size, rng):
    """temperature >= 0 (not NaN), top_k in 1..V or None, and an rng unless the choice is greedy."""
    if not temperature >= 0:
        raise ValueError(f"{caller}: temperature must be >= 0, got {temperature}")
    if top_k is not None and not 1 <= top_k <= vocab_size:
        raise ValueError(f"{caller}: top_k must lie in 1..{vocab_size} (the vocabulary), "
                         f"got {top_k}")
    if rng is None and not (temperature == 0 or top_k == 1):
        raise ValueError(f"{caller}: sampling (temperature > 0) needs an rng")


def sample_next(logits, temperature=1.0, top_k=None, rng=None):
    """One token per row of logits (B, V): greedy (argmax) when temperature == 0 or top_k == 1,
    otherwise a draw from softmax(logits / temperature) restricted to the top_k largest."""
    b, v = logits.shape
    check_sampling("lm.sample_next", temperature, top_k, v, rng)
    if temperature == 0 or top_k == 1:
        return np.argmax(logits, axis=-1)  # (B,)
    z = logits.astype(np.float64)  # (B, V)
    # Shift before dividing: z - max <= 0, so a tiny temperature gives -inf, never inf - inf.
    with np.errstate(over="ignore"):
        z = (z - z.max(axis=-1, keepdims=True)) / temperature  # (B, V), max 0
    if top_k is not None:
        top = np.argpartition(-z, top_k - 1, axis=-1)[:, :top_k]  # (B, k): exactly k, ties too
        keep = np.zeros(z.shape, dtype=bool)  # (B, V)
        np.put_along_axis(keep, top, True, axis=-1)
        z = np.where(keep, z, -np.inf)  # (B, V)
    probs = np.exp(z)  # (B, V); the largest is exp(0) = 1
    cdf = np.cumsum(probs, axis=-1)  # (B, V)
    cdf /= cdf[:, -1:]  # the last entry exactly 1
    u = rng.random((b, 1))  # (B, 1) in [0, 1)
    return (cdf <= u).sum(axis=-1)  # (B,) the first token whose cdf exceeds u


def generate(p, prompt, n_new, temperature=1.0, top_k=None, rng=None):
    """Extend prompt (B, T_p) by n_new sampled tokens -> (B, T_p + n_new) int64.

    The prompt is read in one pass; each later step feeds one token through the
    cached blocks. T_p + n_new must not exceed max_len. The sampling settings are checked
    first, even when n_new is 0: sampling (temperature > 0, top_k != 1) needs an rng.
    """
    prompt = check_ids("lm.generate", p, prompt)
    check_sampling("lm.generate", temperature, top_k, p.head.w.shape[-1], rng)
    if n_new < 0:
        raise ValueError(f"lm.generate: n_new must be >= 0, got {n_new}")
    if prompt.shape[1] == 0:
        raise ValueError("lm.generate: the prompt must hold at least one token")
    if prompt.shape[1] + n_new > p.max_len:
        raise ValueError(f"lm.generate: a prompt of {prompt.shape[1]} tokens plus n_new={n_new} "
                         f"exceeds max_len={p.max_len}")
    ids = step = prompt.astype(np.int64)  # (B, T_p); a narrow prompt dtype cannot hold V
    cache = empty_cache(p, prompt.shape[0])
    for _ in range(n_new):
        logits, cache = forward_cached(p, step, cache)  # (B, t, V)
        token = sample_next(logits[:, -1], temperature, top_k, rng)  # (B,)
        step = token.astype(np.int64)[:, None]  # (B, 1)
        ids = np.concatenate([ids, step], axis=1)  # (B, T + 1)
    return ids
