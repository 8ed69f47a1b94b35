"""The notebooks in examples/ run end to end, as a researcher would run them: every
cell, in order, in a Jupyter kernel that is this venv's Python."""

import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="nbformat is pinned in requirements-dev.txt")
nbclient = pytest.importorskip("nbclient", reason="nbclient is pinned in requirements-dev.txt")

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "examples").glob("*.ipynb"))


def test_there_is_a_notebook():
    assert [p.name for p in NOTEBOOKS] == ["quickstart.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_end_to_end(path, venv_kernel, tmp_path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    # Committed without outputs: what a reader sees on opening it is what running it gives.
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code), f"{path.name}: clear its outputs"
    # One more cell: which Python ran the notebook.
    nb.cells.append(nbformat.v4.new_code_cell("import sys; print(sys.executable)"))
    work = tmp_path / "cwd"
    work.mkdir()
    client = nbclient.NotebookClient(nb, kernel_name=venv_kernel, timeout=300, resources={"metadata": {"path": str(work)}})
    client.execute()  # raises CellExecutionError naming the cell on any error

    assert nb.cells[-1].outputs[0]["text"].strip() == sys.executable
    outputs = [o for c in code for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    # The rich displays a researcher sees: the runs as HTML tables, the plots as images.
    html = [o["data"]["text/html"] for o in outputs if o.output_type == "execute_result" and "text/html" in o.get("data", {})]
    assert any("<strong>vmlab.Results</strong>" in h for h in html) and any("<strong>vmlab.Result</strong>" in h for h in html)
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 2
    # It leaves nothing in the directory it runs in: its files are in a temporary one.
    assert list(work.iterdir()) == []
    if path.name == "quickstart.ipynb":
        (made,) = (tmp_path / "tmp").glob("vmlab-quickstart-*")
        assert {"l1-size.sqlite", "runs.csv", "runs.parquet"} <= {p.name for p in made.iterdir()}
