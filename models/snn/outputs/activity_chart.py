"""``activity.png`` as data: per-layer activity of every training step, a :class:`tilesim.outputs.chart.Chart`.

Three panels over the training steps, one line per neuron layer (from the ``activity`` of the
Training section, one :class:`tilesim.models.snn.training.diagnose.StepRecord` per step): real spikes per
sample and time step, the share of the cap N_max the list fills (spikes + gradient-only entries),
and gradient-only entries per sample and time step; ϑ2 of the first hidden and the output layer on a
right axis of the last panel, and the loss as a thin line on the first, so a dead or saturated layer
is visible at a glance. The core draws it (``tilesim run`` and ``tilesim report`` alike) from the
numbers stored in ``summary.json``.
"""

from __future__ import annotations

from tilesim.errors import require
from tilesim.outputs.chart import Chart, Panel, Series

__all__ = ["activity_chart", "ACTIVITY_FILE"]

ACTIVITY_FILE = "activity.png"


def _layer_name(layer: dict, l: int, n_layers: int) -> str:
    return f"L{l + 1}" + (" (out)" if l == n_layers - 1 else "") + f" N={layer['neurons']} cap {layer['cap']}"


def activity_chart(
    activity: list, title: str = "spikes, cap use and gradient-only entries per layer and step"
) -> Chart:
    """The chart of ``activity`` (a non-empty list of StepRecord dicts: ``step``, ``loss``, ``layers``
    with ``spikes``, ``cap_used``, ``gradient_only``, ``second_threshold``, ``neurons``, ``cap``)."""
    require(len(activity) > 0, "activity", 0, "needs at least one training step")
    L = len(activity[0]["layers"])
    names = [_layer_name(layer, l, L) for l, layer in enumerate(activity[0]["layers"])]

    def per_layer(key: str) -> tuple[Series, ...]:
        return tuple(Series(names[l], tuple(float(r["layers"][l][key]) for r in activity)) for l in range(L))

    loss = Series("loss", tuple(float(r["loss"]) for r in activity), style="thin", right=True)
    thresholds = tuple(
        Series(f"ϑ2 L{l + 1}", tuple(float(r["layers"][l]["second_threshold"]) for r in activity), "dotted", True)
        for l in sorted({0, L - 1})
    )
    return Chart(
        ACTIVITY_FILE,
        title,
        "training step",
        tuple(float(r["step"]) for r in activity),
        (
            Panel("spikes per sample and step", per_layer("spikes") + (loss,), right_label="loss (thin black)"),
            Panel("share of cap used (entries / N_max)", per_layer("cap_used"), y_max=1.05),
            Panel(
                "gradient-only entries per sample and step",
                per_layer("gradient_only") + thresholds,
                right_label="ϑ2 (dotted)",
                right_scale="symlog",
            ),
        ),
    )
