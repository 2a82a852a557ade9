"""The SNN's own part of a run's ``summary.md`` (:class:`tilesim.workload.ReportParts`): the network
line, the training diagnosis with the last step's activity per layer, and the loss. Registered
under the ``tilesim.report_sections`` entry-point group as ``snn``; the core renders everything else."""

from __future__ import annotations

from tilesim.workload import ReportParts

__all__ = ["markdown"]


def _network_lines(s: dict) -> list[str]:
    net = s.get("network")
    if not net:
        return []
    return [
        f"Network {'-'.join(map(str, net['layers']))}: {net['neurons']:,} neurons, {net['weights']:,} "
        f"weights, caps {net['caps']}, up to {net['neurons_per_tile']} neurons per tile, on "
        f"{s.get('machine')} ({s.get('chips')} chip(s)); mapping `{s.get('mapping', {}).get('strategy', '?')}`.",
        "",
    ]


def _training_lines(s: dict) -> list[str]:
    """The training diagnosis of a run: each finding with its fix, and the last step's activity per
    layer (the numbers that decide both the time and whether training works)."""
    if "findings" not in s or s.get("loss", ()) is None:  # no training at fixed activity
        return []
    out = ["## Training", ""]
    sched = s.get("second_threshold_schedule")
    out.append(
        "Second threshold (theta2): "
        + (
            f"the authors' schedule from {sched['start']:g}, rate {sched['rate']:g} per batch."
            if sched
            else "constant."
        )
    )
    out.append("")
    out += [f"* **{f['kind'].replace('_', ' ')}**: {f['message']}. Fix: {f['fix']}." for f in s["findings"]]
    if not s["findings"]:
        out.append(
            "No findings: every layer spiked or carried gradient entries, no layer filled its cap every "
            "step, and the loss moved."
        )
    act = s.get("activity") or []
    if act and act[-1].get("layers"):
        out += [
            "",
            f"Last step ({len(act)} steps):",
            "",
            "| layer | spikes per sample and step | cap used | gradient-only entries | theta2 |",
            "|---|---:|---:|---:|---:|",
        ]
        for i, ly in enumerate(act[-1]["layers"]):
            out.append(
                f"| {i + 1} | {ly.get('spikes', 0):.3g} | {100 * ly.get('cap_used', 0):.0f} % | "
                f"{ly.get('gradient_only', 0):.3g} | {ly.get('second_threshold', float('nan')):g} |"
            )
    return out + [""]


def markdown(summary: dict) -> ReportParts:
    """The SNN lines of ``summary``'s report (a stored ``summary.json``)."""
    loss = summary.get("loss")
    tail = [f"Loss {loss[0]:.4f} → {loss[-1]:.4f} over {len(loss)} step(s).", ""] if loss else []
    return ReportParts(
        head=tuple(_network_lines(summary)),
        body=tuple(_training_lines(summary)),
        tail=tuple(tail),
        tile_groups="neuron layers",
    )
