"""Up-front estimates of the work and memory a command needs, and the limits they must fit.

Every command estimates before it starts and refuses what cannot finish, with one line that
names the estimate, the limit and the fix: memory beyond what this machine has is refused
outright (no flag overrides it — the process would be killed or swap for hours); time beyond
:data:`TIME_LIMIT_S` is refused unless the user passes ``--force``.
"""

from __future__ import annotations

import math
import os

from tilesim.errors import ConfigError, config_message

__all__ = [
    "check_numba_env",
    "memory_limit_bytes",
    "env_memory_limit",
    "check_memory",
    "check_time",
    "TIME_LIMIT_S",
    "SIM_NS_PER_TILE_STEP",
    "MULTICAST_NS_PER_DESTINATION",
    "MULTICAST_BYTES_PER_DESTINATION",
    "MAX_SWEEP_POINTS",
    "worker_limit",
]

# wall-clock a command may take without --force: one hour
TIME_LIMIT_S = 3600.0
# host time per tile per superstep of `tilesim simulate` (parse + build + engine), measured on the
# development machine (2-core VM, 2026-11: demo.toml with repeat = 1000 on m2000, 46-49 ns)
SIM_NS_PER_TILE_STEP = 50.0
# host time and peak memory per destination tile of a program file's multicast, and per repeat of its
# superstep (each repeat is routed and timed): checked, built, routed as a tree and drained by the
# fluid rule. Measured on the development machine (2-core VM, 2026-11: one multicast to the whole wse2
# wafer, 850,000 tiles, took 6.3 s of CPU and 450 MB beyond an empty program: 7.4 us and 530 B per
# tile); the limits use about 3x and 2x that, for slower hosts and a loaded machine
MULTICAST_NS_PER_DESTINATION = 20_000.0
MULTICAST_BYTES_PER_DESTINATION = 1_000.0
# the most points a sweep may have: a results row is ~2 KB, and the grid is checked point by point
# before anything runs (~0.1 ms each with pydantic), so 100k points = 200 MB and ~10 s of checks
MAX_SWEEP_POINTS = 100_000


#: the range ``TILESIM_MEMORY_LIMIT`` may take: 1 MB (nothing runs in less) to 1 EB
ENV_MEMORY_RANGE = (1e6, 1e18)


def env_memory_limit() -> float | None:
    """``TILESIM_MEMORY_LIMIT`` in bytes (None when unset or empty); anything but a finite number in
    :data:`ENV_MEMORY_RANGE` (text, NaN, inf, negative, 0, 1e400) is a :class:`ConfigError` naming it."""
    env = os.environ.get("TILESIM_MEMORY_LIMIT", "")
    if not env:
        return None
    lo, hi = ENV_MEMORY_RANGE
    try:
        value = float(env)
    except ValueError:
        value = math.nan
    if not lo <= value <= hi:  # NaN fails too
        raise ConfigError(
            config_message(
                "TILESIM_MEMORY_LIMIT",
                env,
                f"must be a number of bytes in [{lo:g}, {hi:g}]",
                "unset it or give e.g. 8e9",
            )
        )
    return value


def memory_limit_bytes() -> int:
    """Half of this machine's physical memory (the rest for the OS, Python and other work);
    ``TILESIM_MEMORY_LIMIT`` (bytes, :func:`env_memory_limit`) overrides it."""
    env = env_memory_limit()
    if env is not None:
        return int(env)
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2)
    except (ValueError, OSError, AttributeError):  # not POSIX: assume 8 GB
        return 4 * 2**30


def check_memory(what: str, estimate_bytes: float, fix: str) -> None:
    """Refuse ``estimate_bytes`` above :func:`memory_limit_bytes` (no override)."""
    limit = memory_limit_bytes()
    if estimate_bytes > limit:
        raise ConfigError(
            config_message(
                what,
                f"~{estimate_bytes / 1e9:,.1f} GB of memory",
                f"exceeds the limit of {limit / 1e9:,.1f} GB (half this machine's RAM)",
                fix,
            )
        )


def check_time(what: str, estimate_s: float, force: bool, fix: str) -> None:
    """Refuse ``estimate_s`` above :data:`TIME_LIMIT_S` unless ``force``."""
    if estimate_s > TIME_LIMIT_S and not force:
        raise ConfigError(
            config_message(
                what,
                f"~{estimate_s:,.0f} s of work",
                f"exceeds the limit of {TIME_LIMIT_S:,.0f} s",
                f"{fix}, or pass --force to run it anyway",
            )
        )


def worker_limit() -> int:
    """The cores this process may use (the most useful local worker processes)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def check_numba_env() -> None:
    """The environment variables of Numba that stop it from importing with a traceback, checked before
    anything imports it: ``NUMBA_NUM_THREADS``, when set, must be a whole number >= 1 (Numba raises
    ``ValueError`` for 0 or less, and warns with a printed traceback for text)."""
    env = os.environ.get("NUMBA_NUM_THREADS", "")
    if not env.strip():
        return
    try:
        ok = int(env) >= 1
    except ValueError:
        ok = False
    if not ok:
        raise ConfigError(
            config_message(
                "NUMBA_NUM_THREADS",
                env,
                "must be a whole number >= 1 (Numba's worker threads)",
                "unset it or give e.g. 2",
            )
        )
