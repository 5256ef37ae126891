"""vmap (vmap.py) and the ops' batching rules (rules_*.py, registered on import);
core/batched.py has the mechanism."""
from ..core.batched import Batched, Ops
from ..core.tracer import every_value
from ..ops import operators
from . import rules_elementwise, rules_indexing, rules_nn, rules_products, rules_reductions
from . import rules_shape
from .axes import broadcast_axis, moveaxis
from .vmap import vmap

Ops.moveaxis = staticmethod(moveaxis)
Ops.broadcast_axis = staticmethod(broadcast_axis)
Ops.every_value = staticmethod(every_value)
operators.install(Batched, rules_elementwise.constant_ufunc, rules_reductions.constant_along,
                  described="values under vmap")

__all__ = ["vmap"]
