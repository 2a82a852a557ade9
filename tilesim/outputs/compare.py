"""Stored runs side by side: which gives more throughput, what differs, and where (``tilesim compare``).

Reads two or more run folders (any command's ``--out``; each checked against its manifest first). A
folder that is not a run but whose immediate subfolders are (``map-search --out``'s ``baseline/`` and
``best/``, or runs kept together by hand) stands for those runs, sorted by name. ``tilesim sweep``
writes no run folders: its points live in its SQLite database (``out`` is refused in a sweep file).

The first run is the reference: every other run's numbers carry their ratio to it. Sections:

* ``rank``: throughput (:attr:`tilesim.outputs.runrecord.RunRecord.rate`: the workload's own rate, e.g.
  samples/s, else steps/s; higher is better), time per step, and the workload's units per step;
* ``limits``: what limits each run (its largest phase, or SRAM when tiles are over budget), the
  fullest tile's SRAM headroom, and the named assumptions its workload records (a section's
  ``assumptions`` data, e.g. a workload's execution stack) — what a comparison of one workload on
  several machines reads first;
* ``differs``: every setting that differs (``record.settings``), and workload, program, machine,
  chips, data, cost model and tilesim version when they differ; nothing that is the same;
* ``phase``: time per phase; ``label``: the superstep labels whose time moved (the 12 that moved
  most), with how many did not move; ``chip``: busy time per chip (multi-chip runs);
* ``bytes``, ``memory`` (SRAM by category, fullest tile, tiles over budget), ``tiles`` (critical and
  fullest tiles, slowest phase) and ``workload``: the workload's own numbers that differ.

The verdict ranks by throughput when every run's rate has one unit, else by step time (and says so).
``compare.json`` keeps every number at full precision; ``compare.md`` and the terminal round them.

**One workload on several machines** (``tilesim compare RUN --machines A,B,... --out DIR``):
:func:`runs_on_machines` re-runs the stored run's settings on each machine into ``DIR/<machine>``
through the runner its workload registered (:mod:`tilesim.outputs.runners`; the core runs no
workload itself), and those folders are compared as any others: one workload, so ranked by its rate.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from tilesim.errors import ConfigError, config_message
from tilesim.io import dumps_json
from tilesim.outputs.records import PHASES

__all__ = [
    "Row",
    "Comparison",
    "compare_runs",
    "run_folders",
    "format_comparison",
    "write_comparison",
    "check_compare_out",
    "MAX_RUNS",
    "machine_spec",
    "runs_on_machines",
]

LABEL_ROWS = 12
"""Labels listed: those whose time moved most."""
CHIP_ROWS = 16
"""Chips listed in the busy-time section."""
MAX_RUNS = 32
"""Most runs one comparison reads (each run's arrays are loaded; a table wider than this is unreadable)."""
OUTPUTS = ("compare.md", "compare.json", "compare.png", "compare.html")
JSON_FORMAT = 2
"""Format of ``compare.json``. 1: two runs, keys ``a``, ``b``, ``verdict``, ``rows`` (before N runs); 2: this."""
_NOISE = 1e-9  # relative difference taken as float noise: no change
_SAME_RATE = 1e-4  # relative difference of rates reported as "the same"


@dataclass(frozen=True)
class Row:
    """One compared quantity: ``values`` holds one per run (a number in ``unit``, a text or a
    setting's JSON value; None where the run has none). ``unit``: "s", "B", "tiles", "-" (a plain
    number), a rate unit (e.g. "samples/s"), or "" (text and settings: compared, not divided)."""

    section: str
    item: str
    values: tuple
    unit: str

    @property
    def numeric(self) -> bool:
        """True when the row's values are numbers (or missing), so ratios mean something."""
        return self.unit != "" and all(_is_num(v) or v is None for v in self.values)

    @property
    def ratios(self) -> tuple[float | None, ...]:
        """Each value over the reference's (the first run's): 1.0 for float noise, None when either
        is missing or the reference is 0, or the row is not numeric."""
        ref = self.values[0]
        if not self.numeric or not _is_num(ref) or ref == 0:
            return tuple(None for _ in self.values)
        return tuple(None if v is None else (1.0 if _same(v, ref) else v / ref) for v in self.values)

    def moved(self) -> bool:
        """True when some run's value differs from the reference's (beyond float noise)."""
        ref = self.values[0]
        return any(not _equal(v, ref) for v in self.values[1:])

    def to_dict(self) -> dict:
        """The JSON form: full precision values and their ratios to the reference."""
        return {
            "section": self.section,
            "item": self.item,
            "unit": self.unit,
            "values": list(self.values),
            "ratios": list(self.ratios),
        }


@dataclass(frozen=True)
class Comparison:
    """Runs ``folders`` (named ``names`` in tables; the first is the reference), their ``rows``, how
    they are ranked (``rank_by``: "throughput" or "step time"; ``ranking``: run indices, best first)
    and the ``verdict``. ``labels`` counts superstep labels: (moved, did not move, all). ``runs``
    keeps each loaded run (``(RunRecord, arrays)``) so that the pictures read no folder again.
    ``comparable`` is False when the runs are of different workloads (``record.workload``): the
    table still sets them side by side, but they do different work, so the verdict names no faster
    run and ``ranking`` only orders them by step time."""

    folders: tuple[str, ...]
    names: tuple[str, ...]
    rows: tuple[Row, ...]
    rank_by: str
    ranking: tuple[int, ...]
    verdict: str
    labels: tuple[int, int, int] = (0, 0, 0)
    runs: tuple = field(default=(), repr=False, compare=False)
    comparable: bool = True  # False: the runs are of different workloads (the verdict ranks none)

    def section(self, name: str) -> list[Row]:
        """The rows of section ``name`` (in table order)."""
        return [r for r in self.rows if r.section == name]

    def row(self, section: str, item: str) -> Row | None:
        """The row ``item`` of ``section`` (None when there is none)."""
        return next((r for r in self.rows if r.section == section and r.item == item), None)

    @property
    def best(self) -> str:
        """The name of the best-ranked run."""
        return self.names[self.ranking[0]]

    def to_dict(self) -> dict:
        """The ``compare.json`` form (every number at full precision)."""
        runs = []
        for name, folder, (rec, _) in zip(self.names, self.folders, self.runs or [(None, None)] * len(self.names)):
            entry: dict = {"name": name, "folder": folder}
            if rec is not None:
                entry |= {
                    "workload": rec.workload,
                    "program": rec.program,
                    "machine": rec.machine,
                    "chips": rec.chips,
                    "step_s": rec.step_s,
                    "rate": {"value": rec.rate.value, "unit": rec.rate.unit},
                }
            runs.append(entry)
        moved, still, total = self.labels
        return {
            "format": JSON_FORMAT,
            "reference": self.names[0],
            "runs": runs,
            "comparable": self.comparable,
            "rank_by": self.rank_by if self.comparable else "none",
            "ranking": [self.names[i] for i in self.ranking] if self.comparable else [],
            "verdict": self.verdict,
            "labels": {"moved": moved, "did_not_move": still, "total": total},
            "rows": [r.to_dict() for r in self.rows],
        }


# ---------------------------------------------------------------------------------------------
# numbers


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _same(a: float, b: float) -> bool:
    return abs(a - b) <= _NOISE * max(abs(a), abs(b))


def _equal(a, b) -> bool:
    """Equal values: numbers up to float noise, anything else by its JSON form."""
    if _is_num(a) and _is_num(b):
        return _same(a, b)
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


# ---------------------------------------------------------------------------------------------
# the folders


def _not_a_run(value, why: str) -> ConfigError:
    return ConfigError(
        config_message(
            "RUN",
            str(value),
            why,
            "give a folder written by `tilesim run --out` (or any command's --out), or a folder of such folders",
        )
    )


def _expand(folders) -> list[tuple[Path, str]]:
    """``(run folder, the argument it came from)`` of each run ``folders`` stand for (:func:`run_folders`)."""
    out: list[tuple[Path, str]] = []
    for f in folders:
        p = Path(f).expanduser()
        if not p.is_dir():
            raise _not_a_run(f, "is not a folder" if p.exists() else "does not exist")
        if (p / "manifest.json").exists() or (p / "summary.json").exists():
            out.append((p, str(f)))  # a run (load_run says what is wrong with a broken one)
            continue
        inner = sorted(
            s for s in p.iterdir() if s.is_dir() and not s.name.startswith(".") and (s / "manifest.json").is_file()
        )
        if not inner:
            raise _not_a_run(f, "holds no run: no manifest.json in it or in any folder inside it")
        out += [(s, str(f)) for s in inner]
    return out


def run_folders(folders) -> list[Path]:
    """The run folders that ``folders`` (paths) stand for: a run folder (one with ``manifest.json``)
    itself; a folder of run folders, each of its immediate subfolders holding ``manifest.json``,
    sorted by name. Raises :class:`ConfigError` naming a path that is no folder or holds no run."""
    return [p for p, _ in _expand(folders)]


def _check_folders(found: list[tuple[Path, str]], given) -> None:
    """At least two runs, at most :data:`MAX_RUNS`, none twice."""
    if len(found) < 2:
        raise ConfigError(
            config_message(
                "RUN",
                [str(f) for f in given],
                f"compare needs 2 or more runs, these hold {len(found)}",
                "give two or more run folders, or a folder that holds two or more",
            )
        )
    if len(found) > MAX_RUNS:
        raise ConfigError(
            config_message(
                "RUN",
                [str(f) for f in given],
                f"{len(found)} runs, more than the {MAX_RUNS} one comparison reads",
                "compare fewer runs (e.g. a subset of the folders)",
            )
        )
    seen: dict[Path, tuple[int, str]] = {}
    for i, (p, arg) in enumerate(found):
        key = p.resolve()
        if key in seen:
            j, first = seen[key]
            a, b = (("itself" if Path(x).expanduser().resolve() == key else f"within {x!r}") for x in (first, arg))
            how = f"runs {j + 1} and {i + 1}" if a == b == "itself" else f"{a}, and again {b}"
            raise ConfigError(config_message("RUN", str(p), f"is given twice ({how})", "give each run folder once"))
        seen[key] = (i, arg)


def _load(path: Path):
    from tilesim.outputs.report import load_run  # NumPy loads only when a command runs (start-up time)

    try:
        return load_run(path)
    except ConfigError as exc:  # name the argument, not the report's "run directory"
        text = str(exc)
        if text.startswith(str(path)):  # names a file of the run (its summary.json, arrays.npz) already
            raise
        head = f"run directory = {str(path)!r}: "
        raise ConfigError(f"RUN = {str(path)!r}: {text[len(head) :] if text.startswith(head) else text}") from None


def _names(paths: list[Path]) -> tuple[str, ...]:
    """Column names: the folders' own names when they are all different, else their paths."""
    base = [p.name or str(p) for p in paths]
    return tuple(base if len(set(base)) == len(base) else [str(p) for p in paths])


# ---------------------------------------------------------------------------------------------
# rows


def _rank_rows(recs) -> list[Row]:
    units = list(dict.fromkeys(r.rate.unit for r in recs))
    rows = [
        Row(
            "rank",
            "throughput" if len(units) == 1 else f"throughput ({u})",
            tuple(r.rate.value if r.rate.unit == u else None for r in recs),
            u,
        )
        for u in units
    ]
    rows.append(Row("rank", "time per step", tuple(r.step_s for r in recs), "s"))
    if len(units) == 1 and units[0] != "steps/s":
        noun = units[0].split("/")[0]
        rows.append(Row("rank", f"{noun} per step", tuple(r.rate.value * r.step_s for r in recs), "-"))
    return rows


_LONG_ITEMS = ("program", "data", "cost model", "tilesim version", "settings")
"""What-differs items the verdict leaves to the table (long texts)."""
_RECORD_ITEMS = ("workload", "program", "machine", "chips", "data", "cost model", "tilesim version")


def _record_item(r, item: str):
    p = r.provenance
    return {
        "workload": r.workload,
        "program": r.program,
        "machine": r.machine,
        "chips": r.chips,
        "data": p.data,
        "cost model": p.cost_model,
        "tilesim version": p.tilesim_version,
    }[item]


def _differs_rows(recs) -> list[Row]:
    """Every setting that differs between the runs that record settings, and the runs' identity and
    provenance that differ; a run folder written before settings were recorded is one row, not one per
    setting."""
    rows = [Row("differs", k, tuple(_record_item(r, k) for r in recs), "") for k in _RECORD_ITEMS]
    rows = [r for r in rows if r.moved()]
    have = [i for i, r in enumerate(recs) if r.settings]
    if len(have) < len(recs):
        state = tuple(
            f"{len(r.settings)} recorded" if r.settings else "not recorded (an older run folder)" for r in recs
        )
        rows.append(Row("differs", "settings", state, ""))
    for k in dict.fromkeys(k for r in recs for k in r.settings):
        vals = tuple(r.settings[k] if k in r.settings else None for r in recs)
        known = [vals[i] for i in have]
        if any(not _equal(v, known[0]) for v in known[1:]):
            rows.append(Row("differs", f"{k} (setting)" if k in _RECORD_ITEMS else k, vals, ""))
    return rows


_LIMIT_PHASES = ("compute", "exchange", "sync", "links", "host")
"""The phases that can limit a step (the residual is no mechanism)."""


def _limited_by(r) -> str:
    """What limits run ``r``: SRAM when tiles are over budget, else its largest phase and its share."""
    if r.memory is not None and r.memory.overflow_tiles:
        return f"SRAM: {len(r.memory.overflow_tiles)} tiles over budget"
    times = {p: float(r.breakdown_s.get(p, 0.0)) for p in _LIMIT_PHASES}
    top = max(times, key=lambda p: times[p])
    if r.step_s <= 0 or times[top] <= 0:
        return "—"
    return f"{top} ({times[top] / r.step_s:.0%} of the step)"


def _assumptions(r) -> list[str] | None:
    """The named assumptions run ``r``'s workload records (its sections' ``assumptions`` data)."""
    found = [a for sec in r.sections for a in (sec.as_dict().get("assumptions") or ())]
    return [str(a) for a in found] or None


def _limit_rows(recs) -> list[Row]:
    """What limits each run, its SRAM headroom and its named assumptions (module docstring)."""
    rows = [Row("limits", "limited by", tuple(_limited_by(r) for r in recs), "")]
    mems = [r.memory for r in recs]
    if any(m is not None for m in mems):
        rows.append(
            Row(
                "limits",
                "SRAM headroom (fullest tile)",
                tuple(None if m is None else m.budget_bytes - m.max_tile_bytes for m in mems),
                "B",
            )
        )
        rows.append(
            Row(
                "limits",
                "fullest tile, % of SRAM",
                tuple(None if not m or not m.budget_bytes else m.max_tile_bytes / m.budget_bytes * 100 for m in mems),
                "-",
            )
        )
    named = [_assumptions(r) for r in recs]
    if any(named):
        rows.append(Row("limits", "named assumptions", tuple(None if a is None else "; ".join(a) for a in named), ""))
    return rows


def _phase_rows(recs) -> list[Row]:
    rows = [Row("phase", p, tuple(float(r.breakdown_s.get(p, 0.0)) for r in recs), "s") for p in PHASES]
    return [r for r in rows if any(r.values)]


def _label_rows(recs) -> tuple[list[Row], tuple[int, int, int]]:
    """The labels whose time moved (the :data:`LABEL_ROWS` that moved most) and the counts
    (moved, did not move, all)."""
    names = list(dict.fromkeys(x.label for r in recs for x in r.by_label))
    rows = []
    for name in names:
        times = []
        for r in recs:
            lt = r.label(name)
            times.append(None if lt is None else lt.time_s)
        rows.append(Row("label", name, tuple(times), "s"))
    moved = [r for r in rows if r.moved()]

    def shift(row: Row) -> float:
        ref = row.values[0] or 0.0
        return max(abs((v or 0.0) - ref) for v in row.values[1:])

    moved.sort(key=lambda r: -shift(r))
    return moved[:LABEL_ROWS], (len(moved), len(rows) - len(moved), len(rows))


def _chip_busy_s(arrays: dict) -> list[float]:
    """Per chip: the stored timeline's compute + exchange cycles, in seconds."""
    if "timeline_compute_cycles" not in arrays:
        return []
    hz = float(arrays["clock_hz"])
    busy = arrays["timeline_compute_cycles"].sum(axis=0) + arrays["timeline_exchange_cycles"].sum(axis=0)
    return [float(x) / hz for x in busy]


def _chip_rows(arrays: list[dict]) -> list[Row]:
    busy = [_chip_busy_s(a) for a in arrays]
    chips = max(len(b) for b in busy)
    if chips < 2:
        return []
    return [
        Row("chip", f"chip {c} busy", tuple(b[c] if c < len(b) else None for b in busy), "s")
        for c in range(min(chips, CHIP_ROWS))
    ]


def _bytes_rows(recs) -> list[Row]:
    rows = [
        Row("bytes", "on chip", tuple(r.bytes.onchip for r in recs), "B"),
        Row("bytes", "chip to chip", tuple(r.bytes.links for r in recs), "B"),
        Row("bytes", "host", tuple(r.bytes.host for r in recs), "B"),
    ]
    return [r for r in rows if any(r.values)]


def _tile(tiles_per_chip: int, tile: int) -> str:
    chip, t = divmod(int(tile), max(int(tiles_per_chip), 1))
    return f"chip {chip} tile {t}"


def _memory_rows(recs) -> list[Row]:
    mems = [r.memory for r in recs]
    if all(m is None for m in mems):
        return []
    cats = list(dict.fromkeys(k for m in mems if m is not None for k in m.total_by_category_bytes))
    top = {k: max((m.total_by_category_bytes.get(k, 0) for m in mems if m is not None), default=0) for k in cats}
    rows = [
        Row("memory", k, tuple(None if m is None else m.total_by_category_bytes.get(k, 0) for m in mems), "B")
        for k in sorted(cats, key=lambda k: -top[k])
        if top[k]
    ]
    rows.append(Row("memory", "fullest tile", tuple(None if m is None else m.max_tile_bytes for m in mems), "B"))
    rows.append(
        Row("memory", "tiles over budget", tuple(None if m is None else len(m.overflow_tiles) for m in mems), "tiles")
    )
    return rows


def _tiles_rows(recs) -> list[Row]:
    rows = []
    if any(r.memory is not None for r in recs):
        rows.append(
            Row(
                "tiles",
                "fullest tile",
                tuple(None if r.memory is None else _tile(r.tiles_per_chip, r.memory.max_tile) for r in recs),
                "",
            )
        )
    ex = [r.explain for r in recs]
    if any(e is not None and e.tile is not None for e in ex):
        rows.append(
            Row(
                "tiles",
                "critical tile",
                tuple(None if e is None or e.tile is None else f"chip {e.chip or 0} tile {e.tile}" for e in ex),
                "",
            )
        )
        rows.append(Row("tiles", "slowest phase", tuple(None if e is None else e.phase or None for e in ex), ""))
    return rows


def _flat(x, prefix: str = ""):
    """``(dotted key, value)`` of every scalar of a section's data (lists of up to 16 scalars kept whole)."""
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _flat(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(x, list) and len(x) <= 16 and all(_is_num(v) or isinstance(v, str) for v in x):
        yield prefix, x
    elif _is_num(x) or isinstance(x, (str, bool)):
        yield prefix, x


def _unit_of(key: str, values) -> str:
    """A workload value's unit from its key (``..._bytes``: B; ``..._s``, ``..._s_per_step``: s), "-"
    for other numbers, "" for text."""
    nums = all(_is_num(v) or v is None or (isinstance(v, list) and all(map(_is_num, v))) for v in values)
    if not nums:
        return ""
    parts = key.split(".")
    if any(p.endswith("bytes") for p in parts):
        return "B"
    if any(p.endswith("_s") or "_s_per_" in p for p in parts):
        return "s"
    return "-"


def _workload_rows(recs) -> list[Row]:
    """The workload's own numbers (its sections' data) that differ between the runs (a section's
    ``assumptions`` are the ``limits`` section's)."""
    flat = [{k: v for s in r.sections for k, v in _flat(s.as_dict()) if k != "assumptions"} for r in recs]
    keys = list(dict.fromkeys(k for f in flat for k in f))
    rows = []
    for k in keys:
        vals = tuple(f[k] if k in f else None for f in flat)
        rows.append(Row("workload", k, vals, _unit_of(k, vals)))
    return [r for r in rows if r.moved()]


# ---------------------------------------------------------------------------------------------
# ranking and verdict


def _ranking(recs, by_step: bool = False) -> tuple[str, tuple[int, ...]]:
    """``(rank_by, run indices best first)``: by throughput when the rates share a unit (and not
    ``by_step``), else by step time; runs with no step time last."""
    n = range(len(recs))
    if len({r.rate.unit for r in recs}) == 1 and not by_step:
        return "throughput", tuple(sorted(n, key=lambda i: (recs[i].step_s <= 0, -recs[i].rate.value, i)))
    return "step time", tuple(sorted(n, key=lambda i: (recs[i].step_s <= 0, recs[i].step_s, i)))


def _x(q: float) -> str:
    """A ratio as ``1.37x`` (more digits when two would read as 1.00x for runs that differ)."""
    if not 0.01 <= q < 100:
        return f"{q:.3g}x"
    text = f"{q:.2f}"
    return f"{q:.4f}x" if text == "1.00" and q != 1.0 else text + "x"


def _lead(names, recs, rank_by: str, order) -> str:
    """The ranking sentence: which run is best, by how much, and how its step time reads beside it."""
    b = order[0]
    q = names[b]
    rate = recs[b].rate
    if rank_by == "step time":
        units = ", ".join(dict.fromkeys(r.rate.unit for r in recs))
        rest = ", ".join(f"`{names[i]}` {_fmt_s(recs[i].step_s)}" for i in order[1:])
        return (
            f"`{q}` takes the least time per step ({_fmt_s(recs[b].step_s)}; then {rest}); the runs' rates are in "
            f"different units ({units}), so they are ranked by step time"
        )
    if all(math.isclose(r.rate.value, rate.value, rel_tol=_SAME_RATE) for r in recs):
        return f"The {len(recs)} runs have the same throughput ({_fmt_rate(rate.value, rate.unit)})"
    if len(recs) == 2:
        o = order[1]
        lead = (
            f"`{q}` has the higher throughput: {_fmt_rate(rate.value, rate.unit)} against "
            f"{_fmt_rate(recs[o].rate.value, rate.unit)} for `{names[o]}` ({_x(rate.value / recs[o].rate.value)})"
            if recs[o].rate.value > 0
            else f"`{q}` has the higher throughput ({_fmt_rate(rate.value, rate.unit)}; `{names[o]}` has none)"
        )
        return lead + _step_clause(recs[b], recs[o], rate.unit)
    rest = ", ".join(
        f"`{names[i]}` {_fmt_rate(recs[i].rate.value, rate.unit)} ({_x(recs[i].rate.value / rate.value)}, "
        f"{_fmt_s(recs[i].step_s)} per step)"
        for i in order[1:]
    )
    return (
        f"`{q}` has the highest throughput: {_fmt_rate(rate.value, rate.unit)} ({_fmt_s(recs[b].step_s)} per step); "
        f"then {rest}"
    )


def _step_clause(best, other, unit: str) -> str:
    """How the best run's step time reads beside the other's (a longer step can carry more work)."""
    tb, to = _fmt_s(best.step_s), _fmt_s(other.step_s)
    if unit == "steps/s":
        return f" ({tb} against {to} per step)"
    noun = unit.split("/")[0]
    pb, po = _fmt_num(best.rate.value * best.step_s), _fmt_num(other.rate.value * other.step_s)
    if _same(best.step_s, other.step_s):
        return f"; both steps take {tb}, its carries {pb} {noun} against {po}"
    if best.step_s > other.step_s:
        return f"; its step takes longer ({tb} against {to}) but carries {pb} {noun} against {po}"
    return f"; its step is also shorter ({tb} against {to})"


def _why(names, rows: list[Row], p: int, q: int) -> str:
    """Where the step time of runs ``p`` and ``q`` differs: the phase and the labels that moved most."""

    def delta(r: Row) -> float:
        a, b = r.values[p] or 0.0, r.values[q] or 0.0
        return 0.0 if _same(a, b) else b - a  # float noise is no move

    phases = sorted((r for r in rows if r.section == "phase"), key=lambda r: -abs(delta(r)))
    labels = sorted((r for r in rows if r.section == "label"), key=lambda r: -abs(delta(r)))
    parts = []
    if phases and delta(phases[0]):
        parts.append(f"most in {phases[0].item} ({_fmt_s(delta(phases[0]), signed=True)})")
    moved = [f"'{r.item}' {_fmt_s(delta(r), signed=True)}" for r in labels[:2] if delta(r)]
    if moved:
        parts.append("the labels that moved most: " + ", ".join(moved))
    if not parts:
        return ""
    changed = [
        r
        for r in rows
        if r.section == "differs"
        and r.item not in _LONG_ITEMS
        and None not in (r.values[p], r.values[q])
        and not _equal(r.values[p], r.values[q])
    ]
    what = ", ".join(f"{r.item} {_fmt_value(r.values[p])} → {_fmt_value(r.values[q])}" for r in changed[:3])
    what += f" and {len(changed) - 3} more" if len(changed) > 3 else ""
    return (
        f". From `{names[p]}` to `{names[q]}`"
        + (f" ({what})" if what else "")
        + ", the step time moves "
        + ("; ".join(parts))
    )


def _unranked(names, recs) -> str:
    """The verdict on runs of different workloads: what each run is and its step time, no ranking
    (a step of one workload is no measure of another's: a shorter step of one program than of
    another says nothing about which machine or mapping is faster)."""
    each = ", ".join(
        f"`{n}` {r.workload} ({_fmt_s(r.step_s)} per step, {_fmt_rate(r.rate.value, r.rate.unit)})"
        for n, r in zip(names, recs)
    )
    return (
        f"The runs are of different workloads, so none is ranked above another: {each}. They do different "
        "work per step; compare runs of one workload to say which is faster"
    )


def _verdict(names, recs, rows: list[Row], rank_by: str, order) -> str:
    """The verdict line: the ranking sentence and where the step time moved (:func:`_unranked` for
    runs of different workloads)."""
    if len({r.workload for r in recs}) > 1:
        return _unranked(names, recs)
    bad = [names[i] for i, r in enumerate(recs) if r.step_s <= 0]
    lead = _lead(names, recs, rank_by, order)
    # explain the best against the reference (or, when the reference is best, the runner-up against it)
    why = _why(names, rows, 0, order[0] if order[0] != 0 else order[1])
    tail = f". No step time in {', '.join(f'`{n}`' for n in bad)}" if bad else ""
    return lead + why + tail


def compare_runs(*folders) -> Comparison:
    """The :class:`Comparison` of two or more run folders (paths; a folder of run folders stands for
    the runs in it, :func:`run_folders`), each verified against its manifest; the first is the
    reference. Raises :class:`ConfigError` (one line naming RUN, the path and the fix) for fewer than
    two runs, more than :data:`MAX_RUNS`, a folder given twice, or a folder that is not a complete run."""
    if len(folders) == 1 and isinstance(folders[0], (list, tuple)):
        folders = tuple(folders[0])
    found = _expand(folders)
    _check_folders(found, folders)
    paths = [p for p, _ in found]
    loaded = tuple(_load(p) for p in paths)
    recs = [rec for rec, _ in loaded]
    labels, counts = _label_rows(recs)
    rows = [
        *_rank_rows(recs),
        *_limit_rows(recs),
        *_differs_rows(recs),
        *_phase_rows(recs),
        *labels,
        *_chip_rows([a for _, a in loaded]),
        *_bytes_rows(recs),
        *_memory_rows(recs),
        *_tiles_rows(recs),
        *_workload_rows(recs),
    ]
    names = _names(paths)
    comparable = len({r.workload for r in recs}) == 1
    rank_by, order = _ranking(recs, by_step=not comparable)
    verdict = _verdict(names, recs, rows, rank_by, order)
    return Comparison(
        tuple(str(p) for p in paths), names, tuple(rows), rank_by, order, verdict, counts, loaded, comparable
    )


# ---------------------------------------------------------------------------------------------
# rounding for people


def _fmt_num(v: float) -> str:
    """A number as a person reads it: thousands separated, 4 significant digits, no exponent above 1e-4."""
    if v == 0:
        return "0"
    if isinstance(v, int) or abs(v) >= 1000:
        return f"{v:,.0f}"
    text = f"{v:.4g}"
    return text if "e" not in text else f"{v:.3g}"


_TIME_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))


def _time_scale(v: float) -> tuple[float, str]:
    a = abs(v)
    return next(((s, u) for s, u in _TIME_UNITS if a >= s), _TIME_UNITS[-1])


def _fmt_s(v: float, scale: tuple[float, str] | None = None, signed: bool = False) -> str:
    """Seconds in s, ms, µs or ns (``scale``: the unit to use, e.g. a table row's)."""
    s, u = scale or _time_scale(v)
    text = _fmt_num(abs(v) / s) + f" {u}"
    return ("+" if v > 0 else "−" if v < 0 else "±") + text if signed else ("−" + text if v < 0 else text)


def _fmt_bytes(v: float) -> str:
    """Bytes as B, kB, MB, GB or TB (3 significant digits)."""
    a = abs(v)
    for s, u in ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if a >= s:
            return f"{v / s:.3g} {u}"
    return f"{v:,.0f} B"


def _fmt_rate(v: float, unit: str) -> str:
    return f"{_fmt_num(v)} {unit}"


def _fmt_value(v) -> str:
    """A setting's or a workload value's text: lists of whole numbers joined by dashes (layers
    700-1462-1460-20), other lists by commas, none as a dash."""
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "true" if v else "false"
    if _is_num(v):
        return _fmt_num(v)
    if isinstance(v, (list, tuple)):
        if v and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in v):
            return "-".join(str(x) for x in v)
        return "[" + ", ".join(_fmt_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return json.dumps(v, sort_keys=True)
    return str(v)


def _cell(v, row: Row, scale) -> str:
    if v is None:
        return "—"
    if isinstance(v, list) and row.unit in ("s", "B") and all(map(_is_num, v)):
        return "[" + ", ".join(_fmt_s(x, scale) if row.unit == "s" else _fmt_bytes(x) for x in v) + "]"
    if not row.numeric or not _is_num(v):
        return _fmt_value(v)
    if row.unit == "s":
        return _fmt_s(v, scale)
    if row.unit == "B":
        return _fmt_bytes(v)
    if row.unit in ("-", "tiles"):
        return _fmt_num(v)
    return _fmt_rate(v, row.unit)


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table_row(row: Row) -> str:
    """One markdown row: the reference's value, then each run's with its ratio (or "same")."""
    nums = [abs(x) for v in row.values for x in (v if isinstance(v, list) else [v]) if _is_num(x) and x]
    scale = _time_scale(max(nums)) if row.unit == "s" and nums else None
    cells = [_cell(row.values[0], row, scale)]
    for v, q in zip(row.values[1:], row.ratios[1:]):
        if _equal(v, row.values[0]) and v is not None:
            cells.append("same")
        elif q is not None and q != 1.0:
            cells.append(f"{_cell(v, row, scale)} ({_x(q)})")
        else:
            cells.append(_cell(v, row, scale))
    return f"| {_md(row.item)} | " + " | ".join(_md(c) for c in cells) + " |"


def _titles(c: Comparison) -> dict[str, str]:
    moved, still, total = c.labels
    shown = len(c.section("label"))
    which = f"the {shown} of {total} whose time moved" if shown == moved else f"the {shown} that moved most of {moved}"
    differs = len(c.section("differs"))
    return {
        "rank": f"Throughput and step time (ranked by {c.rank_by})"
        if c.comparable
        else "Throughput and step time (not ranked: different workloads)",
        "limits": "What limits each run",
        "differs": f"What differs ({differs} item{'s' if differs != 1 else ''})",
        "phase": "Time by phase",
        "label": f"Time by superstep label: {which} ({still} did not move)",
        "chip": "Busy time by chip",
        "bytes": "Bytes per step",
        "memory": "SRAM (all tiles) by category",
        "tiles": "Critical and fullest tiles",
        "workload": "The workload's own numbers that differ",
    }


def format_comparison(c: Comparison) -> str:
    """The markdown of comparison ``c`` (``compare.md``; what ``tilesim compare`` prints): the verdict,
    the runs, then one table per section with a column per run, rounded for people (ratios to the
    first run; "same" where a run's value is the reference's)."""
    out = [f"# {len(c.names)} runs compared (reference: `{c.names[0]}`)", "", f"**{c.verdict}.**", ""]
    out += [f"- `{n}`: {f}" + (" (reference)" if i == 0 else "") for i, (n, f) in enumerate(zip(c.names, c.folders))]
    out.append("")
    head = "| | " + " | ".join(f"`{_md(n)}`" for n in c.names) + " |"
    rule = "|---|" + "---:|" * len(c.names)
    for sec, title in _titles(c).items():
        rows = c.section(sec)
        if sec == "label" and not rows and c.labels[2]:
            out += ["## Time by superstep label", "", f"No label's time moved ({c.labels[2]} labels).", ""]
            continue
        if sec == "differs" and not rows:
            out += [
                "## What differs",
                "",
                "Nothing: the runs' settings, machine, program, data and cost model are the same.",
                "",
            ]
            continue
        if not rows:
            continue
        out += [f"## {title}", "", head, rule, *(_table_row(r) for r in rows), ""]
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# writing


def _is_comparison(path: Path) -> bool:
    """True when ``path`` is a ``compare.json`` tilesim wrote (any format)."""
    try:
        d = json.loads(path.read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    return isinstance(d, dict) and {"verdict", "rows"} <= set(d)


def check_compare_out(out, force: bool = False) -> Path:
    """Check that comparison files can be written into folder ``out`` (flag ``--out``) before any work:
    a writable folder, and — unless ``force`` — one whose ``compare.*`` files (if any) are a previous
    comparison's, never a user's own. Returns the path; raises :class:`ConfigError` (one line)."""
    from tilesim.io import check_output_path  # loaded only when the command runs (start-up time)

    p = check_output_path(out, "--out", "dir")
    if force or not p.is_dir():
        return p
    present = [n for n in OUTPUTS if (p / n).exists()]
    if present and not _is_comparison(p / "compare.json"):
        raise ConfigError(
            config_message(
                "--out",
                str(out),
                f"holds {', '.join(present)} that tilesim compare did not write",
                "give a new or empty folder, or add --force to replace those files",
            )
        )
    return p


def write_comparison(c: Comparison, out, force: bool = False) -> list[Path]:
    """Write ``compare.md``, ``compare.json`` (full precision), ``compare.png`` and ``compare.html``
    (every run on shared axes; the page with hover and zoom, and the ``plotly.min.js`` it loads) into
    folder ``out``; returns their paths.
    Raises :class:`ConfigError` when ``out`` holds ``compare.*`` files of a user's (unless ``force``)."""
    from tilesim.io import atomic_write_text  # loaded only when the command runs (start-up time)
    from tilesim.outputs.page import (  # plotly loads only when a page is written (start-up time)
        comparison_html,
        write_plotly_js,
    )
    from tilesim.outputs.plots import comparison_figure  # matplotlib is imported only when drawing (start-up time)

    out = check_compare_out(out, force)
    if not c.runs:
        c = compare_runs(*c.folders)
    out.mkdir(parents=True, exist_ok=True)
    table = format_comparison(c)
    written = [
        atomic_write_text(out / "compare.md", table + "\n"),
        atomic_write_text(out / "compare.json", dumps_json(c.to_dict(), indent=1) + "\n"),
        comparison_figure(c, out / "compare.png"),
        write_plotly_js(out),  # what compare.html loads, beside it
        atomic_write_text(out / "compare.html", comparison_html(c, table)),
    ]
    return [Path(p) for p in written]


# ---------------------------------------------------------------------------------------------
# one workload on several machines


def machine_spec(text: str) -> tuple[str, int | None, str]:
    """``(machine, chips, folder name)`` of one ``--machines`` entry: a preset name or TOML file,
    optionally ``:C`` for C of its chips (``bow:16``: 16 Bow IPUs; folder ``bow-x16``)."""
    name, chips = text.strip(), None
    head, sep, count = name.rpartition(":")
    if sep and head and count.isdigit():
        name, chips = head, int(count)
    if not name or chips == 0:
        raise ConfigError(config_message("--machines", text, "is not a machine", "give preset names, e.g. bow:16,wse2"))
    label = Path(name).stem if name.endswith(".toml") else name
    return name, chips, label + (f"-x{chips}" if chips else "")


def runs_on_machines(run, machines, out, force: bool = False) -> list[Path]:
    """Re-run the run stored in folder ``run`` on each of ``machines`` (``--machines`` entries,
    :func:`machine_spec`) into ``out/<machine>`` with its workload's registered runner
    (:mod:`tilesim.outputs.runners`); returns the folders, in the order given. Raises :class:`ConfigError`
    for fewer than two machines, a machine given twice, or a workload that registered no runner."""
    specs = [machine_spec(m) for m in machines]
    names = [label for _, _, label in specs]
    if len(specs) < 2 or len(set(names)) < len(names):
        why = "names fewer than two machines" if len(specs) < 2 else "names a machine twice"
        raise ConfigError(config_message("--machines", ",".join(machines), why, "e.g. --machines bow:16,wse2"))
    found = _expand([run])
    if len(found) != 1:
        raise _not_a_run(run, f"holds {len(found)} runs; --machines re-runs one run on each machine")
    record, _ = _load(found[0][0])
    from tilesim.outputs.runners import machine_runner  # the workload's module loads only now

    runner = machine_runner(record.workload)
    if runner is None:
        raise ConfigError(
            config_message(
                "RUN",
                str(run),
                f"is a run of {record.workload!r}, which cannot be re-run on other machines here",
                "run it on each machine yourself (--out DIR/<machine>) and compare those folders",
            )
        )
    base = Path(out)
    return [Path(runner(found[0][0], name, chips, base / label, force)) for name, chips, label in specs]
