"""The results store: one SQLite file, one row per finished run.

Crash safety comes from SQLite itself: WAL journaling and one transaction per finished
run, written only by the sweep's parent process. A sweep killed at any moment (even
``kill -9``) leaves every committed run intact and loses only the runs in flight; the
run key is the primary key, so a restarted sweep can neither duplicate nor overwrite a
finished run.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
from typing import Any, Iterator, Mapping

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
"""


class Store:
    """A results store at ``path`` (created if missing)."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self._db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self._db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def finished_keys(self) -> set[str]:
        """Keys of runs already recorded successfully (a failed run is retried)."""
        return {k for (k,) in self._db.execute("SELECT key FROM runs WHERE status = 'ok'")}

    def record(self, run: Mapping[str, Any], status: str, stats: dict | None, error: str | None, seconds: float,
               version: str) -> bool:
        """Record one finished run in its own transaction. Returns False if its key was
        already recorded as successful (then nothing changes)."""
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

    def rows(self) -> Iterator[dict]:
        cols = [d[0] for d in self._db.execute("SELECT * FROM runs LIMIT 0").description]
        for r in self._db.execute("SELECT * FROM runs ORDER BY sweep, design, key"):
            yield dict(zip(cols, r))

    def count(self, status: str | None = None) -> int:
        if status is None:
            return self._db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
        return self._db.execute("SELECT COUNT(*) FROM runs WHERE status = ?", (status,)).fetchone()[0]


def _flatten(prefix: str, v: Any, out: dict) -> None:
    if isinstance(v, dict):
        for k, x in v.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), x, out)
    elif isinstance(v, (int, float)) and not isinstance(v, bool):
        out[prefix] = v


def load(store: str | os.PathLike, *, include_errors: bool = False):
    """The runs of a results store as a pandas DataFrame: one row per run, one column per
    numeric stat (dotted paths such as ``tlb.l1d.misses`` or ``walks.latency.p99``),
    plus ``key``, ``sweep``, ``design``, ``config``, ``seed``, ``status``, ``seconds``,
    ``workload``/``trace`` and one ``axis.KEY`` column per swept key."""
    import pandas as pd

    if not os.path.exists(store):
        raise FileNotFoundError(f"no results store at {os.fspath(store)}")
    rows = []
    with Store(store) as s:
        for r in s.rows():
            if r["status"] != "ok" and not include_errors:
                continue
            row: dict[str, Any] = {k: r[k] for k in ("key", "sweep", "design", "config", "seed", "status", "error",
                                                      "seconds", "host", "version")}
            src = json.loads(r["source"])
            row["workload"] = src.get("workload")
            row["trace"] = src.get("trace")
            for k, v in src.get("params", {}).items():
                row[f"param.{k}"] = v
            for k, v in json.loads(r["axes"]).items():
                row[f"axis.{k}"] = v
            if r["stats"]:
                stats = json.loads(r["stats"])
                stats.pop("config", None)
                _flatten("", stats, row)
            rows.append(row)
    return pd.DataFrame(rows)
