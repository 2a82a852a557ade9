"""``report.html``: one page per run (and ``compare.html`` per comparison) that works offline.

Built with plotly (its figures carry zoom, pan and hover themselves; the page needs no JavaScript of
ours beyond a check that plotly.js loaded). plotly.js (~4.8 MB) is written once beside the page as
``plotly.min.js`` (:data:`PLOTLY_JS`) and loaded by that relative name, so the page opens from its
folder without a network (file://) and stays small; a page whose ``plotly.min.js`` is missing or of
another version says so at its top. Plotly rather than bokeh: one package with no server, a heat map
whose hover text is set per cell, and dropdowns that re-colour a figure from data already in the
page, which is how a phase shows its busy tiles. Every string of the run folder is escaped, in the
HTML and in the figures' text (:func:`_esc`, :func:`_text`).

The page holds, from the run folder's ``summary.json`` and ``arrays.npz`` (the numbers every other
output reads):

* the step at a glance: time per step, the share of each phase, the run's findings;
* the whole-step timeline, one row per chip, phases coloured (zoom with the mouse);
* time per superstep label, stacked by phase;
* tile heat maps of the critical, the fullest and the first chip: hover a tile for its group (the
  workload's, e.g. a layer) and its SRAM bytes by category; "colour tiles by" shows SRAM, all compute, or one label's
  compute (the tiles that label keeps busy);
* on more than one chip, the multi-chip overview: busy time and fullest tile per chip, bytes chip
  to chip;
* SRAM by category over all tiles, and bytes exchanged tile group to tile group.
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tilesim.io import atomic_write_bytes, atomic_write_text
from tilesim.machine.memory import CATEGORIES
from tilesim.outputs.chart import Chart
from tilesim.outputs.plots import CATEGORY_COLOURS, _chip_image, step_ticks, stored_grid
from tilesim.outputs.records import PHASES, phase_spans
from tilesim.outputs.runrecord import MemoryRecord, RunRecord, Section

__all__ = ["write_page", "page_html", "write_plotly_js", "comparison_html", "PAGE_CHIP_ROWS", "PLOTLY_JS"]

PAGE_CHIP_ROWS = 8
"""Chips drawn in the page's timeline (the first, the last and the critical ones beyond that)."""

PHASE_COLOURS = {
    "compute": "#4c72b0",
    "sync": "#c44e52",
    "exchange": "#55a868",
    "links": "#dd8452",
    "host": "#8172b2",
    "residual": "#8c8c8c",
}


def _go():
    import plotly.graph_objects as go  # plotly loads only when a page is written (start-up time)

    return go


def _div(fig, div_id: str) -> str:
    """The figure's ``<div>`` and the script that draws it. Plotly's JSON writes every ``<`` and ``>`` as
    ``\\u003c``/``\\u003e``; a line break ``<br>`` (the hover text's, 4 to 9 per tile) goes back to its
    4 characters (a third of a tile map's bytes): a ``<br>`` never ends a script, and a stored
    ``<br>`` reaches a figure as ``&lt;br&gt;`` (:func:`_text`), so every one left is the page's own."""
    out = fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, config={"displaylogo": False})
    return out.replace("\\u003cbr\\u003e", "<br>")


def _esc(value: object) -> str:
    """A stored value as HTML text: a run folder's fields are data, never markup (nor a traceback when
    a field holds a number, a list or null where text was written)."""
    return html.escape(str(value))


def _text(value: object) -> str:
    """A stored value as plotly text (a name, a tick or button label, hover text): plotly draws ``<b>``,
    ``<br>``, ``<a href>`` … in its text as markup, and ``&lt;`` as ``<``, so escaped the value is
    drawn as the characters it holds."""
    return html.escape(str(value), quote=False)


PAGE_CELLS = 16384
"""Most heat-map cells a page draws per chip: a larger chip (a wafer of 850,000 PEs) is drawn in
square blocks of tiles, each cell the block's largest value (per-tile values stay in arrays.npz)."""


@dataclass(frozen=True)
class _Grid:
    """How a chip's tiles become heat-map cells: ``k`` x ``k`` tiles per cell (1: one tile each)."""

    rows: int
    cols: int
    k: int

    @classmethod
    def of(cls, rows: int, cols: int) -> _Grid:
        return cls(rows, cols, max(1, math.ceil(math.sqrt(rows * cols / PAGE_CELLS))))

    def image(self, values: np.ndarray) -> np.ndarray:
        """Cell values: the tiles' values laid out as the pictures lay them out, each cell the
        largest of its block (NaN where there is no tile)."""
        img = _chip_image(values, self.rows, self.cols)
        if self.k == 1:
            return img
        r, c = -(-self.rows // self.k), -(-self.cols // self.k)
        pad = np.full((r * self.k, c * self.k), np.nan)
        pad[: self.rows, : self.cols] = img
        blocks = pad.reshape(r, self.k, c, self.k).transpose(0, 2, 1, 3).reshape(r, c, -1)
        top = np.where(np.isnan(blocks), -np.inf, blocks).max(axis=2)  # the largest real tile of each block
        return np.where(np.isneginf(top), np.nan, top)  # a block of padding only stays NaN

    def cells(self) -> list[np.ndarray]:
        """Row-major list of each cell's tile indices on the chip (a cell may be empty)."""
        r, c = -(-self.rows // self.k), -(-self.cols // self.k)
        out = []
        for i in range(r):
            for j in range(c):
                ys = np.arange(i * self.k, min((i + 1) * self.k, self.rows))
                xs = np.arange(j * self.k, min((j + 1) * self.k, self.cols))
                t = (ys[:, None] * self.cols + xs[None, :]).ravel()
                out.append(t[t < self.rows * self.cols])
        return out


def _image(values: np.ndarray, rows: int, cols: int) -> list:
    """One chip's tile values laid out as the pictures lay them out (in blocks on a chip larger
    than :data:`PAGE_CELLS`), padding as JSON nulls. Values are whole units (bytes, cycles: what the
    hover shows), each rounded to the nearest."""
    return [[round(float(v)) if np.isfinite(v) else None for v in row] for row in _Grid.of(rows, cols).image(values)]


TIME_DECIMALS = 5
"""Decimals of the timeline's microseconds in the page: 10 ps, far below a cycle (trace.json and
arrays.npz keep every digit)."""


def _timeline(a: dict, chips: list[int]):
    go = _go()
    tl = {k[len("timeline_") :]: np.asarray(v, np.float64) for k, v in a.items() if k.startswith("timeline_")}
    us = 1e6 / float(a["clock_hz"])
    labels = np.asarray([_text(x) for x in a["labels"]], object)[np.asarray(a["label_id"])]
    booked = np.asarray(PHASES, object)[a["booked_phase"]] if "booked_phase" in a else None
    S = tl["start"].shape[0]
    segs: dict[str, tuple[list, list, list, list]] = {p: ([], [], [], []) for p in PHASES}
    steps = np.arange(S)
    for c in chips:
        for ph, lo, hi in phase_spans(tl, slice(None), c):  # every superstep of chip c at once
            keep = hi > lo
            drawn = np.full(S, ph, object) if ph != "compute" or booked is None else booked
            for p in set(drawn[keep].tolist()):
                m = keep & (drawn == p)
                base, width, ys, text = segs[p]
                w = np.round((hi[m] - lo[m]) * us, TIME_DECIMALS)
                base.extend(np.round(lo[m] * us, TIME_DECIMALS).tolist())
                width.extend(w.tolist())
                ys.extend([f"chip {c}"] * int(m.sum()))
                text.extend(f"superstep {s}: {lab}<br>{p} {d:,.2f} µs" for s, lab, d in zip(steps[m], labels[m], w))
    fig = go.Figure()
    for p, (base, width, ys, text) in segs.items():
        if base:
            fig.add_bar(
                base=base,
                x=width,
                y=ys,
                orientation="h",
                name=p,
                marker_color=PHASE_COLOURS[p],
                marker_line_width=0,
                hovertext=text,
                hoverinfo="text",
            )
    shown = "" if len(chips) == tl["start"].shape[1] else f" ({len(chips)} of {tl['start'].shape[1]} chips)"
    fig.update_layout(  # each phase in its own lane of the chip's row: visible at every zoom, none drawn over another
        barmode="group",
        title=f"the whole step, {S} supersteps{shown}, one lane per phase: drag to zoom, double-click to reset",
        xaxis_title="time (µs)",
        yaxis={"autorange": "reversed", "type": "category"},
        height=180 + 40 * len(chips),
        margin={"l": 70, "r": 20, "t": 50, "b": 40},
        bargap=0.25,
    )
    return fig


def _bars_layout(fig, title: str, x_title: str, bars_px: int, left_px: int, **layout):
    """Horizontal bars read top down: the first item on top, ``bars_px`` of height for the bars."""
    fig.update_layout(
        title=title,
        xaxis_title=x_title,
        yaxis={"autorange": "reversed"},
        height=140 + bars_px,
        margin={"l": left_px, "r": 20, "t": 50, "b": 40},
        **layout,
    )
    return fig


def _labels(record: RunRecord):
    go = _go()
    ranked = sorted(record.by_label, key=lambda x: -x.time_s)
    order = [_text(x.label) for x in ranked]
    fig = go.Figure()
    for p in PHASES:
        ms = [x.phase_s(p) * 1e3 for x in ranked]
        if any(ms):
            fig.add_bar(y=order, x=ms, orientation="h", name=p, marker_color=PHASE_COLOURS[p])
    return _bars_layout(
        fig,
        f"time per superstep label ({len(order)} labels), stacked by phase",
        "time per step (ms)",
        24 * len(order),
        240,
        barmode="stack",
    )


def _tile_text(a: dict, tiles: np.ndarray, tpc: int) -> list[str]:
    """Hover text per tile: its id, layer group, SRAM bytes by category (largest first) and compute."""
    group = a["tile_group"] if "tile_group" in a else None
    table = a["memory_by_category"] if "memory_by_category" in a else None
    out = []
    for t in tiles:
        chip, local = divmod(int(t), tpc)
        lines = [f"tile {local} (chip {chip}, global {int(t)})"]
        if group is not None and int(group[t]) > 0:
            lines.append(f"layer {int(group[t])}")
        if table is not None:
            col = table[:, t]
            lines.append(f"SRAM {int(col.sum()):,} B of {int(a['memory_budget']):,} B")
            for i in np.argsort(-col)[:5]:
                if col[i] > 0:
                    lines.append(f"  {CATEGORIES[i]}: {int(col[i]):,} B")
        lines.append(f"compute {float(a['work_cycles'][t]):,.0f} cycles")
        out.append("<br>".join(lines))
    return out


def _tiles(a: dict, chip: int, why: str):
    """One chip's tiles: a heat map with per-tile hover and a 'colour tiles by' dropdown."""
    go = _go()
    tpc = int(a["tiles_per_chip"])
    rows, cols = stored_grid(a)
    tiles = np.arange(chip * tpc, (chip + 1) * tpc)
    views: list[tuple[str, np.ndarray, str]] = []
    if "memory_bytes" in a:
        views.append(("SRAM bytes", np.asarray(a["memory_bytes"][tiles], float), "bytes"))
    views.append(("compute, all labels", np.asarray(a["work_cycles"][tiles], float), "cycles"))
    if "label_tile_cycles" in a:
        for i, lab in enumerate(_text(x) for x in a["labels"]):
            v = np.asarray(a["label_tile_cycles"][i, tiles], float)
            if v.any():
                views.append((f"compute of '{lab}'", v, "cycles"))
    text = _image_text(a, tiles, tpc, rows, cols)
    name0, v0, unit0 = views[0]
    fig = go.Figure(
        go.Heatmap(
            z=_image(v0, rows, cols),
            text=text,
            hovertemplate="%{text}<br><b>shown: %{z:,.0f}</b><extra></extra>",
            colorscale="Viridis",
            colorbar={"title": {"text": unit0}},
            zmin=0,
            xgap=0,
            ygap=0,
        )
    )
    buttons = [
        {
            "label": name,
            "method": "update",
            "args": [
                {"z": [_image(v, rows, cols)], "colorbar.title.text": unit},
                {"title.text": f"chip {chip}: {name}"},
            ],
        }
        for name, v, unit in views
    ]
    fig.update_layout(
        title=f"chip {chip} ({why}): {name0}",
        updatemenus=[{"buttons": buttons, "x": 1.0, "xanchor": "right", "y": 1.18, "yanchor": "top"}],
        annotations=[
            {"text": "colour tiles by", "x": 0.62, "xref": "paper", "y": 1.16, "yref": "paper", "showarrow": False}
        ],
        yaxis={"autorange": "reversed", "scaleanchor": "x", "showticklabels": False},
        xaxis={"showticklabels": False},
        height=220 + 14 * len(text),
        margin={"l": 20, "r": 20, "t": 90, "b": 20},
    )
    return fig


def _image_text(a: dict, tiles: np.ndarray, tpc: int, rows: int, cols: int) -> list:
    """Hover text per cell: the tile's own (:func:`_tile_text`), or on a chip drawn in blocks the
    block's extent and its fullest tile's text."""
    g = _Grid.of(rows, cols)
    if g.k == 1:
        text = _tile_text(a, tiles, tpc)
        pad = text + [""] * (rows * cols - len(text))
        return [pad[r * cols : (r + 1) * cols] for r in range(rows)]
    values = np.asarray(a["memory_bytes"] if "memory_bytes" in a else a["work_cycles"], float)
    flat = []
    for cell in g.cells():
        cell = cell[cell < tiles.size]
        if cell.size == 0:
            flat.append("")
            continue
        top = tiles[cell[int(np.argmax(values[tiles[cell]]))]]
        head = f"{cell.size} tiles ({g.k} x {g.k} block, tiles {int(tiles[cell[0]])}..{int(tiles[cell[-1]])}); fullest:"
        flat.append(head + "<br>" + _tile_text(a, np.array([top]), tpc)[0])
    ncols = -(-cols // g.k)
    return [flat[i : i + ncols] for i in range(0, len(flat), ncols)]


def _chips_overview(a: dict):
    from plotly.subplots import make_subplots

    tpc = int(a["tiles_per_chip"])
    hz = float(a["clock_hz"])
    comp = a["timeline_compute_cycles"].sum(axis=0) / hz * 1e3
    exch = a["timeline_exchange_cycles"].sum(axis=0) / hz * 1e3
    C = comp.size
    names = [f"chip {c}" for c in range(C)]
    fig = make_subplots(
        rows=1, cols=3, subplot_titles=("busy time per chip (ms)", "fullest tile per chip (B)", "bytes chip to chip")
    )
    fig.add_bar(x=names, y=comp, name="compute", marker_color=PHASE_COLOURS["compute"], row=1, col=1)
    fig.add_bar(x=names, y=exch, name="exchange", marker_color=PHASE_COLOURS["exchange"], row=1, col=1)
    if "memory_bytes" in a:
        full = a["memory_bytes"].reshape(C, tpc).max(axis=1)
        fig.add_bar(x=names, y=full, name="fullest tile", marker_color="#937860", row=1, col=2)
    if "exchange_chip" in a:
        m = np.asarray(a["exchange_chip"], float)
        fig.add_heatmap(
            z=m.tolist(),
            x=names,
            y=names,
            colorscale="Viridis",
            hovertemplate="from %{y} to %{x}: %{z:,.0f} B<extra></extra>",
            row=1,
            col=3,
        )
        fig.update_yaxes(autorange="reversed", row=1, col=3)
    fig.update_layout(
        barmode="stack",
        height=440,
        margin={"l": 40, "r": 20, "t": 60, "b": 40},
        legend={"orientation": "h", "y": -0.15},
    )
    return fig


def _memory(memory: MemoryRecord):
    go = _go()
    tot = memory.total_by_category_bytes
    order = sorted(tot, key=lambda k: -tot[k])
    fig = go.Figure(
        go.Bar(y=[_text(k) for k in order], x=[tot[k] for k in order], orientation="h", marker_color="#937860")
    )
    return _bars_layout(fig, f"SRAM by category, all tiles ({sum(tot.values()):,} B)", "bytes", 24 * len(order), 200)


def _liveness(memory: MemoryRecord, tpc: int):
    """Memory over the program's steps (PopVision's liveness report) of the fullest tile: bytes
    holding live data per step, stacked by category, under the bytes allocated (their max is the
    peak the overflow check uses) and the budget; the chip's totals on a second axis."""
    from plotly.subplots import make_subplots  # plotly loads only when a page is written (start-up time)

    go = _go()
    live = memory.liveness
    assert live is not None
    steps = [_text(x) for x in live.steps]  # stored names: drawn as the characters they hold
    peak = _text(live.peak_step)
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.08,
        row_heights=[0.62, 0.38],
        subplot_titles=(
            f"tile {live.tile - live.chip * tpc} of chip {live.chip} (the fullest): bytes per program step",
            f"chip {live.chip}, all tiles: bytes per program step",
        ),
    )
    for c, v in live.held_bytes.items():
        fig.add_trace(
            go.Scatter(
                x=steps,
                y=list(v),
                name=_text(c.replace("variables:", "var:")),
                stackgroup="held",
                line={"width": 0, "color": CATEGORY_COLOURS.get(c, "#8c8c8c")},
                hovertemplate=_text(c).replace("%{", "% {") + ": %{y:,} B holding live data at %{x}<extra></extra>",
            ),
            row=1,
            col=1,
        )
    dash = {"color": "black", "dash": "dash", "width": 1.5}
    fig.add_trace(
        go.Scatter(x=steps, y=list(live.allocated_bytes), name="allocated (peak = overflow check)", line=dash),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Scatter(x=steps, y=[memory.budget_bytes] * len(steps), name="budget", line={"color": "red", "dash": "dot"}),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Scatter(x=steps, y=list(live.chip_held_bytes), name="chip: holding live data", fill="tozeroy"),
        row=2,
        col=1,
    )
    fig.add_trace(
        go.Scatter(x=steps, y=list(live.chip_allocated_bytes), name="chip: allocated", line=dash), row=2, col=1
    )
    if peak in steps:  # (a hand-edited record may name another)
        fig.add_vline(x=steps.index(peak), line={"color": "grey", "width": 1}, row=1, col=1)
    ticks = [steps[i] for i in step_ticks(list(live.steps), live.peak_step, 12)]
    fig.update_xaxes(tickvals=ticks, tickangle=-40, row=2, col=1)
    fig.update_layout(
        title=f"Memory over the step: live data grows and falls within what is allocated; peak at '{peak}'",
        height=620,
        margin={"l": 60, "r": 20, "t": 80, "b": 90},
        legend={"font": {"size": 10}},
    )
    return fig


def _chart(chart: Chart):
    """A workload's own picture (:class:`tilesim.outputs.chart.Chart`) as the page draws it: the panels
    side by side, a panel's right-axis series on a second y axis."""
    from plotly.subplots import make_subplots  # plotly loads only when a page is written (start-up time)

    go = _go()
    n = max(1, len(chart.panels))
    fig = make_subplots(rows=1, cols=n, specs=[[{"secondary_y": True}] * n], horizontal_spacing=0.13)
    dash = {"line": "solid", "thin": "solid", "dotted": "dot"}
    names = list(dict.fromkeys(s.name for p in chart.panels for s in p.series))  # one colour and legend entry each
    shown: set = set()
    for k, panel in enumerate(chart.panels, start=1):
        for s in panel.series:
            colour = "rgba(0,0,0,0.5)" if s.style == "thin" else _run_colour(names.index(s.name))
            look = {"dash": dash[s.style], "width": 0.8 if s.style == "thin" else 1.8, "color": colour}
            fig.add_trace(
                go.Scatter(
                    x=list(chart.x),
                    y=list(s.values),
                    name=_text(s.name),
                    mode="lines",
                    line=look,
                    legendgroup=_text(s.name),
                    showlegend=s.name not in shown,
                ),
                row=1,
                col=k,
                secondary_y=s.right,
            )
            shown.add(s.name)
        fig.update_yaxes(title_text=_text(panel.y_label), row=1, col=k, secondary_y=False)
        if panel.y_max is not None:
            fig.update_yaxes(range=[0, panel.y_max], row=1, col=k, secondary_y=False)
        if any(s.right for s in panel.series):  # plotly has no symlog scale: a right axis is linear on the page
            fig.update_yaxes(title_text=_text(panel.right_label), row=1, col=k, secondary_y=True, showgrid=False)
        fig.update_xaxes(title_text=_text(chart.x_label), row=1, col=k)
    fig.update_layout(
        title=_text(chart.title), height=380, margin={"l": 60, "r": 20, "t": 60, "b": 50}, legend={"font": {"size": 10}}
    )
    return fig


def _exchange(a: dict):
    go = _go()
    m = np.asarray(a["exchange_group"], float)
    edges = [str(int(e)) for e in a["exchange_edges"][:-1]]
    fig = go.Figure(
        go.Heatmap(
            z=np.where(m > 0, m, np.nan).tolist(),
            x=edges,
            y=edges,
            colorscale="Viridis",
            hovertemplate="from tiles %{y}.. to tiles %{x}..: %{z:,.0f} B<extra></extra>",
        )
    )
    chip = int(a["exchange_chip_index"]) if "exchange_chip_index" in a else 0
    fig.update_layout(
        title=f"bytes per step, tile group to tile group on chip {chip} (labels = first tile)",
        yaxis={"autorange": "reversed", "type": "category"},
        xaxis={"type": "category"},
        height=520,
        margin={"l": 60, "r": 20, "t": 50, "b": 40},
    )
    return fig


def _chips_to_show(record: RunRecord, a: dict) -> list[tuple[int, str]]:
    """(chip, why): the critical chip, the chip of the fullest tile, and chip 0."""
    tpc = int(a["tiles_per_chip"])
    out: dict[int, list[str]] = {}
    if record.explain is not None and record.explain.chip is not None:
        out.setdefault(record.explain.chip, []).append("critical tile")
    if "memory_bytes" in a:
        out.setdefault(int(np.argmax(a["memory_bytes"])) // tpc, []).append("fullest tile")
    out.setdefault(0, []).append("first chip")
    return [(c, ", ".join(w)) for c, w in out.items()]


def _timeline_chips(record: RunRecord, a: dict) -> list[int]:
    C = a["timeline_start"].shape[1]
    if C <= PAGE_CHIP_ROWS:
        return list(range(C))
    keep = {0, C - 1, *(c for c, _ in _chips_to_show(record, a))}
    keep |= set(np.linspace(0, C - 1, PAGE_CHIP_ROWS).astype(int).tolist())
    return sorted(keep)[:PAGE_CHIP_ROWS]


def _glance(r: RunRecord) -> str:
    """The step at a glance: time and rate, the share of each phase, bytes, the critical kernel,
    findings and notes (every string escaped: a stored record is data, never markup)."""
    total = r.step_s
    esc = _esc
    parts = ", ".join(f"{esc(p)} {v / total * 100:.0f} %" for p, v in r.breakdown_s.items() if v > 0 and total > 0)
    rate = r.rate
    rows = [
        f"<p><b>{total * 1e3:,.3f} ms</b> per step ({rate.value:,.0f} {esc(rate.unit)}) on <b>{esc(r.machine)}</b> "
        f"({r.chips} chip(s), {r.supersteps:,} supersteps): {parts}.</p>",
        f"<p>{r.bytes.onchip:,} B sent on chip, {r.bytes.links:,} B over the chip-to-chip links, "
        f"{r.bytes.host:,} B to and from the host per step.</p>",
    ]
    if r.explain is not None and r.explain.sentence:
        rows.append(f"<p class='finding'>{esc(r.explain.sentence)}</p>")
    for f in r.findings:
        rows.append(f"<p class='finding'>{esc(f.message)}. {esc(f.fix)}</p>")
    for n in r.notes:
        rows.append(f"<p class='note'>{esc(n)}</p>")
    return "\n".join(rows)


def _section_html(sec: Section) -> str:
    """A workload's own section: its lines as preformatted text (they are written for summary.md)."""
    return f"<pre class='section'>{_esc(chr(10).join(str(x) for x in sec.lines))}</pre>"


def _settings_html(r: RunRecord) -> str:
    """The settings that shaped the run and where its data and costs came from."""
    p = r.provenance
    rows = "".join(
        f"<tr><td>{_esc(k)}</td><td><code>{_esc(json.dumps(v))}</code></td></tr>" for k, v in r.settings.items()
    )
    return (
        f"<p class='note'>tilesim {_esc(p.tilesim_version)}; cost model: {_esc(p.cost_model)}; "
        f"data: {_esc(p.data)}.</p>" + (f"<table class='settings'>{rows}</table>" if rows else "")
    )


STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 2em; border-bottom: 1px solid #ddd; }
.finding { background: #f6f6f0; padding: .5em .8em; border-left: 3px solid #c44e52; }
.note { color: #555; font-size: .9em; }
pre.section { background: #fafafa; padding: .6em .8em; overflow-x: auto; font-size: .85em; }
table.settings { border-collapse: collapse; font-size: .85em; } table.settings td { padding: .1em .8em; }
"""


def page_html(record: RunRecord, a: dict, title: str | None = None) -> str:
    """The page's HTML (loading plotly.js from :data:`PLOTLY_JS` beside it): everything from the run's
    ``record`` and its ``arrays``."""
    sections: list[tuple[str, str]] = [("The step at a glance", _glance(record))]
    if "timeline_start" in a:
        sections.append(("Timeline", _div(_timeline(a, _timeline_chips(record, a)), "timeline")))
    sections.append(("Time by superstep label", _div(_labels(record), "labels")))
    for sec in record.sections:
        sections.append((sec.title, _section_html(sec)))
        sections += [(c.title, _div(_chart(c), f"chart-{c.file[:-4]}")) for c in sec.charts]
    for c, why in _chips_to_show(record, a):
        sections.append((f"Tiles of chip {c} ({why})", _div(_tiles(a, c, why), f"tiles-chip{c}")))
    if "timeline_start" in a and a["timeline_start"].shape[1] > 1:
        sections.append(("Chips", _div(_chips_overview(a), "chips")))
    if record.memory is not None and record.memory.total_by_category_bytes:
        sections.append(("Memory by category", _div(_memory(record.memory), "memory")))
    if record.memory is not None and record.memory.liveness is not None:
        sections.append(("Memory over the step", _div(_liveness(record.memory, record.tiles_per_chip), "liveness")))
    if "exchange_group" in a:
        sections.append(("Exchange", _div(_exchange(a), "exchange")))
    sections.append(("Settings", _settings_html(record)))
    name = title or f"{record.program} on {record.machine}"
    body = "\n".join(f"<h2>{_esc(h)}</h2>\n{content}" for h, content in sections)
    meta = json.dumps({"step_s": record.step_s, "rate": record.rate.value, "unit": record.rate.unit})
    meta = meta.replace("<", "\\u003c")  # a unit is data: it never closes the script element
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{_esc(name)}</title><style>{STYLE}</style>{_plotly_head()}"
        f"<script type='application/json' id='run-summary'>{meta}</script>"
        f"</head><body><h1>{_esc(name)}</h1>\n{body}\n</body></html>\n"
    )


PLOTLY_JS = "plotly.min.js"
"""The file beside each page (``report.html``, ``compare.html``) holding the plotly.js its figures are
drawn with, loaded by this relative name (:func:`write_plotly_js`)."""

_PLOTLY_CHECK = """(function () {
  var want = %s, got = window.Plotly && window.Plotly.version;
  if (got === want) return;
  document.addEventListener("DOMContentLoaded", function () {
    var p = document.createElement("p");
    p.className = "finding";
    p.id = "plotly-missing";
    p.textContent = (got ? "plotly.min.js beside this page is plotly.js " + got + ", not the " + want + " it was"
      + " written for" : "plotly.min.js (the figures' code) was not found beside this page")
      + ": keep the page in the folder it was written to, or write both again (tilesim report DIR; for"
      + " compare.html, tilesim compare ... --out DIR).";
    document.body.insertBefore(p, document.body.firstChild);
  });
})();"""


def _plotly_head() -> str:
    """The page's ``<head>`` part that loads :data:`PLOTLY_JS` from beside the page, then checks that it
    is the plotly.js the figures were written for (else a note on top of the page says what to do)."""
    from plotly.offline import get_plotlyjs_version  # plotly loads only when a page is written (start-up time)

    check = _PLOTLY_CHECK % json.dumps(get_plotlyjs_version())
    return f"<script src='{PLOTLY_JS}' charset='utf-8'></script><script>{check}</script>"


def write_plotly_js(out) -> Path:
    """Write the installed plotly's plotly.js as ``out/plotly.min.js`` (atomically; left alone when the
    file there is already exactly it) and return its path. Every page written into ``out`` loads it."""
    from plotly.offline import get_plotlyjs  # plotly loads only when a page is written (start-up time)

    path = Path(out) / PLOTLY_JS
    js = get_plotlyjs().encode()
    try:
        if path.is_file() and not path.is_symlink() and path.stat().st_size == len(js) and path.read_bytes() == js:
            return path
    except OSError:  # unreadable: written again
        pass
    return Path(atomic_write_bytes(path, js))


def write_page(out, record: RunRecord, arrays: dict, title: str | None = None) -> Path:
    """Write ``out/report.html`` and the ``out/plotly.min.js`` it loads (each atomically, plotly.js
    first) and return the page's path."""
    page = page_html(record, arrays, title)
    write_plotly_js(out)
    return Path(atomic_write_text(Path(out) / "report.html", page))


COMPARE_TILE_MAPS = 8
"""Most runs whose chip-0 SRAM the comparison page draws side by side."""


def _run_colour(k: int) -> str:
    """The colour of run ``k`` (the pictures' series colours, in order)."""
    from tilesim.outputs.plots import SERIES_COLOURS  # already loaded with this module

    return SERIES_COLOURS[k % len(SERIES_COLOURS)]


def _pair_bars(comparison, section: str, title: str, n: int | None = None):
    """Rows of one section of ``comparison`` (times), one bar per run on one axis (the runs in
    the series colours, named as in the table)."""
    from tilesim.outputs.plots import _time_axis  # already loaded with this module

    go = _go()
    rows = comparison.section(section)[:n]
    k, unit = _time_axis(max([(v or 0.0) for r in rows for v in r.values], default=0.0))
    fig = go.Figure()
    for j, name in enumerate(comparison.names):
        fig.add_bar(
            y=[_text(r.item) for r in rows],
            x=[(r.values[j] or 0.0) * k for r in rows],
            orientation="h",
            name=_text(name),
            marker_color=_run_colour(j),
            hovertemplate="%{y}: %{x:.4g} " + unit + "<extra>" + _text(name) + "</extra>",
        )
    height = 20 + (10 + 12 * len(comparison.names)) * len(rows)
    return _bars_layout(fig, title, f"time per step ({unit})", height, 240, barmode="group")


def _pair_steps(comparison):
    """Each run's throughput (higher is better) and its step time stacked by phase, one row per run."""
    from plotly.subplots import make_subplots  # plotly loads only when a page is written (start-up time)

    from tilesim.outputs.plots import _time_axis  # already loaded with this module

    recs = [rec for rec, _ in comparison.runs]
    k, t_unit = _time_axis(max(r.step_s for r in recs))
    mixed = comparison.rank_by == "step time"
    unit = "steps/s" if mixed else recs[0].rate.unit
    rates = [1.0 / r.step_s if r.step_s > 0 else 0.0 for r in recs] if mixed else [r.rate.value for r in recs]
    best = comparison.ranking[0] if comparison.comparable and comparison.ranking else -1  # none across workloads
    names = [_text(f"{n} (best)" if k == best else n) for k, n in enumerate(comparison.names)]
    judge = "higher is better" if comparison.comparable else "different workloads: not ranked"
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.18,
        subplot_titles=[_text(f"throughput ({unit}), {judge}"), f"time per step by phase ({t_unit})"],
    )
    colours = [_run_colour(k) for k in range(len(recs))]
    fig.add_bar(y=names, x=rates, orientation="h", marker_color=colours, showlegend=False, row=1, col=1)
    for p in PHASES:
        t = [r.breakdown_s.get(p, 0.0) * k for r in recs]
        if any(t):
            fig.add_bar(y=names, x=t, orientation="h", name=p, marker_color=PHASE_COLOURS[p], row=1, col=2)
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(barmode="stack", height=160 + 30 * len(recs), margin={"l": 20, "r": 20, "t": 50, "b": 40})
    return fig


def _pair_tiles(comparison):
    """SRAM per tile of chip 0 of each run, side by side on one colour scale, with per-tile hover."""
    from plotly.subplots import make_subplots  # plotly loads only when a page is written (start-up time)

    runs = [(name, a) for name, (_, a) in zip(comparison.names, comparison.runs)]
    top = max(float(np.max(a["memory_bytes"])) for _, a in runs)
    per_row = min(len(runs), 4)
    fig = make_subplots(
        rows=-(-len(runs) // per_row),
        cols=per_row,
        subplot_titles=[_text(f"{name}: SRAM per tile, chip 0") for name, _ in runs],
    )
    for k, (_, a) in enumerate(runs):
        r, c = divmod(k, per_row)
        tpc = int(a["tiles_per_chip"])
        rows, cols = stored_grid(a)
        fig.add_heatmap(
            z=_image(np.asarray(a["memory_bytes"][:tpc], float), rows, cols),
            text=_image_text(a, np.arange(tpc), tpc, rows, cols),
            hovertemplate="%{text}<extra></extra>",
            colorscale="Viridis",
            zmin=0,
            zmax=top,
            showscale=k == len(runs) - 1,
            row=r + 1,
            col=c + 1,
        )
        fig.update_yaxes(autorange="reversed", showticklabels=False, row=r + 1, col=c + 1)
        fig.update_xaxes(showticklabels=False, row=r + 1, col=c + 1)
    fig.update_layout(height=80 + 360 * -(-len(runs) // per_row), margin={"l": 20, "r": 20, "t": 60, "b": 20})
    return fig


def _code(text: str) -> str:
    """Escaped text with its `backquoted` names as code."""
    parts = _esc(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def comparison_html(comparison, table_md: str) -> str:
    """The ``compare.html`` page of a :class:`tilesim.outputs.compare.Comparison` (its ``runs`` loaded): the
    verdict; every run's throughput and step time by phase; the superstep labels whose time moved,
    one bar per run on one axis; chip 0's tiles of each run on one colour scale (up to
    :data:`COMPARE_TILE_MAPS` runs); and ``table_md`` (the comparison's markdown). Every stored
    string is escaped. Returns the page's HTML (loading plotly.js from :data:`PLOTLY_JS` beside it)."""
    runs = "".join(
        f"<li><code>{_esc(n)}</code>: {_esc(f)}{' (reference)' if i == 0 else ''}</li>"
        for i, (n, f) in enumerate(zip(comparison.names, comparison.folders))
    )
    sections = [
        ("Verdict", f"<p class='finding'>{_code(comparison.verdict)}.</p><ul>{runs}</ul>"),
        ("Throughput and step time", _div(_pair_steps(comparison), "steps")),
    ]
    if comparison.section("label"):
        moved, still, _ = comparison.labels
        title = f"the superstep labels whose time moved ({moved}; {still} did not)"
        sections.append(("Time by superstep label", _div(_pair_bars(comparison, "label", title), "labels")))
    arrays = [a for _, a in comparison.runs]
    if len(arrays) <= COMPARE_TILE_MAPS and all("memory_bytes" in a for a in arrays):
        sections.append(("Tiles", _div(_pair_tiles(comparison), "tiles")))
    sections.append(("Table", f"<pre>{_esc(table_md)}</pre>"))
    body = "\n".join(f"<h2>{_esc(h)}</h2>\n{content}" for h, content in sections)
    name = f"{len(comparison.names)} runs compared: " + ", ".join(comparison.names)
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{_esc(name)}</title><style>{STYLE}</style>{_plotly_head()}"
        f"</head><body><h1>{_esc(name)}</h1>\n{body}\n</body></html>\n"
    )
