"""Parameter sweeps: expand a sweep file into points, run them on dask, store each result once.

A sweep file (TOML) has three tables::

    [base]                      # options every point shares (the runner's option names)
    steps = 1
    layers = "32-16-4"

    [grid]                      # lists; the points are their Cartesian product (file order)
    batch = [4, 8]
    machine = ["gc200", "mesh-demo"]

    [random]                    # optional: `samples` draws made once from `seed`
    samples = 4
    seed = 0
    lr = {low = 1e-4, high = 1e-2, log = true}    # float range (log-uniform with log = true)
    timesteps = {low = 8, high = 32}              # two integers: integer range, both ends included
    optimizer = ["adam", "sgd"]                   # a list: uniform choice

Points = grid product × random draws: every grid point is combined with each of the same
``samples`` draws (so ``samples`` = 0 or no ``[random]`` gives the plain grid). A key may be in
``[base]`` and in ``[grid]``/``[random]`` (the point's value wins), not in both of the latter.

Each point's full configuration is ``defaults ∪ base ∪ point``; its id is the SHA-256 of that
configuration (canonical JSON) and the package version (:func:`point_id`). The runner — an
importable ``"module:function"`` taking the configuration dict and returning a JSON-able
summary dict — is resolved with importlib in each worker, so this module never imports a
workload. Points run on a ``dask.distributed`` ``LocalCluster`` (N worker processes, one
thread each) or on an existing scheduler; the driver stores every result as it completes
(``as_completed``), one SQLite transaction per point (:class:`tilesim.running.store.ResultStore`).

Points are expanded lazily (:func:`iter_expand`; :meth:`SweepSpec.count` sizes a grid without
expanding it) and claimed in small batches with a lease in the database before they run, so two
sweeps on one database share the work and never compute the same point (:mod:`tilesim.running.store`).

Resuming: points already stored as ``ok`` are skipped; points stored as ``failed`` are run again
(a failure may have been a killed worker; a deterministic one just fails again, quickly).
A point whose runner raises is stored as ``failed`` with ``"<ExceptionType>: <message>"`` and
the sweep goes on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import importlib
import itertools
import json
import logging
import math
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import numpy as np

from tilesim.errors import ConfigError, config_message, require
from tilesim.io import read_toml
from tilesim.running.limits import MAX_SWEEP_POINTS
from tilesim.running.progress import progress_bar
from tilesim.running.store import LEASE_S, ResultStore, lease_owner

__all__ = [
    "RandomRange",
    "SweepSpec",
    "Point",
    "SweepReport",
    "load_sweep",
    "sweep_from_dict",
    "point_id",
    "expand",
    "iter_expand",
    "resolve_runner",
    "run_point",
    "run_sweep",
    "start_local_cluster",
    "check_workers",
    "package_version",
]

_SCALARS = (bool, int, float, str)


def package_version() -> str:
    """The installed tilesim version (part of every point id)."""
    try:
        return metadata.version("tilesim")
    except metadata.PackageNotFoundError:
        return "unknown"


@dataclass(frozen=True)
class RandomRange:
    """A range to draw from: uniform in [low, high), log-uniform with ``log``; two integers give
    an integer range with both ends included (rounded log-uniform with ``log``)."""

    name: str
    low: float
    high: float
    log: bool = False

    def __post_init__(self):
        for k in ("low", "high"):
            v = getattr(self, k)
            require(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v),
                f"[random] {self.name}.{k}",
                v,
                "must be a finite number",
                "e.g. {low = 1e-4, high = 1e-2}",
            )
        require(
            self.low <= self.high,
            f"[random] {self.name}",
            (self.low, self.high),
            "needs low <= high",
            "swap low and high",
        )
        require(
            isinstance(self.log, bool),
            f"[random] {self.name}.log",
            self.log,
            "must be true or false",
            "e.g. log = true",
        )
        if self.log:
            require(
                self.low > 0,
                f"[random] {self.name}.low",
                self.low,
                "must be > 0 with log = true",
                "use low > 0, or drop log = true",
            )

    @property
    def integer(self) -> bool:
        return isinstance(self.low, int) and isinstance(self.high, int)

    def draw(self, rng: np.random.Generator):
        if self.integer:
            lo, hi = int(self.low), int(self.high)  # both ints already (``integer``)
            if self.log:
                v = math.exp(rng.uniform(math.log(lo), math.log(hi + 1)))
                return min(int(v), hi)
            return int(rng.integers(lo, hi + 1))
        if self.log:
            return float(math.exp(rng.uniform(math.log(self.low), math.log(self.high))))
        return float(rng.uniform(self.low, self.high))


@dataclass(frozen=True)
class SweepSpec:
    """A validated sweep: fixed options, grid lists, random ranges or choices."""

    base: dict = field(default_factory=dict)
    grid: tuple = ()  # ((name, (v1, v2, …)), …) in file order
    random: tuple = ()  # ((name, RandomRange | (choice, …)), …)
    samples: int = 0
    seed: int = 0

    def __post_init__(self):
        names = [n for n, _ in self.grid] + [n for n, _ in self.random]
        dup = sorted({n for n in names if names.count(n) > 1})
        require(not dup, "sweep keys", dup, "appear in both [grid] and [random]", "keep each in one table")
        for n, vals in self.grid:
            require(
                isinstance(vals, tuple) and len(vals) >= 1,
                f"[grid] {n}",
                vals,
                "must be a non-empty list",
                "give at least one value",
            )
        require(
            isinstance(self.samples, int) and not isinstance(self.samples, bool) and self.samples >= 0,
            "[random] samples",
            self.samples,
            "must be an integer >= 0",
            "e.g. samples = 8",
        )
        require(
            isinstance(self.seed, int) and not isinstance(self.seed, bool),
            "[random] seed",
            self.seed,
            "must be an integer",
            "e.g. seed = 0",
        )
        if self.random:
            require(
                self.samples >= 1,
                "[random] samples",
                self.samples,
                "must be >= 1 when ranges are given",
                "e.g. samples = 8",
            )

        require(
            self.samples <= MAX_SWEEP_POINTS,
            "[random] samples",
            self.samples,
            f"must be at most {MAX_SWEEP_POINTS:,} (the draws are made up front)",
            "draw fewer samples",
        )

    def count(self) -> int:
        """How many points :meth:`iter_points` yields, computed without expanding the grid."""
        n = math.prod(len(vals) for _, vals in self.grid)
        return n * self.samples if self.random else n

    def iter_points(self) -> Iterator[dict]:
        """The swept values of every point (dicts), grid-major, then the random draws — lazily
        (a grid of millions of points costs no memory until its points are taken)."""
        names = [n for n, _ in self.grid]
        draws: list[dict] = [{}]
        if self.random:
            rng = np.random.default_rng(self.seed)
            draws = []
            for _ in range(self.samples):
                d = {}
                for name, r in self.random:
                    d[name] = r.draw(rng) if isinstance(r, RandomRange) else r[int(rng.integers(len(r)))]
                draws.append(d)
        for combo in itertools.product(*(vals for _, vals in self.grid)):
            g = dict(zip(names, combo))
            for d in draws:
                yield {**g, **d}

    def points(self) -> list:
        """The swept values of every point (dicts), grid-major, then the random draws."""
        return list(self.iter_points())


def _check_value(where: str, v):
    ok = isinstance(v, _SCALARS) or (isinstance(v, list) and all(isinstance(x, _SCALARS) for x in v))
    require(
        ok,
        where,
        v,
        "must be a number, string, boolean or a list of them",
        'e.g. batch = 8, layers = "32-16-4" or lr = [1e-3, 1e-2]',
    )
    return v


def _random_entry(k: str, v, where: str) -> tuple:
    """``(key, choices)`` for a ``[random]`` list of choices or ``(key, RandomRange)`` for a
    ``{low, high, log}`` table; raises :class:`ConfigError` for anything else."""
    if isinstance(v, list):
        require(
            len(v) >= 1,
            f"{where}: [random] {k}",
            v,
            "must be a non-empty list of choices",
            'e.g. optimizer = ["adam", "sgd"]',
        )
        return k, tuple(_check_value(f"{where}: [random] {k}", x) for x in v)
    elif isinstance(v, dict):
        bad = sorted(set(v) - {"low", "high", "log"})
        require(
            not bad and {"low", "high"} <= set(v),
            f"{where}: [random] {k}",
            v,
            "a range has the keys low, high and optionally log",
            f"e.g. {k} = {{low = 1e-4, high = 1e-2, log = true}}",
        )
        return k, RandomRange(k, v["low"], v["high"], v.get("log", False))
    else:
        raise ConfigError(
            config_message(
                f"{where}: [random] {k}",
                v,
                "must be a range or a list of choices",
                f"e.g. {k} = {{low = 1, high = 10}} or {k} = [1, 2, 3]",
            )
        )


def sweep_from_dict(data: dict, allowed=None, forbidden=None, where: str = "sweep file") -> SweepSpec:
    """Validate the parsed TOML of a sweep file.

    Parameters
    ----------
    allowed : iterable of str or None
        The runner's option names; any other key is an error naming the allowed ones.
    forbidden : dict or None
        ``{key: reason}`` for options a sweep may not set (e.g. output directories).

    Raises
    ------
    ConfigError
        Unknown tables or keys, grid entries that are not lists, malformed ranges.
    """
    allowed = None if allowed is None else set(allowed)
    forbidden = dict(forbidden or {})
    extra = sorted(set(data) - {"base", "grid", "random"})
    require(
        not extra,
        f"{where}: table",
        extra[0] if extra else None,
        "is unknown",
        "a sweep file has only [base], [grid] and [random]",
    )
    for t in ("base", "grid", "random"):
        require(
            isinstance(data.get(t, {}), dict), f"{where}: {t}", data.get(t), "must be a table", f"write it as [{t}]"
        )

    def check_key(table, k):
        if k in forbidden:
            raise ConfigError(
                config_message(f"{where}: [{table}] {k}", data[table][k], "is not a sweep option", forbidden[k])
            )
        if allowed is not None and k not in allowed:
            raise ConfigError(
                config_message(
                    f"{where}: [{table}] {k}",
                    data[table][k],
                    "unknown key",
                    f"allowed: {', '.join(sorted(allowed - set(forbidden)))}",
                )
            )

    base = {}
    for k, v in data.get("base", {}).items():
        check_key("base", k)
        base[k] = _check_value(f"{where}: [base] {k}", v)
    grid = []
    for k, v in data.get("grid", {}).items():
        check_key("grid", k)
        require(
            isinstance(v, list) and len(v) >= 1,
            f"{where}: [grid] {k}",
            v,
            "must be a non-empty list",
            f"write {k} = [{v!r}] for a single value, or move it to [base]",
        )
        grid.append((k, tuple(_check_value(f"{where}: [grid] {k}", x) for x in v)))
    rnd: list[tuple[str, RandomRange | tuple]] = []
    samples, seed = 0, 0
    for k, v in data.get("random", {}).items():
        if k == "samples":
            samples = v
            continue
        if k == "seed":
            seed = v
            continue
        check_key("random", k)
        rnd.append(_random_entry(k, v, where))
    return SweepSpec(base=base, grid=tuple(grid), random=tuple(rnd), samples=samples, seed=seed)


def load_sweep(path, allowed=None, forbidden=None) -> SweepSpec:
    """Read and validate a sweep file (see the module docstring); errors name the file and key."""

    return sweep_from_dict(read_toml(path, "sweep file"), allowed, forbidden, where=str(path))


# ---- points ----------------------------------------------------------------------------------
def point_id(config: dict, version: str) -> str:
    """SHA-256 (hex) of the canonical JSON of ``config`` and ``version``."""
    text = json.dumps({"config": config, "version": version}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Point:
    """One point of a sweep: its id, the swept values and the full configuration."""

    id: str
    swept: dict
    config: dict


def iter_expand(spec: SweepSpec, defaults: dict | None = None, fixed: dict | None = None, version: str | None = None):
    """:func:`expand`, lazily: yields the points one by one (duplicates once, first-seen order)."""
    version = package_version() if version is None else version
    seen = set()
    for swept in spec.iter_points():
        config = {**(defaults or {}), **spec.base, **swept, **(fixed or {})}
        pid = point_id(config, version)
        key = int(pid[:16], 16)  # 64 bits of the id: a small set even for millions
        if key not in seen:
            seen.add(key)
            yield Point(pid, swept, config)


def expand(
    spec: SweepSpec, defaults: dict | None = None, fixed: dict | None = None, version: str | None = None
) -> list:
    """The sweep's points with full configurations ``defaults ∪ base ∪ point ∪ fixed``.

    Duplicate points (same id) are kept once, in first-seen order.
    """
    return list(iter_expand(spec, defaults, fixed, version))


# ---- running ---------------------------------------------------------------------------------
def resolve_runner(text: str):
    """``"package.module:function"`` → the function.

    Raises
    ------
    ConfigError
        Malformed text, a module that cannot be imported, or a missing / non-callable attribute.
    """
    mod, _, attr = str(text).partition(":")
    require(
        bool(mod) and bool(attr),
        "runner",
        text,
        "must look like 'package.module:function'",
        "e.g. mypackage.sweeps:run_point",
    )
    try:
        fn = getattr(importlib.import_module(mod), attr)
    except ImportError as exc:
        raise ConfigError(
            config_message(
                "runner", text, f"cannot import module {mod!r} ({exc})", "install the package on every worker"
            )
        ) from None
    except AttributeError:
        raise ConfigError(
            config_message("runner", text, f"module {mod!r} has no attribute {attr!r}", "check the function name")
        ) from None
    require(callable(fn), "runner", text, "is not callable", "name a function")
    return fn


def run_point(runner: str, config: dict) -> dict:
    """Run one point (in a worker). Never raises for the point's own errors: they are returned
    as ``{"status": "failed", "error": …}`` so they are stored, not retried by dask."""
    t0 = time.perf_counter()
    worker = f"{socket.gethostname()}:{os.getpid()}"
    try:
        summary = resolve_runner(runner)(dict(config))
        json.dumps(summary)  # must be storable
        return {"status": "ok", "summary": summary, "error": None, "wall_s": time.perf_counter() - t0, "worker": worker}
    except Exception as exc:  # the point failed, the sweep goes on
        return {
            "status": "failed",
            "summary": None,
            "error": f"{type(exc).__name__}: {exc}",
            "wall_s": time.perf_counter() - t0,
            "worker": worker,
        }


@dataclass(frozen=True)
class SweepReport:
    """What one invocation of :func:`run_sweep` did."""

    db: str
    points: int
    skipped: int  # already ok in the database
    ran: int  # computed by this invocation
    ok: int
    failed: int
    wall_s: float
    failures: tuple = ()  # ((id, swept, error), …)
    busy: int = 0  # claimed by another sweep running on the same database

    def to_dict(self) -> dict:
        return {
            "db": self.db,
            "points": self.points,
            "skipped": self.skipped,
            "busy": self.busy,
            "ran": self.ran,
            "ok": self.ok,
            "failed": self.failed,
            "wall_s": self.wall_s,
            "failures": [{"id": i, "swept": s, "error": e} for i, s, e in self.failures],
        }


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def check_workers(workers: int) -> int:
    """``workers`` for a local cluster: an integer >= 1 (else ConfigError), capped at this
    machine's cores with a message on stderr (more processes than cores only slow the points)."""
    require(
        isinstance(workers, int) and not isinstance(workers, bool) and workers >= 1,
        "--workers",
        workers,
        "must be an integer >= 1",
        f"e.g. --workers {_cores()} (this machine's cores)",
    )
    if workers > _cores():
        print(f"tilesim: --workers {workers} capped at {_cores()}, the cores this process may use", file=sys.stderr)
        return _cores()
    return workers


def start_local_cluster(workers: int | None = None, quiet: bool = True, numba_threads: int | None = None):
    """A ``LocalCluster`` of ``workers`` processes (default: the number of cores), one task
    thread each; the cores are shared out as numba/OpenMP threads (``numba_threads`` per worker,
    default cores // workers) so that workers do not oversubscribe them."""
    import dask  # dask loads only where used (start-up time)
    from distributed import LocalCluster  # dask.distributed loads only where used (start-up time)

    n = _cores() if workers is None else check_workers(workers)
    threads = str(numba_threads or max(1, _cores() // n))
    # distributed's nanny sets MALLOC_TRIM_THRESHOLD_ in new workers, which turns off glibc's dynamic
    # mmap threshold: every large numpy array is then mmap'ed and faulted in afresh (points ran 3-5x slower)
    pre = {
        k: v
        for k, v in dask.config.get("distributed.nanny.pre-spawn-environ", {}).items()
        if k != "MALLOC_TRIM_THRESHOLD_"
    }
    with dask.config.set({"distributed.nanny.pre-spawn-environ": pre}):
        return LocalCluster(
            n_workers=n,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.ERROR if quiet else logging.WARNING,
            env={"NUMBA_NUM_THREADS": threads, "OMP_NUM_THREADS": threads},
        )


CONNECT_TIMEOUT_S = 10.0
"""Seconds a ``--scheduler`` has to answer as a dask scheduler before the sweep is refused."""


def _client_within(client_cls, scheduler: str, seconds: float):
    """``client_cls(scheduler)`` or :class:`TimeoutError` after ``seconds``: a service that accepts
    the connection but never speaks dask's handshake would otherwise hold the sweep for ever (the
    client's own timeout covers the connection, not the handshake)."""
    box: dict = {}

    def connect() -> None:
        try:
            box["client"] = client_cls(scheduler, timeout=f"{seconds}s")
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=connect, name="tilesim-connect", daemon=True)
    thread.start()
    thread.join(seconds + 2.0)
    if thread.is_alive():
        raise TimeoutError(f"no dask scheduler answered within {seconds + 2.0:.0f} s")
    if "error" in box:
        raise box["error"]
    return box["client"]


def _connect(workers, scheduler, quiet):
    """A dask Client (and the LocalCluster it owns, or None)."""
    from distributed import Client  # dask.distributed loads only where used (start-up time)

    if scheduler:
        require(
            workers is None,
            "--workers",
            workers,
            "applies to the local cluster only",
            "start workers with `dask worker ADDRESS` and drop --workers",
        )
        try:
            return _client_within(Client, scheduler, CONNECT_TIMEOUT_S), None
        except (OSError, TimeoutError, ValueError) as exc:
            raise ConfigError(
                config_message(
                    "--scheduler",
                    scheduler,
                    f"cannot connect ({exc})",
                    "start one with `dask scheduler` and give its tcp://HOST:PORT",
                )
            ) from None
    cluster = start_local_cluster(workers, quiet)
    return Client(cluster), cluster


class _LeaseRenewer(threading.Thread):
    """A daemon thread renewing ``owner``'s leases every ``every_s`` seconds until :meth:`stop`."""

    def __init__(self, db, owner: str, every_s: float):
        super().__init__(name="tilesim-lease-renewer", daemon=True)
        self._db, self._owner, self._every_s = db, owner, every_s
        self._stopped = threading.Event()

    def run(self) -> None:

        with ResultStore(self._db, create=False) as store:
            while not self._stopped.wait(self._every_s):
                store.renew(self._owner)

    def stop(self) -> None:
        self._stopped.set()


def _renewer(db, owner: str, every_s: float) -> _LeaseRenewer:
    """A started :class:`_LeaseRenewer`; ``.stop()`` ends it."""
    t = _LeaseRenewer(db, owner, every_s)
    t.start()
    return t


class _Claims:
    """Points taken lazily from an iterator and claimed with a lease in ``store`` for ``owner``; counts
    the points seen, skipped (already stored ``ok``) and busy (held by another live sweep)."""

    def __init__(self, it, store, owner: str, lease_s: float):
        self.it, self.store, self.owner, self.lease_s = it, store, owner, lease_s
        self.done = store.ok_ids()
        self.seen = self.skipped = self.busy = 0

    def take(self, k: int) -> list:
        """Up to ``k`` points claimed by this sweep (fewer only when the points run out)."""
        got: list[Point] = []
        while len(got) < k:
            chunk = list(itertools.islice(self.it, k - len(got)))
            if not chunk:
                break
            self.seen += len(chunk)
            todo = [p for p in chunk if p.id not in self.done]
            self.skipped += len(chunk) - len(todo)
            claimed = set(self.store.claim([p.id for p in todo], self.owner, self.lease_s))
            self.busy += len(todo) - len(claimed)
            got += [p for p in todo if p.id in claimed]
        return got


def _outcome(fut) -> dict:
    """The result dict of a finished point future; a raised or cancelled point becomes ``failed``."""
    try:
        return fut.result()
    except (Exception, asyncio.CancelledError, concurrent.futures.CancelledError) as exc:
        return {
            "status": "failed",
            "summary": None,
            "error": f"{type(exc).__name__}: {exc}",
            "wall_s": None,
            "worker": None,
        }


def _drain(client, first: list, claims: _Claims, window: int, runner: str, version: str, bar) -> tuple:
    """Run ``first`` on ``client`` and keep ``window`` points in flight, storing each result as it
    completes and claiming more; returns ``(ok, failed, failures)``."""
    from distributed import as_completed  # dask.distributed loads only where used (start-up time)

    store = claims.store
    ok = failed = 0
    failures = []
    futures = {}
    pending = as_completed()

    def submit(batch):
        for p in batch:
            fut = client.submit(
                run_point,
                runner,
                p.config,
                pure=False,
                key=f"tilesim-point-{p.id[:12]}-{uuid.uuid4().hex[:8]}",
            )
            futures[fut] = p
            pending.add(fut)

    submit(first)
    for fut in pending:
        p = futures.pop(fut)
        out = _outcome(fut)
        fut.release()
        store.put(
            p.id,
            status=out["status"],
            swept=p.swept,
            config=p.config,
            version=version,
            summary=out["summary"],
            error=out["error"],
            wall_s=out["wall_s"],
            worker=out["worker"],
        )
        if out["status"] == "ok":
            ok += 1
        else:
            failed += 1
            failures.append((p.id, p.swept, out["error"]))
        submit(claims.take(window - len(futures)))
        bar.n = claims.skipped + ok + failed
        bar.set_postfix(ok=ok, failed=failed, busy=claims.busy, refresh=False)
        bar.update(0)
    return ok, failed, failures


def _run_claimed(first, claims, window, db, runner, version, workers, scheduler, progress, total) -> tuple:
    """Start the lease renewer, the progress bar and the cluster (or connect to ``scheduler``), run the
    claimed points (:func:`_drain`), and always release the leases and close what was opened."""
    renewer = _renewer(db, claims.owner, claims.lease_s / 4)
    client = cluster = None
    bar = progress_bar(total, "sweep", "pt", quiet=not progress, initial=claims.skipped, dynamic_ncols=True, leave=True)
    try:
        client, cluster = _connect(workers, scheduler, quiet=not progress)
        return _drain(client, first, claims, window, runner, version, bar)
    finally:
        bar.close()
        renewer.stop()
        claims.store.release(claims.owner)
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()


def run_sweep(
    points,
    db,
    runner: str,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    progress: bool = True,
    version: str | None = None,
    total: int | None = None,
    lease_s: float | None = None,
) -> SweepReport:
    """Run the points not yet stored as ``ok`` and store each result as it completes.

    Points are taken lazily from ``points`` and claimed in small batches with a lease in the
    database (:meth:`tilesim.running.store.ResultStore.claim`), so two sweeps on one database share
    the work and never compute the same point; points another live sweep holds are counted as
    ``busy`` and left to it.

    Parameters
    ----------
    points : iterable of Point
        From :func:`expand` or :func:`iter_expand`.
    db : str or Path
        The SQLite results file (created if missing).
    runner : str
        ``"module:function"``, importable on the driver and on every worker.
    workers : int or None
        Worker processes of the local cluster (default: the number of cores; more are capped).
    scheduler : str or None
        Address of a running dask scheduler (``tcp://HOST:PORT``) instead of a local cluster.
    progress : bool
        A tqdm bar (points done, ETA) on stderr, when it is a terminal (tilesim.running.progress).
    total : int or None
        The number of points, for the progress bar (default ``len(points)`` when it has one).
    lease_s : float or None
        Lease lifetime (default :data:`tilesim.running.store.LEASE_S`); renewed every quarter of it.

    Raises
    ------
    ConfigError
        Unresolvable runner, bad worker count, unreachable scheduler, unusable database file.
    """

    resolve_runner(runner)  # fail fast, before any cluster starts
    if workers is not None and not scheduler:
        workers = check_workers(workers)
    version = package_version() if version is None else version
    lease_s = LEASE_S if lease_s is None else float(lease_s)
    total = total if total is not None else (len(points) if hasattr(points, "__len__") else None)
    t0 = time.perf_counter()
    owner = lease_owner()
    it = iter(points)
    ok = failed = 0
    failures: list = []
    with ResultStore(db) as store:
        claims = _Claims(it, store, owner, lease_s)
        window = max(4, 2 * (workers or _cores()))
        first = claims.take(window)
        if first:
            ok, failed, failures = _run_claimed(
                first, claims, window, db, runner, version, workers, scheduler, progress, total
            )
        else:
            store.release(owner)
    return SweepReport(
        db=str(Path(db)),
        points=claims.seen,
        skipped=claims.skipped,
        ran=ok + failed,
        ok=ok,
        failed=failed,
        wall_s=time.perf_counter() - t0,
        failures=tuple(failures),
        busy=claims.busy,
    )
