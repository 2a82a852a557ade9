"""The SNN run as a :class:`tilesim.outputs.runrecord.RunRecord`: its own sections (the network and its
placement; the training: loss, the θ2 schedule, the last step's activity per layer), its
throughput (samples/s), the resolved options that shaped it and where its data and costs came from.
The core renders everything from the record; nothing here is read back from a summary."""

from __future__ import annotations

import hashlib
from importlib import resources
from pathlib import Path

from tilesim.models.snn.commands.options import RunOptions, resolved_settings
from tilesim.models.snn.outputs.activity_chart import activity_chart
from tilesim.models.snn.stacks import describe_stack, stack_class
from tilesim.outputs.runrecord import Finding, Provenance, RunRecord, Section, Throughput, tilesim_version

__all__ = ["run_record", "run_sections", "run_provenance", "split_wall_clock", "WALL_CLOCK_FIELDS"]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def run_provenance(options: RunOptions) -> Provenance:
    """The data the run trained on (files read, or generated in-process: which generator and seed),
    the cost model (file and SHA-256 prefix) and the tilesim version."""
    if options.costs:
        p = Path(options.costs).expanduser().resolve()
        costs = f"{p} (sha256 {_sha(p)})"
    else:
        with resources.as_file(resources.files("tilesim") / "presets" / "costs" / "snn.toml") as p:
            costs = f"tilesim/presets/costs/snn.toml (shipped; sha256 {_sha(Path(p))})"
    if options.activity == "fixed":
        data = "none: every spike list at its cap (fixed activity, no training)"
    elif options.data:
        data = f"the file {Path(options.data).expanduser().resolve()}"
    elif options.data_root:
        data = f"tonic's {options.dataset} recordings under {Path(options.data_root).expanduser().resolve()}"
    elif options.dataset == "synthetic":
        data = f"synthetic spikes generated in-process (seed {options.seed})"
    else:
        data = (
            f"{options.dataset.upper()}-shaped spikes generated in-process (seed {options.seed}; no --data-root, "
            f"so not the real {options.dataset.upper()} recordings)"
        )
    if options.model:
        data += f"; network from the NIR file {Path(options.model).expanduser().resolve()}"
    return Provenance(tilesim_version(), costs, data)


def _runs(xs: list[int]) -> str:
    """``[0, 1, 2, 5]`` as ``0-2, 5`` (runs of consecutive ascending numbers)."""
    out: list[list[int]] = []
    for x in xs:
        if out and x == out[-1][1] + 1:
            out[-1][1] = x
        else:
            out.append([x, x])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in out)


def _chips_text(chips_of_layer: list) -> str:
    """Where the layers sit, from the mapping summary's ``chips_of_layer`` (every chip of each layer):
    consecutive layers on the same chips together, e.g. ``layer 1 on chips 0-1; layers 2-3 on chip 0``."""
    groups: list[tuple[list[int], list]] = []  # (layers, their chips)
    for l, on in enumerate(chips_of_layer):
        if groups and groups[-1][1] == list(on):
            groups[-1][0].append(l + 1)
        else:
            groups.append(([l + 1], list(on)))
    return "; ".join(
        f"layer{'s' if len(ls) > 1 else ''} {_runs(ls)} on chip{'s' if len(on) > 1 else ''} {_runs(on)}"
        for ls, on in groups
    )


def _network_lines(s: dict) -> list[str]:
    net, mp = s["network"], s["mapping"]
    # records before chips_of_layer name each layer's first chip only (chip_of_layer)
    on = mp.get("chips_of_layer") or [[c] for c in mp.get("chip_of_layer", [])]
    where = f" Layers on chips: {_chips_text(on)}." if s["chips"] > 1 and on else ""
    return [
        f"Network {'-'.join(map(str, net['layers']))}: {net['neurons']:,} neurons, {net['weights']:,} "
        f"weights, caps {net['caps']}, up to {net['neurons_per_tile']} neurons per tile, on "
        f"{s['machine']} ({s['chips']} chip(s)); mapping `{mp.get('strategy', '?')}`, "
        f"{mp.get('tiles_used', '?')} tiles used." + where,
    ]


def _training_lines(s: dict) -> list[str]:
    """The training of a run: the θ2 schedule, the last step's activity per layer (the numbers that
    decide both the time and whether training works) and the loss."""
    sched = s.get("second_threshold_schedule")
    out = [
        "Second threshold (theta2): "
        + (
            f"the authors' schedule from {sched['start']:g}, rate {sched['rate']:g} per batch."
            if sched
            else "constant."
        ),
    ]
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
    loss = s["loss"]
    out += ["", f"Loss {loss[0]:.4f} → {loss[-1]:.4f} over {len(loss)} step(s)."]
    if not s["findings"]:
        out += [
            "",
            "No findings: every layer spiked or carried gradient entries, no layer filled its cap every "
            "step, and the loss moved.",
        ]
    return out


NETWORK_KEYS = ("network", "mapping", "host_memory")
TRAINING_KEYS = ("loss", "accuracy", "predicted_step_s_per_step", "second_threshold_schedule", "activity")


def run_sections(summary: dict) -> tuple[Section, ...]:
    """The SNN's sections of a run, from :meth:`tilesim.models.snn.commands.run.RunSummary.to_dict`: the network and
    its placement, and (when it trained) the training."""
    out = [Section("Network", tuple(_network_lines(summary)), tuple((k, summary[k]) for k in NETWORK_KEYS))]
    data = tuple((k, summary[k]) for k in TRAINING_KEYS)
    if summary.get("loss"):
        charts = (activity_chart(summary["activity"]),) if summary.get("activity") else ()
        out.append(Section("Training", tuple(_training_lines(summary)), data, charts))
    else:
        out.append(Section("Fixed activity", ("Every spike list at its cap; no training (no loss).",), data))
    if summary.get("stack"):  # the execution stack and its named assumptions (tilesim.models.snn.stacks)
        out.append(
            Section(
                "Execution stack",
                (describe_stack(summary["stack"]) + ".",),
                (("stack", summary["stack"]), ("assumptions", list(stack_class(summary["stack"]).assumptions()))),
            )
        )
    return tuple(out)


WALL_CLOCK_FIELDS = ("wall_s_per_step", "wall_s_total")
"""Summary fields measured on the host's clock (with ``host_memory.peak_rss_bytes``): they go to
``wall.json``, so that two identical runs write byte-identical ``summary.json`` files."""


def split_wall_clock(summary: dict) -> tuple[dict, dict]:
    """``(summary without the host's measurements, those measurements)`` (:data:`WALL_CLOCK_FIELDS`
    and the peak RSS)."""
    record = {k: v for k, v in summary.items() if k not in WALL_CLOCK_FIELDS}
    wall = {k: summary[k] for k in WALL_CLOCK_FIELDS if k in summary}
    host = dict(record.get("host_memory") or {})
    if "peak_rss_bytes" in host:
        wall["peak_rss_bytes"] = host.pop("peak_rss_bytes")
        record["host_memory"] = host
    return record, wall


def run_record(summary, options: RunOptions) -> tuple[RunRecord, dict]:
    """The record of a :class:`tilesim.models.snn.commands.run.RunSummary` trained under ``options`` (the median
    step's engine result and SRAM, samples per second, the SNN's sections, the critical kernel,
    findings, structure, notes, settings and provenance) and, apart, the host's own measurements of the
    run (:func:`split_wall_clock`: ``wall.json``)."""
    d, wall = split_wall_clock(summary.to_dict())
    a = summary.artifacts
    record = RunRecord.of(
        a.result,
        workload="snn",
        ledger=a.ledger,
        throughput=Throughput(float(d["samples_per_s"]), "samples/s"),
        explain=summary.explain,
        findings=tuple(Finding(f["kind"], f["message"], f["fix"]) for f in d["findings"]),
        structure=dict(d["structure"]),
        notes=tuple(d["notes"]),
        settings=resolved_settings(options),
        provenance=run_provenance(options),
        sections=run_sections(d),
        tile_groups="neuron layers",
    )
    return record, wall
