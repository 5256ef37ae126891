"""Greedy and beam-search decoding for models.transformer, one query row per new token.

Incremental decoding: each decoder layer caches the keys and values of its
self-attention for the tokens fed so far (appending one row per step) and the
keys and values of its cross-attention over the memory (computed once). A step
then costs one query row per layer, and gives the logits that
transformer.apply(p, src, prefix)[:, -1] gives for the whole prefix.

Output ids: (B, L) integers, L <= max_len, starting with `bos`. A sequence ends
at its first `eos`; shorter sequences are padded with `eos` up to L.
Inference only: no dropout, plain numpy arrays.
"""
from typing import NamedTuple

import numpy as np

import autograd_lite as ag

from .attention import (cached_self_attention, merge_heads, padding_mask,
                        scaled_dot_product_attention, split_heads)
from .layers import dense, embed_with_positions, feed_forward, layer_norm
from .transformer import check_tokens, encode, project


class LayerCache(NamedTuple):
    self_k: np.ndarray  # (N, H, t, d_head): keys of the t tokens fed so far
    self_v: np.ndarray  # (N, H, t, d_head)
    cross_k: np.ndarray  # (N, H, S, d_head): keys of the memory
    cross_v: np.ndarray  # (N, H, S, d_head)


class DecoderState(NamedTuple):
    layers: tuple  # one LayerCache per decoder block
    memory_mask: np.ndarray  # (N, 1, 1, S) source padding, or None
    length: int  # tokens fed so far (the next token's position)


def start(p, memory, memory_mask=None):
    """The empty state for memory (N, S, D): cross-attention keys/values of every layer."""
    layers = []
    for block in p.decoder:
        a = block.cross_attn
        k = split_heads(dense(a.wk, memory), a.n_heads)  # (N, H, S, d_head)
        v = split_heads(dense(a.wv, memory), a.n_heads)  # (N, H, S, d_head)
        empty = np.zeros(k.shape[:2] + (0, k.shape[3]), dtype=k.dtype)  # (N, H, 0, d_head)
        layers.append(LayerCache(empty, empty, k, v))
    return DecoderState(tuple(layers), memory_mask, 0)


def cached_cross_attention(a, x, cache, mask):
    """Attention of x (N, 1, D) over the memory's cached keys/values -> (N, 1, D)."""
    q = split_heads(dense(a.wq, x), a.n_heads)  # (N, H, 1, d_head)
    heads, _ = scaled_dot_product_attention(q, cache.cross_k, cache.cross_v, mask)  # (N, H, 1, d_h)
    return dense(a.wo, merge_heads(heads))  # (N, 1, D)


def decoder_block_step(block, x, cache, mask, norm):
    """blocks.decoder_block for one new row x (N, 1, D), with cached attention.

    -> (x (N, 1, D), the cache with this row's self-attention keys/values appended)
    """
    kv = (cache.self_k, cache.self_v)  # (N, H, t, d_head) each
    if norm == "post":
        a, (k, v) = cached_self_attention(block.self_attn, x, kv)  # (N, 1, D)
        x = layer_norm(block.norm1, x + a)  # (N, 1, D)
        c = cached_cross_attention(block.cross_attn, x, cache, mask)  # (N, 1, D)
        x = layer_norm(block.norm2, x + c)  # (N, 1, D)
        x = layer_norm(block.norm3, x + feed_forward(block.ff, x))  # (N, 1, D)
    else:
        h = layer_norm(block.norm1, x)  # (N, 1, D)
        a, (k, v) = cached_self_attention(block.self_attn, h, kv)  # (N, 1, D)
        x = x + a  # (N, 1, D)
        h = layer_norm(block.norm2, x)  # (N, 1, D)
        x = x + cached_cross_attention(block.cross_attn, h, cache, mask)  # (N, 1, D)
        x = x + feed_forward(block.ff, layer_norm(block.norm3, x))  # (N, 1, D)
    return x, cache._replace(self_k=k, self_v=v)  # k, v: (N, H, t + 1, d_head)


def step(p, state, tokens):
    """Feed the last token of each prefix.  tokens: (N,) -> (logits (N, V), next state)"""
    x = embed_with_positions(p.tgt_embed, tokens[:, None], p.max_len, state.length)  # (N, 1, D)
    layers = []
    for block, cache in zip(p.decoder, state.layers):
        x, cache = decoder_block_step(block, x, cache, state.memory_mask, p.norm)  # (N, 1, D)
        layers.append(cache)
    logits = project(p, layer_norm(p.decoder_norm, x))[:, 0]  # (N, V)
    return logits, DecoderState(tuple(layers), state.memory_mask, state.length + 1)


def reorder(state, rows):
    """Keep, for each new hypothesis, the self-attention cache of the row it extends.

    rows: (N,) indices into the N rows. The cross-attention cache and the memory
    mask are equal across the rows of one source, which `rows` never leaves.
    """
    layers = tuple(c._replace(self_k=c.self_k[rows], self_v=c.self_v[rows]) for c in state.layers)
    return state._replace(layers=layers)


def check_decode_args(fn, p, src, max_len, beam_size=1):
    check_tokens(fn, "src", src, p.max_len)
    if not 1 <= max_len <= p.max_len:
        raise ValueError(f"transformer.{fn}: max_len={max_len} must lie in [1, {p.max_len}] "
                         f"(the model's max_len={p.max_len} positions)")
    if beam_size < 1:
        raise ValueError(f"transformer.{fn}: beam_size must be >= 1, got {beam_size}")


def greedy_decode(p, src, bos, eos, max_len, src_pad=None):
    """The most probable next token at each step, until every sequence has emitted eos
    or has max_len tokens (bos included).  src: (B, S) -> ids (B, L), L <= max_len"""
    check_decode_args("greedy_decode", p, src, max_len)
    return greedy(p, src, bos, eos, max_len, src_pad)[0]


def greedy(p, src, bos, eos, max_len, src_pad=None):
    """greedy_decode's ids (B, L), with each sequence's log P (B,) float64 and its length
    |Y| (B,): the tokens after bos, eos included."""
    mask = padding_mask(src, src_pad)  # (B, 1, 1, S) or None
    state = start(p, encode(p, src, src_pad), mask)
    n_src = src.shape[0]
    ids = np.full((n_src, 1), bos, dtype=np.int64)  # (B, 1)
    log_p = np.zeros(n_src)  # (B,)
    done = np.zeros(n_src, dtype=bool)  # (B,)
    while ids.shape[1] < max_len and not done.all():
        logits, state = step(p, state, ids[:, -1])  # (B, V)
        best = np.argmax(logits, axis=-1)  # (B,)
        picked = ag.log_softmax(logits.astype(np.float64))[np.arange(n_src), best]  # (B,)
        log_p += np.where(done, 0.0, picked)  # (B,)
        token = np.where(done, eos, best)  # (B,)
        ids = np.concatenate([ids, token[:, None]], axis=1)  # (B, t + 1)
        done |= token == eos
    ended = np.cumsum(ids[:, 1:] == eos, axis=1) > 0  # (B, L - 1): at or after the first eos
    lengths = (~ended).sum(axis=1) + ended.any(axis=1)  # (B,) up to the first eos, included
    return ids, log_p, lengths


def lp(length, alpha):
    """lp(Y) = (5 + |Y|)^α / (5 + 1)^α (Wu et al. 2016, eq. 14).

    |Y| counts the tokens after bos, eos included."""
    return ((5.0 + length) / 6.0) ** alpha


def beam_search(p, src, bos, eos, max_len, beam_size=4, length_penalty=0.6, src_pad=None,
                return_scores=False):
    """Beam search maximizing log P(Y | src) / lp(Y) (Wu et al. 2016), the way fairseq and
    Hugging Face run it: finished hypotheses leave the beam.

    Each source keeps beam_size live (unfinished) hypotheses. At each step every live
    hypothesis is extended by every token: the extensions by eos are finished, and the best
    finished hypothesis so far (by log P / lp) is kept per source, outside the beam; the
    beam_size most probable extensions by other tokens are the next beam (they all have the
    same length, so this is the order of the score). A source stops when no live hypothesis
    can beat its best finished one: log P only falls as tokens are added, so a live
    hypothesis can score at most log P / (the largest lp of a length still possible). At
    max_len tokens the live hypotheses end unfinished. The result is the better of the best
    finished hypothesis and the best live one, padded with eos.  src: (B, S) -> (B, L)

    beam_size=1 is greedy_decode (Hugging Face also runs one beam as greedy search). With
    beam_size >= 2 the result is never worse than a finished hypothesis the search saw (among
    them [bos, eos]), but it can be worse than greedy's (pruning can drop greedy's prefix);
    with a beam at least as wide as the number of prefixes it is the exact optimum.
    return_scores=True also returns each result's log P / lp, (B,) float64.
    """
    check_decode_args("beam_search", p, src, max_len, beam_size)
    alpha, n_src, k = length_penalty, src.shape[0], beam_size
    if k == 1:
        ids, log_p, lengths = greedy(p, src, bos, eos, max_len, src_pad)
        return (ids, log_p / lp(lengths, alpha)) if return_scores else ids
    mask = padding_mask(src, src_pad)  # (B, 1, 1, S) or None
    memory = np.repeat(encode(p, src, src_pad), k, axis=0)  # (B·K, S, D)
    state = start(p, memory, None if mask is None else np.repeat(mask, k, axis=0))
    rows = np.arange(n_src)  # (B,)
    ids = np.full((n_src, k, 1), bos, dtype=np.int64)  # (B, K, 1) the live hypotheses
    log_p = np.full((n_src, k), -np.inf)  # (B, K): one live hypothesis, K - 1 empty slots
    log_p[:, 0] = 0.0
    best = np.full(n_src, -np.inf)  # (B,) the best finished score of each source
    best_ids = np.full((n_src, max_len), eos, dtype=np.int64)  # (B, max_len) padded with eos
    best_len = np.zeros(n_src, dtype=np.int64)  # (B,) its |Y|
    for t in range(1, max_len):
        logits, state = step(p, state, ids[:, :, -1].reshape(-1))  # (B·K, V)
        n_vocab = logits.shape[-1]
        cand = log_p[:, :, None] + ag.log_softmax(logits.astype(np.float64)).reshape(n_src, k, -1)
        ended = cand[:, :, eos] / lp(t, alpha)  # (B, K): the scores of the eos extensions
        j = np.argmax(ended, axis=1)  # (B,)
        better = ended[rows, j] > best  # (B,)
        best = np.where(better, ended[rows, j], best)  # (B,)
        best_ids[better, :t] = ids[rows, j][better]  # its prefix; eos follows (the padding)
        best_len[better] = t
        cand[:, :, eos] = -np.inf  # (B, K, V): the live candidates
        flat = cand.reshape(n_src, -1)  # (B, K·V)
        top = np.argsort(-flat, axis=1, kind="stable")[:, :k]  # (B, K)
        origin, token = np.divmod(top, n_vocab)  # (B, K) each
        log_p = np.take_along_axis(flat, top, axis=1)  # (B, K)
        ids = np.concatenate([ids[rows[:, None], origin], token[:, :, None]], axis=2)  # (B, K, t+1)
        state = reorder(state, (origin + rows[:, None] * k).reshape(-1))
        # log P <= 0, so log P / lp is largest at the largest lp of the lengths t+1 .. max_len-1
        ceiling = log_p.max(axis=1) / max(lp(t + 1, alpha), lp(max_len - 1, alpha))  # (B,)
        log_p[best >= ceiling] = -np.inf  # a stopped source's live hypotheses cannot win
        if np.isneginf(log_p).all():
            break
    live = log_p / lp(ids.shape[2] - 1, alpha)  # (B, K)
    j = np.argmax(live, axis=1)  # (B,)
    use_live = live[rows, j] > best  # (B,)
    score = np.where(use_live, live[rows, j], best)  # (B,)
    length = 1 + np.where(use_live, ids.shape[2] - 1, best_len).max()
    chosen = best_ids[:, :length]  # (B, L)
    if use_live.any():  # then L is the live hypotheses' length
        chosen[use_live] = ids[rows, j][use_live]
    return (chosen, score) if return_scores else chosen
