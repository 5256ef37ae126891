"""The autodiff core: tracing (`tracer`), the reverse pass (`backward`), `gradient` and its
relatives (`differentiate`, `argnums`), pytrees (`tree`) and recomputation (`remat`). Nothing
here knows any op: ops are built on `tracer.primitive`, one level up."""
