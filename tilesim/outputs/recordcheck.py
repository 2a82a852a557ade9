"""The one check of a stored run record (``summary.json``) before anything reads it.

A run folder is data a user can edit (and re-seal), so :func:`check_record` walks the parsed
mapping against the record's schema — every field's type, range and finiteness, the keys each
sub-record must have, and the tile and chip numbers within the run's machine — and refuses the
first field that does not fit with one :class:`ConfigError` naming the file, the field's key path
(``memory.max_tile``, ``by_label[2].breakdown_s.compute``), the value, the problem and the fix.
What passes builds a :class:`tilesim.outputs.runrecord.RunRecord` that every page, table and
comparison can use without a further check (no division by a zero tile count or budget, no NaN,
no number too large to format).

Format 2 (:data:`tilesim.outputs.runrecord.RECORD_FORMAT`) is checked field by field; format 1
(the flat summaries written before the record) by the keys its reader takes.
"""

from __future__ import annotations

import math
import reprlib
from collections.abc import Callable, Mapping

from tilesim.errors import ConfigError, config_message

__all__ = ["check_record", "check_v1", "shown", "MAX_NUMBER", "MAX_WHOLE"]

MAX_NUMBER = 1e30
"""The largest magnitude of a number a run record holds (seconds, bytes, rates, a workload's own
numbers): far beyond any run, and small enough that sums, ratios and unit changes stay finite."""
MAX_WHOLE = 2**63 - 1
"""The largest whole number (counts, tiles, bytes) a run record holds."""
MAX_DEPTH = 32
"""Nesting of a workload's free-form data (settings, sections) beyond which a record is refused."""

_FIX = "restore the value tilesim wrote, or re-run the command that wrote the folder"

Check = Callable[[object, str], None]
"""Checks a value found at a key path; raises :class:`ConfigError` when it does not fit."""


class _Missing:
    def __repr__(self) -> str:
        return "(missing)"


_MISSING = _Missing()
_SHOW = reprlib.Repr()
_SHOW.maxstring, _SHOW.maxother, _SHOW.maxlong, _SHOW.maxlist, _SHOW.maxdict, _SHOW.maxlevel = 60, 60, 24, 3, 3, 2


class _Shown:
    """A value as the error line shows it: short (a long text, list or number cut with ``...``)."""

    def __init__(self, value: object):
        self.text = repr(value) if isinstance(value, _Missing) else _SHOW.repr(value)

    def __repr__(self) -> str:
        return self.text


def shown(value: object) -> _Shown:
    """``value`` as an error line shows it (:func:`tilesim.errors.config_message` writes its repr): short."""
    return _Shown(value)


class _Where:
    """The file a record came from, named in every refusal (set by :func:`check_record`)."""

    def __init__(self, file: str):
        self.file = file

    def bad(self, at: str, value: object, problem: str, fix: str = _FIX) -> ConfigError:
        return ConfigError(config_message(f"{self.file} {at or '(top level)'}", _Shown(value), problem, fix))


def _join(at: str, key: object) -> str:
    if isinstance(key, int):
        return f"{at}[{key}]"
    return f"{at}.{key}" if at else str(key)


def _kind(value: object) -> str:
    names = {dict: "an object", list: "a list", str: "text", bool: "true/false", type(None): "null"}
    return names.get(type(value), "a number")


# ---- leaves ------------------------------------------------------------------------------------
def _number(w: _Where, value: object, at: str, low: float | None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise w.bad(at, value, f"must be a number, not {_kind(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise w.bad(at, value, "is not a finite number")
    if abs(value) > MAX_NUMBER:
        raise w.bad(at, value, f"is larger than any run holds (at most {MAX_NUMBER:g})")
    if low is not None and value < low:
        raise w.bad(at, value, f"must be >= {low:g}" if low else "must not be negative")
    return float(value)


def number(low: float | None = 0.0) -> Callable[[_Where], Check]:
    """A finite number of at most :data:`MAX_NUMBER` in magnitude, ``>= low`` (None: any sign)."""

    def check(w: _Where) -> Check:
        def run(v: object, at: str) -> None:
            _number(w, v, at, low)

        return run

    return check


def whole(low: int = 0) -> Callable[[_Where], Check]:
    """A whole number (an integral float passes) from ``low`` to :data:`MAX_WHOLE`."""

    def check(w: _Where) -> Check:
        def run(v: object, at: str) -> None:
            x = _number(w, v, at, None)
            if isinstance(v, float) and not x.is_integer():
                raise w.bad(at, v, "must be a whole number")
            if abs(v) > MAX_WHOLE:  # type: ignore[arg-type]
                raise w.bad(at, v, f"is larger than any run holds (at most {MAX_WHOLE})")
            if x < low:
                raise w.bad(at, v, f"must be >= {low}" + (" (a run has at least one)" if low == 1 else ""))

        return run

    return check


def text() -> Callable[[_Where], Check]:
    """Text (a JSON string)."""

    def check(w: _Where) -> Check:
        def run(v: object, at: str) -> None:
            if not isinstance(v, str):
                raise w.bad(at, v, f"must be text, not {_kind(v)}")

        return run

    return check


def free() -> Callable[[_Where], Check]:
    """Any JSON value a workload or the user chose (settings, a section's data): its numbers finite
    and at most :data:`MAX_NUMBER`, nested at most :data:`MAX_DEPTH` levels."""

    def check(w: _Where) -> Check:
        def run(v: object, at: str, depth: int = 0) -> None:
            if depth > MAX_DEPTH:
                raise w.bad(at, v, f"nests deeper than {MAX_DEPTH} levels")
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                _number(w, v, at, None)
            elif isinstance(v, dict):
                for k, x in v.items():
                    run(x, _join(at, k), depth + 1)
            elif isinstance(v, list):
                for i, x in enumerate(v):
                    run(x, _join(at, i), depth + 1)

        return run

    return check


# ---- containers --------------------------------------------------------------------------------
def nullable(inner: Callable[[_Where], Check]) -> Callable[[_Where], Check]:
    """``inner``, or null."""

    def check(w: _Where) -> Check:
        run_inner = inner(w)
        return lambda v, at: None if v is None else run_inner(v, at)

    return check


def listof(item: Callable[[_Where], Check]) -> Callable[[_Where], Check]:
    """A list whose every item passes ``item``."""

    def check(w: _Where) -> Check:
        run_item = item(w)

        def run(v: object, at: str) -> None:
            if not isinstance(v, list):
                raise w.bad(at, v, f"must be a list, not {_kind(v)}")
            for i, x in enumerate(v):
                run_item(x, _join(at, i))

        return run

    return check


def mapof(value: Callable[[_Where], Check]) -> Callable[[_Where], Check]:
    """An object of any keys whose every value passes ``value``."""

    def check(w: _Where) -> Check:
        run_value = value(w)

        def run(v: object, at: str) -> None:
            if not isinstance(v, dict):
                raise w.bad(at, v, f"must be an object {{name: value}}, not {_kind(v)}")
            for k, x in v.items():
                run_value(x, _join(at, k))

        return run

    return check


def record(
    required: Mapping[str, Callable[[_Where], Check]],
    optional: Mapping[str, Callable[[_Where], Check]] | None = None,
    others: Callable[[_Where], Check] | None = None,
) -> Callable[[_Where], Check]:
    """An object with the ``required`` keys and any of the ``optional`` ones, each passing its check;
    a key of neither is refused, unless ``others`` checks it."""
    optional = optional or {}

    def check(w: _Where) -> Check:
        runs = {k: c(w) for k, c in {**required, **optional}.items()}
        run_other = others(w) if others is not None else None

        def run(v: object, at: str) -> None:
            if not isinstance(v, dict):
                raise w.bad(at, v, f"must be an object, not {_kind(v)}")
            for k in required:
                if k not in v:
                    raise w.bad(_join(at, k), _MISSING, "is required in a run record")
            for k, x in v.items():
                if k in runs:
                    runs[k](x, _join(at, k))
                elif run_other is not None:
                    run_other(x, _join(at, k))
                else:
                    known = ", ".join(sorted(runs))
                    raise w.bad(_join(at, k), x, f"is not a field here (the fields: {known})", "remove it")

        return run

    return check


# ---- the record --------------------------------------------------------------------------------
_SECONDS = number(0.0)
_PHASE_SECONDS = number(None)  # a phase's share of the critical path may carry float rounding below 0
_BYTES = number(0.0)
_TEXT = text()

_LABEL = record(
    {
        "label": _TEXT,
        "supersteps": whole(0),
        "time_s": _SECONDS,
        "breakdown_s": mapof(_PHASE_SECONDS),
        "critical_chip": whole(0),
        "critical_tile": whole(0),
    }
)
_LIVENESS = record(
    {
        "steps": listof(_TEXT),
        "tile": whole(0),
        "peak_step": _TEXT,
        "allocated_bytes": listof(whole(0)),
        "held_bytes": mapof(listof(whole(0))),
        "chip": whole(0),
        "chip_allocated_bytes": listof(whole(0)),
        "chip_held_bytes": listof(whole(0)),
    }
)
_MEMORY = record(
    {"budget_bytes": whole(1), "max_tile": whole(0), "max_tile_bytes": whole(0)},
    {
        "by_category_bytes": nullable(mapof(whole(0))),
        "total_by_category_bytes": nullable(mapof(whole(0))),
        "max_tile_entries": listof(record({"label": _TEXT, "category": _TEXT, "bytes": whole(0)})),
        "overflow_tiles": listof(whole(0)),
        "liveness": nullable(_LIVENESS),
    },
)
_EXPLAIN = record(
    {},
    {
        "sentence": _TEXT,
        "phase": _TEXT,
        "chip": nullable(whole(0)),
        "tile": nullable(whole(0)),
        "time_s": nullable(_SECONDS),
        "share": nullable(number(0.0)),
        "exchange_bytes": nullable(mapof(_BYTES)),
        "exchange_received_bytes": nullable(mapof(_BYTES)),
        "detail": nullable(mapof(free())),
    },
    others=free(),  # a workload's own numbers beside the fields
)
_SECTION = record(
    {"title": _TEXT},
    {"lines": listof(_TEXT), "data": mapof(free()), "charts": listof(mapof(free()))},
)
RECORD = record(
    {
        "format": whole(1),
        "workload": _TEXT,
        "program": _TEXT,
        "machine": _TEXT,
        "chips": whole(1),
        "tiles_per_chip": whole(1),
        "supersteps": whole(0),
        "step_s": _SECONDS,
        "breakdown_s": mapof(_PHASE_SECONDS),
    },
    {
        "by_label": listof(_LABEL),
        "bytes": record({}, {"onchip": whole(0), "links": whole(0), "host": whole(0)}),
        "throughput": nullable(record({"value": number(0.0), "unit": _TEXT})),
        "busiest_link_groups": listof(record({"group": _TEXT, "bytes": whole(0)})),
        "memory": nullable(_MEMORY),
        "critical_tiles": listof(whole(0)),
        "explain": nullable(_EXPLAIN),
        "findings": listof(record({"kind": _TEXT, "message": _TEXT, "fix": _TEXT})),
        "structure": nullable(mapof(free())),
        "notes": listof(_TEXT),
        "settings": nullable(mapof(free())),
        "provenance": record({}, {"tilesim_version": _TEXT, "cost_model": _TEXT, "data": _TEXT}),
        "sections": listof(_SECTION),
        "tile_groups": _TEXT,
    },
    others=free(),  # a later tilesim's fields of the same format: kept out of the record, but checked
)
"""The schema of :meth:`tilesim.outputs.runrecord.RunRecord.to_dict` (format 2)."""

_V1_LABELS = mapof(
    record(
        {
            "supersteps": whole(0),
            "time_s": _SECONDS,
            "breakdown_s": mapof(_PHASE_SECONDS),
            "critical_chip": whole(0),
            "critical_tile": whole(0),
        }
    )
)
RECORD_V1 = record(
    {"machine": _TEXT, "breakdown_s": mapof(_PHASE_SECONDS)},
    {
        "workload": nullable(_TEXT),
        "program": _TEXT,
        "chips": whole(1),
        "tiles_per_chip": whole(1),
        "supersteps": whole(0),
        "predicted_step_s": _SECONDS,
        "total_s": _SECONDS,
        "by_phase": nullable(_V1_LABELS),
        "by_label": nullable(_V1_LABELS),
        "bytes": nullable(mapof(_BYTES)),
        "samples_per_s": number(0.0),
        "busiest_link_groups": listof(record({"group": _TEXT, "bytes": whole(0)})),
        "memory": nullable(_MEMORY),
        "explain": nullable(_EXPLAIN),
        "findings": nullable(listof(record({"kind": _TEXT, "message": _TEXT, "fix": _TEXT}))),
        "structure": nullable(mapof(free())),
        "notes": nullable(listof(_TEXT)),
    },
    others=free(),  # the workload's own keys
)
"""The keys a format-1 summary's reader (:func:`tilesim.outputs.runrecord.read_record`) takes."""


def _tiles(w: _Where, d: Mapping, v1: bool) -> None:
    """Chip and tile numbers within the run's machine (``chips`` x ``tiles_per_chip``): a page
    indexes its per-tile arrays with them."""
    chips, tpc = int(d.get("chips", 1)), int(d.get("tiles_per_chip", 0) or 0)
    if not tpc:
        return  # a format-1 summary without the machine's size: nothing to bound them by

    def within(at: str, value, limit: int, what: str) -> None:
        if value is not None and int(value) >= limit:
            raise w.bad(at, value, f"is not a {what} of this run (it has {limit})")

    if v1:
        labels = d.get("by_phase") or d.get("by_label") or {}
    else:
        labels = {str(i): x for i, x in enumerate(d.get("by_label", ()))}
    for name, x in labels.items():
        at = f"by_phase.{name}" if v1 else f"by_label[{name}]"
        within(f"{at}.critical_chip", x["critical_chip"], chips, "chip")
        within(f"{at}.critical_tile", x["critical_tile"], tpc, "tile on a chip")
    mem = d.get("memory") or {}
    within("memory.max_tile", mem.get("max_tile"), chips * tpc, "tile")
    for i, t in enumerate(mem.get("overflow_tiles", ())):
        within(f"memory.overflow_tiles[{i}]", t, chips * tpc, "tile")
    live = mem.get("liveness") or {}
    within("memory.liveness.tile", live.get("tile"), chips * tpc, "tile")
    within("memory.liveness.chip", live.get("chip"), chips, "chip")
    for i, t in enumerate(d.get("critical_tiles", ())):
        within(f"critical_tiles[{i}]", t, chips * tpc, "tile")
    ex = d.get("explain") or {}
    within("explain.chip", ex.get("chip"), chips, "chip")


def _liveness(w: _Where, d: Mapping) -> None:
    live = (d.get("memory") or {}).get("liveness")
    if not live:
        return
    n = len(live["steps"])
    series = {"allocated_bytes": live["allocated_bytes"], "chip_allocated_bytes": live["chip_allocated_bytes"]}
    series |= {"chip_held_bytes": live["chip_held_bytes"]}
    series |= {f"held_bytes.{k}": v for k, v in live["held_bytes"].items()}
    sizes = {len(v) for v in series.values()}
    if len(sizes) == 1 and sizes != {n}:  # every series agrees: the steps are what was edited
        raise w.bad("memory.liveness.steps", live["steps"], f"names {n} steps, its series hold {sizes.pop()} values")
    for name, v in series.items():
        if len(v) != n:
            raise w.bad(f"memory.liveness.{name}", v, f"must hold one value per step ({n}), not {len(v)}")


def check_record(d: object, file: str = "summary.json") -> None:
    """Raise :class:`ConfigError` (one line naming ``file``, the key path, the value, the problem and
    the fix) unless ``d`` is a format-2 run record every output can read (module docstring)."""
    w = _Where(file)
    RECORD(w)(d, "")
    assert isinstance(d, Mapping)
    _tiles(w, d, v1=False)
    _liveness(w, d)


def check_v1(d: object, file: str = "summary.json") -> None:
    """:func:`check_record` for a format-1 summary (the keys its reader takes)."""
    w = _Where(file)
    RECORD_V1(w)(d, "")
    assert isinstance(d, Mapping)
    _tiles(w, d, v1=True)
    _liveness(w, d)
