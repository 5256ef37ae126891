"""The Transformer family as plain functions over parameter NamedTuples.

    from models import transformer, classifier, lm
    p = transformer.init(rng, src_vocab, tgt_vocab, ...)
    logits = transformer.apply(p, src, tgt, src_pad=0)

The models, their layers and their bridge to PyTorch are the modules here; `fast/` holds the
fast rules attached to them, `training/` fit, what shows a run and the launchers of several
processes, `inputs/` the tokenizers and batches. `from models import text, data, train, plots`
reaches those too.
"""
# Bound eagerly: importing the submodule models.summary sets the package attribute
# `summary` to the module, which would shadow a lazily returned function.
from .summary import summary
from . import fast  # noqa: E402,F401  (registers the models' fast rules: the speed by default)


# Submodules load on first use (torch_bridge needs torch, plots matplotlib, both optional);
# the support code sits in subpackages, and `from models import train` reaches it the same.
SUBMODULES = {name: f".{name}" for name in (
    "transformer", "decoding", "classifier", "lm", "layers", "attention", "blocks",
    "torch_bridge", "gpt2")}
SUBMODULES.update({name: f".training.{name}" for name in (
    "train", "run_files", "progress", "health", "plots", "side_by_side")})
SUBMODULES.update({name: f".inputs.{name}" for name in ("text", "data", "bpe")})


def __getattr__(name):
    import importlib
    if name in SUBMODULES:
        return importlib.import_module(SUBMODULES[name], __name__)
    raise AttributeError(f"module 'models' has no attribute '{name}'")
