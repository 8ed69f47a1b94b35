"""progress=True in a Jupyter notebook: the engine's bars are watched, not drawn on stderr,
and shown in the cell's output (vmlab._progress); outside a kernel nothing changes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap

import pytest

import vmlab
from vmlab import _core, _progress

from test_api import subprocess_generate


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    """A trace file: its length is known, so a bar has an exact total."""
    out = tmp_path_factory.mktemp("progress") / "gups.vmt"
    subprocess_generate(out, "gups", "accesses=1M", "footprint=16M")
    return out


def records(r) -> int:
    return r.get("totals.records")


# --- The binding: what it reports while a run goes on.

def test_the_binding_reports_positions_up_to_the_total_then_the_end(trace):
    calls = []
    doc = _core.run("tiny", trace=str(trace), progress=True, on_progress=lambda *a: calls.append(a))
    total = vmlab.Result(json.loads(doc)).get("totals.records")
    assert calls, "no progress reported"
    assert {c[0] for c in calls} == {1} and {c[1] for c in calls} == {""}
    assert all(c[3] == total for c in calls), "a trace's total is its record count"
    positions = [c[2] for c in calls]
    assert positions == sorted(positions) and all(a != b for a, b in zip(calls, calls[1:])), "each report is a change"
    assert calls[-1][2:] == (total, total, True)
    assert not any(c[4] for c in calls[:-1])
    assert calls[0][2] < total, "nothing reported while the run went on"


def test_each_bar_of_a_call_is_reported_in_order(trace):
    calls = []
    _core.pt_compare(["radix", "hashed"], config="tiny", trace=str(trace), progress=True,
                     on_progress=lambda *a: calls.append(a))
    ends = [c for c in calls if c[4]]
    assert [c[0] for c in ends] == [1, 2] and "radix" in ends[0][1] and "hashed" in ends[1][1]
    assert [c[0] for c in calls] == sorted(c[0] for c in calls)


def test_an_exception_in_the_observer_stops_the_run_and_is_raised(trace):
    class Stop(Exception):
        pass

    def observer(*a):
        raise Stop

    with pytest.raises(Stop):
        _core.run("tiny", trace=str(trace), progress=True, on_progress=observer)
    # The engine is usable afterwards (the stop request was cleared).
    assert records(vmlab.run("tiny", trace=trace)) > 0


def test_without_progress_nothing_is_reported(trace):
    calls = []
    _core.run("tiny", trace=str(trace), progress=False, on_progress=lambda *a: calls.append(a))
    assert calls == []


# --- The notebook bar, drawn through a stand-in for IPython's display.

class Display:
    """IPython.display.display(data, raw=True, display_id=True): the handles made."""

    def __init__(self):
        self.handles = []

    def __call__(self, data, raw, display_id):
        assert raw and display_id is True
        h = Handle(data)
        self.handles.append(h)
        return h


class Handle:
    def __init__(self, data):
        self.data = data

    def update(self, data, raw):
        assert raw
        self.data = data


def test_a_bar_shows_total_and_eta_then_its_end():
    d = Display()
    bars = _progress.NotebookProgress(d)
    bars(1, "", 0, 1000, False)
    assert "0% 0/1,000 records, ETA" in d.handles[0].data["text/plain"]
    bars(1, "", 250, 1000, False)  # within REDRAW_EVERY of the last draw: not redrawn yet
    bars.close(ok=True)
    [h] = d.handles
    assert "100% 250/250 records in" in h.data["text/plain"]  # an estimated total becomes what was read
    assert '<progress max="1" value="1.0000"' in h.data["text/html"]


def test_an_earlier_bar_ends_done_and_the_last_stopped_on_error():
    d = Display()
    bars = _progress.NotebookProgress(d)
    bars(1, "[1/2] a", 10, 10, True)
    bars(2, "[2/2] b & c", 3, 10, False)
    bars.close(ok=False)
    first, second = (h.data for h in d.handles)
    assert "[1/2] a 100% 10/10 records" in first["text/plain"]
    assert second["text/plain"].endswith(", stopped") and "30% 3/10 records" in second["text/plain"]
    assert "b &amp; c" in second["text/html"] and "b & c" not in second["text/html"]


def test_an_unknown_total_shows_the_count_without_a_bar():
    d = Display()
    bars = _progress.NotebookProgress(d)
    bars(1, "", 5000, None, False)
    assert d.handles[0].data["text/plain"].startswith("5,000 records in")
    assert "value=" not in d.handles[0].data["text/html"]


# --- Where the bar is drawn.

def test_outside_a_kernel_the_python_side_draws_nothing(trace, monkeypatch, capfd):
    assert not _progress.in_notebook()
    seen = {}
    real = _core.run

    def spy(*a, **kw):
        seen.update(kw)
        return real(*a, **kw)

    monkeypatch.setattr(_core, "run", spy)
    vmlab.run("tiny", trace=trace, progress=True)
    assert seen["progress"] is True and "on_progress" not in seen  # the engine draws it, on stderr
    out, err = capfd.readouterr()
    assert out == "" and err == ""  # a short run on a stderr that is no terminal: no line yet


def test_ipykernel_imported_without_a_kernel_is_not_a_notebook():
    code = textwrap.dedent("""
        import ipykernel, IPython
        from vmlab import _progress
        assert not _progress.in_notebook()
        IPython.InteractiveShell.instance()  # a terminal-like shell: no kernel
        assert not _progress.in_notebook()
        print("ok")
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr


def test_in_a_jupyter_kernel_the_bar_is_in_the_cells_output(trace, venv_kernel, tmp_path):
    nbformat = pytest.importorskip("nbformat", reason="nbformat is pinned in requirements-dev.txt")
    nbclient = pytest.importorskip("nbclient", reason="nbclient is pinned in requirements-dev.txt")
    cells = [
        f"import vmlab\nr = vmlab.run('tiny', trace={str(trace)!r}, progress=True)\nprint('records', r.get('totals.records'))",
        f"rs = vmlab.run_many(['tiny', ('tiny', {{'os.page_size': '2M'}})], trace={str(trace)!r}, progress=True)\n"
        "print('records', rs[0].get('totals.records'))",
        f"r = vmlab.run('tiny', trace={str(trace)!r})\nprint('records', r.get('totals.records'))",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbclient.NotebookClient(nb, kernel_name=venv_kernel, timeout=120).execute()

    for cell, shown in zip(nb.cells, [True, True, False]):
        printed = [o["text"] for o in cell.outputs if o.output_type == "stream" and o["name"] == "stdout"]
        n = int(re.fullmatch(r"records (\d+)\n", "".join(printed)).group(1))
        bars = [o for o in cell.outputs if o.output_type == "display_data"]
        assert not [o for o in cell.outputs if o.output_type == "stream" and o["name"] == "stderr"]
        if not shown:
            assert bars == [], "a bar without progress=True"
            continue
        # One bar, updated in place to its final state: 100% and the records read.
        [bar] = bars
        plain, markup = bar["data"]["text/plain"], bar["data"]["text/html"]
        assert f"| 100% {n:,}/{n:,} records in " in plain and plain.startswith("|" + "#" * _progress._BAR_CELLS + "|")
        assert '<progress max="1" value="1.0000"' in markup and f"100% {n:,}/{n:,} records" in markup
