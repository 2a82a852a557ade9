"""The picture of a :class:`tilesim.models.snn.commands.scaling.ScalingStudy` (matplotlib only here)."""

from __future__ import annotations

import textwrap

from tilesim.models.snn.commands.scaling import SPLIT_KEYS, ScalingStudy
from tilesim.outputs.plots import PHASE_COLOURS, literal_text, save_figure

__all__ = ["plot_scaling", "scaling_figure"]

_COLOURS = PHASE_COLOURS  # the one palette of every picture


@literal_text
def plot_scaling(study: ScalingStudy, out) -> None:
    """Two panels into ``out`` (a path or a binary file): efficiency against chips with the
    structural band (each assumption flipped), and the step split per chip count."""
    import matplotlib.pyplot as plt  # matplotlib is imported only when drawing (start-up time)

    fig = scaling_figure(study)
    save_figure(fig, out, format="png", dpi=110)
    plt.close(fig)


def scaling_figure(study: ScalingStudy):
    """The matplotlib figure of :func:`plot_scaling`. Each panel's legend sits below its axes, never
    over the curves (the band's lines span the whole efficiency axis, so no corner inside is free)."""
    import matplotlib  # matplotlib is imported only when drawing (start-up time)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # matplotlib is imported only when drawing (start-up time)

    pts = study.points
    chips = [p.chips for p in pts]
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 5.2), layout="constrained")
    a.plot(chips, [p.efficiency for p in pts], "o-", color="k", label="assumed structure")
    a.set_title("assumed: " + textwrap.fill(study.structure.describe(), 80), fontsize=7, loc="left")
    names = list(pts[0].band) if pts else []
    for n in names:
        a.plot(chips, [p.band[n] for p in pts], "--", marker=".", label=f"{n} flipped")
    a.set_xscale("log", base=2)
    a.set_xticks(chips, [str(c) for c in chips])
    a.set_ylim(0, 1.05)
    a.set_xlabel("chips")
    a.set_ylabel(f"{study.mode}-scaling efficiency")
    a.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    a.grid(alpha=0.3)
    bottom = [0.0] * len(pts)
    x = range(len(pts))
    for k in SPLIT_KEYS:
        v = [p.split_s[k] * 1e3 for p in pts]
        b.bar(x, v, bottom=bottom, color=_COLOURS[k], label=k)
        bottom = [u + w for u, w in zip(bottom, v)]
    b.set_xticks(list(x), [str(c) for c in chips])
    b.set_xlabel("chips")
    b.set_ylabel("ms per step")
    b.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3, frameon=False)
    r = study.recipe
    fig.suptitle(f"{r.dataset}, {r.neurons_per_tile} neurons/tile, batch {r.batch}, fixed activity {r.max_activity:g}")
    return fig
