"""A run's human-readable report and pictures, re-renderable from what the run stored.

``write_run_report(out, ...)`` writes ``arrays.npz`` (the per-superstep timeline, SRAM per tile
by category, compute cycles per tile, exchange matrices) beside ``summary.json``, then
:func:`render` draws ``timeline.png``, ``breakdown.png``, ``memory.png``, ``work.png``,
``exchange.png`` and writes ``summary.md`` from those two files alone — which is what
``tilesim report DIR`` does for a stored run.
"""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from tilesim.errors import ConfigError, config_message
from tilesim.fabric import grid_shape
from tilesim.io import atomic_write_bytes, atomic_write_text

__all__ = ["write_run_report", "render", "summary_markdown"]


def write_run_report(out, result, program, ledger, exchange: dict | None = None) -> None:
    """Store the arrays a report needs in ``out/arrays.npz`` and render everything."""
    import io
    out = Path(out)
    arrays = {f"timeline_{k}": np.asarray(v) for k, v in (result.timeline or {}).items()}
    arrays["time_s"] = result.time_s
    arrays["label_id"] = result.label_id
    arrays["labels"] = np.asarray(result.labels)
    arrays["clock_hz"] = np.float64(result.clock_hz)
    arrays["work_cycles"] = program.compute_cycles.sum(axis=0, dtype=np.float64)
    arrays["tiles_per_chip"] = np.int64(program.tiles_per_chip)
    if ledger is not None:
        arrays["memory_bytes"] = ledger.per_tile()
        arrays["memory_by_category"] = ledger.table
        arrays["memory_budget"] = np.int64(ledger.budget)
        arrays["grid"] = np.asarray(grid_shape(ledger.machine) or (0, 0))
    if exchange is not None:
        arrays["exchange_chip"] = exchange["chip"]
        arrays["exchange_group"] = exchange["group"]
        arrays["exchange_edges"] = np.asarray(exchange["edges"])
        arrays["exchange_chip_index"] = np.int64(exchange["chip_index"])
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    atomic_write_bytes(out / "arrays.npz", buf.getvalue())
    render(out)


def _load(out: Path):
    s, a = out / "summary.json", out / "arrays.npz"
    for p in (s, a):
        if not p.is_file():
            raise ConfigError(config_message("run directory", str(out), f"has no {p.name}",
                                             "give a folder written by `tilesim run --out`"))
    try:
        summary = json.loads(s.read_text())
        arrays = dict(np.load(a))
    except (ValueError, OSError) as exc:
        raise ConfigError(config_message("run directory", str(out), f"files cannot be read ({exc})",
                                         "re-run `tilesim run --out` to rewrite them")) from None
    return summary, arrays


def _grid(arrays, tpc):
    from tilesim.plots import _grid as near_square
    g = tuple(int(x) for x in arrays.get("grid", (0, 0)))
    return g if g[0] else near_square(tpc)


def render(out) -> list[Path]:
    """Draw every picture and write ``summary.md`` from ``summary.json`` + ``arrays.npz``."""
    from tilesim import plots
    out = Path(out)
    summary, a = _load(out)
    tpc = int(a["tiles_per_chip"])
    written = []
    labels = [str(x) for x in a["labels"]]
    if "timeline_start" in a:
        tl = {k[len("timeline_"):]: v for k, v in a.items() if k.startswith("timeline_")}
        shim = SimpleNamespace(timeline=tl, supersteps=int(a["time_s"].shape[0]), chips=tl["start"].shape[1],
                               clock_hz=float(a["clock_hz"]), machine_name=summary.get("machine", ""),
                               by_label=lambda: summary["by_label"])
        written.append(plots.timeline(shim, out / "timeline.png"))
        written.append(plots.breakdown_bars(shim, out / "breakdown.png"))
    rows, cols = _grid(a, tpc)
    if "memory_bytes" in a:
        mem = a["memory_bytes"].astype(float)
        budget = float(a["memory_budget"])
        chip = int(np.argmax(mem)) // tpc
        used = mem[chip * tpc:(chip + 1) * tpc] / budget
        written.append(plots.tile_heatmap(used, out / "memory.png", rows, cols,
                                          f"SRAM per tile, chip {chip} ({summary.get('machine', '')}); budget {budget:,.0f} B",
                                          "used / budget", vmax=max(1.0, float(used.max())), over=used > 1))
    work = a["work_cycles"]
    chip = int(np.argmax(work)) // tpc
    written.append(plots.tile_heatmap(work[chip * tpc:(chip + 1) * tpc] / 1e6, out / "work.png", rows, cols,
                                      f"compute per tile over one step, chip {chip} (labels: {', '.join(labels[:3])}, ...)",
                                      "million cycles"))
    if "exchange_chip" in a:
        written.append(plots.exchange_matrices(a["exchange_chip"], a["exchange_group"], a["exchange_edges"].tolist(),
                                               out / "exchange.png", chip=int(a["exchange_chip_index"]),
                                               totals=(summary.get("explain") or {}).get("exchange_bytes")))
    atomic_write_text(out / "summary.md", summary_markdown(summary))
    written.append(out / "summary.md")
    return written


def _ms(x):
    return f"{x * 1e3:.3f} ms"


def summary_markdown(s: dict) -> str:
    """The run in words: the time per step and where it goes, the critical kernel, memory."""
    total = s.get("predicted_step_s", s.get("total_s", 0.0))
    lines = ["# Run summary", ""]
    net = s.get("network")
    if net:
        lines.append(f"Network {'-'.join(map(str, net['layers']))}: {net['neurons']:,} neurons, {net['weights']:,} "
                     f"weights, caps {net['caps']}, up to {net['neurons_per_tile']} neurons per tile, on "
                     f"{s.get('machine')} ({s.get('chips')} chip(s)); mapping `{s.get('mapping', {}).get('strategy', '?')}`.")
        lines.append("")
    lines += [f"**Predicted time per training step: {_ms(total)}**"
              + (f" ({s['samples_per_s']:,.0f} samples/s)." if "samples_per_s" in s else "."), ""]
    bd = s.get("breakdown_s", {})
    if total > 0 and bd:
        lines += ["| where the time goes | ms | share |", "|---|---:|---:|"]
        lines += [f"| {k} | {v * 1e3:.3f} | {100 * v / total:.1f} % |" for k, v in bd.items()]
        lines.append("")
    by = s.get("by_phase") or s.get("by_label") or {}
    if by:
        lines += ["| phase (superstep label) | supersteps | ms | critical tile |", "|---|---:|---:|---:|"]
        for k, v in sorted(by.items(), key=lambda kv: -kv[1]["time_s"]):
            lines.append(f"| {k} | {v['supersteps']} | {v['time_s'] * 1e3:.3f} | chip {v['critical_chip']} "
                         f"tile {v['critical_tile']} |")
        lines.append("")
    ex = s.get("explain")
    if ex:
        lines += ["## The critical kernel", "", ex["sentence"], ""]
        if ex.get("exchange_bytes"):
            lines += ["| exchanged per step | MB |", "|---|---:|"]
            lines += [f"| {k} | {v / 1e6:,.1f} |" for k, v in sorted(ex["exchange_bytes"].items(), key=lambda kv: -kv[1])]
            lines.append("")
    m = s.get("memory")
    if m:
        lines += ["## Memory", "",
                  f"Fullest tile {m['max_tile']}: {m['max_tile_bytes']:,} of {m['budget_bytes']:,} B "
                  f"({100 * m['max_tile_bytes'] / m['budget_bytes']:.0f} %).", "",
                  "| largest items on that tile | category | bytes |", "|---|---|---:|"]
        lines += [f"| {e['label']} | {e['category']} | {e['bytes']:,} |" for e in m.get("max_tile_entries", [])[:6]]
        lines.append("")
        cats = m.get("total_by_category_bytes")
        if isinstance(cats, dict) and cats:
            lines += ["| category (all tiles) | bytes |", "|---|---:|"]
            lines += [f"| {k} | {int(v):,} |" for k, v in sorted(cats.items(), key=lambda kv: -kv[1]) if v]
            lines.append("")
    if "loss" in s:
        lines += [f"Loss {s['loss'][0]:.4f} → {s['loss'][-1]:.4f} over {len(s['loss'])} step(s).", ""]
    lines += ["Pictures: `timeline.png` (BSP phases per chip), `memory.png` (SRAM per tile), `work.png` "
              "(compute per tile), `exchange.png` (bytes chip × chip and tile group × tile group), "
              "`breakdown.png`; `trace.json` opens in https://ui.perfetto.dev.", ""]
    return "\n".join(lines)
