"""Transformer blocks (§3.1): sublayers wrapped in a residual connection and layer norm, in
the paper's post-LN order or the pre-LN order (norm="pre"); this module alone knows how a
block is wired. The wiring is one function, `residual`, and every block is written with it:
EncoderBlock (self-attention, then the feed-forward network), DecoderOnlyBlock (the language
model's: the same two sublayers under a causal mask, pre-LN) and DecoderBlock (masked
self-attention, cross_attention over the encoder's memory, feed-forward). The cached steps
(`decoder_block_step`, `decoder_only_block_step`) run a block on new rows that follow rows
whose self-attention keys and values are cached, for decoding one token at a time
(transformer.step, lm.forward_cached): their self-attention sublayer returns the grown cache
beside its output, and the step returns it. Activations (B, T, D); masks as in attention.py
(True = may attend). Dropout (rate, rng) acts on each sublayer's output before the residual
sum; rng=None is inference.

    post-LN:  x = LayerNorm(x + Dropout(Sublayer(x)))       (layers.add_and_norm)
    pre-LN:   x = x + Dropout(Sublayer(LayerNorm(x)))
"""
from typing import NamedTuple

import numpy as np

import autograd_lite as ag

from .attention import (MultiHeadAttention, attention_over, cached_self_attention,
                        cross_attention, multihead_attention, multihead_attention_init)
from .layers import (FeedForward, LayerNorm, activation_of, add_and_norm, feed_forward,
                     feed_forward_init, layer_norm, layer_norm_init)

NORM_ORDERS = ("post", "pre")


def check_norm_order(norm):
    if norm not in NORM_ORDERS:
        raise ValueError(f"norm must be one of {NORM_ORDERS}, got {norm!r}")


@ag.viz.transparent
def residual(norm_params, x, sublayer, norm, rate=0.0, rng=None):
    """A sublayer with its residual connection and layer norm (the Annotated Transformer's
    SublayerConnection): post-LN LayerNorm(x + Dropout(Sublayer(x))), the paper's
    LayerNorm(x + Sublayer(x)) of §3.1 with the dropout of §5.4; pre-LN
    x + Dropout(Sublayer(LayerNorm(x))). x: (B, T, D); sublayer: (B, T, D) -> (B, T, D);
    norm_params: the LayerNorm's parameters. -> (B, T, D)

    A sublayer that also returns a value its caller needs (cached self-attention's grown
    cache) returns ((B, T, D), aux); residual then returns ((B, T, D), aux) too."""
    check_norm_order(norm)
    out = sublayer(x if norm == "post" else layer_norm(norm_params, x))  # (B, T, D)
    out, aux = out if isinstance(out, tuple) else (out, None)
    if norm == "post":
        x = add_and_norm(norm_params, x, ag.dropout(out, rate, rng))  # (B, T, D)
    else:
        x = x + ag.dropout(out, rate, rng)  # (B, T, D)
    return x if aux is None else (x, aux)


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
    x = residual(p.norm1, x, lambda h: multihead_attention(p.self_attn, h, h, mask, rate, rng),
                 norm, rate, rng)  # (B, T, D)
    return residual(p.norm2, x, lambda h: feed_forward(p.ff, h, rate, rng), norm, rate, rng)


class DecoderOnlyBlock(NamedTuple):
    """A GPT-style block: an encoder block's parameters, used pre-LN under a causal mask."""
    self_attn: MultiHeadAttention
    norm1: LayerNorm
    ff: FeedForward  # or layers.ActivatedFeedForward (GPT-2's gelu)
    norm2: LayerNorm


def decoder_only_block_init(rng, d_model, n_heads, d_ff, dtype=np.float32, activation=ag.relu):
    """The same parameters, drawn in the same order, as encoder_block_init; the feed-forward
    network's activation is relu, or `activation` (layers.feed_forward_init)."""
    return DecoderOnlyBlock(multihead_attention_init(rng, d_model, n_heads, dtype),
                            layer_norm_init(d_model, dtype),
                            feed_forward_init(rng, d_model, d_ff, dtype, activation),
                            layer_norm_init(d_model, dtype))


def decoder_only_block(p, x, causal, rate=0.0, rng=None):
    """Pre-LN causal self-attention, then the feed-forward network.
    x: (B, T, D), causal: (1, 1, T, T) -> (B, T, D)"""
    x = residual(p.norm1, x, lambda h: multihead_attention(p.self_attn, h, h, causal, rate,
                                                           rng), "pre", rate, rng)  # (B, T, D)
    return residual(p.norm2, x, lambda h: feed_forward(p.ff, h, rate, rng, activation_of(p.ff)),
                    "pre", rate, rng)


def decoder_only_block_step(p, x, kv):
    """decoder_only_block for new rows x (N, t, D) that follow s rows whose keys and values
    are kv ((N, H, s, d_head) each).  -> (out (N, t, D), kv with s + t rows)"""
    x, kv = residual(p.norm1, x, lambda h: cached_self_attention(p.self_attn, h, kv),
                     "pre")  # (N, t, D)
    return residual(p.norm2, x, lambda h: feed_forward(p.ff, h, activation=activation_of(p.ff)),
                    "pre"), kv


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
    """Masked self-attention, cross_attention over the encoder's memory, feed-forward.

    x: (B, T, D) targets so far; memory: (B, S, D); self_mask: (1, 1, T, T) causal;
    memory_mask: (B, 1, 1, S) source padding. -> (B, T, D)
    """
    x = residual(p.norm1, x, lambda h: multihead_attention(p.self_attn, h, h, self_mask, rate,
                                                           rng), norm, rate, rng)  # (B, T, D)
    x = residual(p.norm2, x, lambda h: cross_attention(p.cross_attn, h, memory, memory_mask,
                                                       rate, rng), norm, rate, rng)  # (B, T, D)
    return residual(p.norm3, x, lambda h: feed_forward(p.ff, h, rate, rng), norm, rate, rng)


def decoder_block_step(p, x, self_kv, memory_kv, memory_mask, norm):
    """decoder_block for new rows x (N, t, D) that follow s rows whose self-attention keys and
    values are self_kv ((N, H, s, d_head) each); memory_kv: the cross-attention's keys and
    values of the memory ((N, H, S, d_head) each, attention.keys_and_values).
    -> (out (N, t, D), self_kv with s + t rows)"""
    x, grown_kv = residual(p.norm1, x, lambda h: cached_self_attention(p.self_attn, h, self_kv),
                           norm)  # (N, t, D)
    x = residual(p.norm2, x, lambda h: attention_over(p.cross_attn, h, memory_kv, memory_mask),
                 norm)  # (N, t, D)
    x = residual(p.norm3, x, lambda h: feed_forward(p.ff, h), norm)  # (N, t, D)
    return x, grown_kv
