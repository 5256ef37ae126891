"""Decoding as search over a step function: greedy search, beam search and sampling, for any
model that extends its prefixes incrementally (transformer.step / transformer.reorder and
lm.step / lm.reorder are such pairs); nothing here knows a model. Every search starts from a
prefix (N, T_0) (a bos column, or a prompt) and returns ids (N, L), L <= max_len: the
prefix, then the chosen tokens. With an eos token a row ends at its first eos and is padded
with eos up to L; without one (eos=None) every row runs to max_len. Scores count |Y|, the
tokens after the prefix up to the first eos, eos included. Inference only: plain numpy
arrays, log-probabilities in float64. The search itself runs on numpy's arrays; a model
whose state lies on a device (CuPy's) gets its tokens there and gives its logits back, one
explicit copy each way a step (`on_host`). A model offers

    step(state, tokens) -> (logits, state)
        tokens (N, t) ints: for each of N rows, the tokens that follow those the state has
        seen (the whole prefix at the first call, one token at each later call);
        logits (N, V): the scores of each row's next token.
    reorder(state, rows) -> state
        row i of the result is row rows[i] of `state`, rows (N',) ints: beam search copies,
        drops and multiplies rows (take_rows does it for a state of arrays with rows first).
"""
import functools

import numpy as np

import autograd_lite as ag


def log_probs(logits):
    """log softmax over the vocabulary in float64.  (N, V) -> (N, V)"""
    return ag.log_softmax(np.asarray(logits, dtype=np.float64), axis=-1)


def generated_lengths(new, eos):
    """|Y| of each row of new (N, n), the tokens after the prefix: up to the first eos,
    eos included; n for a row without eos (or when eos is None).  -> (N,)"""
    if eos is None:
        return np.full(len(new), new.shape[1])
    ended = np.cumsum(new == eos, axis=1) > 0  # (N, n): at or after the first eos
    return (~ended).sum(axis=1) + ended.any(axis=1)  # (N,)


def on_host(step, reorder, state):
    """(step, reorder) for a search on the host: as they are for a model on numpy's arrays;
    for one whose state lies on a device (CuPy's), step takes the host's tokens there and
    brings its logits back, and reorder takes the rows there."""
    device = next((ag.device_name(a) for a in ag.tree_leaves(state)
                   if ag.device_name(a) != "cpu"), "cpu")
    if device == "cpu":
        return step, reorder

    def device_step(state, tokens):
        logits, state = step(state, ag.to_device(tokens, device))
        return ag.to_device(logits, "cpu"), state

    def device_reorder(state, rows):
        return reorder(state, ag.to_device(rows, device))
    return device_step, device_reorder


def repeated_ngram_bans(ids, n, n_vocab):
    """The tokens that would repeat an n-gram (Hugging Face's no_repeat_ngram_size): True at
    each token that, appended to a row of ids, would make the row's last n tokens equal to n
    consecutive tokens it already holds (n = 1: every token it holds).
    ids (N, T) -> (N, V) bool"""
    n_rows, length = ids.shape
    banned = np.zeros((n_rows, n_vocab), dtype=bool)  # (N, V)
    if length < n:  # no whole n-gram yet
        return banned
    windows = np.lib.stride_tricks.sliding_window_view(ids, n, axis=1)  # (N, T - n + 1, n)
    follows = ids[:, length - n + 1:]  # (N, n - 1): what the next token would follow
    seen = (windows[:, :, :-1] == follows[:, None, :]).all(axis=2)  # (N, T - n + 1)
    rows, at = np.nonzero(seen)
    banned[rows, windows[rows, at, -1]] = True
    return banned


def extend(step, state, prefix, max_len, choose, eos=None, no_repeat_ngram=None):
    """The search of greedy decoding and sampling: one token per row at each step, the one
    `choose(logits (N, V)) -> (N,)` picks, until every row has emitted eos or has max_len
    tokens; with no_repeat_ngram=n, among the tokens that repeat no n-gram of the row
    (repeated_ngram_bans; a row that every token would repeat chooses among all).
    prefix: (N, T_0) -> (ids (N, L) int64, log P (N,) float64 of the tokens chosen up to
    each row's first eos, |Y| (N,))"""
    step, _ = on_host(step, None, state)
    prefix = ag.to_device(prefix, "cpu")
    ids = np.asarray(prefix).astype(np.int64)  # (N, T_0); a narrow dtype cannot hold V
    n_rows, start = ids.shape
    log_p = np.zeros(n_rows)  # (N,)
    done = np.zeros(n_rows, dtype=bool)  # (N,)
    fresh = ids  # (N, t): the tokens the state has not seen
    while ids.shape[1] < max_len and not done.all():
        logits, state = step(state, fresh)  # (N, V)
        allowed = logits
        if no_repeat_ngram is not None:
            banned = repeated_ngram_bans(ids, no_repeat_ngram, logits.shape[-1])  # (N, V)
            banned &= ~banned.all(axis=1, keepdims=True)
            allowed = np.where(banned, -np.inf, logits)  # (N, V)
        token = np.asarray(choose(allowed)).astype(np.int64)  # (N,)
        log_p += np.where(done, 0.0, log_probs(logits)[np.arange(n_rows), token])  # (N,)
        if eos is not None:
            token = np.where(done, eos, token)  # (N,) an ended row is padded with eos
            done |= token == eos
        fresh = token[:, None]  # (N, 1)
        ids = np.concatenate([ids, fresh], axis=1)  # (N, T + 1)
    return ids, log_p, generated_lengths(ids[:, start:], eos)


def most_probable(logits):
    """The argmax token of each row.  logits (N, V) -> (N,)"""
    return np.argmax(logits, axis=-1)


def greedy(step, state, prefix, max_len, eos=None):
    """The most probable next token at each step.  prefix (N, T_0) -> ids (N, L)"""
    return extend(step, state, prefix, max_len, most_probable, eos)[0]


# --- sampling ---------------------------------------------------------------------------------

def check_sampling(caller, temperature, top_k, vocab_size, rng, top_p=None):
    """temperature >= 0 (not NaN), top_k in 1..V or None, top_p in (0, 1] or None, and an rng
    unless the choice is greedy; `caller` names the function in the error."""
    if not temperature >= 0:
        raise ValueError(f"{caller}: temperature must be >= 0, got {temperature}")
    if top_k is not None and not 1 <= top_k <= vocab_size:
        raise ValueError(f"{caller}: top_k must lie in 1..{vocab_size} (the vocabulary), "
                         f"got {top_k}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"{caller}: top_p must lie in (0, 1], got {top_p}")
    if rng is None and not (temperature == 0 or top_k == 1):
        raise ValueError(f"{caller}: sampling (temperature > 0) needs an rng")


def sample_next(logits, temperature=1.0, top_k=None, rng=None, top_p=None):
    """One token per row of logits (N, V): greedy (argmax) when temperature == 0 or top_k == 1,
    otherwise a draw from softmax(logits / temperature) restricted to the top_k largest, and
    then to its nucleus of mass top_p (nucleus). One uniform number per row per call: same
    rng, same tokens. -> (N,)"""
    n_rows, vocab_size = logits.shape
    check_sampling("decoding.sample_next", temperature, top_k, vocab_size, rng, top_p)
    if temperature == 0 or top_k == 1:
        return most_probable(logits)  # (N,)
    z = logits.astype(np.float64)  # (N, V)
    # Shift before dividing: z - max <= 0, so a tiny temperature gives -inf, never inf - inf.
    with np.errstate(over="ignore"):
        z = (z - z.max(axis=-1, keepdims=True)) / temperature  # (N, V), max 0
    if top_k is not None:
        top = np.argpartition(-z, top_k - 1, axis=-1)[:, :top_k]  # (N, k): exactly k, ties too
        keep = np.zeros(z.shape, dtype=bool)  # (N, V)
        np.put_along_axis(keep, top, True, axis=-1)
        z = np.where(keep, z, -np.inf)  # (N, V)
    if top_p is not None:
        z = nucleus(z, top_p)  # (N, V)
    probs = np.exp(z)  # (N, V); the largest is exp(0) = 1
    cdf = np.cumsum(probs, axis=-1)  # (N, V)
    cdf /= cdf[:, -1:]  # the last entry exactly 1
    u = rng.random((n_rows, 1))  # (N, 1) in [0, 1)
    return (cdf <= u).sum(axis=-1)  # (N,) the first token whose cdf exceeds u


def nucleus(z, top_p):
    """z (N, V) with -inf outside each row's nucleus (Holtzman et al. 2020, top-p): the
    fewest most probable tokens whose probabilities under softmax(z) sum to at least top_p,
    i.e. each token whose more probable tokens hold less than top_p (the most probable
    always). Tied tokens are taken in index order. -> (N, V)"""
    order = np.argsort(-z, axis=-1, kind="stable")  # (N, V) most probable first
    ranked = np.take_along_axis(z, order, axis=-1)  # (N, V)
    probs = np.exp(ranked - ranked[:, :1])  # (N, V)
    probs /= probs.sum(axis=-1, keepdims=True)
    before = np.cumsum(probs, axis=-1) - probs  # (N, V): the mass of the tokens ranked above
    keep = np.zeros(z.shape, dtype=bool)  # (N, V)
    np.put_along_axis(keep, order, before < top_p, axis=-1)
    return np.where(keep, z, -np.inf)


def sample(step, state, prefix, max_len, temperature=1.0, top_k=None, rng=None, eos=None,
           top_p=None):
    """Each next token drawn by sample_next.  prefix (N, T_0) -> ids (N, L)"""
    choose = functools.partial(sample_next, temperature=temperature, top_k=top_k, rng=rng,
                               top_p=top_p)
    return extend(step, state, prefix, max_len, choose, eos)[0]


# --- beam search ------------------------------------------------------------------------------

def lp(length, alpha):
    """lp(Y) = (5 + |Y|)^α / (5 + 1)^α (Wu et al. 2016, eq. 14), |Y| the tokens after the
    prefix, eos included."""
    return ((5.0 + length) / 6.0) ** alpha


def take_rows(state, rows):
    """A `reorder` for a state whose arrays all hold one row per hypothesis along axis 0:
    every array indexed by rows (N',); other leaves (ints, None) kept."""
    return ag.tree_map(lambda a: a[rows] if isinstance(a, np.ndarray)
                       or ag.device_name(a) != "cpu" else a, state)


def beam_search(step, reorder, state, prefix, max_len, beam_size=4, length_penalty=0.6,
                eos=None, no_repeat_ngram=None, *, caller="beam_search"):
    """Beam search maximizing log P(Y | prefix) / lp(Y) (Wu et al. 2016), the way fairseq and
    Hugging Face run it: finished hypotheses leave the beam. `state` has one row per prefix
    row (B of them); the search makes it beam_size rows per prefix with reorder.

    Each prefix keeps beam_size live (unfinished) hypotheses. At each step every live
    hypothesis is extended by every token: the extensions by eos are finished, and the best
    finished hypothesis so far (by log P / lp) is kept per prefix, outside the beam; the
    beam_size most probable extensions by other tokens are the next beam (they all have the
    same length, so this is the order of the score). A prefix stops when no live hypothesis
    can beat its best finished one: log P only falls as tokens are added, so a live
    hypothesis can score at most log P / (the largest lp of a length still possible). At
    max_len tokens the live hypotheses end unfinished. The result is the better of the best
    finished hypothesis and the best live one, padded with eos. Without eos nothing finishes:
    every hypothesis has max_len tokens, and the result is the most probable one kept.

    beam_size=1 is greedy search. With beam_size >= 2 the result is never worse than a
    finished hypothesis the search saw (among them the prefix followed by eos), but it can
    be worse than greedy's (pruning can drop greedy's path); with a beam at least as wide as
    the number of paths it is the exact optimum.

    no_repeat_ngram=n (Hugging Face's no_repeat_ngram_size): no hypothesis holds the same n
    consecutive tokens twice, the prefix and eos included; an extension that would
    (repeated_ngram_bans) is no candidate. All of the above then holds among the sequences
    without a repeat. The most probable continuation of a character model is often a loop
    (a phrase again and again, or spaces): this is the usual cure.
    prefix (B, T_0) -> (ids (B, L), scores (B,) float64: each result's log P / lp);
    `caller` (a model's search: "lm.beam_search") names the function in an error.
    """
    alpha, k = length_penalty, beam_size
    if beam_size < 1:
        raise ValueError(f"{caller}: beam_size must be >= 1, got {beam_size}")
    if no_repeat_ngram is not None and not (isinstance(no_repeat_ngram, (int, np.integer))
                                            and no_repeat_ngram >= 1):
        raise ValueError(f"{caller}: no_repeat_ngram must be None or an int >= 1, got "
                         f"{no_repeat_ngram!r}")
    if k == 1:
        ids, log_p, lengths = extend(step, state, prefix, max_len, most_probable, eos,
                                     no_repeat_ngram)
        return ids, log_p / lp(lengths, alpha)
    step, reorder = on_host(step, reorder, state)
    prefix = np.asarray(ag.to_device(prefix, "cpu")).astype(np.int64)  # (B, T_0)
    n_src, start = prefix.shape
    rows = np.arange(n_src)  # (B,)
    state = reorder(state, np.repeat(rows, k))  # (B·K) rows: K per prefix
    ids = np.repeat(prefix[:, None, :], k, axis=1)  # (B, K, T_0) the live hypotheses
    log_p = np.full((n_src, k), -np.inf)  # (B, K): one live hypothesis, K - 1 empty slots
    log_p[:, 0] = 0.0
    best = np.full(n_src, -np.inf)  # (B,) the best finished score of each prefix
    # (B, max_len) the best finished hypothesis, padded with eos (never read without eos)
    best_ids = np.full((n_src, max_len), -1 if eos is None else eos)
    best_len = np.zeros(n_src, dtype=np.int64)  # (B,) its |Y|
    fresh = ids.reshape(n_src * k, start)  # (B·K, t): the tokens the state has not seen
    for length in range(start, max_len):  # ids hold `length` tokens; their extensions one more
        logits, state = step(state, fresh)  # (B·K, V)
        n_vocab = logits.shape[-1]
        cand = log_p[:, :, None] + log_probs(logits).reshape(n_src, k, n_vocab)  # (B, K, V)
        if no_repeat_ngram is not None:
            banned = repeated_ngram_bans(ids.reshape(n_src * k, length), no_repeat_ngram,
                                         n_vocab)  # (B·K, V)
            cand[banned.reshape(n_src, k, n_vocab)] = -np.inf
        n_new = length + 1 - start  # |Y| of the extensions
        if eos is not None:
            ended = cand[:, :, eos] / lp(n_new, alpha)  # (B, K): the scores of the eos extensions
            j = np.argmax(ended, axis=1)  # (B,)
            better = ended[rows, j] > best  # (B,)
            best = np.where(better, ended[rows, j], best)  # (B,)
            best_ids[better, :length] = ids[rows, j][better]  # its prefix; eos follows (padding)
            best_len[better] = n_new
            cand[:, :, eos] = -np.inf  # (B, K, V): the live candidates
        flat = cand.reshape(n_src, k * n_vocab)  # (B, K·V)
        top = np.argsort(-flat, axis=1, kind="stable")[:, :k]  # (B, K)
        origin, token = np.divmod(top, n_vocab)  # (B, K) each
        log_p = np.take_along_axis(flat, top, axis=1)  # (B, K)
        ids = np.concatenate([ids[rows[:, None], origin], token[:, :, None]], axis=2)  # (B, K, +1)
        state = reorder(state, (origin + rows[:, None] * k).reshape(-1))
        fresh = token.reshape(n_src * k, 1)  # (B·K, 1)
        # log P <= 0, so log P / lp is largest at the largest lp of the lengths still possible
        ceiling = log_p.max(axis=1) / max(lp(n_new + 1, alpha), lp(max_len - start, alpha))
        log_p[best >= ceiling] = -np.inf  # a stopped prefix's live hypotheses cannot win
        if np.isneginf(log_p).all():
            break
    live = log_p / lp(ids.shape[2] - start, alpha)  # (B, K)
    j = np.argmax(live, axis=1)  # (B,)
    use_live = live[rows, j] > best  # (B,)
    score = np.where(use_live, live[rows, j], best)  # (B,)
    length = start + np.where(use_live, ids.shape[2] - start, best_len).max()
    chosen = best_ids[:, :length]  # (B, L)
    if use_live.any():  # then L is the live hypotheses' length
        chosen[use_live] = ids[rows, j][use_live]
    return chosen, score
