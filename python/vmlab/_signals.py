"""SIGTERM handled like Ctrl-C, so that one cleanup path serves both."""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived. A KeyboardInterrupt, so ``except KeyboardInterrupt`` cleanup
    (a sweep stopping its workers, a run stopping its engine) handles it too."""


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated()


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated` in the main thread, unless
    the program has its own SIGTERM handler (which is left alone)."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def exit_status(e: KeyboardInterrupt) -> int:
    """A shell's status for a process ended by the signal: 128 + its number."""
    return 128 + (signal.SIGTERM if isinstance(e, Terminated) else signal.SIGINT)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block ends, then take effect as usual: a step
    that must not be cut in two (stopping workers, moving finished files into place)
    runs whole. Only in the main thread, and only for signals with a Python-level
    handler or the default action (an ignored signal stays ignored)."""
    pending: list[int] = []
    saved: dict[int, object] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            old = signal.getsignal(sig)
            if old is not None and old is not signal.SIG_IGN:
                saved[sig] = signal.signal(sig, lambda signum, frame: pending.append(signum))
    try:
        yield
    finally:
        for sig, old in saved.items():
            signal.signal(sig, old)
        for sig in dict.fromkeys(pending):
            signal.raise_signal(sig)
