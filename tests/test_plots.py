"""Pictures (issue 20): every chip shown, layers marked, the whole step in the timeline with
its legend outside the axes, one palette."""

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
from matplotlib.figure import Figure

from tilesim.engine.events import simulate
from tilesim.outputs import plots
from tilesim.program import ProgramBuilder


@pytest.fixture
def figures(monkeypatch):
    seen = []
    real = Figure.savefig

    def keep(self, *a, **k):
        seen.append(self)
        return real(self, *a, **k)

    monkeypatch.setattr(Figure, "savefig", keep)
    return seen


def _images(fig):
    return [ax for ax in fig.axes if ax.images]


def test_every_chip_and_layers(tmp_path, figures):
    T = 256
    v = np.r_[np.linspace(0, 1, T), np.linspace(1, 0, T)]
    layer = np.r_[np.full(T // 2, 1), np.full(T // 2, 2), np.full(T, 3)]
    plots.tile_heatmap(v, tmp_path / "two.png", 4, 64, "t", "x", tiles_per_chip=T, tile_layer=layer)
    fig = figures[-1]
    assert len(_images(fig)) == 2  # both chips, tile by tile
    texts = {t.get_text() for ax in fig.axes for t in ax.texts}
    assert {"L1", "L2", "L3"} <= texts  # layers named
    many = np.random.default_rng(0).random(64 * T)
    plots.tile_heatmap(many, tmp_path / "many.png", 4, 64, "t", "x", tiles_per_chip=T)
    fig = figures[-1]
    assert len(_images(fig)) == 1  # one chip drawn ...
    strip = [ax for ax in fig.axes if ax.patches and not ax.images]
    assert strip and len(strip[0].patches) == 2 * 64  # ... and every chip's max and mean
    assert plots.tile_grid.__doc__ and plots.TILES_PER_ROW == 64


def test_timeline_whole_step_legend_outside(round2, tmp_path, figures):
    b = ProgramBuilder(round2.chips, round2.tiles_per_chip, "long")
    comp = np.arange(round2.chips * round2.tiles_per_chip, dtype=float) * 10 + 10
    for s in range(200):
        b.superstep(f"phase {s % 3}", compute_cycles=comp, sync="all", flows=[(0, 1, 100.0)])
    res = simulate(b.build(), round2)
    plots.timeline(res, tmp_path / "t.png")
    fig = figures[-1]
    gantt = fig.axes[0]
    assert "all 200 supersteps" in gantt.get_title()
    assert gantt.get_xlim()[1] == pytest.approx(res.total_s * 1e6, rel=1e-6)  # the whole step
    assert len(fig.axes) == 2 and len(fig.axes[1].get_yticklabels()) == 3  # per label
    leg = gantt.get_legend()
    fig.canvas.draw()
    lb, ab = leg.get_window_extent(), gantt.get_window_extent()
    assert lb.x0 >= ab.x1 - 1  # outside the axes
    colours = {p.get_facecolor()[:3] for p in leg.get_patches()}
    assert colours == {matplotlib.colors.to_rgb(c) for c in plots.PHASE_COLOURS.values()}


def test_label_bars_draw_every_label_the_title_counts():
    """Issue 29: the timeline said 15 labels and drew 14; the rest now add up in one 'other' bar."""
    from tilesim.outputs.plots import _count_labels, _top_labels

    by = {f"l{i}": {"time_s": 1.0 / (i + 1), "breakdown_s": {"compute": 1.0 / (i + 1)}} for i in range(15)}
    shown, labels = _top_labels(by, 14)
    assert len(labels) == 14 and labels[-1] == "2 other labels"
    assert _count_labels(shown) == "15 labels"
    assert sum(shown[k]["time_s"] for k in labels) == pytest.approx(sum(v["time_s"] for v in by.values()))
    assert shown[labels[-1]]["breakdown_s"]["compute"] == pytest.approx(1 / 14 + 1 / 15)
    few, order = _top_labels(dict(list(by.items())[:3]), 14)
    assert order == ["l0", "l1", "l2"] and _count_labels(few) == "3 labels"
