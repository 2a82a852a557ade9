"""Pictures: tile-memory heat map, BSP timeline (Gantt), phase breakdown. matplotlib is
imported lazily, only here and in experiments/."""

from __future__ import annotations

import functools
import io
import math
from pathlib import Path

import numpy as np

from tilesim.io import atomic_write_bytes
from tilesim.machine.fabric import grid_shape
from tilesim.outputs.chart import Chart, Panel
from tilesim.outputs.records import PHASES, phase_spans

# One palette for every picture (run reports, the tour, the experiments): a phase of the BSP
# step always has the same colour, and chips / series use SERIES_COLOURS in order.
PHASE_COLOURS = {
    "compute": "#4c72b0",
    "sync": "#c44e52",
    "exchange": "#55a868",
    "links": "#dd8452",
    "host": "#8172b3",
    "residual": "#8c8c8c",  # grey: a fitted term, not a mechanism
}
SERIES_COLOURS = (
    "#4c72b0",
    "#dd8452",
    "#55a868",
    "#c44e52",
    "#8172b3",
    "#937860",
    "#da8bc3",
    "#8c8c8c",
    "#ccb974",
    "#64b5cd",
)
# SRAM categories (tilesim.machine.memory.CATEGORIES), the same colour in every memory picture
CATEGORY_COLOURS = {
    "variables:weights": "#4c72b0",
    "variables:gradients": "#dd8452",
    "variables:optimizer": "#55a868",
    "variables:state": "#c44e52",
    "variables:activations": "#8172b3",
    "variables:sequences": "#e377c2",
    "variables:inputs": "#937860",
    "variables:other": "#8c8c8c",
    "exchange_buffers": "#64b5cd",
    "vertex_state": "#ccb974",
    "vertex_code": "#17becf",
    "control_code": "#bcbd22",
    "exchange_code": "#9edae5",
    "stack": "#c7c7c7",
}
# tiles drawn per row when the fabric has no grid of its own (the IPU's exchange is all-to-all):
# the chip's floorplan is not in the reference material (ipu-hardware.md), so tiles are drawn in
# their id order as supertile pairs (2 tiles share an exchange port, ipu-hardware.md §2), 32
# pairs per row: GC200 1472 tiles = 23 rows, GC2 1216 = 19 rows.
TILES_PER_ROW = 64
# chips drawn tile by tile; above this one chip is drawn and every chip as a summary strip
MAX_CHIP_PANELS = 4


def literal_text(draw):
    """``draw`` with every text drawn as written: a ``$`` is a dollar sign and a backslash a
    backslash, never matplotlib's mathtext. Labels, names and titles come from the user (a superstep
    label, a folder's name, a chart's series), and ``$\\foo{$`` would otherwise fail to draw after the
    simulation. Every picture-drawing function of tilesim is wrapped in it."""

    @functools.wraps(draw)
    def run(*args, **kwargs):
        import matplotlib  # matplotlib is imported only when drawing (start-up time)

        with matplotlib.rc_context({"text.parse_math": False}):
            return draw(*args, **kwargs)

    return run


def _plt():
    import matplotlib  # matplotlib is imported only when drawing (start-up time)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # matplotlib is imported only when drawing (start-up time)

    return plt


def save_figure(fig, path, **kwargs) -> None:
    """``fig.savefig`` that never leaves a half-written picture: into memory, then an atomic write
    (``path`` may also be a binary file object)."""
    if hasattr(path, "write"):
        fig.savefig(path, **kwargs)
        return
    buf = io.BytesIO()
    fig.savefig(buf, format=kwargs.pop("format", Path(path).suffix.lstrip(".") or "png"), **kwargs)
    atomic_write_bytes(path, buf.getvalue())


def _grid(n: int, cols: int | None = None) -> tuple[int, int]:
    cols = cols or (TILES_PER_ROW if n >= 4 * TILES_PER_ROW else int(math.ceil(math.sqrt(n * 1.5))))
    return int(math.ceil(n / cols)), cols


def tile_grid(machine) -> tuple[int, int]:
    """Rows and columns to draw one chip's tiles: the mesh's own grid, else :data:`TILES_PER_ROW`
    tiles (supertile pairs) per row in tile-id order."""
    return grid_shape(machine) or _grid(machine.tiles_per_chip)


def stored_grid(arrays: dict) -> tuple[int, int]:
    """Rows and columns of one chip's tiles for a stored run (its ``arrays.npz``): the grid it
    recorded (a mesh), else :func:`tile_grid`'s rows of :data:`TILES_PER_ROW`."""
    g = [int(x) for x in arrays.get("grid", (0, 0))]
    return (g[0], g[1]) if g[0] else _grid(int(arrays["tiles_per_chip"]))


def _chip_image(values, rows, cols):
    img = np.full(rows * cols, np.nan)
    img[: values.size] = values
    return img.reshape(rows, cols)


def _mark_layers(ax, layer, rows, cols):
    """Outline the tiles of each tile group (``layer`` int per tile, 0 = none: a workload's groups, e.g. its
    layers) and name it."""
    if layer is None or not np.any(layer):
        return
    img = np.nan_to_num(_chip_image(np.asarray(layer, float), rows, cols))
    ids = [int(v) for v in np.unique(layer) if v > 0]
    for v in ids:
        ys, xs = np.nonzero(img == v)
        # the group's bounding box (one tile of margin) only: a contour keeps its grid, and a
        # wafer's 192 layers each outlined over the whole 750 x 994 image held gigabytes
        y0, y1 = max(int(ys.min()) - 1, 0), min(int(ys.max()) + 2, img.shape[0])
        x0, x1 = max(int(xs.min()) - 1, 0), min(int(xs.max()) + 2, img.shape[1])
        m = (img[y0:y1, x0:x1] == v).astype(float)
        if min(m.shape) >= 2:
            ax.contour(np.arange(x0, x1), np.arange(y0, y1), m, levels=[0.5], colors="white", linewidths=0.9)
        ax.text(
            float(np.median(xs)),
            float(np.median(ys)),
            f"L{v}",
            color="white",
            fontsize=8,
            ha="center",
            va="center",
            fontweight="bold",
            bbox={"boxstyle": "round,pad=0.15", "fc": "black", "alpha": 0.45, "lw": 0},
        )


@literal_text
def tile_heatmap(
    values,
    path,
    rows: int,
    cols: int,
    title: str,
    label: str,
    vmax=None,
    over=None,
    tiles_per_chip: int | None = None,
    tile_layer=None,
    chip_names=None,
    panel=None,
):
    """One value per tile as grids, one per chip (``values`` of every chip, ``tiles_per_chip``
    each; default one chip). Up to :data:`MAX_CHIP_PANELS` chips side by side on one colour
    scale; more: the chip with the largest value drawn tile by tile beside a strip of every
    chip's max and mean. ``over`` (bool per tile) is outlined in red; ``tile_layer`` (int per
    tile, 0 = none) outlines and names the workload's tile groups; ``panel`` (a function of a
    matplotlib sub-figure, e.g. :func:`liveness_panel`) draws below the grids."""
    plt = _plt()
    values = np.asarray(values, float)
    tpc = tiles_per_chip or values.size
    C = max(1, values.size // tpc)
    finite = values[np.isfinite(values)]
    top = vmax if vmax is not None else max(float(finite.max()) if finite.size else 1.0, 1e-12)
    if C <= MAX_CHIP_PANELS:
        shown = list(range(C))
    else:
        shown = [int(np.nanargmax(values)) // tpc]
    n = len(shown) + (C > MAX_CHIP_PANELS)
    pw = 9.0 if n == 1 else 5.6  # inches per panel; 3-4 chips as a 2 x 2 grid
    gr, gc = (2, 2) if n > 2 else (1, n)
    height = gr * (pw * rows / cols + 0.75) + 0.5
    fig = plt.figure(figsize=(pw * gc + 0.8, height + (PANEL_INCHES if panel else 0.0)), layout="constrained")
    grids = fig
    if panel is not None:
        grids, below = fig.subfigures(2, 1, height_ratios=[height, PANEL_INCHES])
        panel(below)
    axes = grids.subplots(gr, gc, squeeze=False).ravel()
    for ax in axes[n:]:
        ax.axis("off")
    im = None
    for ax, c in zip(axes, shown):
        v = values[c * tpc : (c + 1) * tpc]
        im = ax.imshow(
            _chip_image(v, rows, cols), cmap="viridis", vmin=0, vmax=top, interpolation="nearest", aspect="equal"
        )
        if over is not None:
            o = np.asarray(over)[c * tpc : (c + 1) * tpc] if np.size(over) == values.size else np.asarray(over)
            idx = np.flatnonzero(o)
            if idx.size:
                ax.scatter(
                    idx % cols,
                    idx // cols,
                    s=12,
                    facecolors="none",
                    edgecolors="red",
                    linewidths=0.8,
                    label=f"{idx.size} tiles over budget",
                )
                ax.legend(loc="upper right", fontsize=7)
        if tile_layer is not None:
            _mark_layers(ax, np.asarray(tile_layer)[c * tpc : (c + 1) * tpc], rows, cols)
        name = chip_names[c] if chip_names else f"chip {c}"
        ax.set_title(f"{name}: max {np.nanmax(v):.3g}, mean {np.nanmean(v):.3g}", fontsize=9)
        ax.set_xlabel(f"tile id mod {cols}")
        ax.set_ylabel(f"tile id // {cols}")
    if C > MAX_CHIP_PANELS:
        _chips_strip(axes[-1], values[: C * tpc].reshape(C, tpc), label)
    grids.suptitle(title, fontsize=10)
    grids.colorbar(im, ax=list(axes[: len(shown)]), fraction=0.03 if n == 1 else 0.025, label=label)
    save_figure(fig, path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return Path(path)


def _chips_strip(ax, per, label: str) -> None:
    """Every chip's max and mean tile (``per``: values [chips, tiles per chip]) as bars."""
    C = per.shape[0]
    ax.barh(range(C), np.nanmax(per, axis=1), color=SERIES_COLOURS[0], label="max tile")
    ax.barh(range(C), np.nanmean(per, axis=1), color=SERIES_COLOURS[1], height=0.5, label="mean tile")
    ax.set_yticks(range(0, C, max(1, C // 16)))
    ax.invert_yaxis()
    ax.set_ylabel("chip")
    ax.set_xlabel(label)
    ax.set_title(f"all {C} chips", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")


PANEL_INCHES = 3.6
"""Height of a panel drawn below a heat map (:func:`tile_heatmap`'s ``panel``)."""


def step_ticks(steps, peak: str, most: int = 8) -> list[int]:
    """Indices of the program steps to label on an axis: the ``peak`` step, the last, and about
    ``most`` evenly spaced ones that do not crowd them."""
    n = len(steps)
    every = max(1, math.ceil(n / most))
    fixed = {n - 1} | ({list(steps).index(peak)} if peak in steps else set())
    even = {i for i in range(0, n, every) if all(abs(i - j) >= every / 2 for j in fixed)}
    return sorted(even | fixed)


def varying_last(held: dict) -> list:
    """The categories of ``held`` (bytes per step by category), those whose bytes change over the
    steps last: stacked on top, where their rise and fall shows."""
    return sorted(held, key=lambda c: len(set(held[c])) > 1)


def liveness_panel(fig, live, budget: float | None = None, tiles_per_chip: int | None = None) -> None:
    """Memory over the program's steps (a :class:`tilesim.outputs.runrecord.MemoryLiveness`) into
    the matplotlib (sub-)figure ``fig``: left, the fullest tile's bytes holding live data per step,
    stacked by category (those that change on top), under its allocated bytes (their max is the
    peak the overflow check uses) and the budget (drawn when near); right, the same two totals over
    its chip's tiles (``tiles_per_chip`` names the tile within its chip)."""
    x = np.arange(len(live.steps))
    peak = live.peak_index
    left, right = fig.subplots(1, 2, width_ratios=[3, 2])
    cats = varying_last(live.held_bytes)
    left.stackplot(
        x,
        *[np.asarray(live.held_bytes[c], float) / 1e3 for c in cats],
        labels=[c.replace("variables:", "var:") for c in cats],
        colors=[CATEGORY_COLOURS.get(c, "#8c8c8c") for c in cats],
        linewidth=0,
    )
    left.plot(x, np.asarray(live.allocated_bytes) / 1e3, "k--", lw=1.2, label="allocated (max = the peak checked)")
    near = budget is not None and budget <= 1.5 * max(live.allocated_bytes, default=0)
    if near and budget is not None:
        left.axhline(budget / 1e3, color="red", lw=0.8, ls=":", label="budget")
    tile = f"tile {live.tile - live.chip * tiles_per_chip}" if tiles_per_chip else f"tile {live.tile} (global id)"
    left.set_title(
        f"fullest {tile} of chip {live.chip}: KB holding live data per program step"
        + ("" if near or budget is None else f" (budget {budget / 1e3:,.0f} KB)"),
        fontsize=9,
    )
    right.plot(x, np.asarray(live.chip_allocated_bytes) / 1e6, "k--", lw=1.2, label="allocated")
    right.fill_between(
        x, np.asarray(live.chip_held_bytes) / 1e6, color=SERIES_COLOURS[0], alpha=0.5, label="holding live data"
    )
    right.set_title(f"chip {live.chip}, all tiles: MB per program step", fontsize=9)
    ticks = step_ticks(live.steps, live.peak_step)
    for ax, unit in ((left, "KB"), (right, "MB")):
        ax.axvline(peak, color="grey", lw=0.8)
        ax.set_xticks(ticks, [live.steps[i] + (" (peak)" if i == peak else "") for i in ticks], rotation=35, ha="right")
        ax.tick_params(axis="x", labelsize=7)
        ax.set_xlim(0, max(1, len(x) - 1))
        ax.set_ylim(bottom=0)
        ax.set_ylabel(unit)
        ax.grid(axis="y", alpha=0.3)
    left.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    right.legend(fontsize=7, loc="lower center")


def memory_heatmap(ledger, path, chip: int | None = None, title: str | None = None, tile_layer=None):
    """Every tile coloured by bytes used / budget (one panel per chip, or the fullest chip and a
    per-chip strip on many chips; ``chip`` = draw that chip only); overflow tiles outlined."""
    T = ledger.machine.tiles_per_chip
    used = ledger.per_tile() / ledger.budget
    if chip is not None:
        used = used[chip * T : (chip + 1) * T]
        tile_layer = None if tile_layer is None else np.asarray(tile_layer)[chip * T : (chip + 1) * T]
    rows, cols = tile_grid(ledger.machine)
    where = f"chip {chip}" if chip is not None else f"{ledger.machine.chips} chip(s)"
    return tile_heatmap(
        used,
        path,
        rows,
        cols,
        title or f"SRAM per tile, {where} ({ledger.machine.name}); budget {ledger.budget:,} B",
        "used / budget",
        vmax=max(1.0, float(used.max())),
        over=used > 1,
        tiles_per_chip=T,
        tile_layer=tile_layer,
        chip_names=None if chip is None else [f"chip {chip}"],
    )


@literal_text
def exchange_matrices(
    chip_bytes, group_bytes, group_edges, path, chip: int = 0, title: str | None = None, totals: dict | None = None
):
    """Bytes exchanged per training step: chip x chip (left; diagonal = bytes sent on each chip's
    fabric, off it = bytes over the links from row chip to column chip; on one chip, the bytes
    of each kind of exchange in ``totals`` instead) and, on chip ``chip``, tile group x tile
    group (right; ``group_edges`` = first tile of every group plus the end). Titles state the
    totals, which are the run's ``bytes.onchip`` / ``bytes.links``."""
    plt = _plt()
    from matplotlib.colors import LogNorm  # matplotlib is imported only when drawing (start-up time)

    chip_bytes = np.asarray(chip_bytes, float)
    group_bytes = np.asarray(group_bytes, float)
    C = chip_bytes.shape[0]
    onchip = float(np.trace(chip_bytes))
    links = float(chip_bytes.sum() - onchip)
    fig, axes = plt.subplots(1, 2, figsize=(12.5, 5.6), gridspec_kw={"width_ratios": [1, 1.3]})
    panels = [(axes[1], group_bytes, "tile group")]
    if C > 1 or not totals:
        panels.insert(0, (axes[0], chip_bytes, "chip"))
        step = max(1, C // 16)
        axes[0].set_xticks(range(0, C, step))
        axes[0].set_yticks(range(0, C, step))
    else:
        kinds = sorted(totals, key=lambda k: -totals[k])
        vals = [totals[k] / 1e6 for k in kinds]
        bars = axes[0].barh(range(len(kinds)), vals, color=PHASE_COLOURS["exchange"])
        label_bars(axes[0], bars, "{:,.1f}")
        axes[0].set_yticks(range(len(kinds)), kinds, fontsize=8)
        axes[0].invert_yaxis()
        axes[0].set_xlabel("MB per step sent on the chip's fabric (a multicast once)")
    for ax, m, what in panels:
        pos = m[m > 0]
        norm = LogNorm(vmin=max(pos.min(), 1.0), vmax=max(pos.max(), 10.0)) if pos.size else None
        cmap = plt.get_cmap("viridis").with_extremes(bad="#eeeeee")  # bright = more, as the tile heat maps
        im = ax.imshow(np.where(m > 0, m, np.nan), cmap=cmap, norm=norm, interpolation="nearest")
        ax.set_xlabel(f"to {what}")
        ax.set_ylabel(f"from {what}")
        fig.colorbar(im, ax=ax, fraction=0.046, label="bytes per step (grey: none)")
        if what == "chip" and C <= 8:
            for i in range(C):
                for j in range(C):
                    if m[i, j] > 0:
                        ax.text(
                            j,
                            i,
                            _mb(m[i, j]),
                            ha="center",
                            va="center",
                            fontsize=8,
                            color="black" if norm is not None and norm(m[i, j]) > 0.6 else "white",
                        )
    n = len(group_edges) - 1
    step = max(1, n // 8)
    axes[1].set_xticks(range(0, n, step), [str(group_edges[i]) for i in range(0, n, step)], fontsize=7)
    axes[1].set_yticks(range(0, n, step), [str(group_edges[i]) for i in range(0, n, step)], fontsize=7)
    if len(panels) == 2:
        axes[0].set_title(
            f"chip x chip: diagonal {_mb(onchip)} sent on chip,\noff it {_mb(links)} over the links", fontsize=9
        )
    else:
        axes[0].set_title(f"one chip: {_mb(onchip)} sent on chip, by kind", fontsize=9)
    axes[1].set_title(
        f"chip {chip}: tile groups (labels = first tile), {_mb(group_bytes.sum())} sent within the chip", fontsize=9
    )
    fig.suptitle(title or "exchange bytes per training step")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return Path(path)


LINK_SEGMENTS_MAX = 4096
"""Grids of at most this many tiles draw every directed link as a segment; larger ones (a wafer)
draw each tile's busiest outgoing link as a heat map."""


@literal_text
def link_load(links: dict, path, title: str):
    """Bytes on every directed link of one chip's 2-D network-on-chip, drawn where the links are:
    ``links`` has ``right``, ``left``, ``down``, ``up`` ``[rows, cols]`` (:class:`tilesim.machine.gridload.GridLinks`;
    a torus's wrap-around links are drawn as stubs at the edge). Each link is a segment between two
    tile centres, the two directions side by side, on one log colour scale; the busiest is named.
    Grids larger than :data:`LINK_SEGMENTS_MAX` tiles: each tile's busiest outgoing link."""
    plt = _plt()
    from matplotlib.collections import LineCollection  # matplotlib is imported only when drawing
    from matplotlib.colors import LogNorm

    right, left, down, up = (np.asarray(links[k], float) for k in ("right", "left", "down", "up"))
    rows, cols = right.shape
    top = float(max(a.max() for a in (right, left, down, up)))
    cmap = plt.get_cmap("viridis")
    fig, ax = plt.subplots(figsize=(min(14, 2.5 + cols * 0.55), min(12, 1.5 + rows * 0.55)))
    if top <= 0:
        ax.text(0.5, 0.5, "no traffic on the chip's links", ha="center", va="center", transform=ax.transAxes)
    elif rows * cols > LINK_SEGMENTS_MAX:
        out = np.max(np.stack([right, left, down, up]), axis=0)
        im = ax.imshow(np.where(out > 0, out, np.nan), cmap=cmap, norm=LogNorm(vmin=max(top * 1e-4, 1), vmax=top))
        fig.colorbar(im, ax=ax, label="bytes per step on the busiest link at each tile")
    else:
        norm = LogNorm(vmin=max(top * 1e-3, 1.0), vmax=top)
        segs, vals = [], []
        o = 0.12  # the two directions of a link side by side
        for y in range(rows):
            for x in range(cols):
                nx, ny = min(x + 1, cols - 0.6), min(y + 1, rows - 0.6)  # a wrap-around: a stub at the edge
                segs += [[(x, y - o), (nx, y - o)], [(nx, y + o), (x, y + o)]]
                vals += [right[y, x], left[y, x]]
                segs += [[(x + o, y), (x + o, ny)], [(x - o, ny), (x - o, y)]]
                vals += [down[y, x], up[y, x]]
        vals_a = np.asarray(vals)
        keep = vals_a > 0
        lc = LineCollection(
            [s for s, k in zip(segs, keep) if k], cmap=cmap, norm=norm, linewidths=1.0 + 3.0 * (vals_a[keep] / top)
        )
        lc.set_array(vals_a[keep])
        ax.add_collection(lc)
        ax.scatter(*np.meshgrid(np.arange(cols), np.arange(rows)), s=30, c="#dddddd", edgecolors="#888888", zorder=3)
        ax.set_xlim(-0.7, cols - 0.3)
        ax.set_ylim(rows - 0.3, -0.7)
        ax.set_aspect("equal")
        fig.colorbar(lc, ax=ax, fraction=0.046, label="bytes per step on the link (log)")
    names = ("right", "left", "down", "up")
    k = int(np.argmax([a.max() for a in (right, left, down, up)]))
    arr = (right, left, down, up)[k]
    y, x = (int(v) for v in np.unravel_index(int(np.argmax(arr)), arr.shape))
    ax.set_xlabel(f"column; the busiest link: {names[k]} from the tile at column {x}, row {y}: {_mb(top)} per step")
    ax.set_ylabel("row")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return Path(path)


def _mb(b: float) -> str:
    return f"{b / 1e9:.2f} GB" if b >= 1e9 else f"{b / 1e6:.2f} MB" if b >= 1e4 else f"{b:,.0f} B"


def label_bars(ax, bars, fmt: str = "{:.3g}", fontsize: int = 7):
    """Write each bar's value at its end (``bars`` from ``ax.bar`` or ``ax.barh``)."""
    horizontal = getattr(bars, "orientation", "vertical") == "horizontal"
    for b in bars:
        w, h = b.get_width(), b.get_height()
        if horizontal:
            ax.annotate(
                fmt.format(w),
                (b.get_x() + w, b.get_y() + h / 2),
                xytext=(2, 0),
                textcoords="offset points",
                va="center",
                fontsize=fontsize,
            )
        else:
            ax.annotate(
                fmt.format(h),
                (b.get_x() + w / 2, b.get_y() + h),
                xytext=(0, 2),
                textcoords="offset points",
                ha="center",
                fontsize=fontsize,
            )


@literal_text
def timeline(result, path, max_supersteps: int | None = None, title: str | None = None, booked=None):
    """The whole step as a Gantt chart, one row per chip, phases coloured (``max_supersteps``:
    only the first that many). With more than 60 supersteps a second panel adds up the time per
    superstep label, split by phase. ``booked`` (str [S], default the result's
    :meth:`~tilesim.outputs.records.SimResult.booked_phase`) is the phase each superstep's compute is drawn
    in (host work and fitted residuals are not compute). Legend outside the axes."""
    plt = _plt()
    tl = result.timeline
    S = result.supersteps if not max_supersteps else min(result.supersteps, max_supersteps)
    C = result.chips
    us = 1e6 / result.clock_hz
    if booked is None and hasattr(result, "booked_phase"):
        booked = result.booked_phase()
    booked = np.full(S, "compute", dtype=object) if booked is None else np.asarray(booked, dtype=object)
    agg = S > 60 and hasattr(result, "by_label")
    by, labels = _top_labels(result.by_label(), 14) if agg else ({}, [])
    h_top = 1.0 + 0.42 * min(C, 16)
    fig = plt.figure(figsize=(12, h_top + (0.7 + 0.3 * len(labels) if agg else 0) + 0.6))
    gs = fig.add_gridspec(2 if agg else 1, 1, height_ratios=[h_top, 0.7 + 0.3 * len(labels)] if agg else [1])
    ax = fig.add_subplot(gs[0])
    rows = list(range(C)) if C <= 16 else sorted({0, C - 1, *np.linspace(0, C - 1, 14).astype(int).tolist()})
    for y, c in enumerate(rows):
        segs: dict[str, list[tuple[float, float]]] = {p: [] for p in PHASES}  # (start, width) in us
        for s in range(S):
            for ph, a, b in phase_spans(tl, s, c):
                if b > a:
                    segs[booked[s] if (ph == "compute" and s < booked.size) else ph].append((a * us, (b - a) * us))
        for ph, sg in segs.items():
            if sg:
                ax.broken_barh(sg, (y - 0.35, 0.7), facecolors=PHASE_COLOURS[ph], linewidth=0)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_yticks(range(len(rows)), [f"chip {c}" for c in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("time (µs)")
    end = max(float(tl["end"][:S].max()) * us, 1e-9) if S else 1.0
    ax.set_xlim(0, end)
    what = f"all {S} supersteps" if S == result.supersteps else f"first {S} of {result.supersteps} supersteps"
    ax.set_title(
        title
        or f"BSP timeline of one step: {what} ({result.machine_name})"
        + ("" if len(rows) == C else f"; {len(rows)} of {C} chips shown"),
        fontsize=10,
    )
    handles = [plt.Rectangle((0, 0), 1, 1, color=PHASE_COLOURS[p]) for p in PHASES]
    ax.legend(handles, PHASES, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    if agg:
        ax2 = fig.add_subplot(gs[1])
        _phase_bars(ax2, by, labels)
        ax2.set_title(f"the same step added up per superstep label ({_count_labels(by)})", fontsize=9)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return Path(path)


def _top_labels(by: dict, n: int) -> tuple[dict, list]:
    """The ``n - 1`` longest labels and one ``"N other labels"`` bar adding up the rest (when there
    are more than ``n``), so that the bars add up to the step and the title's count is what is drawn."""
    order = sorted(by, key=lambda k: -by[k]["time_s"])
    if len(order) <= n:
        return by, order
    keep, rest = order[: n - 1], order[n - 1 :]
    other = f"{len(rest)} other labels"
    merged = {p: sum(by[k]["breakdown_s"].get(p, 0.0) for k in rest) for p in PHASES}
    out = {k: by[k] for k in keep}
    out[other] = {"time_s": sum(by[k]["time_s"] for k in rest), "breakdown_s": merged, "labels": len(rest)}
    return out, [*keep, other]


def _count_labels(by: dict) -> str:
    n = sum(v.get("labels", 1) for v in by.values())
    return f"{n} label{'s' if n != 1 else ''}"


def _phase_bars(ax, by: dict, labels: list):
    left = np.zeros(len(labels))
    for ph in PHASES:
        vals = np.array([by[lab]["breakdown_s"].get(ph, 0.0) for lab in labels]) * 1e3
        ax.barh(range(len(labels)), vals, left=left, color=PHASE_COLOURS[ph], label=ph)
        left += vals
    for i, v in enumerate(left):
        ax.annotate(f"{v:.3f}", (v, i), xytext=(2, 0), textcoords="offset points", va="center", fontsize=7)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("time (ms)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)


@literal_text
def breakdown_bars(result, path, title: str | None = None):
    """Time per label, stacked by phase, with each label's total."""
    plt = _plt()
    by, labels = _top_labels(result.by_label(), 15)
    fig, ax = plt.subplots(figsize=(10, 0.9 + 0.35 * len(labels)))
    _phase_bars(ax, by, labels)
    ax.set_title(title or f"time per superstep label ({_count_labels(by)})")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return Path(path)


COMPARE_HEATMAPS = 8
"""Most runs whose chip-0 SRAM a comparison picture draws (one small map each)."""


def _time_axis(seconds: float) -> tuple[float, str]:
    """Scale and unit for a time axis whose largest value is ``seconds``."""
    return (1e3, "ms") if seconds >= 1e-3 else (1e6, "µs") if seconds >= 1e-6 else (1e9, "ns")


def _run_colour(k: int) -> str:
    return SERIES_COLOURS[k % len(SERIES_COLOURS)]


def _compare_rates(ax, comparison, recs) -> None:
    """One bar per run: its throughput on one axis (steps/s when the runs' rates differ in unit)."""
    mixed = comparison.rank_by == "step time"
    vals = [1.0 / r.step_s if r.step_s > 0 else 0.0 for r in recs] if mixed else [r.rate.value for r in recs]
    unit = "steps/s" if mixed else recs[0].rate.unit
    y = np.arange(len(recs))
    bars = ax.barh(y, vals, color=[_run_colour(k) for k in range(len(recs))])
    label_bars(ax, bars, "{:,.0f}" if max(vals, default=0) >= 100 else "{:.4g}", fontsize=8)
    best = comparison.ranking[0] if comparison.comparable else None  # different workloads: no best
    names = [f"{n} (best)" if k == best else n for k, n in enumerate(comparison.names)]
    ax.set_yticks(y, names, fontsize=8)
    if best is not None:
        ax.get_yticklabels()[best].set_fontweight("bold")
    ax.invert_yaxis()
    ax.set_xlim(0, max(vals, default=1.0) * 1.25 or 1.0)
    ax.xaxis.set_major_formatter("{x:,.0f}" if max(vals, default=0) >= 100 else "{x:.3g}")
    ax.set_xlabel(unit)
    what = "steps per second (the runs' own rates have different units)" if mixed else f"throughput ({unit})"
    if best is None:
        ax.set_title("steps per second (different workloads: steps of different work, no ranking)", fontsize=9)
    else:
        ax.set_title(what + ", higher is better", fontsize=9)


def _compare_steps(ax, comparison, recs) -> None:
    """One bar per run: its step time, stacked by phase, on one time axis."""
    k, unit = _time_axis(max(r.step_s for r in recs))
    y = np.arange(len(recs))
    left = np.zeros(len(recs))
    for ph in PHASES:
        vals = np.array([r.breakdown_s.get(ph, 0.0) for r in recs]) * k
        if vals.any():
            ax.barh(y, vals, left=left, color=PHASE_COLOURS[ph], label=ph)
            left += vals
    for i, v in enumerate(left):
        ax.annotate(f"{v:,.4g} {unit}", (v, i), xytext=(2, 0), textcoords="offset points", va="center", fontsize=8)
    ax.set_yticks(y, comparison.names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(float(np.max(left)), 1e-12) * 1.25)
    ax.set_xlabel(f"time per step ({unit})")
    ax.set_title("time per step by phase", fontsize=9)
    ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def _compare_labels(ax, comparison, rows) -> None:
    """The labels whose time moved: one bar per run and label, on one time axis."""
    n = len(comparison.names)
    k, unit = _time_axis(max((v or 0.0) for r in rows for v in r.values))
    y = np.arange(len(rows))
    h = 0.8 / n
    for j, name in enumerate(comparison.names):
        vals = [(r.values[j] or 0.0) * k for r in rows]
        ax.barh(y - 0.4 + h * (j + 0.5), vals, height=h, color=_run_colour(j), label=name)
    ax.set_yticks(y, [r.item for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(f"time per step ({unit})")
    moved, still, _ = comparison.labels
    which = f"the {len(rows)} superstep labels whose time moved" + (f" most (of {moved})" if moved > len(rows) else "")
    ax.set_title(f"{which}; {still} label{'s' if still != 1 else ''} did not move", fontsize=9)
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def _kb(b: float) -> str:
    """Bytes as B, kB, MB or GB (3 significant digits)."""
    for s, u in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if b >= s:
            return f"{b / s:.3g} {u}"
    return f"{b:,.0f} B"


def _compare_tiles(fig, gs, row0: int, comparison, arrays: list, per_row: int) -> None:
    """Chip 0's SRAM per tile of each run, one colour scale for all."""
    vmax = max(float(np.max(a["memory_bytes"])) for a in arrays) or 1.0
    span = 12 // per_row
    axes, im = [], None
    for j, (name, a) in enumerate(zip(comparison.names, arrays)):
        r, c = divmod(j, per_row)
        ax = fig.add_subplot(gs[row0 + r, c * span : (c + 1) * span])
        tpc = int(a["tiles_per_chip"])
        rows_, cols = stored_grid(a)
        values = np.asarray(a["memory_bytes"][:tpc], float)
        im = ax.imshow(
            _chip_image(values, rows_, cols), cmap="viridis", vmin=0, vmax=vmax, interpolation="nearest", aspect="equal"
        )
        ax.set_title(f"{name} (fullest tile {_kb(float(values.max()))})", fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
        axes.append(ax)
    bar = fig.colorbar(im, ax=axes, fraction=0.03, shrink=0.8, label="SRAM per tile (B)")
    bar.ax.yaxis.set_major_formatter("{x:,.0f}")


@literal_text
def comparison_figure(comparison, path):
    """Every run of a :class:`tilesim.outputs.compare.Comparison` on shared axes (``compare.png``): throughput
    (higher is better; the best run in bold) and step time by phase, one bar per run; the superstep
    labels whose time moved, one bar per run; and, when every run stored SRAM per tile (and there are
    at most :data:`COMPARE_HEATMAPS` runs), chip 0's tiles of each on one colour scale. The verdict
    heads it. Returns ``path``."""
    import textwrap  # only when drawing

    plt = _plt()
    recs = [rec for rec, _ in comparison.runs]
    arrays = [a for _, a in comparison.runs]
    n = len(recs)
    labels = comparison.section("label")[:10]
    heat = n <= COMPARE_HEATMAPS and all("memory_bytes" in a for a in arrays)
    per_row = min(n, 4)
    heat_rows = -(-n // per_row) if heat else 0
    grid = stored_grid(arrays[0]) if heat else (1, 1)
    heights = [1.0 + 0.35 * n] + ([0.9 + 0.1 * n * len(labels)] if labels else [])
    heights += [0.7 + min(11.0 / per_row * grid[0] / grid[1], 4.0)] * heat_rows
    fig = plt.figure(figsize=(13, 1.0 + sum(heights)), layout="constrained")
    gs = fig.add_gridspec(len(heights), 12, height_ratios=heights)
    _compare_rates(fig.add_subplot(gs[0, :6]), comparison, recs)
    _compare_steps(fig.add_subplot(gs[0, 6:]), comparison, recs)
    if labels:
        _compare_labels(fig.add_subplot(gs[1, :]), comparison, labels)
    if heat:
        _compare_tiles(fig, gs, 1 + bool(labels), comparison, arrays, per_row)
    verdict = textwrap.wrap(comparison.verdict.replace("`", "") + ".", 170)
    fig.suptitle("\n".join(verdict[:4] + (["..."] if len(verdict) > 4 else [])), fontsize=9)
    save_figure(fig, path, dpi=100)
    plt.close(fig)
    return Path(path)


@literal_text
def draw_chart(chart: Chart, path) -> None:
    """Draw ``chart`` as a PNG into ``path`` (a file name or a binary file object; atomic)."""
    import matplotlib  # matplotlib is imported only when drawing (start-up time)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # matplotlib is imported only when drawing (start-up time)

    n = max(1, len(chart.panels))
    fig, axes = plt.subplots(1, n, figsize=(4.4 * n, 3.8), layout="constrained", squeeze=False)
    for ax, panel in zip(axes[0], chart.panels):
        _draw_panel(ax, chart, panel)
    fig.suptitle(chart.title)
    save_figure(fig, path, format="png", dpi=100)
    plt.close(fig)


_LOOK = {"line": {"ls": "-", "lw": 1.5}, "thin": {"ls": "-", "lw": 0.7, "color": "k", "alpha": 0.5}}
_LOOK["dotted"] = {"ls": ":", "lw": 1.0}


def _draw_panel(ax, chart: Chart, panel: Panel) -> None:
    """One panel's series on its left axis and, if any, on a right axis of its own."""
    left = [s for s in panel.series if not s.right]
    right = [s for s in panel.series if s.right]
    for s in left:
        ax.plot(chart.x, s.values, label=s.name, **_LOOK[s.style])
    ax.set_xlabel(chart.x_label)
    ax.set_ylabel(panel.y_label)
    ax.grid(alpha=0.3)
    if panel.y_max is not None:
        ax.set_ylim(0, panel.y_max)
    if any(s.style != "thin" for s in left):
        ax.legend(fontsize=7)
    if right:
        twin = ax.twinx()
        for s in right:
            twin.plot(chart.x, s.values, label=s.name, **_LOOK[s.style])
        twin.set_ylabel(panel.right_label, fontsize=8)
        if panel.right_scale == "symlog":
            twin.set_yscale("symlog", linthresh=1.0)
        if any(s.style != "thin" for s in right):
            twin.legend(fontsize=7, loc="center right")
