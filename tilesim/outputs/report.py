"""A run's human-readable report and pictures, re-renderable from what the run stored.

``write_run_report(out, ...)`` writes ``arrays.npz`` (the per-superstep timeline, SRAM per tile
by category, compute cycles per tile, exchange matrices) beside ``summary.json``, then
:func:`render` draws ``timeline.png``, ``breakdown.png``, ``memory.png``, ``work.png``,
``exchange.png`` and writes ``summary.md`` from those two files alone — which is what
``tilesim report DIR`` does for a stored run.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import stat
import zipfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from tilesim.errors import ConfigError, config_message
from tilesim.io import atomic_write_bytes, atomic_write_text, check_output_path
from tilesim.machine.fabric import grid_shape, make_fabric
from tilesim.outputs import plots
from tilesim.outputs.recordcheck import MAX_NUMBER
from tilesim.outputs.records import PHASES, ProgramDigest, label_tile_cycles
from tilesim.outputs.runrecord import Explain, MemoryRecord, RunRecord, read_record

CORE_PICTURES = ("timeline.png", "breakdown.png", "memory.png", "work.png", "exchange.png", "links.png")
"""The pictures the core draws; a workload's :class:`tilesim.outputs.chart.Chart` takes another name."""

__all__ = [
    "write_run_report",
    "run_files",
    "render",
    "load_run",
    "read_summary",
    "summary_markdown",
    "seal_run_folder",
    "verify_run_folder",
    "MANIFEST",
]

# A run folder is complete only with this file: written last, it lists every file of the run with
# its size and SHA-256. Writing a run first deletes it, so a run killed half-way (a new summary.json
# beside an old arrays.npz) has no manifest, or one that does not match, and `report` refuses it.
MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1
_FIX = "re-run the command with --out to write the folder again"
# what render() reads: arrays.npz keys (summary.json is read whole as a RunRecord)
ARRAY_KEYS = ("time_s", "label_id", "labels", "clock_hz", "work_cycles", "tiles_per_chip")
TIMELINE_KEYS = tuple(f"timeline_{k}" for k in ("start", "arrive", "release", "exchange_cycles", "links_end", "end"))
MEMORY_KEYS = ("memory_bytes", "memory_budget")
EXCHANGE_KEYS = ("exchange_chip", "exchange_group", "exchange_edges", "exchange_chip_index")


def _digest(path: Path) -> str:

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def seal_run_folder(out, names) -> Path:
    """Write the manifest (size and SHA-256 of each of ``names``; ``written``: every file of the run
    in ``out``, sealed or not) last, atomically."""
    out = Path(out)
    files = {n: {"bytes": (out / n).stat().st_size, "sha256": _digest(out / n)} for n in names}
    written = sorted(p.name for p in out.iterdir() if p.name != MANIFEST and not p.name.startswith("."))
    body = {"format": MANIFEST_FORMAT, "files": files, "written": written}
    return atomic_write_text(out / MANIFEST, json.dumps(body, indent=2))


RENDERED = (*CORE_PICTURES, "activity.png", "summary.md", "report.html", "plotly.min.js", "memory.txt", "wall.json")
"""Files a run folder written before manifests said what the run wrote may hold besides its sealed ones."""


def run_files(out) -> frozenset:
    """The names of the files the tilesim run in ``out`` wrote (its manifest's ``written``; for an older
    manifest its sealed files and :data:`RENDERED`); empty when ``out`` holds no sealed run. A re-run into
    ``out`` removes them (what the new run does not write again would be stale) and keeps the rest."""
    try:
        m = json.loads((Path(out) / MANIFEST).read_text())
        names = set(m["files"]) | set(m.get("written", RENDERED))
    except (OSError, ValueError, KeyError, TypeError):
        return frozenset()
    return frozenset(str(n) for n in names) | {MANIFEST}


def _broken(out, why: str, fix: str = _FIX) -> ConfigError:
    return ConfigError(config_message("run directory", str(out), why, fix))


def verify_run_folder(out) -> None:
    """Raise :class:`ConfigError` unless ``out`` holds one complete run: a manifest whose every
    file is present with its recorded size and SHA-256."""
    out = Path(out)
    if not out.is_dir():
        raise _broken(
            out, "is not a folder", "give a folder written by `tilesim run --out` or `tilesim simulate --out`"
        )
    m = out / MANIFEST
    if not m.is_file():
        why = (
            "has no manifest.json: the run that wrote it was interrupted, or it was written by an older tilesim"
            if (out / "summary.json").exists()
            else "has no summary.json and no manifest.json (holds no run)"
        )
        raise _broken(
            out,
            why,
            _FIX
            if (out / "summary.json").exists()
            else "give a folder written by `tilesim run --out` or `tilesim simulate --out`",
        )
    try:
        if m.stat().st_size > MAX_SUMMARY_BYTES:
            raise ValueError("larger than any manifest")
        man = json.loads(m.read_text())
        files = man["files"]
        if not isinstance(files, dict) or not files:
            raise TypeError
        for name, rec in files.items():
            f = out / name
            if not isinstance(name, str) or "/" in name or not f.is_file():
                what = "is not a regular file (a folder, device or pipe)" if f.exists() else "is missing"
                raise _broken(out, f"has a {name} listed in its manifest that {what} (a mixed or damaged run)")
            if f.stat().st_size != int(rec["bytes"]) or _digest(f) != rec["sha256"]:
                raise _broken(
                    out,
                    f"has a {name} that differs from the one its run wrote (changed, truncated or from another run)",
                )
    except ConfigError:
        raise
    except (ValueError, TypeError, KeyError, OSError, UnicodeDecodeError, RecursionError, AttributeError):
        raise _broken(out, "has an unreadable manifest.json") from None


def write_run_report(out, result, program, ledger, exchange: dict | None = None) -> None:
    """Store the arrays a report needs in ``out/arrays.npz`` and render everything."""

    out = Path(out)
    not_work = tuple(getattr(result, "host_labels", ())) + tuple(getattr(result, "residual_labels", ()))
    fabric = make_fabric(ledger.machine) if ledger is not None else None
    digest = ProgramDigest.of(program, host_labels=not_work, fabric=fabric)
    arrays: dict[str, np.ndarray] = {f"timeline_{k}": np.asarray(v) for k, v in (result.timeline or {}).items()}
    arrays["time_s"] = result.time_s
    arrays["label_id"] = result.label_id
    arrays["labels"] = np.asarray(result.labels)
    arrays["clock_hz"] = np.asarray(result.clock_hz, np.float64)
    arrays["work_cycles"] = digest.work_cycles
    per_label = digest.label_tile_cycles if program is digest else label_tile_cycles(program)
    if per_label is not None:
        arrays["label_tile_cycles"] = np.asarray(per_label, np.float32)
    arrays["tiles_per_chip"] = np.asarray(result.tiles_per_chip, np.int64)
    if hasattr(result, "booked_phase"):  # the phase each superstep's compute is drawn in, as PHASES indices
        arrays["booked_phase"] = np.array([PHASES.index(p) for p in result.booked_phase()], np.int64)
    if digest.tile_group is not None:
        arrays["tile_group"] = np.asarray(digest.tile_group, np.int64)
    if ledger is not None:
        arrays["memory_bytes"] = ledger.per_tile()
        arrays["memory_by_category"] = ledger.table
        arrays["memory_budget"] = np.asarray(ledger.budget, np.int64)
        arrays["grid"] = np.asarray(grid_shape(ledger.machine) or (0, 0))
    if digest.grid_links is not None:
        chip, links = digest.grid_links
        for k in ("right", "left", "down", "up"):
            arrays[f"links_{k}"] = getattr(links, k)
        arrays["links_chip"] = np.asarray(chip, np.int64)
    if exchange is not None:
        arrays["exchange_chip"] = exchange["chip"]
        arrays["exchange_group"] = exchange["group"]
        arrays["exchange_edges"] = np.asarray(exchange["edges"])
        arrays["exchange_chip_index"] = np.asarray(exchange["chip_index"], np.int64)
    buf = io.BytesIO()
    # allow_pickle is numpy's default, named so that no key of ``arrays`` can be taken for it
    np.savez_compressed(buf, allow_pickle=True, **arrays)
    atomic_write_bytes(out / "arrays.npz", buf.getvalue())
    render(out, verify=False)


def _load(out: Path) -> tuple[RunRecord, dict]:
    """The run's record (summary.json, any format: :func:`tilesim.outputs.runrecord.read_record`) and
    arrays.npz, checked for everything :func:`render` reads."""

    s, a = out / "summary.json", out / "arrays.npz"
    for p in (s, a):
        if not p.is_file():
            raise _broken(out, f"has no {p.name}" if not p.exists() else f"has a {p.name} that is not a regular file")
    record = read_record(read_summary(s), str(s))
    try:
        with np.load(a, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (ValueError, OSError, EOFError, UnicodeDecodeError, zipfile.BadZipFile) as exc:
        raise _broken(out, f"has files that cannot be read ({type(exc).__name__}: {str(exc)[:80]})") from None
    need = list(ARRAY_KEYS)
    if any(k.startswith("timeline_") for k in arrays):
        need += TIMELINE_KEYS
    for group in (MEMORY_KEYS, EXCHANGE_KEYS):
        if any(k in arrays for k in group):
            need += group
    missing = [k for k in need if k not in arrays]
    if missing:
        raise _broken(out, f"has an arrays.npz without {', '.join(missing)}")
    _check_scalars(a, arrays, record)
    return record, arrays


def _check_scalars(path: Path, arrays: dict, record: RunRecord) -> None:
    """The numbers of ``arrays.npz`` the pages divide by: the clock, the tiles per chip (the record's)
    and the SRAM budget, each one finite positive number."""
    wanted = {"clock_hz": "a clock rate in Hz > 0", "tiles_per_chip": f"{record.tiles_per_chip} (summary.json's)"}
    if "memory_budget" in arrays:
        wanted["memory_budget"] = "a budget in bytes >= 1"
    for key, what in wanted.items():
        v = arrays[key]
        ok = v.shape == () and v.dtype.kind in "iuf" and math.isfinite(float(v)) and 0 < float(v) <= MAX_NUMBER
        if ok and key == "tiles_per_chip":
            ok = float(v) == record.tiles_per_chip
        if not ok:
            shown = v.tolist() if v.size <= 4 else f"{v.dtype} array of shape {v.shape}"
            raise ConfigError(
                config_message(
                    f"{path} {key}",
                    shown,
                    f"must be one number: {what}",
                    "restore the file tilesim wrote, or re-run the command that wrote the folder",
                )
            )


MAX_SUMMARY_BYTES = 256 << 20
"""The largest ``summary.json`` read (a run's is kilobytes to a few megabytes)."""


def read_summary(path) -> object:
    """The parsed JSON of a run's ``summary.json`` at ``path``: a regular file (not a folder, a device
    or a pipe) of at most :data:`MAX_SUMMARY_BYTES`, UTF-8 text, complete JSON. Raises
    :class:`ConfigError` naming the file, what it holds and the fix (:func:`read_record` checks the fields)."""
    p = Path(path)
    fix = "restore the file tilesim wrote, or re-run the command that wrote the folder"
    try:
        st = p.stat()
        if not stat.S_ISREG(st.st_mode):
            kind = "a folder" if stat.S_ISDIR(st.st_mode) else "a device, pipe or socket"
            raise ConfigError(config_message(str(p), kind, "must be a regular file (a run's JSON summary)", fix))
        if st.st_size > MAX_SUMMARY_BYTES:
            raise ConfigError(
                config_message(
                    str(p), f"{st.st_size:,} B", f"is larger than a run's summary ({MAX_SUMMARY_BYTES:,} B)", fix
                )
            )
        raw = p.read_bytes()
    except OSError as exc:
        raise ConfigError(
            config_message(str(p), exc.strerror or str(exc), "cannot be read", "check its permissions")
        ) from None
    try:
        body = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            config_message(
                str(p), raw[max(exc.start - 8, 0) : exc.start + 8], f"is not UTF-8 text (byte {exc.start})", fix
            )
        ) from None
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        problem = "ends before its JSON is complete (truncated)" if exc.pos >= len(body.rstrip()) else "is not JSON"
        raise ConfigError(
            config_message(
                str(p), body[max(exc.pos - 20, 0) : exc.pos + 20], f"{problem}: {exc.msg} at line {exc.lineno}", fix
            )
        ) from None
    except RecursionError:
        raise ConfigError(config_message(str(p), f"{len(raw):,} B", "nests too deeply to read", fix)) from None
    except ValueError as exc:  # e.g. a whole number of more digits than Python converts
        raise ConfigError(config_message(str(p), f"{len(raw):,} B", f"cannot be read ({str(exc)[:80]})", fix)) from None


def load_run(out) -> tuple[RunRecord, dict]:
    """``(record, arrays)`` of a run folder, after :func:`verify_run_folder` (a broken, mixed or
    missing folder raises :class:`ConfigError`)."""
    verify_run_folder(out)
    return _load(Path(out))


def render(out, verify: bool = True) -> list[Path]:
    """Draw every picture and write ``summary.md`` from ``summary.json`` + ``arrays.npz``.

    With ``verify`` (``tilesim report``) the folder must first pass :func:`verify_run_folder`
    and be writable; a broken or mixed folder raises :class:`ConfigError` (one line)."""

    out = Path(out)
    if verify:
        verify_run_folder(out)
        check_output_path(out, "run directory", "dir")
    record, a = _load(out)
    try:
        return _draw(out, record, a, plots)
    except (KeyError, IndexError, ValueError, TypeError) as exc:  # arrays of the wrong shape or type
        raise _broken(
            out,
            f"has arrays.npz/summary.json contents that do not fit together ({type(exc).__name__}: {str(exc)[:80]})",
        ) from None


def _draw(out, record: RunRecord, a, plots, page: bool = True) -> list[Path]:
    tpc = int(a["tiles_per_chip"])
    written = []
    if "timeline_start" in a:
        tl = {k[len("timeline_") :]: v for k, v in a.items() if k.startswith("timeline_")}
        by = record.label_table()
        shim = SimpleNamespace(
            timeline=tl,
            supersteps=int(a["time_s"].shape[0]),
            chips=tl["start"].shape[1],
            clock_hz=float(a["clock_hz"]),
            machine_name=record.machine,
            by_label=lambda: by,
        )
        booked = np.asarray(PHASES, object)[a["booked_phase"]] if "booked_phase" in a else None
        written.append(plots.timeline(shim, out / "timeline.png", booked=booked))
        written.append(plots.breakdown_bars(shim, out / "breakdown.png"))
    rows, cols = plots.stored_grid(a)
    if "memory_bytes" in a:
        mem = a["memory_bytes"].astype(float)
        budget = float(a["memory_budget"])
        used = mem / budget
        written.append(
            plots.tile_heatmap(
                used,
                out / "memory.png",
                rows,
                cols,
                f"SRAM per tile ({record.machine}); budget {budget:,.0f} B; {_layout_note(a, record.tile_groups)}",
                "used / budget",
                vmax=max(1.0, float(used.max())),
                over=used > 1,
                tiles_per_chip=tpc,
                tile_layer=a["tile_group"] if "tile_group" in a else None,
                panel=_liveness_panel(record, budget, tpc),
            )
        )
    work = a["work_cycles"]
    written.append(
        plots.tile_heatmap(
            work / 1e6,
            out / "work.png",
            rows,
            cols,
            "compute cycles per tile over one step (host-booked supersteps left out); "
            + _layout_note(a, record.tile_groups),
            "million cycles",
            tiles_per_chip=tpc,
            tile_layer=a["tile_group"] if "tile_group" in a else None,
        )
    )
    if "exchange_chip" in a:
        written.append(
            plots.exchange_matrices(
                a["exchange_chip"],
                a["exchange_group"],
                a["exchange_edges"].tolist(),
                out / "exchange.png",
                chip=int(a["exchange_chip_index"]),
                totals=record.explain.exchange_bytes if record.explain else None,
            )
        )
    if "links_right" in a:
        written.append(
            plots.link_load(
                {k: a[f"links_{k}"] for k in ("right", "left", "down", "up")},
                out / "links.png",
                f"bytes per step on each directed link of chip {int(a['links_chip'])}'s network-on-chip "
                f"({record.machine})\nper-tile totals as proportional traffic (tilesim/machine/gridload.py)",
            )
        )
    written += _draw_charts(out, record)
    atomic_write_text(out / "summary.md", summary_markdown(record))
    written.append(out / "summary.md")
    if page:
        from tilesim.outputs.page import write_page  # plotly loads only when a page is written (start-up time)

        written.append(write_page(out, record, a))
    return written


def _draw_charts(out: Path, record: RunRecord) -> list[Path]:
    """The workload's own pictures (:class:`tilesim.outputs.chart.Chart` s of its sections)."""
    written = []
    for chart in (c for section in record.sections for c in section.charts):
        if chart.file in CORE_PICTURES:
            raise _broken(out, f"has a workload chart named {chart.file}, one of the core's own pictures")
        plots.draw_chart(chart, out / chart.file)
        written.append(out / chart.file)
    return written


def _liveness_panel(record: RunRecord, budget: float, tpc: int):
    """The liveness panel of ``memory.png`` (None when the run's memory names no program steps)."""
    live = record.memory.liveness if record.memory is not None else None
    if live is None:
        return None
    return lambda fig: plots.liveness_panel(fig, live, budget, tpc)


def _layout_note(a, tile_groups: str) -> str:
    g = tuple(int(x) for x in (a["grid"] if "grid" in a else (0, 0)))
    return (
        f"tiles where they sit on the network-on-chip ({g[0]} rows x {g[1]} columns)"
        if g[0]
        else "tiles in id order, supertile pairs side by side (floorplan not modelled)"
    ) + (f"; L1, L2, ...: {tile_groups}" if "tile_group" in a else "")


def _ms(x):
    return f"{x * 1e3:.3f} ms"


def _critical_kernel_markdown(ex: Explain | None) -> list:
    """The "critical kernel" section of :func:`summary_markdown` (its sentence and exchanged bytes per
    kind, sent and received); no lines without one."""
    if ex is None:
        return []
    lines: list = ["## The critical kernel", "", ex.sentence, ""]
    if ex.exchange_bytes:
        rec = ex.exchange_received_bytes
        lines += [
            "| exchanged per step | MB sent | MB received (a multicast once per receiving tile) |",
            "|---|---:|---:|",
        ]
        lines += [
            f"| {k} | {v / 1e6:,.1f} | {rec[k] / 1e6:,.1f} |" if k in rec else f"| {k} | {v / 1e6:,.1f} | |"
            for k, v in sorted(ex.exchange_bytes.items(), key=lambda kv: -kv[1])
        ]
        sent = sum(ex.exchange_bytes.values()) / 1e6
        lines += [
            f"| **total** | {sent:,.1f} | {sum(rec.values()) / 1e6:,.1f} |"
            if rec
            else f"| **total** | {sent:,.1f} | |",
            "",
        ]
    return lines


def _memory_markdown(m: MemoryRecord | None) -> list:
    """The "Memory" section of :func:`summary_markdown`: the fullest tile, its largest items and the
    bytes per category over all tiles; no lines without a memory record."""
    if m is None:
        return []
    lines: list = [
        "## Memory",
        "",
        f"Fullest tile {m.max_tile}: {m.max_tile_bytes:,} of {m.budget_bytes:,} B "
        f"({100 * m.max_tile_bytes / m.budget_bytes:.0f} %).",
        "",
        "| largest items on that tile | category | bytes |",
        "|---|---|---:|",
    ]
    lines += [f"| {e.label} | {e.category} | {e.bytes:,} |" for e in m.max_tile_entries[:6]]
    lines.append("")
    lines += _liveness_markdown(m)
    cats = m.total_by_category_bytes
    if cats:
        lines += ["| category (all tiles) | bytes |", "|---|---:|"]
        lines += [f"| {k} | {int(v):,} |" for k, v in sorted(cats.items(), key=lambda kv: -kv[1]) if v]
        lines.append("")
    return lines


def _liveness_markdown(m: MemoryRecord) -> list:
    """One line on the fullest tile's memory over the program's steps (none without a liveness record)."""
    live = m.liveness
    if live is None:
        return []
    held = live.held_total()
    peak = live.peak_index
    flat = len(set(live.allocated_bytes)) == 1
    return [
        f"Over the step ({len(live.steps)} program steps; `memory.png`, `report.html`): that tile "
        + ("has all of it allocated for the whole program; " if flat else f"peaks at '{live.peak_step}'; ")
        + f"its live data is {held[0]:,} B at '{live.steps[0]}', {held[peak]:,} B at '{live.peak_step}' "
        f"and {held[-1]:,} B at '{live.steps[-1]}'.",
        "",
    ]


def _settings_markdown(r: RunRecord) -> list:
    """The settings and provenance of the run: what shaped it, where its data and costs came from."""
    p = r.provenance
    lines = [
        "## Settings",
        "",
        f"tilesim {p.tilesim_version}; cost model: {p.cost_model}; data: {p.data}.",
        "",
    ]
    if r.settings:
        lines += ["| setting | value |", "|---|---|"]
        lines += [f"| {k} | `{_setting(v)}` |" for k, v in r.settings.items()]
        lines.append("")
    return lines


def _setting(v) -> str:
    """A setting's value as a person reads it (lists joined by commas, none as a dash)."""
    if v is None:
        return "—"
    if isinstance(v, (list, tuple)):
        return ", ".join(_setting(x) for x in v)
    return str(v)


def summary_markdown(r: RunRecord) -> str:
    """The run in words: what ran, the time per step and where it goes, the critical kernel, the
    workload's own sections, memory, notes and the settings — from the record alone."""
    total = r.step_s
    rate = r.rate
    lines = [
        "# Run summary",
        "",
        f"`{r.program}` ({r.workload}) on {r.machine}, {r.chips} chip(s) of {r.tiles_per_chip:,} tiles.",
        "",
    ]
    if r.structure:  # the workload's named structural assumptions
        lines += ["Assumed structure: " + ", ".join(f"{k} `{v}`" for k, v in r.structure.items()) + ".", ""]
    lines += [f"**Predicted time per step: {_ms(total)}** ({rate.value:,.0f} {rate.unit}).", ""]
    if total > 0 and r.breakdown_s:
        lines += ["| where the time goes | ms | share |", "|---|---:|---:|"]
        lines += [f"| {k} | {v * 1e3:.3f} | {100 * v / total:.1f} % |" for k, v in r.breakdown_s.items()]
        lines.append("")
    b = r.bytes
    lines += [
        f"Bytes per step: {b.onchip / 1e6:,.1f} MB sent on chip (each byte once, as the sending tiles put it on "
        f"the exchange), {b.links / 1e6:,.1f} MB over the chip-to-chip links, {b.host / 1e6:,.3f} MB to/from the host.",
        "",
    ]
    if r.by_label:
        lines += ["| superstep label | supersteps | ms | critical tile |", "|---|---:|---:|---:|"]
        for x in sorted(r.by_label, key=lambda x: -x.time_s):
            lines.append(
                f"| {x.label} | {x.supersteps} | {x.time_s * 1e3:.3f} | chip {x.critical_chip} tile {x.critical_tile} |"
            )
        lines.append("")
    if r.critical_tiles:
        tiles = ", ".join(f"chip {t // r.tiles_per_chip} tile {t % r.tiles_per_chip}" for t in r.critical_tiles)
        lines += [
            f"Critical tiles (the slowest tile of the last chip to arrive, by the compute they bound): {tiles}.",
            "",
        ]
    lines += _critical_kernel_markdown(r.explain)
    if r.findings:
        lines += ["## Findings", ""]
        lines += [f"* **{f.kind.replace('_', ' ')}**: {f.message}. Fix: {f.fix}." for f in r.findings]
        lines.append("")
    for sec in r.sections:
        lines += [f"## {sec.title}", "", *sec.lines, ""]
    lines += _memory_markdown(r.memory)
    lines += [f"{n}." for n in r.notes] + ([""] if r.notes else [])
    lines += _settings_markdown(r)
    lines += [
        "Pictures: `timeline.png` (BSP phases per chip), `memory.png` (SRAM per tile), `work.png` "
        "(compute per tile), `exchange.png` (bytes chip × chip and tile group × tile group), "
        "`breakdown.png`, on a mesh or torus `links.png` (bytes on every directed link of the NoC); "
        "`trace.json` opens in https://ui.perfetto.dev; `report.html` has them all, with hover and zoom.",
        "",
    ]
    return "\n".join(lines)
