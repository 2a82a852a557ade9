"""Pictures: tile-memory heat map, BSP timeline (Gantt), phase breakdown. matplotlib is
imported lazily, only here and in experiments/."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from tilesim.fabric import grid_shape
from tilesim.records import PHASES

PHASE_COLOURS = {"compute": "#4c72b0", "sync": "#c44e52", "exchange": "#55a868", "links": "#dd8452",
                 "host": "#8172b3"}


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _grid(n: int, cols: int | None = None) -> tuple[int, int]:
    cols = cols or int(math.ceil(math.sqrt(n * 1.5)))
    return int(math.ceil(n / cols)), cols


def tile_grid(machine) -> tuple[int, int]:
    """Rows and columns to draw one chip's tiles (the mesh's own grid, else near-square)."""
    return grid_shape(machine) or _grid(machine.tiles_per_chip)


def tile_heatmap(values, path, rows: int, cols: int, title: str, label: str, vmax=None, over=None):
    """One value per tile of a chip as a grid; ``over`` (bool per tile) is outlined in red."""
    plt = _plt()
    values = np.asarray(values, float)
    img = np.full(rows * cols, np.nan)
    img[:values.size] = values
    fig, ax = plt.subplots(figsize=(9, 9 * rows / cols + 1.2))
    top = float(np.nanmax(img)) if np.isfinite(img).any() else 1.0
    im = ax.imshow(img.reshape(rows, cols), cmap="viridis", vmin=0, vmax=vmax if vmax is not None else max(top, 1e-12),
                   interpolation="nearest")
    if over is not None and np.any(over):
        idx = np.flatnonzero(over)
        ax.scatter(idx % cols, idx // cols, s=12, facecolors="none", edgecolors="red", linewidths=0.8,
                   label=f"{idx.size} tiles over budget")
        ax.legend(loc="upper right", fontsize=8)
    ax.set_title(title)
    ax.set_xlabel(f"tile index mod {cols}")
    ax.set_ylabel(f"tile index // {cols}")
    fig.colorbar(im, ax=ax, fraction=0.03, label=label)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def memory_heatmap(ledger, path, chip: int = 0, title: str | None = None):
    """All tiles of one chip as a grid coloured by bytes used / budget; overflow tiles outlined."""
    T = ledger.machine.tiles_per_chip
    used = ledger.per_tile()[chip * T:(chip + 1) * T] / ledger.budget
    rows, cols = tile_grid(ledger.machine)
    return tile_heatmap(used, path, rows, cols,
                        title or f"SRAM per tile, chip {chip} ({ledger.machine.name}); budget {ledger.budget:,} B",
                        "used / budget", vmax=max(1.0, float(used.max())), over=used > 1)


def exchange_matrices(chip_bytes, group_bytes, group_edges, path, chip: int = 0, title: str | None = None,
                      totals: dict | None = None):
    """Bytes exchanged per training step: chip x chip (left; on one chip, the bytes of each kind of
    exchange in ``totals`` instead) and, on one chip, tile group x tile group (right;
    ``group_edges`` = first tile of every group plus the end)."""
    plt = _plt()
    from matplotlib.colors import LogNorm
    chip_bytes = np.asarray(chip_bytes, float)
    group_bytes = np.asarray(group_bytes, float)
    fig, axes = plt.subplots(1, 2, figsize=(12, 5.4), gridspec_kw={"width_ratios": [1, 1.3]})
    panels = [(axes[1], group_bytes, "tile group")]
    if chip_bytes.shape[0] > 1 or not totals:
        panels.insert(0, (axes[0], chip_bytes, "chip"))
        C = chip_bytes.shape[0]
        axes[0].set_xticks(range(C))
        axes[0].set_yticks(range(C))
    else:
        kinds = sorted(totals, key=lambda k: -totals[k])
        axes[0].barh(range(len(kinds)), [totals[k] / 1e6 for k in kinds], color="#55a868")
        axes[0].set_yticks(range(len(kinds)), kinds, fontsize=8)
        axes[0].invert_yaxis()
        axes[0].set_xlabel("MB per step (counted at each receiving tile)")
    for ax, m, what in panels:
        pos = m[m > 0]
        norm = LogNorm(vmin=max(pos.min(), 1.0), vmax=max(pos.max(), 10.0)) if pos.size else None
        im = ax.imshow(np.where(m > 0, m, np.nan), cmap="magma_r", norm=norm, interpolation="nearest")
        ax.set_xlabel(f"to {what}")
        ax.set_ylabel(f"from {what}")
        fig.colorbar(im, ax=ax, fraction=0.046, label="bytes per step")
    n = len(group_edges) - 1
    step = max(1, n // 8)
    axes[1].set_xticks(range(0, n, step), [str(group_edges[i]) for i in range(0, n, step)], fontsize=7)
    axes[1].set_yticks(range(0, n, step), [str(group_edges[i]) for i in range(0, n, step)], fontsize=7)
    axes[0].set_title("between chips (diagonal: on-chip)" if len(panels) == 2 else "one chip: bytes by kind of exchange")
    axes[1].set_title(f"chip {chip}: tile groups (labels = first tile)")
    fig.suptitle(title or "exchange bytes per training step")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def timeline(result, path, max_supersteps: int = 40, title: str | None = None):
    """Gantt chart of the first supersteps: one row per chip, phases coloured."""
    plt = _plt()
    tl = result.timeline
    S = min(result.supersteps, max_supersteps)
    C = result.chips
    us = 1e6 / result.clock_hz
    fig, ax = plt.subplots(figsize=(11, 1.2 + 0.5 * C))
    for c in range(C):
        for s in range(S):
            rel = tl["release"][s, c]
            exe = rel + tl["exchange_cycles"][s, c]
            spans = [("compute", tl["start"][s, c], tl["arrive"][s, c]), ("sync", tl["arrive"][s, c], rel),
                     ("exchange", rel, exe), ("links", exe, tl["links_end"][s, c]),
                     ("host", tl["links_end"][s, c], tl["end"][s, c])]
            for ph, a, b in spans:
                if b > a:
                    ax.barh(c, (b - a) * us, left=a * us, color=PHASE_COLOURS[ph], height=0.7,
                            edgecolor="white", linewidth=0.3)
    for ph in PHASES:
        ax.barh(-10, 0, color=PHASE_COLOURS[ph], label=ph)
    ax.set_ylim(-0.6, C - 0.4)
    ax.set_yticks(range(C), [f"chip {c}" for c in range(C)])
    ax.invert_yaxis()
    ax.set_xlabel("time (µs)")
    ax.set_title(title or f"BSP timeline, first {S} of {result.supersteps} supersteps ({result.machine_name})")
    ax.legend(ncol=5, loc="upper center", bbox_to_anchor=(0.5, -0.25), fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def breakdown_bars(result, path, title: str | None = None):
    """Time per label, stacked by phase."""
    plt = _plt()
    by = result.by_label()
    labels = sorted(by, key=lambda k: -by[k]["time_s"])[:15]
    fig, ax = plt.subplots(figsize=(9, 0.8 + 0.35 * len(labels)))
    left = np.zeros(len(labels))
    for ph in PHASES:
        vals = np.array([by[l]["breakdown_s"][ph] for l in labels]) * 1e3
        ax.barh(range(len(labels)), vals, left=left, color=PHASE_COLOURS[ph], label=ph)
        left += vals
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.set_xlabel("time (ms)")
    ax.set_title(title or "time per superstep label")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)
