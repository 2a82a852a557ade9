"""The results store of sweeps: one SQLite file, one row per point, crash-safe.

The file is in WAL mode with ``synchronous = FULL``; every finished point is one transaction
(``BEGIN IMMEDIATE … COMMIT``), so a killed driver loses no committed point and a reader never
sees half a row. The primary key is the point's id (a hash of its full configuration and the
package version, :func:`tilesim.running.sweep.point_id`), so no point is ever stored twice.

Status is ``"ok"`` or ``"failed"``. An ``ok`` row is final: storing the same id again is a no-op.
A ``failed`` row is replaced by the next attempt (``attempts`` counts them), which is how a
rerun retries failed points.

Table ``points``: ``id, status, error, swept (JSON), config (JSON), summary (JSON), version,
wall_s, worker, attempts, finished_at``.

Leases (table ``leases``: ``id, claimed_by, claimed_at``): a sweep claims a point before it runs
it, in one transaction that skips points already ``ok`` or claimed by another live sweep, and
drops the lease in the transaction that stores the result. A lease expires after
:data:`LEASE_S` without renewal (the driver renews its leases while it runs), or at once when its
owner was a process on this host that no longer exists (a killed sweep); an expired lease may be
claimed again. So two sweeps on one database never compute the same point.

The file is marked with ``PRAGMA application_id`` (:data:`APPLICATION_ID`); a database of another
program (another application id, or other tables) is refused before anything is written to it.
"""

from __future__ import annotations

import csv
import io
import json
import os
import socket
import sqlite3
import time
from pathlib import Path

from tilesim.errors import ConfigError, config_message
from tilesim.io import atomic_write_bytes, atomic_write_text, check_output_path

__all__ = [
    "ResultStore",
    "STATUSES",
    "export_table",
    "default_flatten",
    "write_csv",
    "write_parquet",
    "format_table",
    "lease_owner",
    "lease_expired",
    "APPLICATION_ID",
    "LEASE_S",
]

STATUSES = ("ok", "failed")
SCHEMA_VERSION = "1"
# "TSim" in ASCII: marks an SQLite file as a tilesim results store (PRAGMA application_id)
APPLICATION_ID = 0x5453696D
# a lease not renewed for this long is free again (the driver renews every LEASE_S / 4)
LEASE_S = 600.0
_TABLES = {"meta", "points", "leases"}
_COLUMNS = (
    "id",
    "status",
    "error",
    "swept",
    "config",
    "summary",
    "version",
    "wall_s",
    "worker",
    "attempts",
    "finished_at",
)
_FIX = "give the --db file of a tilesim sweep, or a new file name"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS points (
    id          TEXT PRIMARY KEY,
    status      TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
    error       TEXT,
    swept       TEXT NOT NULL,
    config      TEXT NOT NULL,
    summary     TEXT,
    version     TEXT NOT NULL,
    wall_s      REAL,
    worker      TEXT,
    attempts    INTEGER NOT NULL DEFAULT 1,
    finished_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS leases (
    id          TEXT PRIMARY KEY,
    claimed_by  TEXT NOT NULL,
    claimed_at  REAL NOT NULL
);
"""

_UPSERT = """
INSERT INTO points (id, status, error, swept, config, summary, version, wall_s, worker, attempts, finished_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?)
ON CONFLICT (id) DO UPDATE SET
    status = excluded.status, error = excluded.error, summary = excluded.summary,
    wall_s = excluded.wall_s, worker = excluded.worker, finished_at = excluded.finished_at,
    attempts = points.attempts + 1
WHERE points.status != 'ok'
"""


def _use_wal(db: sqlite3.Connection, wait_s: float = 60.0) -> None:
    """Switch ``db`` to write-ahead logging. While another process holds the file (a second sweep
    creating the same store), SQLite answers the mode switch with "database is locked" at once,
    without its busy wait; retry for up to ``wait_s`` like every other statement here."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            db.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class ResultStore:
    """An open results database (``with ResultStore(path) as db: …``).

    Parameters
    ----------
    path : str or Path
    create : bool
        Create the file if missing (the sweep driver); ``False`` for readers (``tilesim
        results``), which then raise :class:`ConfigError` for a missing file.

    Raises
    ------
    ConfigError
        The file is missing (``create=False``), is not an SQLite database, or is a database
        of another program.
    """

    def __init__(self, path, create: bool = True):
        self.path = Path(path)
        if not create and not self.path.is_file():
            raise ConfigError(
                config_message("results database", str(path), "no such file", "give the --db file of a tilesim sweep")
            )
        if create:
            check_output_path(self.path, "--db", "file")
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
        except sqlite3.Error as exc:
            raise ConfigError(
                config_message("results database", str(path), f"cannot be opened ({exc})", _FIX)
            ) from None
        try:
            self._db.execute("PRAGMA busy_timeout = 60000")
            self._check_owner()  # before anything is written to the file
            if create:
                _use_wal(self._db)
                self._db.execute("PRAGMA synchronous = FULL")
                # one transaction: another process never sees half a schema
                self._db.executescript(
                    f"BEGIN IMMEDIATE; {_SCHEMA} PRAGMA application_id = {APPLICATION_ID}; "
                    f"INSERT OR IGNORE INTO meta VALUES ('schema', '{SCHEMA_VERSION}'); COMMIT;"
                )
            cols = [r[1] for r in self._db.execute("PRAGMA table_info(points)")]
        except sqlite3.DatabaseError as exc:
            self._db.close()
            if "full" in str(exc):  # SQLITE_FULL: the disk, not the file
                raise ConfigError(
                    config_message(
                        "results database",
                        str(path),
                        f"cannot be written: {exc}",
                        "free space on its disk, or give --db on another disk",
                    )
                ) from None
            what = (
                f"is not an SQLite database ({exc})"
                if "not a database" in str(exc) or "malformed" in str(exc)
                else f"cannot be used ({exc})"
            )
            raise ConfigError(
                config_message(
                    "results database", str(path), what, _FIX + " (a read-only folder needs a writable copy)"
                )
            ) from None
        except ConfigError:
            self._db.close()
            raise
        missing = [c for c in _COLUMNS if c not in cols]
        if missing:
            self._db.close()
            what = (
                "has no tilesim 'points' table"
                if not cols
                else f"has a 'points' table without the column(s) {', '.join(missing)} "
                "(damaged or from another program)"
            )
            raise ConfigError(config_message("results database", str(path), what, _FIX))

    @classmethod
    def check_file(cls, path) -> None:
        """Refuse an existing file that is not SQLite or belongs to another program, without
        writing to it (a store being created by another sweep right now passes)."""
        self = cls.__new__(cls)
        self.path = Path(path)
        try:
            self._db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=60.0)
        except sqlite3.Error as exc:
            raise ConfigError(
                config_message("results database", str(path), f"cannot be opened ({exc})", _FIX)
            ) from None
        try:
            self._check_owner()
        except sqlite3.DatabaseError as exc:
            raise ConfigError(
                config_message("results database", str(path), f"is not an SQLite database ({exc})", _FIX)
            ) from None
        finally:
            self._db.close()

    def _check_owner(self) -> None:
        """Refuse a database that belongs to another program: another application id, or tables
        other than a tilesim store's (an empty file or a new one is fine)."""
        app = self._db.execute("PRAGMA application_id").fetchone()[0]
        if app == APPLICATION_ID:
            return
        if app != 0:
            raise ConfigError(
                config_message(
                    "results database", str(self.path), f"belongs to another program (application id {app:#x})", _FIX
                )
            )
        tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
        other = sorted(tables - _TABLES)
        if other or (tables - {"meta"} and "points" not in tables):
            raise ConfigError(
                config_message(
                    "results database",
                    str(self.path),
                    f"is not a tilesim results store (it has the table(s) {', '.join(other or sorted(tables))})",
                    _FIX,
                )
            )

    # ---- context manager ---------------------------------------------------------------------
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        self._db.close()

    # ---- writes ------------------------------------------------------------------------------
    def put(
        self,
        point_id: str,
        *,
        status: str,
        swept: dict,
        config: dict,
        version: str,
        summary: dict | None = None,
        error: str | None = None,
        wall_s: float | None = None,
        worker: str | None = None,
    ) -> bool:
        """Store one finished point and drop its lease, in one transaction; False if it was
        already ``ok``."""
        if status not in STATUSES:
            raise ConfigError(config_message("point status", status, f"must be one of {STATUSES}", "use ok or failed"))
        row = (
            point_id,
            status,
            error,
            json.dumps(swept, sort_keys=True),
            json.dumps(config, sort_keys=True),
            None if summary is None else json.dumps(summary),
            version,
            wall_s,
            worker,
            time.time(),
        )
        self._db.execute("BEGIN IMMEDIATE")
        try:
            cur = self._db.execute(_UPSERT, row)
            self._db.execute("DELETE FROM leases WHERE id = ?", (point_id,))
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        return cur.rowcount > 0

    # ---- leases ------------------------------------------------------------------------------
    def claim(self, ids, owner: str, lease_s: float = LEASE_S) -> list:
        """Claim the points ``ids`` for ``owner`` in one transaction; returns the ids claimed: not
        ``ok`` yet, and unclaimed or claimed under an expired lease (:func:`lease_expired`)."""
        ids = list(ids)
        if not ids:
            return []
        now, got = time.time(), []
        self._db.execute("BEGIN IMMEDIATE")
        try:
            for pid in ids:
                if self._db.execute("SELECT 1 FROM points WHERE id = ? AND status = 'ok'", (pid,)).fetchone():
                    continue
                row = self._db.execute("SELECT claimed_by, claimed_at FROM leases WHERE id = ?", (pid,)).fetchone()
                if row is not None and not lease_expired(row[0], row[1], now, lease_s):
                    continue
                self._db.execute("INSERT OR REPLACE INTO leases VALUES (?, ?, ?)", (pid, owner, now))
                got.append(pid)
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        return got

    def renew(self, owner: str) -> None:
        """Renew every lease of ``owner``."""
        self._db.execute("UPDATE leases SET claimed_at = ? WHERE claimed_by = ?", (time.time(), owner))

    def release(self, owner: str) -> None:
        """Drop every lease of ``owner`` (a sweep ending, cleanly or not)."""
        self._db.execute("DELETE FROM leases WHERE claimed_by = ?", (owner,))

    # ---- reads -------------------------------------------------------------------------------
    def ok_ids(self) -> set:
        """Ids of the finished (``ok``) points."""
        return {r[0] for r in self._db.execute("SELECT id FROM points WHERE status = 'ok'")}

    def count(self, status: str | None = None) -> int:
        if status is None:
            return self._db.execute("SELECT COUNT(*) FROM points").fetchone()[0]
        return self._db.execute("SELECT COUNT(*) FROM points WHERE status = ?", (status,)).fetchone()[0]

    def to_dataframe(self, flatten=None):
        """Every point as one row of a pandas DataFrame (:func:`to_dataframe`)."""
        return to_dataframe(self.rows(), flatten or default_flatten)

    def rows(self) -> list:
        """Every point as a dict (JSON columns decoded), in order of completion."""
        cur = self._db.execute(
            "SELECT id, status, error, swept, config, summary, version, wall_s, worker, "
            "attempts, finished_at FROM points ORDER BY finished_at, id"
        )
        names = [d[0] for d in cur.description]
        out = []
        for r in cur:
            d = dict(zip(names, r))
            for k in ("swept", "config", "summary"):
                try:
                    d[k] = None if d[k] is None else json.loads(d[k])
                except (TypeError, ValueError):
                    d[k] = ...
                if not (isinstance(d[k], dict) or (k == "summary" and d[k] is None)):
                    raise ConfigError(
                        config_message(
                            f"results database {self.path}: point {str(d['id'])[:12]} {k}",
                            str(r[names.index(k)])[:40],
                            "is not a JSON object (damaged row)",
                            "delete the row (it is run again by the next sweep) or use a backup",
                        )
                    )
            out.append(d)
        return out


def lease_owner() -> str:
    """A lease owner name for this process: ``host:pid:random``."""
    return f"{socket.gethostname()}:{os.getpid()}:{os.urandom(4).hex()}"


def lease_expired(owner: str, claimed_at: float, now: float, lease_s: float = LEASE_S) -> bool:
    """True when a lease may be taken over: older than ``lease_s``, or held by a process of this
    host that no longer runs (a killed sweep)."""
    if now - claimed_at > lease_s:
        return True
    host, _, rest = str(owner).partition(":")
    pid = rest.partition(":")[0]
    if host == socket.gethostname() and pid.isdigit():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True
        except (PermissionError, OverflowError, OSError):  # alive but someone else's, or unknowable
            return False
    return False


# ---- export ----------------------------------------------------------------------------------
def default_flatten(summary: dict) -> dict:
    """Top-level numbers and strings of a summary, plus ``a.b`` for numbers one level down."""
    out = {}
    for k, v in summary.items():
        if isinstance(v, (int, float, str, bool)) or v is None:
            out[k] = v
        elif isinstance(v, dict):
            out.update({f"{k}.{k2}": v2 for k2, v2 in v.items() if isinstance(v2, (int, float))})
    return out


def _cell(v):
    return json.dumps(v) if isinstance(v, (list, tuple, dict)) else v


def export_table(rows, flatten=default_flatten) -> tuple:
    """``(columns, records)``: one record per point with ``id``, ``status``, the swept fields by
    name (union over points, in order of first appearance), the flattened summary fields, then
    ``attempts``, ``wall_s`` and ``error``. Lists in swept values become JSON text."""
    swept_cols, summary_cols, records = [], [], []
    for r in rows:
        swept = {k: _cell(v) for k, v in r["swept"].items()}
        flat = flatten(r["summary"]) if r["summary"] else {}
        swept_cols += [k for k in swept if k not in swept_cols]
        summary_cols += [k for k in flat if k not in summary_cols and k not in swept]
        records.append(
            {
                "id": r["id"],
                "status": r["status"],
                **flat,
                **swept,
                "attempts": r["attempts"],
                "wall_s": r["wall_s"],
                "error": r["error"],
            }
        )
    summary_cols = [c for c in summary_cols if c not in swept_cols]
    columns = ["id", "status", *swept_cols, *summary_cols, "attempts", "wall_s", "error"]
    return columns, [{c: rec.get(c) for c in columns} for rec in records]


def to_dataframe(rows, flatten=default_flatten):
    """The sweep's results (:meth:`ResultStore.rows`) as a pandas DataFrame: the columns and
    records of :func:`export_table`, one row per point (``tilesim.running.store.ResultStore(db).to_dataframe()``)."""
    import pandas as pd  # pandas loads only where used (start-up time)

    columns, records = export_table(rows, flatten)
    return pd.DataFrame(records, columns=columns)


def write_csv(path, columns, records) -> Path:
    """Write the table as CSV (atomically); empty cells for missing values."""

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    w.writeheader()
    w.writerows(records)
    return atomic_write_text(path, buf.getvalue())


def write_parquet(path, columns, records) -> Path:
    """Write the table as Parquet (atomically, with pyarrow): one column per field."""
    import pyarrow as pa  # pyarrow loads only where used (start-up time)
    import pyarrow.parquet as pq  # pyarrow loads only where used (start-up time)

    buf = io.BytesIO()
    pq.write_table(pa.table({c: [rec[c] for rec in records] for c in columns}), buf)
    return atomic_write_bytes(path, buf.getvalue())


def format_table(columns, records, max_width: int = 24) -> str:
    """A plain aligned text table (long cells cut with '…')."""

    def cell(v):
        s = "" if v is None else (f"{v:.6g}" if isinstance(v, float) else str(v))
        return s if len(s) <= max_width else s[: max_width - 1] + "…"

    cells = [[cell(c) for c in columns]] + [[cell(rec[c]) for c in columns] for rec in records]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    return "\n".join("  ".join(s.ljust(w) for s, w in zip(row, widths)).rstrip() for row in cells)
