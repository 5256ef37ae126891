"""Every ```python block of README.md, and of docs/transformations.md (the transformations
the README leaves to it), runs, each on its own (a fresh namespace), except one that opens
with "# continues the <first|second|...> block", which runs after that block of the same
page, in a copy of its namespace: so a reader can paste any block alone, or knows which to
paste first, and the examples cannot rot."""
import csv
import pathlib
import re

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
TRANSFORMATIONS = ROOT / "docs" / "transformations.md"
ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")
CONTINUES = re.compile(r"# continues the (\w+) block\b")


def python_blocks(text):
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def continued(block):
    """The index of the block this one continues (its first line says so), else None."""
    found = CONTINUES.match(block)
    return ORDINALS.index(found.group(1)) if found else None


def test_readme_has_examples():
    assert len(python_blocks(README.read_text())) >= 2


def run_blocks(page):
    """Run the page's python blocks in order (a continued block in a copy of its block's
    namespace) -> the namespace each block left."""
    namespaces = []
    for i, block in enumerate(python_blocks(page.read_text())):
        before = continued(block)
        assert before is None or before < i, f"{page.name}: block {i + 1} continues a later block"
        namespace = dict(namespaces[before] if before is not None else {}, __name__="readme")
        exec(compile(block, f"{page.name} python block {i + 1}", "exec"), namespace)
        namespaces.append(namespace)
    return namespaces


def write_reviews_csv(path, n=600, seed=0):
    """The CSV that "Train on your data" reads: short reviews whose label (a word) is told by
    which of two word lists their adjectives come from, among neutral filler words."""
    rng = np.random.default_rng(seed)
    good, bad = ("great", "lovely", "solid", "superb"), ("awful", "broken", "flimsy", "dull")
    filler = ("the", "kettle", "lamp", "book", "was", "really", "quite", "and", "arrived")
    rows = [("text", "label")]
    for label in rng.permutation(np.arange(n) % 2):
        words = list(rng.choice(filler, 6)) + list(rng.choice(good if label else bad, 2))
        rows.append((" ".join(rng.permutation(words)).capitalize() + ".",
                     "positive" if label else "negative"))
    with open(path, "w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows(rows)


@pytest.mark.usefixtures("dot")  # the pictures section writes an explorer
def test_readme_examples_run(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # "Train on your data" reads reviews.csv and writes runs/
    write_reviews_csv(tmp_path / "reviews.csv")
    namespaces = run_blocks(README)
    namespace = {k: v for n in namespaces for k, v in n.items()}
    printed = capsys.readouterr().out
    # the outputs the README promises in its comments
    assert "Dense (3, 2) (2,)" in printed
    # the classifier learned the reviews' labels, saved its run and drew its curves
    accuracy = float(re.search(r"validation accuracy ([\d.]+)%", printed).group(1))
    assert accuracy >= 95
    assert (tmp_path / "runs/my-reviews/history.json").exists()
    assert (tmp_path / "runs/my-reviews/curves.png").stat().st_size > 1000
    # "[~0, 0.5, 1]": the README's softplus primitive has the logistic function as its derivative
    ag, softplus = namespace["ag"], namespace["softplus"]
    x = np.array([-30.0, 0.0, 30.0])
    np.testing.assert_allclose(ag.gradient(lambda x: ag.sum(softplus(x)), x)[0],
                               1 / (1 + np.exp(-x)), rtol=1e-12, atol=1e-15)


def test_the_transformations_page_examples_run(capsys):
    """docs/transformations.md: jacobian, hessian, hvp, jvp and checkpoint on the dense layer
    (the blocks assert their own identities), and a fast rule against its plain function."""
    namespaces = run_blocks(TRANSFORMATIONS)
    assert len(namespaces) >= 3
    # the Jacobian's shapes its comment promises: J.w (5, 2, 3, 2), J.b (5, 2, 2)
    assert "(5, 2, 3, 2) (5, 2, 2)" in capsys.readouterr().out
    namespace = {k: v for n in namespaces for k, v in n.items()}
    assert "scaled_tanh_rule" in namespace  # the fast rule's block ran
