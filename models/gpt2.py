"""GPT-2's published files as an lm.LM: the weights of `model.safetensors` and the sizes of
`config.json` from a folder the user gives (Hugging Face's openai-community/gpt2 holds them;
nothing is downloaded here). The model is lm.py's, with GPT-2's options (learned positions,
GELU, the head tied to the token table); this module only maps GPT-2's tensor names onto
its NamedTuples, both ways:

    wte (V, D), wpe (P, D)               -> embed.tokens.table, embed.positions.table
    h.i.ln_1, h.i.ln_2 (weight, bias)    -> blocks[i].norm1, blocks[i].norm2
    h.i.attn.c_attn (D, 3D), (3D,)       -> blocks[i].self_attn.wq, wk, wv (its thirds)
    h.i.attn.c_proj (D, D)               -> blocks[i].self_attn.wo
    h.i.mlp.c_fc (D, 4D), c_proj (4D, D) -> blocks[i].ff.linear1, linear2
    ln_f                                 -> norm

GPT-2's Conv1D stores a weight as (d_in, d_out) and computes x W + b, as layers.dense does,
so weights map without a transpose. A file written by GPT2LMHeadModel.save_pretrained
prefixes every name with "transformer."; both spellings load.

    p = gpt2.load("gpt2-folder")                  # an lm.LM: lm.apply, lm.generate, ...
    p = gpt2.init(rng, gpt2.Config(n_layer=12))   # GPT-2's shape, GPT-2's random init
"""
import json
import os
from typing import NamedTuple

import numpy as np

import autograd_lite as ag

from . import lm
from .attention import MultiHeadAttention
from .blocks import DecoderOnlyBlock
from .layers import ActivatedFeedForward, Dense, Embedding, LayerNorm


class Config(NamedTuple):
    """The sizes of config.json that the model needs (GPT-2 small's by default)."""
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    n_positions: int = 1024
    vocab_size: int = 50257
    layer_norm_epsilon: float = 1e-5


def read_config(directory):
    """Config from directory/config.json; a setting our model cannot follow is refused."""
    path = os.path.join(directory, "config.json")
    with open(path, encoding="utf-8") as fh:
        settings = json.load(fh)
    config = Config(**{name: settings.get(name, default)
                       for name, default in Config._field_defaults.items()})
    d_ff = settings.get("n_inner") or 4 * config.n_embd
    unusual = {"activation_function": (settings.get("activation_function", "gelu_new"),
                                       "gelu_new"),
               "n_inner": (d_ff, 4 * config.n_embd),
               "layer_norm_epsilon": (config.layer_norm_epsilon, 1e-5)}
    for name, (found, expected) in unusual.items():
        if found != expected:
            raise ValueError(f"gpt2: {path}: {name} is {found!r}; this model takes {expected!r}")
    return config


def init(rng, config=Config(), dtype=np.float32, dropout=0.0):
    """A GPT-2 of config's sizes with GPT-2's random initial weights (lm.gpt2_weights)."""
    return lm.init(rng, config.vocab_size, config.n_embd, config.n_head, 4 * config.n_embd,
                   config.n_layer, config.n_positions, dropout, dtype, positions="learned",
                   activation=ag.gelu, tied_head=True, weights="gpt2")


def load(directory, dtype=np.float32, dropout=0.0):
    """The lm.LM of directory's config.json and model.safetensors, its arrays of `dtype`."""
    config = read_config(directory)
    tensors = read_safetensors(os.path.join(directory, "model.safetensors"))
    return from_tensors(tensors, config, dtype, dropout)


def shaped(config, dtype=np.float32):
    """A GPT-2 of config's sizes with every weight zero: the `like` that ag.load checks a
    saved GPT-2 (a fine-tuned one) against."""
    zeros = {name: np.zeros(shape, dtype) for name, shape in expected_shapes(config).items()}
    return from_tensors(zeros, config, dtype)


# --- names ------------------------------------------------------------------------------

IGNORED = (".attn.bias", ".attn.masked_bias", "lm_head.weight")  # masks; the tied head


def from_tensors(tensors, config, dtype=np.float32, dropout=0.0):
    """The lm.LM whose weights are `tensors` (GPT-2's name -> array), each copied as
    `dtype`. A tensor missing, of another shape than config's, or not GPT-2's is a
    ValueError naming it and both shapes."""
    prefix = "transformer." if any(name.startswith("transformer.") for name in tensors) else ""
    d = config.n_embd
    expected = expected_shapes(config)
    for name, array in tensors.items():
        short = name[len(prefix):] if name.startswith(prefix) else name
        if short not in expected and not short.endswith(IGNORED):
            raise ValueError(f"gpt2: the file holds {name} {tuple(array.shape)}, which a GPT-2 "
                             f"of {config} does not have")

    def tensor(name):
        found = tensors.get(prefix + name)
        shape = expected[name]
        if found is None:
            raise ValueError(f"gpt2: {prefix + name} is missing from the file; expected {shape}")
        if tuple(found.shape) != shape:
            raise ValueError(f"gpt2: {prefix + name} has shape {tuple(found.shape)}, expected "
                             f"{shape}")
        return np.array(found, dtype=dtype)  # a copy: the file's pages are not kept

    def dense(name):
        return Dense(tensor(name + ".weight"), tensor(name + ".bias"))

    def norm(name):
        return LayerNorm(tensor(name + ".weight"), tensor(name + ".bias"))

    def block(i):
        h = f"h.{i}."
        qkv = dense(h + "attn.c_attn")  # (D, 3D): q, k and v side by side
        wq, wk, wv = (Dense(np.ascontiguousarray(qkv.w[:, j * d:(j + 1) * d]),
                            qkv.b[j * d:(j + 1) * d].copy()) for j in range(3))
        attention = MultiHeadAttention(wq, wk, wv, dense(h + "attn.c_proj"), config.n_head)
        ff = ActivatedFeedForward(dense(h + "mlp.c_fc"), dense(h + "mlp.c_proj"), ag.gelu)
        return DecoderOnlyBlock(attention, norm(h + "ln_1"), ff, norm(h + "ln_2"))

    embed = lm.LearnedPositions(Embedding(tensor("wte.weight")), Embedding(tensor("wpe.weight")))
    blocks = tuple(block(i) for i in range(config.n_layer))
    return lm.LM(embed, blocks, norm("ln_f"), None, config.n_positions, ag.Hyper(dropout))


def expected_shapes(config):
    """GPT-2's tensor names (without "transformer.") -> their shapes for config's sizes."""
    d, d_ff = config.n_embd, 4 * config.n_embd
    shapes = {"wte.weight": (config.vocab_size, d), "wpe.weight": (config.n_positions, d),
              "ln_f.weight": (d,), "ln_f.bias": (d,)}
    for i in range(config.n_layer):
        for name, d_in, d_out in (("attn.c_attn", d, 3 * d), ("attn.c_proj", d, d),
                                  ("mlp.c_fc", d, d_ff), ("mlp.c_proj", d_ff, d)):
            shapes[f"h.{i}.{name}.weight"] = (d_in, d_out)
            shapes[f"h.{i}.{name}.bias"] = (d_out,)
        for name in ("ln_1", "ln_2"):
            shapes[f"h.{i}.{name}.weight"] = shapes[f"h.{i}.{name}.bias"] = (d,)
    return shapes


def to_tensors(p):
    """GPT-2's names (without "transformer.") -> the arrays of p, an lm.LM of GPT-2's shape,
    or a tree of its gradients: the inverse of from_tensors (c_attn its three parts joined)."""
    tensors = {"wte.weight": p.embed.tokens.table, "wpe.weight": p.embed.positions.table,
               "ln_f.weight": p.norm.scale, "ln_f.bias": p.norm.bias}
    for i, block in enumerate(p.blocks):
        a, h = block.self_attn, f"h.{i}."
        pairs = {"attn.c_attn": Dense(np.concatenate([a.wq.w, a.wk.w, a.wv.w], axis=1),
                                      np.concatenate([a.wq.b, a.wk.b, a.wv.b])),
                 "attn.c_proj": a.wo, "mlp.c_fc": block.ff.linear1,
                 "mlp.c_proj": block.ff.linear2}
        for name, dense in pairs.items():
            tensors[h + name + ".weight"], tensors[h + name + ".bias"] = dense.w, dense.b
        for name, norm in (("ln_1", block.norm1), ("ln_2", block.norm2)):
            tensors[h + name + ".weight"], tensors[h + name + ".bias"] = norm.scale, norm.bias
    return tensors


# --- the safetensors format ----------------------------------------------------------------

SAFETENSORS_DTYPES = {"F16": np.float16, "F32": np.float32, "F64": np.float64,
                      "BF16": np.uint16}  # bfloat16: the top half of a float32, widened below


def read_safetensors(path):
    """name -> array of a .safetensors file, each a read-only view of the file mapped into
    memory (nothing is read until used). The format: an 8-byte little-endian header length
    n, n bytes of JSON {name: {"dtype", "shape", "data_offsets": [begin, end]}} (and an
    optional "__metadata__"), then the tensors' bytes, offsets counted from the header's end.
    bfloat16 is widened to float32 (a copy)."""
    path = os.fspath(path)
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        n = int.from_bytes(fh.read(8), "little")
        if not 0 < n <= size - 8:
            raise ValueError(f"gpt2: {path} is not a safetensors file (header length {n}, "
                             f"file size {size})")
        header = json.loads(fh.read(n))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n) if size > 8 + n else None
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        if entry["dtype"] not in SAFETENSORS_DTYPES:
            raise ValueError(f"gpt2: {path}: {name} has dtype {entry['dtype']}; readable: "
                             f"{sorted(SAFETENSORS_DTYPES)}")
        dtype = np.dtype(SAFETENSORS_DTYPES[entry["dtype"]])
        shape = tuple(entry["shape"])
        if end - begin != int(np.prod(shape)) * dtype.itemsize or end > size - 8 - n:
            raise ValueError(f"gpt2: {path}: {name} {shape} {entry['dtype']} does not fit "
                             f"bytes {begin}..{end} of the file's {size - 8 - n}")
        array = (data[begin:end] if end > begin else np.zeros(0, np.uint8)).view(dtype)
        if entry["dtype"] == "BF16":
            array = (array.astype(np.uint32) << 16).view(np.float32)
        tensors[name] = array.reshape(shape)
    return tensors
