"""Batching rules of the element-wise ops, numpy broadcasting included (aligned_operands):
one call computes every example."""
from ..core.batched import BATCHING_RULES, Batched
from ..core.tracer import primal
from ..core import dtypes
from ..ops import elementwise as ew, selection as sel
from .axes import aligned_operands


def elementwise_rule(op):
    """The rule of an element-wise op whose operands broadcast together (non-array operands,
    such as astype's dtype or a None bound of clip, pass as they are)."""
    def rule(values, bdims, **kwargs):
        return op(*aligned_operands(values, bdims), **kwargs), 0
    rule.__name__ = f"{getattr(op, 'op_name', op.__name__)}_batching_rule"
    return rule


def constant_ufunc(ufunc, *inputs):
    """A ufunc without a derivative (a comparison, sign, isfinite) on batched values: on their
    plain values, aligned; a batched bool array."""
    level = max(x.level for x in inputs if type(x) is Batched)
    values = [x.value if type(x) is Batched and x.level == level else x for x in inputs]
    bdims = [x.bdim if type(x) is Batched and x.level == level else None for x in inputs]
    out = ufunc(*(primal(v) for v in aligned_operands(values, bdims)))
    return Batched(out, level, 0)


ELEMENTWISE = [ew.add, ew.sub, ew._multiply, ew.div, ew._power, ew.float_cast, ew.relu, ew.gelu,
               sel.where, sel.clip, dtypes.weak_cotangent, *ew.ROW_OPS.values()]

for _op in ELEMENTWISE:
    BATCHING_RULES[_op] = elementwise_rule(_op)
