"""A decoder-only (GPT-style) language model: pre-LN self-attention blocks under a causal
mask, a final layer norm and a linear map to the vocabulary, with generation that reuses each
layer's keys and values, so that every new token costs one query row. generate and
beam_search (beam_search_with_scores also returns the scores) run decoding.py's searches
over `step` (forward_cached's last row, through blocks.decoder_only_block_step) and
`reorder`. Tokens (B, T), activations (B, T, D), per-head keys and values (B, H, T, d_head);
masks True = may attend. Sequences are limited to max_len (the position table): generating
past it is an error, not a sliding window.

    p = lm.init(rng, vocab_size, d_model=64, n_heads=4, d_ff=256, n_layers=2, max_len=128)
    logits = lm.apply(p, ids)                                       # (B, T, V)
    ids = lm.generate(p, prompt, n_new=20, temperature=0.8, top_k=10, rng=rng)
    ids = lm.beam_search(p, prompt, n_new=20, beam_size=4, eos=eos)
    ids = lm.ensemble_generate((p, q), prompt, n_new=20, rng=rng)  # mean of p's and q's P

An ensemble is a tuple of models of one vocabulary and max_len: ensemble_generate and
ensemble_beam_search use the mean of their next-token probabilities (mixture_logits), each
model keeping its own cache. One model is an ensemble of one: generate and beam_search run
the same searches over (p,).

    x_0 = E[ids] · √d_model + PE[:T]                                (as the encoder-decoder, layers.py)
    x_l = x_{l-1} + MHA(LN(x_{l-1}), causal);  x_l += FFN(LN(x_l))    (blocks.DecoderOnlyBlock)
    logits = LN(x_L) W + b

GPT-2's shape (Radford et al. 2019) is a choice of init's options, the same equations with
learned positions P, GELU in the feed-forward network and the head tied to the token table:

    x_0 = E[ids] + P[:T];  FFN(x) = gelu(x W1 + b1) W2 + b2;  logits = LN(x_L) Eᵀ

and GPT-2's init (weights N(0, 0.02²), the projections into the residual stream, W_O and
W2, N(0, (0.02/√(2 n_layers))²)). models/gpt2.py reads GPT-2's published files into it.
"""
import functools
from typing import NamedTuple

import numpy as np

import autograd_lite as ag

from . import decoding
from .attention import causal_mask
from .blocks import decoder_only_block, decoder_only_block_init, decoder_only_block_step
from .layers import (Dense, Embedding, LayerNorm, check_dropout_rate, check_tokens, dense,
                     dense_init, dropout_setting, embed, embed_with_positions, embedding_init,
                     layer_norm, layer_norm_init)
from .sizes import check_sizes


class LM(NamedTuple):
    embed: Embedding  # (V, D); or LearnedPositions (GPT-2)
    blocks: tuple  # n_layers blocks.DecoderOnlyBlock (pre-LN, causal)
    norm: LayerNorm  # (D,) the final layer norm
    head: Dense  # (D, V); None: tied to the token table (GPT-2)
    max_len: int
    dropout: ag.Hyper  # the rate: a float setting, static in the tree (no gradient, no update)


class LearnedPositions(NamedTuple):
    """The token table and a learned table of positions, as GPT-2's wte and wpe."""
    tokens: Embedding  # (V, D)
    positions: Embedding  # (max_len, D)


POSITIONS = ("sinusoidal", "learned")
WEIGHTS = ("glorot", "gpt2")


def init(rng, vocab_size, d_model, n_heads, d_ff, n_layers, max_len, dropout=0.0,
         dtype=np.float32, positions="sinusoidal", activation=ag.relu, tied_head=False,
         weights="glorot"):
    """Glorot-uniform weights, zero biases, unit layer-norm scales, from `rng`.

    GPT-2's shape: positions="learned" (a table P of max_len rows), activation=ag.gelu (the
    tanh approximation, as GPT-2's), tied_head=True (logits = h Eᵀ, no head of its own) and
    weights="gpt2" (gpt2_weights). The defaults are the paper's model as it always was: the
    same tree, drawn in the same order."""
    check_sizes("lm.init", vocab_size=vocab_size, d_model=d_model, n_heads=n_heads, d_ff=d_ff,
                max_len=max_len)
    check_sizes("lm.init", least=0, n_layers=n_layers)
    check_dropout_rate("lm.init", dropout)
    for name, value, choices in (("positions", positions, POSITIONS),
                                 ("weights", weights, WEIGHTS)):
        if value not in choices:
            raise ValueError(f"lm.init: {name} must be one of {choices}, got {value!r}")
    table = embedding_init(rng, vocab_size, d_model, dtype)
    blocks = tuple(decoder_only_block_init(rng, d_model, n_heads, d_ff, dtype, activation)
                   for _ in range(n_layers))
    head = None if tied_head else dense_init(rng, d_model, vocab_size, dtype)
    if positions == "learned":
        table = LearnedPositions(table, embedding_init(rng, max_len, d_model, dtype))
    p = LM(table, blocks, layer_norm_init(d_model, dtype), head, max_len, ag.Hyper(dropout))
    return gpt2_weights(rng, p) if weights == "gpt2" else p


def gpt2_weights(rng, p, std=0.02):
    """p with GPT-2's initial weights: every weight matrix and table N(0, std²), except the
    projections into the residual stream (each block's W_O and W2), N(0, (std/√(2L))²) for L
    blocks, so that the stream's variance does not grow with depth; biases and layer norms as
    they are (zero, and unit scales)."""
    residual_std = std / np.sqrt(2 * max(len(p.blocks), 1))

    def drawn(path, leaf):
        if not (path.endswith(".w") or path.endswith(".table")):
            return leaf
        scale = residual_std if path.endswith(("wo.w", "linear2.w")) else std
        return (rng.standard_normal(leaf.shape) * scale).astype(leaf.dtype)
    leaves = [drawn(path, leaf) for path, leaf in zip(ag.tree_paths(p), ag.tree_leaves(p))]
    return ag.tree_unflatten(p, leaves)


def token_table(p):
    """The token embedding E (V, D), of either kind of embedding."""
    return p.embed.tokens.table if has_learned_positions(p) else p.embed.table


def has_learned_positions(p):
    return "positions" in getattr(p.embed, "_fields", ())


@ag.viz.transparent  # pictured in its caller, as the call it makes was before GPT-2's options
def embedded(p, ids, start=0):
    """x_0 for ids (B, T) at positions start .. start + T - 1 -> (B, T, D): the paper's
    E[ids] · √D + PE (layers.embed_with_positions), or E[ids] + P with learned positions."""
    if not has_learned_positions(p):
        return embed_with_positions(p.embed, ids, p.max_len, start)  # (B, T, D)
    positions = p.embed.positions.table[start:start + ids.shape[1]]  # (T, D)
    return embed(p.embed.tokens, ids) + positions  # (B, T, D)


@ag.viz.transparent
def logits_of(p, h):
    """The head over the final layer norm: LN(h) W + b, or LN(h) Eᵀ with the head tied to
    the token table.  h: (B, T, D) -> (B, T, V)"""
    h = layer_norm(p.norm, h)  # (B, T, D)
    if p.head is None:
        return h @ ag.transpose(token_table(p))  # (B, T, V)
    return dense(p.head, h)  # (B, T, V)


def vocab_size(p):
    return token_table(p).shape[0]


def apply(p, ids, training=False, rng=None):
    """Next-token logits (B, T, V) for ids (B, T); position t sees tokens 0..t only."""
    ids = check_tokens("lm.apply", ids, vocab_size(p), p.max_len)
    rate, rng = dropout_setting("lm.apply", p.dropout, training, rng)
    x = ag.dropout(embedded(p, ids), rate, rng)  # (B, T, D)
    mask = causal_mask(ids.shape[1], like=ids)  # (1, 1, T, T)
    for block in p.blocks:
        x = decoder_only_block(block, x, mask, rate, rng)  # (B, T, D)
    return logits_of(p, x)  # (B, T, V)


# --- inference with a key/value cache -------------------------------------------------------

class Cache(NamedTuple):
    layers: tuple  # one (keys, values) pair per block, each (B, H, length, d_head)
    length: int  # tokens seen so far: the next token's position


def empty_cache(p, batch):
    """Nothing seen yet: per block, keys and values (B, H, 0, d_head)."""
    table = token_table(p)
    d_model = table.shape[1]
    layers = []
    for block in p.blocks:
        h = block.self_attn.n_heads
        empty = ag.array_module(table).zeros((batch, h, 0, d_model // h), dtype=table.dtype)
        layers.append((empty, empty))
    return Cache(tuple(layers), 0)


def forward_cached(p, ids, cache):
    """Logits (B, t, V) for ids (B, t) that follow the cache.length tokens whose keys and
    values are in `cache`; returns (logits, new cache). Equals apply(p, all tokens)[:, -t:]."""
    ids = check_tokens("lm.forward_cached", ids, vocab_size(p), p.max_len, start=cache.length)
    x = embedded(p, ids, cache.length)  # (B, t, D)
    layers = []
    for block, kv in zip(p.blocks, cache.layers):
        x, kv = decoder_only_block_step(block, x, kv)  # (B, t, D)
        layers.append(kv)
    return logits_of(p, x), Cache(tuple(layers), cache.length + ids.shape[1])


def step(p, cache, tokens):
    """The step of decoding.py's searches: forward_cached's logits of the last token only.
    tokens (B, t) -> (logits (B, V), new cache)"""
    logits, cache = forward_cached(p, tokens, cache)  # (B, t, V)
    return logits[:, -1], cache


def reorder(cache, rows):
    """Row i of the new cache is row rows[i] of `cache` (rows (N',) ints)."""
    return decoding.take_rows(cache, rows)


# --- generation: decoding.py's searches over an ensemble; one model is an ensemble of one --

def mixture_logits(logits):
    """Logits whose softmax is the mean of the softmaxes of `logits`, a sequence of M arrays
    (..., V) of one shape and dtype:

        log (1/M · Σ_m softmax(l_m)) = logsumexp_m(log_softmax(l_m)) - log M

    A single array is returned as it is: softmax, argmax and log_softmax ignore the constant
    that would make its logits log-probabilities."""
    if len(logits) == 1:
        return logits[0]
    xp = ag.array_module(logits[0])
    log_p = xp.stack([ag.log_softmax(l) for l in logits])  # (M, ..., V)
    top = log_p.max(axis=0)
    return top + xp.log(xp.exp(log_p - top).mean(axis=0))


def ensemble_step(members, caches, tokens):
    """`step` for an ensemble: the members' last-token logits mixed (mixture_logits), and
    each member's new cache. caches: one Cache per member -> (logits (B, V), caches)"""
    stepped = [step(p, cache, tokens) for p, cache in zip(members, caches)]
    return mixture_logits([logits for logits, _ in stepped]), tuple(c for _, c in stepped)


def check_members(caller, members):
    """A non-empty sequence of LMs (of LM's fields: ag.load makes its own NamedTuple type
    without like=) of one vocabulary and one max_len -> them as a tuple."""
    members = tuple(members)
    if not members or not all(getattr(p, "_fields", None) == LM._fields for p in members):
        raise ValueError(f"{caller}: members must be one or more lm.LM parameters, got "
                         f"{[type(p).__name__ for p in members]}")
    shapes = {(vocab_size(p), p.max_len) for p in members}
    if len(shapes) > 1:
        raise ValueError(f"{caller}: the members must share the vocabulary and max_len, got "
                         f"(vocab, max_len) = {sorted(shapes)}")
    return members


def check_prompt(caller, p, prompt, n_new):
    """A prompt (B, T_p) of at least one token, n_new >= 0, T_p + n_new <= max_len."""
    prompt = check_tokens(caller, prompt, vocab_size(p), p.max_len)
    if n_new < 0:
        raise ValueError(f"{caller}: n_new must be >= 0, got {n_new}")
    if prompt.shape[1] == 0:
        raise ValueError(f"{caller}: the prompt must hold at least one token")
    if prompt.shape[1] + n_new > p.max_len:
        raise ValueError(f"{caller}: a prompt of {prompt.shape[1]} tokens plus n_new={n_new} "
                         f"exceeds max_len={p.max_len}")
    return prompt


def generate(p, prompt, n_new, temperature=1.0, top_k=None, rng=None, eos=None, top_p=None):
    """Extend prompt (B, T_p) by n_new sampled tokens -> (B, T_p + n_new) int64
    (decoding.sample: softmax(logits / temperature) over the top_k most probable, then over
    the nucleus of mass top_p; greedy when temperature == 0 or top_k == 1). With eos, a row
    ends at its first eos and is padded with eos, and the result stops when every row has
    ended: (B, L), L <= T_p + n_new.

    The prompt is read in one pass; each later step feeds one token through the
    cached blocks. T_p + n_new must not exceed max_len. The sampling settings are checked
    first, even when n_new is 0: sampling (temperature > 0, top_k != 1) needs an rng.
    """
    return generated("lm.generate", (p,), prompt, n_new, temperature, top_k, rng, eos, top_p)


def beam_search(p, prompt, n_new, beam_size=4, length_penalty=0.6, eos=None,
                no_repeat_ngram=None):
    """The continuation Y of up to n_new tokens maximizing log P(Y | prompt) / lp(Y)
    (decoding.beam_search: Wu et al.'s length penalty, |Y| counting the new tokens up to the
    first eos, eos included). Without eos every continuation has n_new tokens, and the most
    probable one kept in the beam wins. no_repeat_ngram=n: among the texts that hold no n
    tokens in a row twice, the prompt included. prompt (B, T_p) -> ids (B, L),
    L <= T_p + n_new, padded with eos."""
    return beam_search_with_scores(p, prompt, n_new, beam_size, length_penalty, eos,
                                   no_repeat_ngram)[0]


def beam_search_with_scores(p, prompt, n_new, beam_size=4, length_penalty=0.6, eos=None,
                            no_repeat_ngram=None):
    """beam_search, and each result's score log P / lp: -> (ids (B, L), scores (B,) float64)."""
    return searched("lm.beam_search", (p,), prompt, n_new, beam_size, length_penalty, eos,
                    no_repeat_ngram)


def ensemble_generate(members, prompt, n_new, temperature=1.0, top_k=None, rng=None, eos=None,
                      top_p=None):
    """generate, sampling each token from the mean of the members' probabilities."""
    members = check_members("lm.ensemble_generate", members)
    return generated("lm.ensemble_generate", members, prompt, n_new, temperature, top_k, rng,
                     eos, top_p)


def ensemble_beam_search(members, prompt, n_new, beam_size=4, length_penalty=0.6, eos=None,
                         no_repeat_ngram=None):
    """beam_search, scoring continuations by the mean of the members' probabilities."""
    members = check_members("lm.ensemble_beam_search", members)
    return searched("lm.ensemble_beam_search", members, prompt, n_new, beam_size,
                    length_penalty, eos, no_repeat_ngram)[0]


def generated(caller, members, prompt, n_new, temperature, top_k, rng, eos, top_p=None):
    """The body of generate and ensemble_generate: their checks, under `caller`'s name, then
    decoding.sample over ensemble_step, each member with its own cache."""
    decoding.check_sampling(caller, temperature, top_k, vocab_size(members[0]), rng, top_p)
    prompt = check_prompt(caller, members[0], prompt, n_new)
    caches = tuple(empty_cache(p, prompt.shape[0]) for p in members)
    return decoding.sample(functools.partial(ensemble_step, members), caches, prompt,
                           prompt.shape[1] + n_new, temperature, top_k, rng, eos, top_p)


def searched(caller, members, prompt, n_new, beam_size, length_penalty, eos, no_repeat_ngram):
    """The body of beam_search_with_scores and ensemble_beam_search: their checks, under
    `caller`'s name, then decoding.beam_search over ensemble_step. -> (ids, scores)"""
    prompt = check_prompt(caller, members[0], prompt, n_new)
    caches = tuple(empty_cache(p, prompt.shape[0]) for p in members)
    return decoding.beam_search(functools.partial(ensemble_step, members), reorder, caches,
                                prompt, prompt.shape[1] + n_new, beam_size, length_penalty,
                                eos, no_repeat_ngram, caller=caller)
