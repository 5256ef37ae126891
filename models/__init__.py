"""The Transformer family as plain functions over parameter NamedTuples.

    from models import transformer, classifier, lm
    p = transformer.init(rng, src_vocab, tgt_vocab, ...)
    logits = transformer.apply(p, src, tgt, src_pad=0)
"""
# Bound eagerly: importing the submodule models.summary sets the package attribute
# `summary` to the module, which would shadow a lazily returned function.
from .summary import summary
from . import fast  # noqa: E402,F401  (registers the models' fast rules: the speed by default)


def __getattr__(name):
    # Submodules load on first use; torch_bridge needs torch, which is optional.
    import importlib
    if name in ("transformer", "decoding", "classifier", "lm", "torch_bridge", "torch_distributed",
                "layers", "attention", "blocks", "text", "data", "train", "plots", "run_files",
                "health"):
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'models' has no attribute '{name}'")
