"""``activity.png``: per-layer activity of every training step (matplotlib, imported lazily).

Three panels over the training steps, one line per neuron layer (from a history of
:class:`models.snn.training.diagnose.StepRecord`): real spikes per sample and time step, the share of the
cap N_max the list fills (spikes + gradient-only entries), and gradient-only entries per sample
and time step; ϑ2 of the first hidden and the output layer on a second axis of the last panel,
and the loss as a thin line on the first, so a dead or saturated layer is visible at a glance.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tilesim.errors import require
from tilesim.outputs.plots import save_figure

__all__ = ["plot_activity"]


def plot_activity(history, path, title: str | None = None) -> Path:
    """Write the activity figure of ``history`` (a non-empty sequence of StepRecord) to ``path`` (a
    file name, or a binary file object that receives the PNG)."""
    hist = list(history)
    require(len(hist) > 0, "history", 0, "needs at least one training step")
    import matplotlib  # matplotlib is imported only when drawing (start-up time)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # matplotlib is imported only when drawing (start-up time)

    steps = np.array([r.step for r in hist])
    L = len(hist[0].layers)
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    panels = (
        ("spikes", "spikes per sample and step", lambda s: s.spikes),
        ("cap", "share of cap used (entries / N_max)", lambda s: s.cap_used),
        ("grad", "gradient-only entries per sample and step", lambda s: s.gradient_only),
    )
    for ax, (_, label, get) in zip(axes, panels):
        for l in range(L):
            s0 = hist[0].layers[l]
            name = f"L{l + 1}" + (" (out)" if l == L - 1 else "") + f" N={s0.neurons} cap {s0.cap}"
            ax.plot(steps, [get(r.layers[l]) for r in hist], "-", lw=1.5, label=name)
        ax.set_xlabel("training step")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[1].set_ylim(0, 1.05)
    axes[0].legend(fontsize=7)
    loss_ax = axes[0].twinx()
    loss_ax.plot(steps, [r.loss for r in hist], "k-", lw=0.7, alpha=0.5)
    loss_ax.set_ylabel("loss (thin black)", fontsize=8)
    th_ax = axes[2].twinx()
    for l in sorted({0, L - 1}):
        th_ax.plot(steps, [r.layers[l].second_threshold for r in hist], ":", lw=1, label=f"ϑ2 L{l + 1}")
    th_ax.set_ylabel("ϑ2 (dotted)", fontsize=8)
    th_ax.set_yscale("symlog", linthresh=1.0)
    th_ax.legend(fontsize=7, loc="center right")
    fig.suptitle(title or "activity per layer and training step")
    fig.tight_layout()
    if hasattr(path, "write"):  # a binary file object (e.g. io.BytesIO)
        fig.savefig(path, dpi=100, format="png")
        plt.close(fig)
        return path
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, out, dpi=100)
    plt.close(fig)
    return out
