"""Two stored runs side by side: what differs, where, and which is faster (``tilesim compare``).

Reads two run folders (written by any command's ``--out``; each checked against
its manifest first) and lines up the numbers both summaries hold, section by section:

* ``step``: predicted time per step (``predicted_step_s``, else ``total_s``) and samples per second;
* ``phase``: time per phase (``breakdown_s``: compute, sync, exchange, links, host, residual);
* ``label``: time per superstep label, the labels whose time moved most first;
* ``chip``: busy time per chip (compute + exchange of the stored timeline), multi-chip runs;
* ``bytes``: bytes sent on chip, over the chip-to-chip links and to the host;
* ``memory``: SRAM by category (all tiles), the fullest tile's bytes, tiles over budget;
* ``tiles``: the critical tile and the fullest tile (chip/tile), as text;
* ``workload``: every other scalar (or short list) of the summaries that differs (a mapping's
  strategy, a partition, a per-step series, ...): the workload's own section, read generically.

``delta = B - A``, ``ratio = B / A``. The verdict names the faster run, by how much, and the phase
and labels that carry most of the difference: the answer to "which is better, and why?".
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tilesim.errors import ConfigError, config_message
from tilesim.records import PHASES

__all__ = ["Row", "Comparison", "compare_runs", "format_comparison", "write_comparison"]

LABEL_ROWS = 12
"""Labels listed (those whose time moved most)."""

CORE_KEYS = frozenset(
    "program machine chips tiles_per_chip supersteps total_s breakdown_s bytes by_label by_phase "
    "busiest_link_groups memory predicted_step_s samples_per_s explain host_memory findings notes "
    "workload".split()
)
"""Summary keys the sections above read: the rest is the workload's."""


@dataclass(frozen=True)
class Row:
    """One compared quantity: ``a`` and ``b`` are numbers (in ``unit``) or text (``unit`` = "")."""

    section: str
    item: str
    a: float | str | None
    b: float | str | None
    unit: str

    @property
    def delta(self) -> float | None:
        """``b - a`` for numbers both runs have, else None."""
        if isinstance(self.a, (int, float)) and isinstance(self.b, (int, float)):
            d = self.b - self.a
            return 0 * d if abs(d) <= 1e-9 * max(abs(self.a), abs(self.b)) else d  # float noise is no change
        return None

    @property
    def ratio(self) -> float | None:
        """``b / a`` (None when ``a`` is 0 or not a number)."""
        d = self.delta
        return None if d is None or not self.a else self.b / self.a  # type: ignore[operator]

    def to_dict(self) -> dict:
        """The JSON form (with delta and ratio)."""
        return {**asdict(self), "delta": self.delta, "ratio": self.ratio}


@dataclass(frozen=True)
class Comparison:
    """Runs ``a`` and ``b`` (folder paths), their rows and the verdict sentence; ``runs`` keeps the two
    loaded folders (``(summary, arrays)`` each) so that writing the pictures reads neither again."""

    a: str
    b: str
    rows: tuple[Row, ...]
    verdict: str
    runs: tuple = field(default=(), repr=False, compare=False)

    def section(self, name: str) -> list[Row]:
        """The rows of one section."""
        return [r for r in self.rows if r.section == name]

    def to_dict(self) -> dict:
        """The ``compare.json`` form."""
        return {"a": self.a, "b": self.b, "verdict": self.verdict, "rows": [r.to_dict() for r in self.rows]}


def _load(folder) -> tuple[dict, dict]:
    from tilesim.report import load_run  # NumPy loads only when a command runs (start-up time)

    return load_run(folder)


def _step_s(s: dict) -> float:
    return float(s.get("predicted_step_s", s.get("total_s", 0.0)))


def _chip_busy_s(arrays: dict) -> list[float]:
    """Per chip: the stored timeline's compute + exchange cycles, in seconds."""
    if "timeline_compute_cycles" not in arrays:
        return []
    hz = float(arrays["clock_hz"])
    busy = arrays["timeline_compute_cycles"].sum(axis=0) + arrays["timeline_exchange_cycles"].sum(axis=0)
    return [float(x) / hz for x in busy]


def _scalars(x, prefix: str = ""):
    """``(dotted key, value)`` of every number or string in a summary section (lists of scalars joined)."""
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _scalars(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(x, list) and len(x) <= 16 and all(isinstance(v, (int, float, str)) for v in x):
        yield prefix, "-".join(str(v) for v in x)
    elif isinstance(x, (int, float, str)) and not isinstance(x, bool):
        yield prefix, x


def _tile(chip, tile) -> str:
    return f"chip {chip} tile {tile}"


def _rows(sa: dict, aa: dict, sb: dict, ab: dict) -> list[Row]:
    rows = [Row("step", "time per step", _step_s(sa), _step_s(sb), "s")]
    if "samples_per_s" in sa and "samples_per_s" in sb:
        rows.append(Row("step", "samples per second", sa["samples_per_s"], sb["samples_per_s"], "1/s"))
    for p in PHASES:
        a, b = sa["breakdown_s"].get(p, 0.0), sb["breakdown_s"].get(p, 0.0)
        if a or b:
            rows.append(Row("phase", p, a, b, "s"))
    la, lb = sa.get("by_label", {}), sb.get("by_label", {})
    labels = sorted(
        set(la) | set(lb),
        key=lambda k: -abs(lb.get(k, {}).get("time_s", 0.0) - la.get(k, {}).get("time_s", 0.0)),
    )
    for k in labels[:LABEL_ROWS]:
        rows.append(Row("label", k, la.get(k, {}).get("time_s", 0.0), lb.get(k, {}).get("time_s", 0.0), "s"))
    ca, cb = _chip_busy_s(aa), _chip_busy_s(ab)
    if max(len(ca), len(cb)) > 1:
        for c in range(min(max(len(ca), len(cb)), 64)):
            rows.append(
                Row("chip", f"chip {c} busy", ca[c] if c < len(ca) else None, cb[c] if c < len(cb) else None, "s")
            )
    for k in ("onchip", "links", "host"):
        a, b = sa.get("bytes", {}).get(k, 0), sb.get("bytes", {}).get(k, 0)
        if a or b:
            rows.append(Row("bytes", k, a, b, "B"))
    ma, mb = sa.get("memory") or {}, sb.get("memory") or {}
    if ma and mb:
        ta, tb = ma.get("total_by_category_bytes", {}), mb.get("total_by_category_bytes", {})
        for k in sorted(set(ta) | set(tb), key=lambda k: -max(ta.get(k, 0), tb.get(k, 0))):
            rows.append(Row("memory", k, ta.get(k, 0), tb.get(k, 0), "B"))
        rows.append(Row("memory", "fullest tile", ma.get("max_tile_bytes"), mb.get("max_tile_bytes"), "B"))
        rows.append(
            Row(
                "memory",
                "tiles over budget",
                len(ma.get("overflow_tiles", [])),
                len(mb.get("overflow_tiles", [])),
                "tiles",
            )
        )
        ta_, tb_ = sa.get("tiles_per_chip") or 1, sb.get("tiles_per_chip") or 1
        rows.append(
            Row("tiles", "fullest tile", _tile(*divmod(ma["max_tile"], ta_)), _tile(*divmod(mb["max_tile"], tb_)), "")
        )
    ea, eb = sa.get("explain") or {}, sb.get("explain") or {}
    if "tile" in ea and "tile" in eb:
        rows.append(
            Row("tiles", "critical tile", _tile(ea.get("chip"), ea["tile"]), _tile(eb.get("chip"), eb["tile"]), "")
        )
        rows.append(Row("tiles", "slowest phase", ea.get("phase"), eb.get("phase"), ""))
    wa = dict(_scalars({k: v for k, v in sa.items() if k not in CORE_KEYS}))
    wb = dict(_scalars({k: v for k, v in sb.items() if k not in CORE_KEYS}))
    rows.append(Row("workload", "program", sa.get("program"), sb.get("program"), ""))
    rows.append(
        Row(
            "workload",
            "machine",
            f"{sa['machine']} x{sa.get('chips', 1)}",
            f"{sb['machine']} x{sb.get('chips', 1)}",
            "",
        )
    )
    for k in sorted(set(wa) | set(wb)):
        if wa.get(k) != wb.get(k):
            a, b = wa.get(k), wb.get(k)
            rows.append(Row("workload", k, a, b, "" if isinstance(a, str) or isinstance(b, str) else "-"))
    return rows


def _verdict(rows: list[Row]) -> str:
    step = rows[0]
    a, b = float(step.a), float(step.b)  # type: ignore[arg-type]
    if not (a > 0 and b > 0):
        return "one of the runs has no step time"
    if math.isclose(a, b, rel_tol=1e-4):
        return f"A and B take the same time per step ({a * 1e3:.4g} ms)"
    faster, slower = ("B", "A") if b < a else ("A", "B")
    lead = (
        f"{faster} is {max(a, b) / min(a, b):.3f}x faster than {slower} "
        f"(A {a * 1e3:.4g} ms, B {b * 1e3:.4g} ms per step)"
    )
    phases = sorted((r for r in rows if r.section == "phase"), key=lambda r: -abs(r.delta or 0.0))
    labels = sorted((r for r in rows if r.section == "label"), key=lambda r: -abs(r.delta or 0.0))
    why = []
    if phases and phases[0].delta:
        why.append(f"most of the difference is in {phases[0].item} ({phases[0].delta * 1e3:+.3g} ms)")
    moved = [f"'{r.item}' {r.delta * 1e3:+.3g} ms" for r in labels[:2] if r.delta]
    if moved:
        why.append("the labels that moved most: " + ", ".join(moved))
    return lead + ("; " + "; ".join(why) if why else "")


def compare_runs(dir_a, dir_b) -> Comparison:
    """The :class:`Comparison` of run folders ``dir_a`` and ``dir_b`` (each verified first)."""
    if Path(dir_a).resolve() == Path(dir_b).resolve():
        raise ConfigError(config_message("RUN_B", str(dir_b), "is RUN_A", "give two different run folders"))
    sa, aa = _load(dir_a)
    sb, ab = _load(dir_b)
    rows = _rows(sa, aa, sb, ab)
    return Comparison(str(dir_a), str(dir_b), tuple(rows), _verdict(rows), ((sa, aa), (sb, ab)))


def _cell(v, unit: str) -> str:
    if v is None:
        return "—"
    if isinstance(v, str) or unit in ("", "-"):
        return f"{v:,}" if isinstance(v, int) else str(v)
    if unit == "s":
        return f"{v * 1e3:,.4g} ms"
    if unit == "B":
        return f"{int(v):,} B"
    return f"{v:,.4g}"


def format_comparison(c: Comparison) -> str:
    """The markdown table (``compare.md``; also what ``tilesim compare`` prints)."""
    out = [f"# A: `{c.a}`  vs  B: `{c.b}`", "", f"**{c.verdict}.**", ""]
    titles = {
        "step": "Step",
        "phase": "Time by phase",
        "label": f"Time by superstep label (the {LABEL_ROWS} that moved most)",
        "chip": "Busy time by chip",
        "bytes": "Bytes per step",
        "memory": "SRAM (all tiles) by category",
        "tiles": "Critical and fullest tiles",
        "workload": "Workload and machine (what differs)",
    }
    for sec, title in titles.items():
        rows = c.section(sec)
        if not rows:
            continue
        out += [f"## {title}", "", "| | A | B | B − A | B / A |", "|---|---:|---:|---:|---:|"]
        for r in rows:
            d, q = r.delta, r.ratio
            delta = "" if d is None else (_cell(d, r.unit) if d >= 0 else "−" + _cell(-d, r.unit))
            if d is not None and d > 0:
                delta = "+" + delta
            ratio = "" if q is None else f"{q:.3f}"
            out.append(f"| {r.item} | {_cell(r.a, r.unit)} | {_cell(r.b, r.unit)} | {delta} | {ratio} |")
        out.append("")
    return "\n".join(out)


def write_comparison(c: Comparison, out) -> list[Path]:
    """``compare.md``, ``compare.json``, ``compare.png`` and ``compare.html`` (side by side on shared
    scales; the page with hover and zoom) into ``out``."""
    from tilesim.io import atomic_write_text  # loaded only when the command runs (start-up time)
    from tilesim.plots import comparison_figure  # matplotlib is imported only when drawing (start-up time)

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = [
        atomic_write_text(out / "compare.md", format_comparison(c) + "\n"),
        atomic_write_text(out / "compare.json", json.dumps(c.to_dict(), indent=1) + "\n"),
    ]
    from tilesim.page import comparison_html  # plotly loads only when a page is written (start-up time)

    (sa, aa), (sb, ab) = c.runs or (_load(c.a), _load(c.b))
    written.append(comparison_figure(c, aa, ab, out / "compare.png"))
    page = comparison_html(c, [("A", sa, aa), ("B", sb, ab)], format_comparison(c))
    written.append(atomic_write_text(out / "compare.html", page))
    return [Path(p) for p in written]
