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
    check_tokens(fn, "src", src)
    if not 1 <= max_len <= p.max_len:
        raise ValueError(f"transformer.{fn}: max_len={max_len} must lie in [1, {p.max_len}] "
                         f"(the model's max_len={p.max_len} positions)")
    if beam_size < 1:
        raise ValueError(f"transformer.{fn}: beam_size must be >= 1, got {beam_size}")


def greedy_decode(p, src, bos, eos, max_len, src_pad=None):
    """The most probable next token at each step, until every sequence has emitted eos
    or has max_len tokens (bos included).  src: (B, S) -> ids (B, L), L <= max_len"""
    check_decode_args("greedy_decode", p, src, max_len)
    mask = padding_mask(src, src_pad)  # (B, 1, 1, S) or None
    state = start(p, encode(p, src, src_pad), mask)
    ids = np.full((src.shape[0], 1), bos, dtype=np.int64)  # (B, 1)
    done = np.zeros(src.shape[0], dtype=bool)  # (B,)
    while ids.shape[1] < max_len and not done.all():
        logits, state = step(p, state, ids[:, -1])  # (B, V)
        token = np.where(done, eos, np.argmax(logits, axis=-1))  # (B,)
        ids = np.concatenate([ids, token[:, None]], axis=1)  # (B, t + 1)
        done |= token == eos
    return ids


def lp(length, alpha):
    """lp(Y) = (5 + |Y|)^α / (5 + 1)^α (Wu et al. 2016, eq. 14).

    |Y| counts the tokens after bos, eos included."""
    return ((5.0 + length) / 6.0) ** alpha


def beam_search(p, src, bos, eos, max_len, beam_size=4, length_penalty=0.6, src_pad=None,
                return_scores=False):
    """Beam search maximizing log P(Y | src) / lp(Y) (Wu et al. 2016).

    Each source keeps beam_size hypotheses. At each step every unfinished hypothesis
    is extended by every token, a finished one (it has emitted eos) by eos alone with
    its score frozen, and the beam_size best candidates by score are kept (candidates
    of one step that are unfinished all have the same length, so among them this is
    the order of log P). Stops when every hypothesis is finished or has max_len tokens;
    returns each source's best hypothesis, padded with eos.  src: (B, S) -> (B, L)

    beam_size=1 is greedy_decode. The result is the best of the final beam, not
    necessarily at least as good as greedy's (pruning can drop greedy's prefix);
    with a beam wider than the number of prefixes it is the exact optimum.
    return_scores=True also returns each result's log P / lp, (B,) float64.
    """
    check_decode_args("beam_search", p, src, max_len, beam_size)
    alpha, n_src, k = length_penalty, src.shape[0], beam_size
    mask = padding_mask(src, src_pad)  # (B, 1, 1, S) or None
    memory = np.repeat(encode(p, src, src_pad), k, axis=0)  # (B·K, S, D)
    state = start(p, memory, None if mask is None else np.repeat(mask, k, axis=0))
    ids = np.full((n_src, k, 1), bos, dtype=np.int64)  # (B, K, 1)
    log_p = np.full((n_src, k), -np.inf)  # (B, K): one live hypothesis, K - 1 empty slots
    log_p[:, 0] = 0.0
    finished = np.isinf(log_p)  # (B, K); empty slots count as finished at -inf
    lengths = np.zeros((n_src, k), dtype=np.int64)  # (B, K) tokens after bos
    for t in range(1, max_len):
        if finished.all():
            break
        logits, state = step(p, state, ids[:, :, -1].reshape(-1))  # (B·K, V)
        n_vocab = logits.shape[-1]
        cand = log_p[:, :, None] + ag.log_softmax(logits.astype(np.float64)).reshape(n_src, k, -1)
        cand[finished] = -np.inf  # (B, K, V): a finished hypothesis only "extends" by eos
        cand[:, :, eos] = np.where(finished, log_p, cand[:, :, eos])
        cand_len = np.where(finished, lengths, t)  # (B, K)
        score = (cand / lp(cand_len, alpha)[:, :, None]).reshape(n_src, -1)  # (B, K·V)
        best = np.argsort(-score, axis=1, kind="stable")[:, :k]  # (B, K)
        origin, token = np.divmod(best, n_vocab)  # (B, K) each
        rows = np.arange(n_src)[:, None]  # (B, 1)
        log_p = np.take_along_axis(cand.reshape(n_src, -1), best, axis=1)  # (B, K)
        lengths = np.where(finished[rows, origin], lengths[rows, origin], t)  # (B, K)
        finished = finished[rows, origin] | (token == eos) | np.isinf(log_p)
        ids = np.concatenate([ids[rows, origin], token[:, :, None]], axis=2)  # (B, K, t + 1)
        state = reorder(state, (origin + rows * k).reshape(-1))
    final = log_p / lp(lengths, alpha)  # (B, K)
    winner = np.argmax(final, axis=1)  # (B,)
    chosen = ids[np.arange(n_src), winner]  # (B, L)
    chosen = chosen[:, :1 + lengths[np.arange(n_src), winner].max()]
    return (chosen, final[np.arange(n_src), winner]) if return_scores else chosen
