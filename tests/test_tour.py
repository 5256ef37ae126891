"""docs/tour.py, the tour notebook in jupytext's percent format, runs top to bottom in a
fresh kernel as a reader would run it (jupytext makes the notebook, nbclient executes it):
every cell without an error, its own checks (asserts against hand derivations) included,
and every picture it promises is drawn."""
import pathlib
import time

import pytest

jupytext = pytest.importorskip("jupytext")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = pathlib.Path(__file__).resolve().parents[1]
TOUR = ROOT / "docs" / "tour.py"
BUDGET_SECONDS = 180  # the tour's promise: about three minutes of a CPU (measured: see below)


def outputs_of(notebook, kind):
    return [output for cell in notebook.cells if cell.cell_type == "code"
            for output in cell.get("outputs", []) if kind in output.get("data", {})]


@pytest.mark.usefixtures("dot")  # the tour draws a picture and an explorer
def test_the_tour_runs_top_to_bottom_and_draws_its_pictures():
    notebook = jupytext.read(TOUR)
    assert notebook.metadata["kernelspec"]["name"] == "python3"
    client = nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(ROOT)}})
    started = time.perf_counter()
    client.execute()  # raises CellExecutionError naming the cell that failed
    seconds = time.perf_counter() - started
    errors = [output for cell in notebook.cells if cell.cell_type == "code"
              for output in cell.get("outputs", []) if output.get("output_type") == "error"]
    assert not errors
    assert len(outputs_of(notebook, "image/svg+xml")) == 1  # the attention call's graph
    assert len(outputs_of(notebook, "image/png")) == 2  # the attention heatmap and the health
    pages = outputs_of(notebook, "text/html")  # the explorer, inline
    assert len(pages) == 1 and "autogradExplorer" in "".join(pages[0]["data"]["text/html"])
    printed = "".join(output.get("text", "") for cell in notebook.cells
                      if cell.cell_type == "code" for output in cell.get("outputs", []))
    assert "matches the hand derivation" in printed and "bits per character" in printed
    print(f"\nthe tour ran in {seconds:.0f} s (its budget: {BUDGET_SECONDS} s on a quiet machine)")
