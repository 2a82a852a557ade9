"""A run as one typed record: what every output of a run reads (``summary.json``, ``summary.md``,
``report.html``, ``compare``), written once with a format version.

A :class:`RunRecord` holds the run's identity (workload, machine, chips), the **settings that shaped
it** (every resolved option, so a folder can be compared and re-run), where its data came from and
which tilesim and cost model timed it (:class:`Provenance`), the step time and the workload's
throughput, the breakdown by phase and by superstep label, bytes, memory, the critical kernel,
findings, named structural assumptions, notes, and the workload's own :class:`Section` s as data.

``RunRecord.to_dict`` is the ``summary.json`` form; :func:`read_record` reads it back, converting
folders written before the record had a format (format 1: flat keys in two dialects) so that an old
run folder still renders. Nothing reads a summary as a dict after that.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields

from tilesim.errors import ConfigError, config_message
from tilesim.outputs.chart import Chart
from tilesim.outputs.recordcheck import check_record, check_v1, shown
from tilesim.outputs.records import critical_tiles, whole_bytes

__all__ = [
    "RECORD_FORMAT",
    "Section",
    "LabelTime",
    "ByteTotals",
    "LinkLoad",
    "Throughput",
    "MemoryEntry",
    "MemoryLiveness",
    "MemoryRecord",
    "Explain",
    "Finding",
    "Provenance",
    "RunRecord",
    "read_record",
    "tilesim_version",
]

RECORD_FORMAT = 2
"""Format of :meth:`RunRecord.to_dict`. 1: the flat summaries written before the record (no
``format`` key); 2: this record."""


def tilesim_version() -> str:
    """The installed tilesim's version (``0+unknown`` when run from a tree that is not installed)."""
    from importlib import metadata

    try:
        return metadata.version("tilesim")
    except metadata.PackageNotFoundError:  # pragma: no cover - the package is installed to run
        return "0+unknown"


@dataclass(frozen=True)
class Section:
    """A workload's own part of a run's report: a ``title``, ``lines`` of text for ``summary.md``,
    ``report.html`` and the terminal, and the same facts as plain JSON-ready ``data`` for
    ``summary.json`` and ``compare`` (``(key, value)`` pairs, in order); ``charts``: pictures of its own
    (:class:`tilesim.outputs.chart.Chart`), drawn by the core into the run folder."""

    title: str
    lines: tuple[str, ...] = ()
    data: tuple[tuple[str, object], ...] = ()
    charts: tuple[Chart, ...] = ()

    def as_dict(self) -> dict[str, object]:
        """``data`` as a JSON-ready mapping."""
        return dict(self.data)

    def to_dict(self) -> dict:
        """The ``summary.json`` form (``charts`` only when there are some)."""
        out: dict = {"title": self.title, "lines": list(self.lines), "data": self.as_dict()}
        if self.charts:
            out["charts"] = [c.to_dict() for c in self.charts]
        return out

    @classmethod
    def from_dict(cls, d: Mapping) -> Section:
        """The section of its :meth:`to_dict` form."""
        return cls(
            str(d["title"]),
            tuple(str(x) for x in d.get("lines", ())),
            tuple(dict(d.get("data", {})).items()),
            tuple(Chart.from_dict(c) for c in d.get("charts", ())),
        )


@dataclass(frozen=True)
class LabelTime:
    """Time of one superstep label over the step: its supersteps, seconds, seconds per phase and the
    tile that bounded it most often (chip, tile on that chip)."""

    label: str
    supersteps: int
    time_s: float
    breakdown_s: dict[str, float]
    critical_chip: int
    critical_tile: int

    def phase_s(self, phase: str) -> float:
        """Seconds of ``phase`` (0 when the label spent none)."""
        return float(self.breakdown_s.get(phase, 0.0))


@dataclass(frozen=True)
class ByteTotals:
    """Bytes per step: sent on chip (each byte once, as the sending tiles put it on the exchange),
    over the chip-to-chip links, to and from the host."""

    onchip: int = 0
    links: int = 0
    host: int = 0


@dataclass(frozen=True)
class LinkLoad:
    """Bytes per step over one directed group of chip-to-chip links."""

    group: str
    bytes: int


@dataclass(frozen=True)
class Throughput:
    """The workload's own rate: ``value`` ``unit`` (e.g. 6,081 samples/s). What ``compare`` ranks."""

    value: float
    unit: str

    @classmethod
    def per_step(cls, step_s: float, per_step: float, unit: str) -> Throughput:
        """``per_step`` units each step of ``step_s`` seconds (0 when the step takes no time)."""
        return cls(per_step / step_s if step_s > 0 else 0.0, unit)


@dataclass(frozen=True)
class MemoryEntry:
    """One item of the fullest tile's SRAM."""

    label: str
    category: str
    bytes: int


@dataclass(frozen=True)
class MemoryLiveness:
    """Memory over the program's named steps (PopVision's liveness report), from the ledger that gives
    the peak (:meth:`tilesim.machine.memory.MemoryLedger.liveness`): the fullest ``tile`` (global id)
    and its ``peak_step``; per step its bytes allocated (their max is the tile's peak, what the
    overflow check compares) and its bytes holding live data by category; the same two totals summed
    over the tiles of its ``chip``."""

    steps: tuple[str, ...]
    tile: int
    peak_step: str
    allocated_bytes: tuple[int, ...]
    held_bytes: dict[str, tuple[int, ...]]
    chip: int
    chip_allocated_bytes: tuple[int, ...]
    chip_held_bytes: tuple[int, ...]

    @property
    def peak_index(self) -> int:
        """The index of :attr:`peak_step` in :attr:`steps` (a record edited to name no step of its own: the
        step where the most bytes are allocated, then held)."""
        if self.peak_step in self.steps:
            return self.steps.index(self.peak_step)
        held = self.held_total() or (0,) * len(self.steps)
        return max(range(len(self.steps)), key=lambda i: (self.allocated_bytes[i], held[i]), default=0)

    def held_total(self) -> tuple[int, ...]:
        """The tile's bytes holding live data per step, over every category."""
        return tuple(int(x) for x in map(sum, zip(*self.held_bytes.values()))) if self.held_bytes else ()

    @classmethod
    def from_dict(cls, d: Mapping) -> MemoryLiveness:
        """The record of its JSON form."""

        def ints(v) -> tuple[int, ...]:
            return tuple(int(x) for x in v)

        steps = tuple(str(x) for x in d["steps"])
        series = [d["allocated_bytes"], *d["held_bytes"].values()]
        if any(len(v) != len(steps) for v in series):
            raise ConfigError(
                config_message(
                    "summary.json memory.liveness",
                    len(steps),
                    "steps do not fit its series (one value per step)",
                    "re-run to rewrite the folder",
                )
            )
        return cls(
            steps=steps,
            tile=int(d["tile"]),
            peak_step=str(d["peak_step"]),
            allocated_bytes=ints(d["allocated_bytes"]),
            held_bytes={str(k): ints(v) for k, v in d["held_bytes"].items()},
            chip=int(d["chip"]),
            chip_allocated_bytes=ints(d["chip_allocated_bytes"]),
            chip_held_bytes=ints(d["chip_held_bytes"]),
        )


@dataclass(frozen=True)
class MemoryRecord:
    """SRAM of the step: the budget per tile, the fullest tile (global id), its bytes, its bytes per
    category and largest items, the bytes per category over all tiles, and the tiles over budget;
    ``liveness``: its memory over the program's steps when the workload names them (else None)."""

    budget_bytes: int
    max_tile: int
    max_tile_bytes: int
    by_category_bytes: dict[str, int]
    total_by_category_bytes: dict[str, int]
    max_tile_entries: tuple[MemoryEntry, ...] = ()
    overflow_tiles: tuple[int, ...] = ()
    liveness: MemoryLiveness | None = None

    def to_dict(self) -> dict:
        """The JSON form (the ledger's keys; no ``liveness`` key without one)."""
        return {f.name: _json(getattr(self, f.name)) for f in fields(self) if getattr(self, f.name) is not None}

    @classmethod
    def of(cls, ledger) -> MemoryRecord:
        """The record of a :class:`tilesim.machine.memory.MemoryLedger`."""
        return cls.from_dict(ledger.to_dict())

    @classmethod
    def from_dict(cls, d: Mapping) -> MemoryRecord:
        """The record of a ledger's (or a stored summary's) ``memory`` mapping."""
        return cls(
            budget_bytes=int(d["budget_bytes"]),
            max_tile=int(d["max_tile"]),
            max_tile_bytes=int(d["max_tile_bytes"]),
            by_category_bytes={str(k): int(v) for k, v in (d.get("by_category_bytes") or {}).items()},
            total_by_category_bytes={str(k): int(v) for k, v in (d.get("total_by_category_bytes") or {}).items()},
            max_tile_entries=tuple(
                MemoryEntry(str(e["label"]), str(e["category"]), int(e["bytes"])) for e in d.get("max_tile_entries", ())
            ),
            overflow_tiles=tuple(int(t) for t in d.get("overflow_tiles", ())),
            liveness=MemoryLiveness.from_dict(d["liveness"]) if d.get("liveness") else None,
        )


@dataclass(frozen=True)
class Explain:
    """The critical kernel: the slowest phase (superstep label) in a sentence, where it ran (chip and
    tile), its seconds and share of the step, the bytes exchanged per kind (sent and received), and
    the workload's own further numbers (``detail``: e.g. the layer, the tile's role)."""

    sentence: str
    phase: str = ""
    chip: int | None = None
    tile: int | None = None
    time_s: float = 0.0
    share: float = 0.0
    exchange_bytes: dict[str, int] = field(default_factory=dict)
    exchange_received_bytes: dict[str, int] = field(default_factory=dict)
    detail: dict[str, object] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The JSON form: the fields, then the workload's ``detail`` keys beside them (as a workload
        writes its explain mapping)."""
        d = _json(self)
        return {**{k: v for k, v in d.items() if k != "detail"}, **d["detail"]}

    @classmethod
    def from_dict(cls, d: Mapping) -> Explain:
        """The record of a workload's explain mapping (keys beyond the fields go to ``detail``)."""
        own = {f.name for f in fields(cls)} - {"detail"}
        chip, tile = d.get("chip"), d.get("tile")
        return cls(
            sentence=str(d.get("sentence", "")),
            phase=str(d.get("phase", "")),
            chip=int(chip) if isinstance(chip, int) else None,
            tile=int(tile) if isinstance(tile, int) else None,
            time_s=float(d.get("time_s", 0.0) or 0.0),
            share=float(d.get("share", 0.0) or 0.0),
            exchange_bytes=_whole(d.get("exchange_bytes")),
            exchange_received_bytes=_whole(d.get("exchange_received_bytes")),
            detail={**dict(d.get("detail") or {}), **{k: v for k, v in d.items() if k not in own and k != "detail"}},
        )


def _whole(nbytes: Mapping | None) -> dict[str, int]:
    """Bytes by kind as a user reads them (:func:`tilesim.outputs.records.whole_bytes` each)."""
    return {str(k): whole_bytes(v) for k, v in (nbytes or {}).items()}


@dataclass(frozen=True)
class Finding:
    """A diagnosis of the run (e.g. a dead layer): its ``kind``, a one-line ``message`` and the ``fix``."""

    kind: str
    message: str
    fix: str


@dataclass(frozen=True)
class Provenance:
    """Where a run's numbers come from: the tilesim that timed it, its cost model (the file and its
    SHA-256, or what stood in for one), and the data it ran on (e.g. "SHD-shaped data generated
    in-process: no --data-root" or the files read)."""

    tilesim_version: str = "unknown"
    cost_model: str = "not recorded"
    data: str = "not recorded"


_SCALARS = (str, int, float, bool, type(None))


def _finite(value: float, what: str) -> float:
    v = float(value)
    if not math.isfinite(v):
        raise ConfigError(
            config_message(what, value, "is not a finite number", "check the machine and cost files' rates")
        )
    return v


@dataclass(frozen=True, eq=False)
class RunRecord:
    """One run, typed (module docstring). ``step_s``: predicted seconds per step; ``throughput``: the
    workload's own rate (None: steps per second, :attr:`rate`); ``settings``: every resolved option
    that shaped the run, by name; ``structure``: the named structural assumptions it was timed
    under; ``tile_groups``: what the outlined tile groups of the pictures are (e.g. the layers a workload places)."""

    workload: str
    program: str
    machine: str
    chips: int
    tiles_per_chip: int
    supersteps: int
    step_s: float
    breakdown_s: dict[str, float]
    by_label: tuple[LabelTime, ...]
    bytes: ByteTotals = ByteTotals()
    throughput: Throughput | None = None
    busiest_link_groups: tuple[LinkLoad, ...] = ()
    memory: MemoryRecord | None = None
    critical_tiles: tuple[int, ...] = ()
    explain: Explain | None = None
    findings: tuple[Finding, ...] = ()
    structure: dict[str, object] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    settings: dict[str, object] = field(default_factory=dict)
    provenance: Provenance = Provenance()
    sections: tuple[Section, ...] = ()
    tile_groups: str = "tile groups"
    format: int = RECORD_FORMAT

    # ------------------------------------------------------------------------------------------
    @classmethod
    def of(cls, result, *, workload: str, ledger=None, **parts) -> RunRecord:
        """The record of an engine result (:class:`tilesim.outputs.records.SimResult`) of ``workload``, its
        SRAM ``ledger`` (optional) and the other fields by name (``throughput``, ``settings``,
        ``provenance``, ``sections``, ``explain``, ...). Raises :class:`ConfigError` for a step time
        that is not finite (a machine or cost file with extreme rates)."""
        totals = result.to_dict()  # by label, bytes and link groups, computed once
        return cls(
            workload=workload,
            program=result.program_name,
            machine=result.machine_name,
            chips=int(result.chips),
            tiles_per_chip=int(result.tiles_per_chip),
            supersteps=int(result.supersteps),
            step_s=_finite(result.total_s, "predicted step time (s)"),
            breakdown_s={k: float(v) for k, v in result.breakdown_s().items()},
            by_label=tuple(_label_time(k, v) for k, v in totals["by_label"].items()),
            bytes=ByteTotals(**totals["bytes"]),
            busiest_link_groups=tuple(LinkLoad(**g) for g in totals["busiest_link_groups"]),
            memory=MemoryRecord.of(ledger) if ledger is not None else None,
            critical_tiles=critical_tiles(result),
            **parts,
        )

    @property
    def rate(self) -> Throughput:
        """The workload's throughput, else steps per second: what comparisons rank by."""
        return self.throughput if self.throughput is not None else Throughput.per_step(self.step_s, 1.0, "steps/s")

    def label_table(self) -> dict[str, dict]:
        """The labels in the form :meth:`tilesim.outputs.records.SimResult.by_label` returns (what the
        pictures draw from either a live result or a stored record)."""
        return {
            x.label: {
                "supersteps": x.supersteps,
                "time_s": x.time_s,
                "breakdown_s": dict(x.breakdown_s),
                "critical_chip": x.critical_chip,
                "critical_tile": x.critical_tile,
            }
            for x in self.by_label
        }

    def label(self, name: str) -> LabelTime | None:
        """The time of superstep label ``name`` (None when the run has no such label)."""
        return next((x for x in self.by_label if x.label == name), None)

    def section(self, title: str) -> Section | None:
        """The workload section titled ``title`` (None when there is none)."""
        return next((s for s in self.sections if s.title == title), None)

    # ------------------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """The ``summary.json`` form (JSON-ready; field order as declared, ``format`` first)."""
        d: dict = {"format": self.format}
        for f in fields(self):
            if f.name != "format":
                d[f.name] = _json(getattr(self, f.name))
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> RunRecord:
        """The record of a :meth:`to_dict` mapping of this format (:func:`read_record` reads any)."""
        return cls(
            workload=str(d["workload"]),
            program=str(d["program"]),
            machine=str(d["machine"]),
            chips=int(d["chips"]),
            tiles_per_chip=int(d["tiles_per_chip"]),
            supersteps=int(d["supersteps"]),
            step_s=float(d["step_s"]),
            breakdown_s={str(k): float(v) for k, v in d["breakdown_s"].items()},
            by_label=tuple(_label_time(x["label"], x) for x in d.get("by_label", ())),
            bytes=ByteTotals(**d.get("bytes", {})),
            throughput=Throughput(**d["throughput"]) if d.get("throughput") else None,
            busiest_link_groups=tuple(LinkLoad(**g) for g in d.get("busiest_link_groups", ())),
            memory=MemoryRecord.from_dict(d["memory"]) if d.get("memory") else None,
            critical_tiles=tuple(int(t) for t in d.get("critical_tiles", ())),
            explain=Explain.from_dict(d["explain"]) if d.get("explain") else None,
            findings=tuple(Finding(**f) for f in d.get("findings", ())),
            structure=dict(d.get("structure") or {}),
            notes=tuple(str(n) for n in d.get("notes", ())),
            settings=dict(d.get("settings") or {}),
            provenance=Provenance(**d.get("provenance", {})),
            sections=tuple(Section.from_dict(s) for s in d.get("sections", ())),
            tile_groups=str(d.get("tile_groups", "tile groups")),
            format=int(d["format"]),
        )


def _label_time(label: str, v: Mapping) -> LabelTime:
    return LabelTime(
        label=str(label),
        supersteps=int(v["supersteps"]),
        time_s=float(v["time_s"]),
        breakdown_s={str(k): float(x) for k, x in v["breakdown_s"].items()},
        critical_chip=int(v["critical_chip"]),
        critical_tile=int(v["critical_tile"]),
    )


def _json(value):
    """A record field in its JSON form: dataclasses as dicts (sections by their own form), tuples as lists."""
    if isinstance(value, (Section, MemoryRecord)):
        return value.to_dict()
    if hasattr(value, "__dataclass_fields__"):
        return {f.name: _json(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, (tuple, list)):
        return [_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json(v) for k, v in value.items()}
    return value


# ---------------------------------------------------------------------------------------------
# reading: any format

_V1_CORE = frozenset(
    "program machine chips tiles_per_chip supersteps total_s breakdown_s bytes by_label by_phase "
    "busiest_link_groups memory predicted_step_s samples_per_s explain findings structure notes workload".split()
)
"""Keys of a format-1 summary that the record's own fields take; the rest is the workload's."""


def _from_v1(d: Mapping) -> RunRecord:
    """A record of a summary written before the record (flat keys; ``predicted_step_s`` or
    ``total_s``, ``by_phase`` or ``by_label``): the workload's own keys become one section of data,
    with a line for each scalar."""
    step = float(d.get("predicted_step_s", d.get("total_s", 0.0)))
    by = d.get("by_phase") or d.get("by_label") or {}
    rest = {k: v for k, v in d.items() if k not in _V1_CORE}
    name = str(d.get("workload") or "workload")
    lines = tuple(f"{k}: {v}" for k, v in rest.items() if isinstance(v, _SCALARS))
    return RunRecord(
        workload=name,
        program=str(d.get("program", "")),
        machine=str(d["machine"]),
        chips=int(d.get("chips", 1)),
        tiles_per_chip=int(d.get("tiles_per_chip", 0)),
        supersteps=int(d.get("supersteps", sum(int(v["supersteps"]) for v in by.values()))),
        step_s=step,
        breakdown_s={str(k): float(v) for k, v in d["breakdown_s"].items()},
        by_label=tuple(_label_time(k, v) for k, v in by.items()),
        bytes=ByteTotals(**{k: int(v) for k, v in (d.get("bytes") or {}).items()}),
        throughput=Throughput(float(d["samples_per_s"]), "samples/s") if "samples_per_s" in d else None,
        busiest_link_groups=tuple(LinkLoad(**g) for g in d.get("busiest_link_groups", ())),
        memory=MemoryRecord.from_dict(d["memory"]) if d.get("memory") else None,
        explain=Explain.from_dict(d["explain"]) if d.get("explain") else None,
        findings=tuple(Finding(f["kind"], f["message"], f["fix"]) for f in d.get("findings") or ()),
        structure=dict(d.get("structure") or {}),
        notes=tuple(str(n) for n in d.get("notes") or ()),
        provenance=Provenance(data="not recorded (a run folder written before tilesim recorded its settings)"),
        sections=(Section(f"{name} (stored before run records)", lines, tuple(rest.items())),) if rest else (),
        format=1,
    )


def read_record(d: object, where: str = "summary.json") -> RunRecord:
    """The :class:`RunRecord` of a stored ``summary.json`` mapping of any format (format 1 is
    converted: :func:`_from_v1`), after the one check of every field
    (:func:`tilesim.outputs.recordcheck.check_record`). Raises :class:`ConfigError` naming ``where``
    (the file), the field's key path, its value, the problem and the fix for a mapping that is not a
    run record every output can read, or of a format newer than this tilesim reads."""
    if not isinstance(d, Mapping):
        raise ConfigError(
            config_message(where, type(d).__name__, "is not a JSON object", "give the summary.json of a run folder")
        )
    fmt = d.get("format", 1)
    if isinstance(fmt, bool) or not isinstance(fmt, int) or fmt > RECORD_FORMAT or fmt < 1:
        raise ConfigError(
            config_message(
                f"{where} format",
                shown(fmt),
                f"this tilesim reads formats 1..{RECORD_FORMAT}",
                "upgrade tilesim to read a newer run, or re-run the command that wrote the folder",
            )
        )
    (check_v1 if fmt == 1 else check_record)(d, where)
    try:
        return _from_v1(d) if fmt == 1 else RunRecord.from_dict(d)
    except ConfigError as exc:  # a workload chart's own check (tilesim/outputs/chart.py)
        raise ConfigError(f"{where}: {exc}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # pragma: no cover - the check passed it
        raise ConfigError(
            config_message(
                where, f"{type(exc).__name__}: {str(exc)[:80]}", "is not a complete run record", "re-run the command"
            )
        ) from None
