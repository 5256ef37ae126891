"""GPT-2's files for the tests, made offline: a byte-level BPE vocabulary (vocab.json,
merges.txt) with merges learnt from a text as BPE learns them, and a tiny GPT-2 of that
vocabulary built by transformers with random weights and saved by save_pretrained
(model.safetensors, config.json): the four files a user downloads, in small."""
import collections
import json

from models.inputs import bpe


def learnt_merges(corpus, n):
    """n merges learnt as BPE learns them: in each pre-token's symbols, the most frequent
    adjacent pair (ties: the first seen) is joined, n times."""
    import regex
    table = bpe.byte_characters()
    words = collections.Counter(tuple(table[b] for b in piece.encode("utf-8"))
                                for piece in regex.findall(bpe.PATTERN, corpus))
    merges = []
    for _ in range(n):
        pairs = collections.Counter()
        for word, count in words.items():
            for pair in zip(word, word[1:]):
                pairs[pair] += count
        if not pairs:
            break
        best = max(pairs, key=pairs.__getitem__)
        merges.append(best)
        words = collections.Counter({tuple(bpe.merged(word, {best: 0})): count
                                     for word, count in words.items()})
    return merges


def write_bpe_files(folder, corpus, n_merges):
    """vocab.json (the 256 byte symbols, the merged symbols, "<|endoftext|>" last) and
    merges.txt in folder -> the vocabulary's size."""
    merges = learnt_merges(corpus, n_merges)
    symbols = list(bpe.byte_characters().values()) + [a + b for a, b in merges]
    vocab = {s: i for i, s in enumerate(dict.fromkeys(symbols))}
    vocab[bpe.END_OF_TEXT] = len(vocab)
    (folder / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    (folder / "merges.txt").write_text("#version: 0.2\n" + "\n".join(f"{a} {b}" for a, b
                                                                      in merges) + "\n",
                                       encoding="utf-8")
    return len(vocab)


def write_tiny_gpt2(folder, transformers, torch, vocab_size, n_positions=64, seed=0):
    """model.safetensors and config.json of a GPT-2 of 2 layers of width 32 (4 heads), its
    weights GPT-2's random init (transformers'), saved by save_pretrained. -> the model"""
    torch.manual_seed(seed)
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=vocab_size,
                                     n_positions=n_positions, bos_token_id=vocab_size - 1,
                                     eos_token_id=vocab_size - 1)
    model = transformers.GPT2LMHeadModel(config).eval()
    model.save_pretrained(folder)
    return model
