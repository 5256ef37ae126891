"""Helpers shared by the tests, one module per kind:

    helpers.references    central differences (first and second order), closeness, PyTorch
                          comparison of ops, the paper's position encoding written out
    helpers.op_table      the op table: one row per case of an op, checked by test_op_table.py
    helpers.op_cases      the vocabulary of the op table: rows, domains
    helpers.numpy_forms   numpy's operators, functions and methods on traced values, rows of
                          the op table against numpy's own untraced calls
    helpers.torch_models  PyTorch layers holding our blocks' weights (through
                          models.torch_bridge) and gradients compared by torch's names
    helpers.tiny_models   small seeded models of each family; dropout's seeding checked
    helpers.search        plain reference searches for the decoding tests
    helpers.pictures      the SVG a picture renders to, the engine's own op count, and the
                          small network the picture tests draw
    helpers.demos         the classify demo run in the test's process, its final line's pattern
    helpers.serialization crafted files and small models for the save/load tests
    helpers.to_torch      the to_torch demo's start: a model trained a little, its torch copy
    helpers.workers       functions for training.torch_distributed.launch to run in processes
"""
# The op-level references, also as `from helpers import ...` (the name other branches expect).
from helpers.references import (DTYPES, RTOL, assert_close, check_first_order,  # noqa: F401
                                check_second_order, compare_with_torch, relative_error,
                                to_tensor)
