"""The README's promise for Graphviz's `dot`: on a machine without it the picture tests skip,
with the reason, and none fails; AUTOGRAD_LITE_REQUIRE_DOT=1, as CI sets it, turns the skip
into an error (the `dot` fixture, conftest.py). Each case runs pytest in a fresh process
whose PATH is one empty folder."""
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
PICTURE_TESTS = ["tests/test_viz.py", "tests/test_viz_models.py", "tests/test_viz_explorer.py"]
REASON = "Graphviz's dot is not on PATH"


def pytest_without_dot(tmp_path, tests, **environment):
    """pytest on `tests` with no `dot` on PATH and no AUTOGRAD_LITE_REQUIRE_* but those in
    `environment` -> ({outcome: count} of its last line, its output)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {name: value for name, value in os.environ.items()
           if not name.startswith("AUTOGRAD_LITE_REQUIRE_")}
    env.update(environment, PATH=str(empty))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                           *tests], cwd=ROOT, env=env, capture_output=True, text=True)
    last = done.stdout.strip().splitlines()[-1]
    return {outcome: int(n) for n, outcome in re.findall(r"(\d+) (\w+)", last)}, done.stdout


def test_without_dot_the_picture_tests_skip_with_the_reason(tmp_path):
    counts, output = pytest_without_dot(tmp_path, PICTURE_TESTS)
    assert set(counts) == {"passed", "skipped"}, output  # no failed, no error
    reasons = re.findall(r"^SKIPPED \[(\d+)\] [^:]+:\d+: (.*)$", output, re.M)
    assert {reason for _, reason in reasons} == {REASON}, output
    assert sum(int(n) for n, _ in reasons) == counts["skipped"]


def test_where_dot_is_required_its_absence_fails_the_test(tmp_path):
    counts, output = pytest_without_dot(tmp_path, ["tests/test_viz.py::test_notebook_svg"],
                                        AUTOGRAD_LITE_REQUIRE_DOT="1")
    assert counts == {"error": 1}, output  # pytest's word for a fixture that fails
    assert f"{REASON}, and AUTOGRAD_LITE_REQUIRE_DOT=1 requires it" in output
