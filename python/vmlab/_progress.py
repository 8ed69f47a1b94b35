"""Progress in a Jupyter notebook.

The engine draws its progress on stderr (a bar on a terminal, a line every 10 s
elsewhere: vmlab::api::Progress). A notebook does not show an IPython kernel's stderr
file descriptor, so inside a kernel the engine's bars are watched instead of drawn
(vmlab::api::watch_progress): the binding calls :class:`NotebookProgress` with each
bar's position, and it keeps one output line per bar up to date in the cell's output
(``IPython.display``, no widgets needed). Outside a kernel nothing here is used.
"""

from __future__ import annotations

import html
import math
import sys
import time
from typing import Any, Callable

# Redraw a bar at most this often (seconds); its last state is always drawn.
REDRAW_EVERY = 0.2
_BAR_CELLS = 30


def in_notebook() -> bool:
    """True inside an IPython kernel (Jupyter, VS Code, nbclient): where stderr's file
    descriptor is not shown, but what IPython displays is."""
    if "ipykernel" not in sys.modules:
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def _count(n: int) -> str:
    return f"{n:,}"


def _duration(secs: float) -> str:
    secs = max(0, round(secs))
    h, rest = divmod(secs, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class _Bar:
    """One engine bar: its display handle and what it last showed."""

    def __init__(self, label: str, display: Callable[..., Any]):
        self.label = label
        self.start = time.monotonic()
        self.end: float | None = None
        self.pos = 0
        self.len: int | None = None
        self.finished = False
        self.drawn_at = -math.inf
        self.final = False
        self.handle = display({"text/plain": label}, raw=True, display_id=True)

    def text(self, state: str) -> tuple[str, float | None]:
        """The line, and the fraction done (None if the total is unknown)."""
        secs = (self.end if self.end is not None else time.monotonic()) - self.start
        rate = self.pos / secs if secs > 0 else 0.0
        label = f"{self.label} " if self.label else ""
        speed = f"{rate / 1e6:.2f} M records/s"
        if state == "done":
            return f"{label}100% {_count(self.pos)}/{_count(self.pos)} records in {_duration(secs)} ({speed})", 1.0
        if not self.len:
            frac = None
            line = f"{label}{_count(self.pos)} records in {_duration(secs)} ({speed})"
        else:
            # An estimated total (a workload's) is a ceiling until the end.
            pos = min(self.pos, self.len)
            frac = pos / self.len
            eta = f"ETA {_duration((self.len - pos) / rate)}" if rate > 0 else "ETA ?"
            line = f"{label}{frac:.0%} {_count(pos)}/{_count(self.len)} records, {eta} ({speed})"
        if state == "stopped":
            line += ", stopped"
        return line, frac

    def draw(self, state: str = "running") -> None:
        line, frac = self.text(state)
        if frac is None:
            plain, value = line, ""
        else:
            cells = round(_BAR_CELLS * frac)
            plain, value = "|" + "#" * cells + " " * (_BAR_CELLS - cells) + "| " + line, f' value="{frac:.4f}"'
        markup = (f'<div class="vmlab-progress"><progress max="1"{value} style="width:20em;vertical-align:middle">'
                  f'</progress> <code>{html.escape(line)}</code></div>')
        self.handle.update({"text/plain": plain, "text/html": markup}, raw=True)
        self.drawn_at = time.monotonic()
        self.final = state != "running"


class NotebookProgress:
    """The engine's progress for one call, as output lines in the running cell.

    Called by the binding as ``(bar, label, pos, total, finished)`` for each bar that
    changed (``total`` None when unknown): one output line per bar. A finished bar that a
    later one follows is drawn done (100%, the records it read); :meth:`close` draws the
    last bar done if the call succeeded, else where it stopped.
    """

    def __init__(self, display: Callable[..., Any] | None = None):
        if display is None:
            from IPython.display import display
        self._display = display
        self._bars: dict[int, _Bar] = {}

    def __call__(self, bar: int, label: str, pos: int, total: int | None, finished: bool) -> None:
        b = self._bars.get(bar)
        if b is None:
            for prev in self._bars.values():
                if not prev.final:
                    prev.draw("done")
            b = self._bars[bar] = _Bar(label, self._display)
        b.pos, b.len = pos, total
        if finished and not b.finished:
            b.finished, b.end = True, time.monotonic()
        if time.monotonic() - b.drawn_at >= REDRAW_EVERY:
            b.draw()

    def close(self, ok: bool) -> None:
        """The call ended: well (``ok``) or with an error or an interrupt."""
        bars = list(self._bars.values())
        for i, b in enumerate(bars):
            if not b.final:
                b.draw("done" if ok or (b.finished and i < len(bars) - 1) else "stopped")


def call(fn: Callable[..., Any], *args: Any, progress: bool, **kwargs: Any) -> Any:
    """``fn(*args, progress=progress, **kwargs)``, a ``_core`` call, with its progress
    shown in the notebook when ``progress`` is asked for inside a kernel; elsewhere the
    engine draws it on stderr as usual."""
    if not (progress and in_notebook()):
        return fn(*args, progress=progress, **kwargs)
    bars = NotebookProgress()
    ok = False
    try:
        out = fn(*args, progress=True, on_progress=bars, **kwargs)
        ok = True
        return out
    finally:
        bars.close(ok)
