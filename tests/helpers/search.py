"""Plain reference searches for the decoding tests, written for reading, not speed: one
prefix at a time, hypotheses as tuples, each next-token distribution computed afresh from
the whole sequence by `next_log_probs(tokens) -> (V,)` (no cache, no batching, no early
stop). |Y| counts the tokens after the prefix, eos included; lp(Y) = ((5 + |Y|) / 6)^α."""
import numpy as np


def score(log_p, n_new, alpha):
    return log_p / ((5 + n_new) / 6) ** alpha


def exhaustive_search(next_log_probs, prefix, eos, max_len, alpha, no_repeat_ngram=None):
    """The best of every complete continuation (ended by eos, or max_len tokens long) by
    log P / lp, found by enumerating them all; with no_repeat_ngram=n, of those in which no
    new token completes n tokens in a row that the sequence already holds. -> (tokens
    tuple, score)"""
    best = (-np.inf, None)
    stack = [(tuple(prefix), 0.0)]
    while stack:
        tokens, log_p = stack.pop()
        if len(tokens) == max_len or (len(tokens) > len(prefix) and tokens[-1] == eos):
            best = max(best, (score(log_p, len(tokens) - len(prefix), alpha), tokens))
            continue
        for v, s in enumerate(next_log_probs(tokens)):
            if no_repeat_ngram is None or not repeats_an_ngram(tokens, v, no_repeat_ngram):
                stack.append((tokens + (v,), log_p + s))
    return best[1], best[0]


def repeats_an_ngram(tokens, v, n):
    """Whether token v after `tokens` ends n tokens in a row that `tokens` already hold."""
    new = tuple(tokens[len(tokens) - n + 1:]) + (v,) if n > 1 else (v,)
    return len(new) == n and any(tuple(tokens[i:i + n]) == new
                                 for i in range(len(tokens) - n + 1))


def reference_beam_search(next_log_probs, prefix, eos, max_len, k, alpha):
    """The standard search (fairseq, Hugging Face): every eos extension is finished and
    leaves the beam; the k most probable other extensions are the next beam. No early stop:
    it runs to max_len, so agreeing with it also shows that a search that stops early stops
    only when nothing could beat its best finished hypothesis. -> (tokens list, score)"""
    start = len(prefix)
    finished, live = [], [(tuple(prefix), 0.0)]  # finished: (score, tokens) in the order found
    for _ in range(start, max_len):
        extensions = []
        for tokens, log_p in live:
            for v, s in enumerate(next_log_probs(tokens)):
                if v == eos:
                    finished.append((score(log_p + s, len(tokens) + 1 - start, alpha),
                                     tokens + (v,)))
                else:
                    extensions.append((tokens + (v,), log_p + s))
        extensions.sort(key=lambda c: -c[1])  # stable
        live = extensions[:k]
    ends = finished + [(score(log_p, len(tokens) - start, alpha), tokens)
                       for tokens, log_p in live]
    best_score, tokens = max(ends, key=lambda e: e[0])  # the first of equal scores
    return list(tokens), best_score


def assert_only_eos_after_eos(ids, eos, start=1):
    """After a row's first eos (past the prefix's `start` tokens), every token is eos."""
    new = ids[:, start:]
    ended = np.cumsum(new == eos, axis=1) > 0  # (N, n): at or after the first eos
    after = np.concatenate([np.zeros((len(ids), 1), bool), ended[:, :-1]], axis=1)
    assert (new[after] == eos).all(), ids
