"""viz/scopes.py and viz/marks.py: which functions a picture shows as clusters. Each clause
of the rule is tested on small user functions: a transparent helper leaves the picture
exactly as if its body were written inline; any other helper, whatever its name, adds its
cluster; an alias and the function it calls are one cluster."""
import collections
import dataclasses
import functools
import os
import sys
import sysconfig
import types
from typing import NamedTuple

import numpy as np
import pytest

import autograd_lite as ag
from autograd_lite.viz import scopes
from autograd_lite.viz.marks import ALIASES


class Dense(NamedTuple):
    w: np.ndarray


@dataclasses.dataclass
class Settings:
    scale: float = 0.5


def code_of(source, name):
    """The code object of function `name` defined in `source`, compiled as a file would be."""
    namespace = {}
    exec(compile(source, os.path.join(os.path.dirname(__file__), "snippet.py"), "exec"), namespace)
    return namespace[name].__code__


def test_library_code_is_numpy_the_standard_library_this_package_and_frozen_modules():
    assert scopes.is_library(np.__file__) and scopes.is_library(np.linalg.__file__)
    assert scopes.is_library(functools.__file__) and scopes.is_library(collections.__file__)
    assert scopes.is_library(ag.__file__) and scopes.is_library(scopes.__file__)
    assert scopes.is_library("<frozen importlib._bootstrap>")
    assert not scopes.is_library(__file__)                       # user code
    assert not scopes.is_library(pytest.__file__)                # installed beside the stdlib
    site = sysconfig.get_paths()["purelib"]
    assert not scopes.is_library(os.path.join(site, "somepackage", "model.py"))
    assert not scopes.is_library(os.path.dirname(np.__file__) + "_extras/model.py")  # a prefix only


def test_generated_code_is_what_the_standard_library_writes_from_strings():
    assert scopes.is_generated(Settings.__init__.__code__)        # dataclasses
    assert scopes.is_generated(Settings.__eq__.__code__)
    namespace = {}
    exec("def from_a_string(x):\n    return x\n", namespace)     # a notebook cell, a doc example
    assert not scopes.is_generated(namespace["from_a_string"].__code__)
    assert not scopes.is_generated(code_of.__code__)


def test_transparent_code_lambdas_comprehensions_generators_and_marked():
    source = ("def helper(x):\n    return [y for y in x]\n"
              "def _helper(x):\n    return x\n"
              "def steps(x):\n    yield x\n"
              "async def later(x):\n    return x\n"
              "def __call__(self, x):\n    return x\n")
    nested = [c for c in code_of(source, "helper").co_consts if isinstance(c, types.CodeType)]
    assert scopes.is_transparent((lambda x: x).__code__)
    assert scopes.is_transparent(Dense.__new__.__code__)         # a NamedTuple's is a lambda
    if sys.version_info < (3, 12):  # later, a comprehension runs in its function's own frame
        assert [c.co_name for c in nested] == ["<listcomp>"]
    assert all(scopes.is_transparent(c) for c in nested)
    assert scopes.is_transparent(code_of(source, "steps"))       # a generator
    assert scopes.is_transparent(code_of(source, "later"))       # a coroutine
    assert not scopes.is_transparent(code_of(source, "_helper"))  # a name says nothing
    assert not scopes.is_transparent(code_of(source, "helper"))
    assert not scopes.is_transparent(code_of(source, "__call__"))
    assert scopes.is_user_level(code_of(source, "helper"))
    assert not scopes.is_user_level(Settings.__init__.__code__)  # generated
    assert not scopes.is_user_level(collections.namedtuple.__code__)  # library


def test_the_transparent_marker_registers_the_function_and_returns_it():
    def wiring(x, sublayer):
        return x + sublayer(x)

    code = wiring.__code__
    assert not scopes.is_transparent(code)
    assert ag.viz.transparent(wiring) is wiring and wiring.__code__ is code  # no wrapper
    assert scopes.is_transparent(code) and not scopes.is_user_level(code)
    with pytest.raises(TypeError, match=r"ag\.viz\.transparent: expected a Python function, "
                                        r"got partial"):
        ag.viz.transparent(functools.partial(wiring, sublayer=ag.tanh))
    with pytest.raises(TypeError, match="got ufunc"):
        ag.viz.transparent(np.tanh)


def test_the_alias_marker_registers_the_function_and_returns_it():
    def scaled(x):
        return helper(x, 2.0)

    code = scaled.__code__
    assert ag.viz.alias(scaled) is scaled and scaled.__code__ is code and code in ALIASES
    assert scopes.is_user_level(code)  # an alias opens its scope; the call it makes opens none
    with pytest.raises(TypeError, match=r"ag\.viz\.alias: expected a Python function, got "
                                        r"builtin_function_or_method"):
        ag.viz.alias(len)


def test_a_marker_on_a_fusable_function_marks_its_plain_definition():
    def plain(w, x):
        return ag.tanh(x @ w)

    fused = ag.fusable(plain)
    assert ag.viz.transparent(fused) is fused
    assert scopes.is_transparent(plain.__code__)
    assert not scopes.is_transparent(fused.__code__)  # the wrapper every fusable shares


# --- the rule on pictures: a helper changes the picture only when it is meant to be seen ---

def inline(w, x):
    return ag.sum(ag.tanh(x @ w) * 0.5)


def helper(w, x):
    return ag.tanh(x @ w)


def _helper(w, x):
    return ag.tanh(x @ w)


def __helper(w, x):
    return ag.tanh(x @ w)


def marked(w, x):
    return ag.tanh(x @ w)


ag.viz.transparent(marked)


def generator(w, x):
    yield ag.tanh(x @ w)


def model_calling(sublayer):
    """A model named `inline` (so that titles agree) whose first step is `sublayer(w, x)`."""
    def inline(w, x):
        return ag.sum(sublayer(w, x) * 0.5)
    return inline


TRANSPARENT = {
    "marked": marked,
    "lambda": lambda w, x: ag.tanh(x @ w),
    "comprehension": lambda w, x: [ag.tanh(x @ v) for v in (w,)][0],
    "generator": lambda w, x: next(generator(w, x)),
}


def pictures(graph):
    """Everything a user sees of a graph: the listing and the DOT text at every depth."""
    return [graph.summary()] + [graph.to_dot(depth=d, backward=b)
                                for d in (None, 0, 1, 2, 3) for b in (False, True)]


@pytest.fixture
def w_x(rng):
    return rng.standard_normal((3, 4)), rng.standard_normal((5, 3))


@pytest.mark.parametrize("kind", sorted(TRANSPARENT))
def test_a_transparent_helper_leaves_the_picture_as_if_written_inline(kind, w_x):
    reference = ag.viz.trace(inline, *w_x)
    assert [(op.label, repr(op.scope)) for op in reference.ops] == [
        ("matmul", "inline"), ("tanh", "inline"), ("mul", "inline"), ("sum", "inline")]
    factored = ag.viz.trace(model_calling(TRANSPARENT[kind]), *w_x)
    assert pictures(factored) == pictures(reference)


@pytest.mark.parametrize("function", [helper, _helper, __helper], ids=lambda f: f.__name__)
def test_a_helper_is_a_cluster_of_its_own_whatever_its_name(function, w_x, tmp_path):
    g = ag.viz.trace(model_calling(function), *w_x)
    name = function.__name__
    assert [(op.label, repr(op.scope)) for op in g.ops] == [("matmul", f"inline/{name}"),
                                                            ("tanh", f"inline/{name}"),
                                                            ("mul", "inline"), ("sum", "inline")]
    assert pictures(g) != pictures(ag.viz.trace(inline, *w_x))
    assert g.view(1).count() == ag.viz.trace(inline, *w_x).view(1).count() - 1  # 2 ops -> 1 box


def residual(x, sublayer, *args):
    """x + sublayer(x, *args): the wiring of every Transformer block."""
    return x + sublayer(x, *args)


@ag.viz.transparent
def marked_residual(x, sublayer, *args):
    """The same wiring, marked: the picture shows the sublayer, not the wiring."""
    return x + sublayer(x, *args)


def block(x, w):
    return ag.tanh(x @ w)


def two_blocks_with(wiring):
    def two_blocks(w, x):
        return wiring(wiring(x, block, w), block, w)
    return two_blocks


def test_marking_wiring_transparent_shows_the_sublayers_it_calls(rng):
    w, x = rng.standard_normal((3, 3)), rng.standard_normal((2, 3))
    plain = [repr(op.scope) for op in ag.viz.trace(two_blocks_with(residual), w, x).ops]
    assert plain == ["two_blocks/residual #1/block"] * 2 + ["two_blocks/residual #1"] + [
        "two_blocks/residual #2/block"] * 2 + ["two_blocks/residual #2"]
    marked = [repr(op.scope) for op in ag.viz.trace(two_blocks_with(marked_residual), w, x).ops]
    assert marked == ["two_blocks/block #1"] * 2 + ["two_blocks"] + ["two_blocks/block #2"] * 2 + [
        "two_blocks"]


WIRED = {  # the scope of each op of two_blocks below, by the wiring it is written with
    "residual": ["two_blocks/residual #1/block"] * 2 + ["two_blocks/residual #1"]
    + ["two_blocks/residual #2/block"] * 2 + ["two_blocks/residual #2"],
    "marked_residual": ["two_blocks/block #1"] * 2 + ["two_blocks"]
    + ["two_blocks/block #2"] * 2 + ["two_blocks"]}


@pytest.mark.parametrize("wiring", [residual, marked_residual], ids=lambda f: f.__name__)
def test_wiring_handed_a_lambda_is_drawn_as_its_caller_only_when_marked(wiring, rng):
    """What it is handed does not decide: only the marker makes wiring transparent."""
    w, x = rng.standard_normal((3, 3)), rng.standard_normal((2, 3))

    def two_blocks(w, x):
        return wiring(wiring(x, lambda h: block(h, w)), lambda h: block(h, w))
    assert [repr(op.scope) for op in ag.viz.trace(two_blocks, w, x).ops] == WIRED[
        wiring.__name__]


@ag.viz.alias
def another_name(w, x):
    """helper, under the name its callers know it by."""
    return helper(w, x)


def unmarked_name(w, x):
    """The same body as another_name, unmarked."""
    return helper(w, x)


@ag.viz.alias
def with_keywords(w, x):
    return helper(x=x, w=w)


@ag.viz.alias
def helper_and_more(w, x):
    return helper(w, x) * 2.0


def test_an_alias_and_the_function_it_calls_are_one_cluster_under_its_name(w_x):
    g = ag.viz.trace(model_calling(another_name), *w_x)
    assert [(op.label, repr(op.scope)) for op in g.ops] == [
        ("matmul", "inline/another_name"), ("tanh", "inline/another_name"), ("mul", "inline"),
        ("sum", "inline")]
    assert ag.viz.capture(model_calling(another_name), *w_x, op="tanh", scope="another_name")
    with pytest.raises(ValueError, match="no 'tanh' op ran in a function named 'helper'"):
        ag.viz.capture(model_calling(another_name), *w_x, op="tanh", scope="helper")
    keywords = ag.viz.trace(model_calling(with_keywords), *w_x)  # the marker decides, not the
    assert [repr(op.scope) for op in keywords.ops][:2] == ["inline/with_keywords"] * 2  # body
    more = ag.viz.trace(model_calling(helper_and_more), *w_x)  # the call it makes, then its own
    assert [repr(op.scope) for op in more.ops][:3] == ["inline/helper_and_more"] * 3
    traced = ag.viz.trace(another_name, *w_x)  # traced itself: its call is the outermost scope
    assert [repr(op.scope) for op in traced.ops] == ["another_name"] * 2


def test_without_the_marker_a_function_that_only_calls_another_is_a_cluster_of_its_own(w_x):
    g = ag.viz.trace(model_calling(unmarked_name), *w_x)
    assert [repr(op.scope) for op in g.ops] == ["inline/unmarked_name/helper"] * 2 + [
        "inline"] * 2
    assert ag.viz.capture(model_calling(unmarked_name), *w_x, op="tanh", scope="helper")


def test_recording_restores_the_profiler_it_found_even_when_the_call_fails(rng):
    events = []

    def outer_profiler(frame, event, arg):  # a user's own profiler, running around the picture
        events.append(event)

    def failing(x):
        return ag.tanh(x) @ x[:2]  # (3,) @ (2,): matmul refuses the inner dimensions

    sys.setprofile(outer_profiler)
    try:
        g = ag.viz.trace(helper, rng.standard_normal((3, 2)), rng.standard_normal((4, 3)))
        assert sys.getprofile() is outer_profiler
        with pytest.raises(ValueError, match="matmul"):
            ag.viz.trace(failing, rng.standard_normal(3))
        assert sys.getprofile() is outer_profiler
    finally:
        sys.setprofile(None)
    assert [op.label for op in g.ops] == ["matmul", "tanh"] and "call" in events
