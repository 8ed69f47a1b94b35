"""The results store: one SQLite file, one row per finished run.

Crash safety comes from SQLite itself: WAL journaling and one transaction per finished
run, written only by the sweep's parent process. A sweep killed at any moment (even
``kill -9``) leaves every committed run intact and loses only the runs in flight; the
run key is the primary key, so a restarted sweep can neither duplicate nor overwrite a
finished run.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import socket
import sqlite3
import stat
import threading
import time
import urllib.parse
import uuid
from typing import Any, Iterator, Mapping

from . import _core, _table
from ._files import path_arg
from .api import _bool_arg, _form_arg

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    key         TEXT PRIMARY KEY,  -- hash of resolved config, source content, vmlab version
    sweep       TEXT NOT NULL,     -- the sweep spec's name
    design      TEXT NOT NULL,     -- the [[config]] entry's name
    config      TEXT NOT NULL,     -- preset name or TOML path, as given
    overrides   TEXT NOT NULL,     -- JSON list of "key=value"
    axes        TEXT NOT NULL,     -- JSON object: the swept keys' values for this run
    source      TEXT NOT NULL,     -- JSON: {"workload": name, "params": {...}} or {"trace": path}
    seed        INTEGER NOT NULL,
    status      TEXT NOT NULL,     -- "ok" or "error"
    error       TEXT,              -- the one-line error of a failed run
    stats       TEXT,              -- the full stats document (JSON), for "ok" runs
    seconds     REAL NOT NULL,     -- wall-clock seconds of the run
    host        TEXT NOT NULL,
    version     TEXT NOT NULL,     -- vmlab version
    finished_at REAL NOT NULL      -- Unix time
);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS claims (
    key         TEXT PRIMARY KEY,  -- a run some sweep has taken on and not yet recorded
    owner       TEXT NOT NULL,     -- that sweep: host:pid:random
    host        TEXT NOT NULL,
    pid         INTEGER NOT NULL,
    heartbeat   REAL NOT NULL      -- Unix time the owner last showed it was alive
);
"""

# The tables of a results store: a sweep adds them to a new or empty file, or to a store,
# never to another program's database.
_STORE_TABLES = {"runs", "meta", "claims"}
# The columns of table `runs`, in order.
_RUN_COLUMNS = ["key", "sweep", "design", "config", "overrides", "axes", "source", "seed", "status", "error", "stats",
                "seconds", "host", "version", "finished_at"]


def _tables(db: sqlite3.Connection) -> set[str]:
    return {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


# A claim whose owner has not shown itself alive for this long is taken over (a sweep on
# another host that died; on this host a dead owner is seen at once).
CLAIM_TIMEOUT = 600.0
# How often a sweep refreshes its claims' heartbeat.
HEARTBEAT_EVERY = 60.0


class StoreError(_core.VmlabError):
    """A results store that cannot be opened, read or written; the message names the file."""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _guarded(method):
    """SQLite's errors as one-line StoreErrors naming the file."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except sqlite3.Error as e:
            raise _store_error(self.path, e) from None

    return wrapper


class Store:
    """A results store: one SQLite file, one row per finished run.

    Parameters
    ----------
    path : str or os.PathLike
        The store's file.
    create : bool
        Create the file if it is missing (else a missing file is an error).
    readonly : bool
        Only read the store: it must exist and be a results store, and no file is
        created or changed (not even SQLite's ``-wal`` and ``-shm`` files, unless a
        sweep writing the store has them open).

    Raises
    ------
    StoreError
        The path is a directory, a device, a FIFO or a socket, is missing (with
        ``create=False`` or ``readonly=True``), or is not a results store (named).
    """

    def __init__(self, path: str | os.PathLike, *, create: bool = True, readonly: bool = False):
        self.path = os.fspath(path)
        try:
            mode = os.stat(self.path).st_mode
        except FileNotFoundError:
            mode = None
        except OSError as e:
            raise StoreError(f"{self.path}: cannot open: {e.strerror}") from None
        if mode is None and (readonly or not create):
            raise StoreError(f"{self.path}: no results store there")
        if mode is not None and stat.S_ISDIR(mode):
            raise StoreError(f"{self.path}: is a directory, not a results store")
        if mode is not None and not stat.S_ISREG(mode):
            raise StoreError(f"{self.path}: not a vmlab results store (not a regular file: a device, FIFO or socket)")
        if readonly:
            self._db = self._open_readonly()
            return
        # Switching a new file to WAL does not wait for a busy database (SQLite's busy
        # timeout does not cover it): two sweeps that create one store together retry.
        deadline = time.monotonic() + 30
        while True:
            db = None
            try:
                db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
                tables = _tables(db)
                if tables - _STORE_TABLES:
                    db.close()
                    raise StoreError(f"{self.path}: not a vmlab results store (an SQLite database with other tables: "
                                     f"{', '.join(sorted(tables - _STORE_TABLES)[:5])}); name another store")
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
                db.executescript(_SCHEMA)
                db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
                self._db = db
                break
            except sqlite3.OperationalError as e:
                if db is not None:
                    db.close()
                if "locked" not in str(e) or time.monotonic() > deadline:
                    raise _store_error(self.path, e) from None
                time.sleep(0.05)
            except sqlite3.Error as e:
                if db is not None:
                    db.close()
                raise _store_error(self.path, e) from None

    def _open_readonly(self) -> sqlite3.Connection:
        """A read-only connection that creates no file. SQLite opens a WAL database
        read-only by creating its ``-wal`` and ``-shm`` files (and leaves them): with no
        ``-wal`` file no sweep has the store open and every run is in the file itself, so
        it is read as immutable; with one (a sweep running, or killed), through the WAL,
        which holds that sweep's latest runs."""
        uri = "file:" + urllib.parse.quote(os.path.abspath(self.path)) + "?mode=ro"
        if not os.path.exists(self.path + "-wal"):
            uri += "&immutable=1"
        db = None
        try:
            db = sqlite3.connect(uri, uri=True, timeout=30, isolation_level=None)
            columns = {row[1] for row in db.execute("PRAGMA table_info(runs)")}
            if not columns:
                raise StoreError(f"{self.path}: not a vmlab results store (no table `runs`"
                                 f"{'; the file is empty' if os.path.getsize(self.path) == 0 else ''})")
            missing = [c for c in _RUN_COLUMNS if c not in columns]
            if missing:
                raise StoreError(f"{self.path}: not a vmlab results store (table `runs` has no column "
                                 f"{', '.join(f'`{c}`' for c in missing[:5])})")
            return db
        except BaseException as e:
            if db is not None:
                db.close()
            if isinstance(e, sqlite3.Error):
                raise _store_error(self.path, e) from None
            raise

    def close(self) -> None:
        """Close the connection."""
        self._db.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @_guarded
    def finished_keys(self) -> set[str]:
        """Keys of the runs recorded successfully (a failed run is retried).

        Returns
        -------
        set of str
        """
        return {k for (k,) in self._db.execute("SELECT key FROM runs WHERE status = 'ok'")}

    @_guarded
    def record(self, run: Mapping[str, Any], status: str, stats: dict | None, error: str | None, seconds: float,
               version: str) -> bool:
        """Record one finished run in its own transaction.

        Parameters
        ----------
        run : mapping
            The run: ``key``, ``sweep``, ``design``, ``config``, ``overrides``,
            ``axes``, ``source``, ``seed`` (docs/sweeps.md, "The store").
        status : {"ok", "error"}
        stats : dict or None
            The stats document of an ``"ok"`` run.
        error : str or None
            The one-line error of a failed run.
        seconds : float
            The run's wall-clock seconds.
        version : str
            The vmlab version that ran it.

        Returns
        -------
        bool
            False if the key was already recorded as successful (then nothing
            changes), else True.

        Raises
        ------
        StoreError
            The store cannot be written (named).
        """
        row = (
            run["key"], run["sweep"], run["design"], run["config"], json.dumps(run["overrides"]),
            json.dumps(run["axes"], sort_keys=True), json.dumps(run["source"], sort_keys=True), run["seed"],
            status, error, json.dumps(stats, sort_keys=True) if stats is not None else None, seconds,
            socket.gethostname(), version, time.time(),
        )
        with self._db:  # BEGIN ... COMMIT
            cur = self._db.execute("SELECT status FROM runs WHERE key = ?", (run["key"],)).fetchone()
            if cur is not None and cur[0] == "ok":
                return False
            self._db.execute("INSERT OR REPLACE INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", row)
        return True

    @_guarded
    def claim(self, keys: list[str], owner: str) -> tuple[list[str], dict[str, int]]:
        """Take on the runs of ``keys`` that no live sweep has claimed and none has
        finished, in one transaction, so that two sweeps on one store share the work
        instead of both running it.

        Parameters
        ----------
        keys : list of str
            Run keys.
        owner : str
            The claiming sweep (:func:`new_owner`).

        Returns
        -------
        tuple
            (the keys now ``owner``'s, ``{"host pid N": runs}`` of the sweeps holding
            the others).

        Raises
        ------
        StoreError
            The store cannot be written (named).
        """
        host, now = socket.gethostname(), time.time()
        with self._lock():
            for k, h, pid, beat in self._db.execute("SELECT key, host, pid, heartbeat FROM claims").fetchall():
                if (h == host and not _pid_alive(pid)) or now - beat > CLAIM_TIMEOUT:
                    self._db.execute("DELETE FROM claims WHERE key = ?", (k,))
            held = {k: f"{h} pid {p}" for k, h, p in self._db.execute("SELECT key, host, pid FROM claims WHERE owner != ?", (owner,))}
            finished = self.finished_keys()
            mine, others = [], {}
            for k in keys:
                if k in finished:
                    continue
                if k in held:
                    others[held[k]] = others.get(held[k], 0) + 1
                    continue
                mine.append(k)
            self._db.executemany("INSERT OR REPLACE INTO claims VALUES (?,?,?,?,?)",
                                 [(k, owner, host, os.getpid(), now) for k in mine])
        return mine, others

    @_guarded
    def release(self, owner: str) -> None:
        """Drop ``owner``'s claims (its recorded runs are in ``runs``; the rest are free).

        Parameters
        ----------
        owner : str
            The sweep whose claims end.
        """
        with self._lock():
            self._db.execute("DELETE FROM claims WHERE owner = ?", (owner,))

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        """A write transaction taken at once (BEGIN IMMEDIATE): claims are read and
        written with no other writer in between."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    @_guarded
    def rows(self) -> list[dict]:
        """Every recorded run, as stored.

        Returns
        -------
        list of dict
            One dict per row of table ``runs`` (its columns as keys; JSON columns as
            text), ordered by sweep, design and key.
        """
        cols = [d[0] for d in self._db.execute("SELECT * FROM runs LIMIT 0").description]
        return [dict(zip(cols, r)) for r in self._db.execute("SELECT * FROM runs ORDER BY sweep, design, key")]

    @_guarded
    def count(self, status: str | None = None) -> int:
        """The number of recorded runs.

        Parameters
        ----------
        status : {"ok", "error"}, optional
            Count only the runs with this status.

        Returns
        -------
        int
        """
        if status is None:
            return self._db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
        return self._db.execute("SELECT COUNT(*) FROM runs WHERE status = ?", (status,)).fetchone()[0]


class Heartbeat:
    """Refreshes ``owner``'s claims every :data:`HEARTBEAT_EVERY` seconds from a thread of
    its own (with its own connection), so a long run is not taken for a dead sweep's.

    Parameters
    ----------
    path : str
        The store.
    owner : str
        The sweep whose claims to refresh.
    """

    def __init__(self, path: str, owner: str):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, args=(path, owner), daemon=True, name="vmlab-heartbeat")
        self._thread.start()

    def _beat(self, path: str, owner: str) -> None:
        while not self._stop.wait(HEARTBEAT_EVERY):
            try:
                db = sqlite3.connect(path, timeout=30, isolation_level=None)
                db.execute("UPDATE claims SET heartbeat = ? WHERE owner = ?", (time.time(), owner))
                db.close()
            except sqlite3.Error:
                pass  # the next beat tries again; the sweep itself reports a broken store

    def stop(self) -> None:
        """Stop refreshing, and wait for the thread to end."""
        self._stop.set()
        self._thread.join()


def new_owner() -> str:
    """A sweep's identity in the claims table.

    Returns
    -------
    str
        ``host:pid:random``.
    """
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _store_error(path: str, e: sqlite3.Error) -> StoreError:
    msg = str(e)
    if isinstance(e, sqlite3.DatabaseError) and "not a database" in msg:
        msg = "not a vmlab results store (not an SQLite database, or a damaged one)"
    elif "malformed" in msg:
        msg = f"the results store is damaged ({msg})"
    return StoreError(f"{path}: {msg}")


# The description columns of load(), in order; then param.*, axis.* and the stats.
LOAD_COLUMNS = ["key", "sweep", "design", "config", "seed", "status", "error", "seconds", "host", "version",
                "workload", "trace"]


def load(store: str | os.PathLike, *, include_errors: bool = False, form: str = "wide"):
    """The runs of a results store as one tidy pandas DataFrame.

    Parameters
    ----------
    store : str or os.PathLike
        A results store written by :func:`vmlab.sweep` (it is only read).
    include_errors : bool
        Keep the failed runs too (``status`` ``"error"``, the message in ``error``,
        no stats).
    form : {"wide", "long"}
        ``"wide"``: one row per run, one column per statistic. ``"long"``: one row
        per run and statistic, its name in ``stat`` and its value in ``value``.

    Returns
    -------
    pandas.DataFrame
        Columns ``key``, ``sweep``, ``design``, ``config``, ``seed``, ``status``,
        ``error``, ``seconds``, ``host``, ``version``, ``workload`` (for a trace run:
        the trace's file name), ``trace`` (a trace run's path), one ``param.NAME``
        column per workload parameter, typed as the engine reads it (``"1G"`` bytes
        is 1073741824, ``"10k"`` accesses is 10000), one ``axis.KEY`` column per swept
        config key, then every statistic by its dotted name (``tlb.l1d_4k.misses``,
        ``walks.latency.p99``): the same names as :meth:`vmlab.Result.get` and
        :meth:`vmlab.Results.to_pandas`.

    Raises
    ------
    StoreError
        The file is missing, is not a results store, or is damaged (named).
    ArgumentError
        An argument of the wrong type or value (named).
    """
    path = path_arg("store", store)
    include_errors = _bool_arg("include_errors", include_errors)
    form = _form_arg(form)
    records = []
    with Store(path, readonly=True) as s:
        for r in s.rows():
            if r["status"] != "ok" and not include_errors:
                continue
            desc: dict[str, Any] = {k: r[k] for k in LOAD_COLUMNS if k in r}
            try:
                doc = json.loads(r["stats"]) if r["stats"] else None
                desc.update(_table.input_columns(_table.doc_source(doc) if doc else json.loads(r["source"])))
                desc.update({f"axis.{k}": v for k, v in json.loads(r["axes"]).items()})
                stats = _table.stats(doc) if doc else {}
            except (ValueError, TypeError, AttributeError) as e:
                raise StoreError(f"{path}: run {r['key']}: a damaged record ({e})") from None
            records.append((desc, stats))
    return _table.frame(records, LOAD_COLUMNS, form)
