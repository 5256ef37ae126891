"""Every ```python block of README.md, executed in order in one namespace, so the
examples cannot rot."""
import pathlib
import re

import numpy as np

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def python_blocks(text):
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def test_readme_has_examples():
    assert len(python_blocks(README.read_text())) >= 2


def test_readme_examples_run(capsys):
    namespace = {"__name__": "readme"}
    for i, block in enumerate(python_blocks(README.read_text())):
        exec(compile(block, f"README.md python block {i + 1}", "exec"), namespace)
    printed = capsys.readouterr().out
    # the outputs the README promises in its comments
    assert "Dense (3, 2) (2,)" in printed
    # "[~0, 0.5, 1]": the README's softplus primitive has the logistic function as its derivative
    ag, softplus = namespace["ag"], namespace["softplus"]
    x = np.array([-30.0, 0.0, 30.0])
    np.testing.assert_allclose(ag.gradient(lambda x: ag.sum(softplus(x)), x)[0],
                               1 / (1 + np.exp(-x)), rtol=1e-12, atol=1e-15)
