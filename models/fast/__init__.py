"""The models' fast rules: plain-array kernels registered against the paper's functions of
models/ (core/rules.py: `ag.fast_rule`), which stay the definitions that higher order,
pictures and `ag.fast_rules(False)` run. Importing `models` registers them, so the speed is
the default.

    attention.py   multihead_attention (and so cross_attention), and decoding's
                   attention_over and projected_heads
    layers.py      feed_forward with relu or gelu, the post-LN blocks' add_and_norm
    sublayers.py   their kernels: BLAS products and ag.kernels, forward and backward
    conditions.py  when a rule applies (one float dtype, a mask of the scores' rank) and
                   the dropout masks the rules draw as ag.dropout does

Each rule computes its function's output and pullback on plain arrays, takes the function's
own arguments (parameter NamedTuples included) and gives each argument's cotangent in that
argument's structure. The tests hold every rule against its function with the rules off.
"""
from . import attention, layers  # noqa: F401  (registers the rules)
