"""The encoder-decoder Transformer of "Attention is all you need" (Vaswani et al. 2017), as
a function of its parameters, with the incremental decoder that the searches of decoding.py
run over. In the paper's order: token embeddings scaled by √d_model plus the sinusoidal
position encoding (§3.4, §3.5), a stack of N encoder blocks, a stack of N decoder blocks
attending to the encoder's output ("memory") under a causal mask (§3.1), a final layer norm
on each stack's output (as torch.nn.Transformer does, in both norm orders), and a linear map
to the target vocabulary (§3.4). Dropout (§5.4) acts on embeddings + positions, on every
sublayer output and on the attention weights, only when training=True (which needs an rng).
`start`, `step` and `reorder` decode with cached keys and values (one query row per new
token); greedy_decode, beam_search (beam_search_with_scores also returns each result's
score) and sample search over them. Tokens are (B, S) for the source and (B, T) for the
target, activations (B, S, D) / (B, T, D); masks True = may attend (attention.py).

    p = transformer.init(rng, src_vocab, tgt_vocab, **transformer.BASE)
    logits = transformer.apply(p, src, tgt, src_pad=0)          # (B, T, tgt_vocab)
    state = transformer.start(p, src, src_pad)                   # the source encoded once
    logits, state = transformer.step(p, state, tokens)           # tokens (B, t) -> (B, V)
"""
import functools
from typing import NamedTuple

import numpy as np

import autograd_lite as ag

from . import decoding
from .attention import causal_mask, keys_and_values, padding_mask
from .blocks import (check_norm_order, decoder_block, decoder_block_init, decoder_block_step,
                     encoder_block, encoder_block_init)
from .layers import (Dense, Embedding, LayerNorm, as_tokens, check_dropout_rate, check_tokens,
                     dense, dense_init, dropout_setting, embed_with_positions, embedding_init,
                     layer_norm, layer_norm_init)
from .sizes import check_sizes

# Table 3 of the paper; use as init(rng, V, V, **BASE). (N = n_encoder = n_decoder, h = n_heads.)
BASE = dict(d_model=512, n_heads=8, d_ff=2048, n_encoder=6, n_decoder=6, dropout=0.1)
BIG = dict(d_model=1024, n_heads=16, d_ff=4096, n_encoder=6, n_decoder=6, dropout=0.3)


class Transformer(NamedTuple):
    src_embed: Embedding  # (src_vocab, D), or table=None when it is tgt_embed's (share "all")
    tgt_embed: Embedding  # (tgt_vocab, D)
    encoder: tuple  # of n_encoder blocks.EncoderBlock
    encoder_norm: LayerNorm  # (D,)
    decoder: tuple  # of n_decoder blocks.DecoderBlock
    decoder_norm: LayerNorm  # (D,)
    out: Dense  # w (D, tgt_vocab), or w=None when tied to tgt_embed.table (sharing)
    d_model: int
    max_len: int
    norm: str  # "post" (the paper) or "pre"
    dropout: ag.Hyper  # the rate: a float setting, static in the tree (no gradient, no update)


def init(rng, src_vocab, tgt_vocab, d_model=512, n_heads=8, d_ff=2048, n_encoder=6, n_decoder=6,
         max_len=512, norm="post", dropout=0.1, share_embeddings=False, dtype=np.float32):
    """Glorot-uniform weights, zero biases, unit layer-norm scales, from `rng`.

    share_embeddings ties the embeddings (§3.4); a tied matrix is one array in the tree, so
    its gradient is the sum of the gradients of its uses:
      False            three matrices: src_embed.table, tgt_embed.table, out.w.
      True / "target"  the output projection is the target embedding:
                       logits = x tgt_embed.tableᵀ + out.b, and out.w is None.
      "all"            the paper's sharing, for one vocabulary (src_vocab == tgt_vocab): the
                       source embedding is the target's too, and src_embed.table is None.
    "all" reproduces Table 3's sizes: models.summary counts BASE at a shared 37,000-token
    vocabulary as 63,121,544 parameters (the paper: 65M) and BIG as 214,286,472 (213M).
    """
    check_sizes("transformer.init", src_vocab=src_vocab, tgt_vocab=tgt_vocab, d_model=d_model,
                n_heads=n_heads, d_ff=d_ff, max_len=max_len)
    check_sizes("transformer.init", least=0, n_encoder=n_encoder, n_decoder=n_decoder)
    check_norm_order(norm)
    check_dropout_rate("transformer.init", dropout)
    tied = check_sharing("transformer.init", share_embeddings, src_vocab, tgt_vocab)
    if tied == "all":
        src_embed = Embedding(None)  # the source reads tgt_embed's table (source_embedding)
    else:
        src_embed = embedding_init(rng, src_vocab, d_model, dtype)
    tgt_embed = embedding_init(rng, tgt_vocab, d_model, dtype)
    encoder = tuple(encoder_block_init(rng, d_model, n_heads, d_ff, dtype)
                    for _ in range(n_encoder))
    decoder = tuple(decoder_block_init(rng, d_model, n_heads, d_ff, dtype)
                    for _ in range(n_decoder))
    if tied:
        out = Dense(None, np.zeros(tgt_vocab, dtype=dtype))
    else:
        out = dense_init(rng, d_model, tgt_vocab, dtype)
    return Transformer(src_embed, tgt_embed, encoder, layer_norm_init(d_model, dtype), decoder,
                       layer_norm_init(d_model, dtype), out, d_model, max_len, norm, ag.Hyper(dropout))


def check_sharing(caller, share_embeddings, src_vocab, tgt_vocab):
    """share_embeddings as init takes it -> False, "target" or "all" (True means "target");
    a ValueError naming `caller` for any other value, or for "all" with two vocabulary sizes."""
    if isinstance(share_embeddings, bool):
        return "target" if share_embeddings else False
    if share_embeddings not in ("target", "all"):
        raise ValueError(f"{caller}: share_embeddings must be False, True (= \"target\"), "
                         f"\"target\" or \"all\", got {share_embeddings!r}")
    if share_embeddings == "all" and src_vocab != tgt_vocab:
        raise ValueError(f"{caller}: share_embeddings=\"all\" makes one (vocab, d_model) table "
                         f"of the source embedding, the target embedding and the output "
                         f"projection, so src_vocab must equal tgt_vocab; got src_vocab="
                         f"{src_vocab}, tgt_vocab={tgt_vocab} (share_embeddings=\"target\" "
                         f"ties the target side alone)")
    return share_embeddings


def sharing(p):
    """Which embeddings p ties, as init's share_embeddings: False, "target" or "all"."""
    if p.src_embed.table is None:
        return "all"
    return "target" if p.out.w is None else False


def source_embedding(p):
    """The source side's Embedding: src_embed, or tgt_embed when all three are shared."""
    return p.tgt_embed if p.src_embed.table is None else p.src_embed


def project(p, x):
    """Logits over the target vocabulary.  x: (B, T, D) -> (B, T, tgt_vocab)"""
    if p.out.w is None:  # tied to the target embedding (§3.4)
        return x @ ag.transpose(p.tgt_embed.table) + p.out.b  # (B, T, V)
    return dense(p.out, x)  # (B, T, V)


def memory_mask(caller, src, src_pad, memory):
    """The source padding mask (B, 1, 1, S) for attention over `memory` (B, S, D), or None."""
    if src_pad is None:
        return None
    if src is None:
        raise ValueError(f"{caller}: src_pad={src_pad!r} needs src= (the source ids "
                         f"(B, S)) to mask the padded positions of memory {memory.shape}")
    if src.shape != memory.shape[:2]:
        raise ValueError(f"{caller}: src {src.shape} does not match memory "
                         f"{memory.shape}; expected src of shape {memory.shape[:2]}")
    return padding_mask(src, src_pad)


def check_source(caller, p, src):
    """src: integer tokens (B, S) of the source vocabulary that fit the position table."""
    return check_tokens(caller, src, source_embedding(p).table.shape[0], p.max_len, "src")


def check_target(caller, p, tgt, name="tgt", start=0):
    """tgt: integer tokens (B, T) of the target vocabulary at positions start .. start + T - 1."""
    return check_tokens(caller, tgt, p.tgt_embed.table.shape[0], p.max_len, name, start)


def encode(p, src, src_pad=None, training=False, rng=None, *, caller="transformer.encode"):
    """The encoder stack.  src: (B, S) ints -> memory (B, S, D)

    Source positions holding `src_pad` are masked as keys in every self-attention.
    `caller` names the function in an error (apply gives its own name).
    """
    src = check_source(caller, p, src)
    rate, rng = dropout_setting(caller, p.dropout, training, rng)
    mask = padding_mask(src, src_pad)  # (B, 1, 1, S) or None
    embedding = source_embedding(p)  # tgt_embed when all three are shared
    x = ag.dropout(embed_with_positions(embedding, src, p.max_len), rate, rng)  # (B, S, D)
    for block in p.encoder:
        x = encoder_block(block, x, mask, p.norm, rate, rng)  # (B, S, D)
    return layer_norm(p.encoder_norm, x)  # (B, S, D)


def decode(p, memory, tgt, src_pad=None, src=None, training=False, rng=None, *,
           caller="transformer.decode"):
    """The decoder stack and the output projection.  memory: (B, S, D), tgt: (B, T) -> (B, T, V)

    Each target position attends to itself and earlier positions only (the causal
    mask is built here). With src_pad given, src= (the source ids (B, S) that made
    `memory`) must be given too: memory positions where src == src_pad are masked.
    `caller` names the function in an error (apply gives its own name).
    """
    tgt = check_target(caller, p, tgt)
    if memory.ndim != 3 or memory.shape[0] != tgt.shape[0] or memory.shape[2] != p.d_model:
        raise ValueError(f"{caller}: memory {memory.shape} must be (B, S, {p.d_model}) "
                         f"with the batch size of tgt {tgt.shape}")
    rate, rng = dropout_setting(caller, p.dropout, training, rng)
    mem_mask = memory_mask(caller, src, src_pad, memory)  # (B, 1, 1, S) or None
    self_mask = causal_mask(tgt.shape[1], like=tgt)  # (1, 1, T, T)
    x = ag.dropout(embed_with_positions(p.tgt_embed, tgt, p.max_len), rate, rng)  # (B, T, D)
    for block in p.decoder:
        x = decoder_block(block, x, memory, self_mask, mem_mask, p.norm, rate, rng)  # (B, T, D)
    return project(p, layer_norm(p.decoder_norm, x))  # (B, T, V)


def apply(p, src, tgt, src_pad=None, training=False, rng=None):
    """Logits of the next target token at each position.  src: (B, S), tgt: (B, T) -> (B, T, V)

    Teacher forcing: tgt is the shifted-right target (starting with BOS); logits[:, t]
    predicts the token after tgt[:, t]. One rng draws the encoder's dropout, then the decoder's.
    encode checks src and decode tgt, in apply's name.
    """
    src, tgt = as_tokens(src), as_tokens(tgt)
    if src.ndim == tgt.ndim == 2 and src.shape[0] != tgt.shape[0]:  # other shapes: encode, decode
        raise ValueError(f"transformer.apply: src {src.shape} and tgt {tgt.shape} have "
                         f"different batch sizes")
    memory = encode(p, src, src_pad, training, rng, caller="transformer.apply")  # (B, S, D)
    return decode(p, memory, tgt, src_pad, src, training, rng,
                  caller="transformer.apply")  # (B, T, V)


# --- incremental decoding: one step per new token, with cached keys and values ---------------

class LayerCache(NamedTuple):
    self_kv: tuple  # (keys, values) of the t tokens fed so far, each (N, H, t, d_head)
    memory_kv: tuple  # (keys, values) of the memory for cross-attention, each (N, H, S, d_head)


class DecoderState(NamedTuple):
    layers: tuple  # one LayerCache per decoder block
    memory_mask: np.ndarray  # (N, 1, 1, S) source padding, or None
    length: int  # tokens fed so far (the next token's position)


def start(p, src, src_pad=None):
    """The decoder's state before any target token: the source encoded, and each layer's
    cross-attention keys and values of the memory computed once.  src: (N, S) -> DecoderState"""
    memory = encode(p, src, src_pad)  # (N, S, D)
    layers = []
    for block in p.decoder:
        memory_kv = keys_and_values(block.cross_attn, memory)  # (N, H, S, d_head) each
        empty = memory_kv[0][:, :, :0]  # (N, H, 0, d_head)
        layers.append(LayerCache((empty, empty), memory_kv))
    return DecoderState(tuple(layers), padding_mask(src, src_pad), 0)


def step(p, state, tokens):
    """Feed tokens (N, t), which follow the state.length tokens fed so far; each decoder layer
    appends their self-attention keys and values to its cache. -> (logits (N, V) of the next
    token, the new state). The logits are those of decode(p, memory, all tokens)[:, -1]."""
    tokens = check_target("transformer.step", p, tokens, "tokens", state.length)
    x = embed_with_positions(p.tgt_embed, tokens, p.max_len, state.length)  # (N, t, D)
    layers = []
    for block, cache in zip(p.decoder, state.layers):
        x, self_kv = decoder_block_step(block, x, cache.self_kv, cache.memory_kv,
                                        state.memory_mask, p.norm)  # (N, t, D)
        layers.append(cache._replace(self_kv=self_kv))
    logits = project(p, layer_norm(p.decoder_norm, x[:, -1:]))[:, 0]  # (N, V)
    return logits, DecoderState(tuple(layers), state.memory_mask, state.length + tokens.shape[1])


def reorder(state, rows):
    """Row i of the new state is row rows[i] of `state` (rows (N',) ints): every array of a
    DecoderState, the caches and the memory mask, holds one row per hypothesis."""
    return decoding.take_rows(state, rows)


# --- searches over step (decoding.py) ---------------------------------------------------------

def check_decode_args(fn, p, src, max_len):
    """The arguments every search shares. -> src as an array, on p's device (the searches
    run on the host: decoding.py)"""
    src = ag.to_device(src, ag.device_name(p.tgt_embed.table))
    src = check_source(f"transformer.{fn}", p, src)
    if not 1 <= max_len <= p.max_len:
        raise ValueError(f"transformer.{fn}: max_len={max_len} must lie in [1, {p.max_len}] "
                         f"(the model's max_len={p.max_len} positions)")
    return src


def bos_column(src, bos):
    """Every target prefix at the start: bos.  src: (B, S) -> (B, 1) int64"""
    return np.full((src.shape[0], 1), bos, dtype=np.int64)


def greedy_decode(p, src, bos, eos, max_len, src_pad=None):
    """The most probable next token at each step (decoding.greedy), until every sequence has
    emitted eos or has max_len tokens (bos included).  src: (B, S) -> ids (B, L), L <= max_len,
    starting with bos; a sequence ends at its first eos and is padded with eos."""
    src = check_decode_args("greedy_decode", p, src, max_len)
    return decoding.greedy(functools.partial(step, p), start(p, src, src_pad),
                           bos_column(src, bos), max_len, eos)


def beam_search(p, src, bos, eos, max_len, beam_size=4, length_penalty=0.6, src_pad=None):
    """Beam search maximizing log P(Y | src) / lp(Y) with the length penalty of Wu et al. 2016
    (decoding.beam_search: the algorithm and its guarantees). beam_size=1 is greedy_decode.
    src: (B, S) -> ids (B, L) as greedy_decode's."""
    return beam_search_with_scores(p, src, bos, eos, max_len, beam_size, length_penalty,
                                   src_pad)[0]


def beam_search_with_scores(p, src, bos, eos, max_len, beam_size=4, length_penalty=0.6,
                            src_pad=None):
    """beam_search, and each result's score log P / lp: -> (ids (B, L), scores (B,) float64),
    |Y| counting the tokens after bos, eos included."""
    src = check_decode_args("beam_search", p, src, max_len)
    return decoding.beam_search(functools.partial(step, p), reorder, start(p, src, src_pad),
                                bos_column(src, bos), max_len, beam_size, length_penalty, eos,
                                caller="transformer.beam_search")


def sample(p, src, bos, eos, max_len, temperature=1.0, top_k=None, rng=None, src_pad=None):
    """Each next token drawn from softmax(logits / temperature) over the top_k most probable
    (decoding.sample_next; greedy when temperature == 0 or top_k == 1, else rng is needed).
    src: (B, S) -> ids (B, L) as greedy_decode's."""
    src = check_decode_args("sample", p, src, max_len)
    decoding.check_sampling("transformer.sample", temperature, top_k, p.out.b.shape[0], rng)
    return decoding.sample(functools.partial(step, p), start(p, src, src_pad),
                           bos_column(src, bos), max_len, temperature, top_k, rng, eos)
