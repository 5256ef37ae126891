"""Generation per token with and without the key/value cache: the character LM of workloads.py
(vocab 65, D 64, 2 pre-LN blocks, max_len 64), greedy, one sequence, a 1-token prompt grown
by 63 tokens. A script, not a test:

    python3 tests/benchmarks/bench_generation.py [--threads 2] [--rounds 7]

Three ways to the same tokens: lm.generate (the cache: each new token is one query row
through the blocks), lm.apply on the whole prefix for every token (no cache), and the
PyTorch twin (twins.lm_logits, under torch.no_grad()) on the whole prefix, as eager code
without a cache of its own. The first two must give the same tokens (asserted). Timed in
alternating blocks (timing.alternating_blocks): cached against uncached, and our uncached
against the twin's; reported in ms per generated token.
"""
import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import timing  # noqa: E402  (standard library only: numpy is not loaded yet)

THREADS = timing.pin_threads(timing.threads_from_argv())
import numpy as np  # noqa: E402

import autograd_lite as ag  # noqa: E402
from models import lm  # noqa: E402

import twins  # noqa: E402
import workloads  # noqa: E402

N_NEW = 63


def greedy_without_cache(logits_of, prompt, n_new):
    """Append argmax of the last position's logits n_new times; logits_of(ids) -> (B, T, V)."""
    ids = prompt
    for _ in range(n_new):
        next_token = np.asarray(logits_of(ids))[:, -1].argmax(axis=-1)  # (B,)
        ids = np.concatenate([ids, next_token[:, None]], axis=1)
    return ids


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="threads for each library")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    ag.memory.keep_freed_memory()
    import torch

    from models import torch_bridge
    timing.torch_threads(torch, THREADS)
    env = timing.environment(torch)
    print(timing.describe_environment(env))
    p = workloads.build("lm").params
    prompt = np.array([[1]])
    weights = torch_bridge.lm_to_torch(p)

    def twin_logits(ids):
        with torch.no_grad():
            return twins.lm_logits(torch, weights, torch.from_numpy(ids), n_heads=4, n_layers=2,
                                   max_len=p.max_len).numpy()

    def cached():
        return lm.generate(p, prompt, N_NEW, temperature=0.0)

    def uncached():
        return greedy_without_cache(lambda ids: lm.apply(p, ids), prompt, N_NEW)

    def twin_uncached():
        return greedy_without_cache(twin_logits, prompt, N_NEW)

    tokens = cached()
    np.testing.assert_array_equal(tokens, uncached(), err_msg="the cache changed the tokens")
    same_as_twin = bool(np.array_equal(tokens, twin_uncached()))
    options = dict(rounds=args.rounds, pause=0.3, block_seconds=0.5)
    cache = timing.alternating_blocks(cached, uncached, **options).summary()
    versus_twin = timing.alternating_blocks(uncached, twin_uncached, **options).summary()
    per_token = {"cached_ms": cache["ms_a"] / N_NEW, "uncached_ms": cache["ms_b"] / N_NEW,
                 "twin_uncached_ms": versus_twin["ms_b"] / N_NEW,
                 "cache_ratio": cache["ratio"], "uncached_vs_twin_ratio": versus_twin["ratio"],
                 "same_tokens_as_twin": same_as_twin, "n_new": N_NEW}
    print(f"ms per token, {N_NEW} new tokens after a 1-token prompt, batch 1, greedy:")
    print(f"  ours with the cache     {per_token['cached_ms']:7.3f}")
    print(f"  ours without            {per_token['uncached_ms']:7.3f}   cached / uncached "
          f"{cache['ratio']:.2f} ({cache['ratio_q1']:.2f} - {cache['ratio_q3']:.2f})")
    print(f"  PyTorch twin, without   {per_token['twin_uncached_ms']:7.3f}   ours / twin, "
          f"both uncached {versus_twin['ratio']:.2f} ({versus_twin['ratio_q1']:.2f} - "
          f"{versus_twin['ratio_q3']:.2f}); same tokens: {same_as_twin}")
    timing.emit({"threads": THREADS, "environment": env, **per_token})


if __name__ == "__main__":
    main()
