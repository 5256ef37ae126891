"""Encoder and decoder blocks (§3.1): sublayers wrapped in residual connections and
layer norm, in the paper's post-LN order or the pre-LN order (norm="pre").

    post-LN:  x = LayerNorm(x + Dropout(Sublayer(x)))
    pre-LN:   x = x + Dropout(Sublayer(LayerNorm(x)))

Activations (B, T, D); masks as in attention.py (True = may attend). Dropout
(rate, rng) acts on each sublayer's output before the residual sum; rng=None is
inference.
"""
from typing import NamedTuple

import numpy as np

import autograd_lite as ag

from .attention import MultiHeadAttention, multihead_attention, multihead_attention_init
from .layers import (FeedForward, LayerNorm, feed_forward, feed_forward_init, layer_norm,
                     layer_norm_init)

NORM_ORDERS = ("post", "pre")


def check_norm_order(norm):
    if norm not in NORM_ORDERS:
        raise ValueError(f"norm must be one of {NORM_ORDERS}, got {norm!r}")


class EncoderBlock(NamedTuple):
    self_attn: MultiHeadAttention
    norm1: LayerNorm
    ff: FeedForward
    norm2: LayerNorm


def encoder_block_init(rng, d_model, n_heads, d_ff, dtype=np.float32):
    return EncoderBlock(multihead_attention_init(rng, d_model, n_heads, dtype),
                        layer_norm_init(d_model, dtype),
                        feed_forward_init(rng, d_model, d_ff, dtype),
                        layer_norm_init(d_model, dtype))


def encoder_block(p, x, mask=None, norm="post", rate=0.0, rng=None):
    """Self-attention, then the feed-forward network.  x: (B, T, D) -> (B, T, D)"""
    check_norm_order(norm)
    if norm == "post":
        a = multihead_attention(p.self_attn, x, x, mask, rate, rng)  # (B, T, D)
        x = layer_norm(p.norm1, x + ag.dropout(a, rate, rng))  # (B, T, D)
        f = feed_forward(p.ff, x, rate, rng)  # (B, T, D)
        return layer_norm(p.norm2, x + ag.dropout(f, rate, rng))  # (B, T, D)
    h = layer_norm(p.norm1, x)  # (B, T, D)
    a = multihead_attention(p.self_attn, h, h, mask, rate, rng)  # (B, T, D)
    x = x + ag.dropout(a, rate, rng)  # (B, T, D)
    f = feed_forward(p.ff, layer_norm(p.norm2, x), rate, rng)  # (B, T, D)
    return x + ag.dropout(f, rate, rng)  # (B, T, D)


class DecoderBlock(NamedTuple):
    self_attn: MultiHeadAttention
    norm1: LayerNorm
    cross_attn: MultiHeadAttention
    norm2: LayerNorm
    ff: FeedForward
    norm3: LayerNorm


def decoder_block_init(rng, d_model, n_heads, d_ff, dtype=np.float32):
    return DecoderBlock(multihead_attention_init(rng, d_model, n_heads, dtype),
                        layer_norm_init(d_model, dtype),
                        multihead_attention_init(rng, d_model, n_heads, dtype),
                        layer_norm_init(d_model, dtype),
                        feed_forward_init(rng, d_model, d_ff, dtype),
                        layer_norm_init(d_model, dtype))


def decoder_block(p, x, memory, self_mask=None, memory_mask=None, norm="post", rate=0.0,
                  rng=None):
    """Masked self-attention, attention over the encoder's memory, feed-forward.

    x: (B, T, D) targets so far; memory: (B, S, D); self_mask: (1, 1, T, T) causal;
    memory_mask: (B, 1, 1, S) source padding. -> (B, T, D)
    """
    check_norm_order(norm)
    if norm == "post":
        a = multihead_attention(p.self_attn, x, x, self_mask, rate, rng)  # (B, T, D)
        x = layer_norm(p.norm1, x + ag.dropout(a, rate, rng))  # (B, T, D)
        c = multihead_attention(p.cross_attn, x, memory, memory_mask, rate, rng)  # (B, T, D)
        x = layer_norm(p.norm2, x + ag.dropout(c, rate, rng))  # (B, T, D)
        f = feed_forward(p.ff, x, rate, rng)  # (B, T, D)
        return layer_norm(p.norm3, x + ag.dropout(f, rate, rng))  # (B, T, D)
    h = layer_norm(p.norm1, x)  # (B, T, D)
    a = multihead_attention(p.self_attn, h, h, self_mask, rate, rng)  # (B, T, D)
    x = x + ag.dropout(a, rate, rng)  # (B, T, D)
    h = layer_norm(p.norm2, x)  # (B, T, D)
    c = multihead_attention(p.cross_attn, h, memory, memory_mask, rate, rng)  # (B, T, D)
    x = x + ag.dropout(c, rate, rng)  # (B, T, D)
    f = feed_forward(p.ff, layer_norm(p.norm3, x), rate, rng)  # (B, T, D)
    return x + ag.dropout(f, rate, rng)  # (B, T, D)
