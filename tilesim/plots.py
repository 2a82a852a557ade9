"""Pictures: tile-memory heat map, BSP timeline (Gantt), phase breakdown. matplotlib is
imported lazily, only here and in experiments/."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

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


def memory_heatmap(ledger, path, chip: int = 0, title: str | None = None):
    """All tiles of one chip as a grid coloured by bytes used / budget; overflow tiles outlined."""
    plt = _plt()
    T = ledger.machine.tiles_per_chip
    used = ledger.per_tile()[chip * T:(chip + 1) * T] / ledger.budget
    fab = ledger.machine.fabric
    rows, cols = (fab.rows, fab.cols) if fab.kind == "mesh" else _grid(T)
    img = np.full(rows * cols, np.nan)
    img[:T] = used
    fig, ax = plt.subplots(figsize=(9, 9 * rows / cols + 1.2))
    im = ax.imshow(img.reshape(rows, cols), cmap="viridis", vmin=0, vmax=max(1.0, float(np.nanmax(img))),
                   interpolation="nearest")
    over = np.flatnonzero(used > 1)
    if over.size:
        ax.scatter(over % cols, over // cols, s=12, facecolors="none", edgecolors="red", linewidths=0.8,
                   label=f"{over.size} tiles over budget")
        ax.legend(loc="upper right", fontsize=8)
    ax.set_title(title or f"SRAM per tile, chip {chip} ({ledger.machine.name}); budget {ledger.budget:,} B")
    ax.set_xlabel(f"tile index mod {cols}")
    ax.set_ylabel(f"tile index // {cols}")
    fig.colorbar(im, ax=ax, fraction=0.03, label="used / budget")
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
