"""Issue 24: a run's summary is typed records at the core, and its JSON keeps the shape users read."""

from __future__ import annotations

import json

from tilesim.models.snn.commands.options import RunOptions
from tilesim.models.snn.commands.run import HostMemory, NetworkSummary, run_training
from tilesim.models.snn.step.structure import StepStructure
from tilesim.models.snn.training.diagnose import Finding, StepRecord

KEYS = [
    "predicted_step_s", "samples_per_s", "breakdown_s", "memory", "network", "machine", "chips", "mapping",
    "loss", "accuracy", "predicted_step_s_per_step", "wall_s_per_step", "by_phase", "explain", "wall_s_total",
    "host_memory", "second_threshold_schedule", "activity", "findings", "structure", "stack", "notes", "workload",
]  # fmt: skip


def test_the_summary_is_records_and_its_json_has_the_users_shape():
    s = run_training(RunOptions(layers="40-30-4", batch=4, timesteps=8, max_activity=0.2, input_cap=8, steps=2))
    assert isinstance(s.network, NetworkSummary) and s.network.layers == (40, 30, 4)
    assert isinstance(s.host_memory, HostMemory) and isinstance(s.structure, StepStructure)
    assert all(isinstance(r, StepRecord) for r in s.activity) and len(s.activity) == 2
    assert all(isinstance(f, Finding) for f in s.findings)
    d = json.loads(json.dumps(s.to_dict()))  # plain JSON all the way down
    assert list(d) == KEYS
    net = {"layers": [40, 30, 4], "neurons": 34, "weights": 40 * 30 + 30 * 4, "caps": list(s.network.caps)}
    assert d["network"] == {**net, "neurons_per_tile": s.network.neurons_per_tile}
    assert set(d["host_memory"]) == {"estimate_bytes", "estimate_parts_bytes", "peak_rss_bytes"}
    assert d["second_threshold_schedule"] == {"start": -100.0, "rate": 0.5}
    assert d["structure"]["sync_scope"] == "chip" and d["workload"] == "snn"
    assert [a["step"] for a in d["activity"]] == [0, 1]


def test_a_fixed_activity_summary_keeps_the_empty_shapes():
    s = run_training(
        RunOptions(layers="40-30-4", batch=4, timesteps=8, max_activity=0.2, input_cap=8, steps=1, activity="fixed")
    )
    d = s.to_dict()
    assert d["loss"] is None and d["activity"] == [] and d["findings"] == [] and d["notes"]
    assert d["second_threshold_schedule"] is None and d["structure"]["copies"] == "separate"


def test_options_are_read_in_typed_parts_built_once():
    """Issue 24: the flat declaration users write, read as typed parts (each built once)."""
    from tilesim.models.snn.commands.options import OutputOptions, PlacementOptions, TrainingOptions

    o = RunOptions(layers="40-30-4", batch=4, chips=2, copies="merged", out="x", steps=3)
    assert isinstance(o.placement, PlacementOptions) and o.placement.chips == 2
    assert isinstance(o.structure, StepStructure) and o.structure.copies == "merged"
    assert isinstance(o.training, TrainingOptions) and o.training.steps == 3
    assert isinstance(o.output, OutputOptions) and o.output.out == "x"
    assert o.network["layers"] == (40, 30, 4) and "chips" not in o.network
    assert o.placement is o.placement and o.structure is o.structure  # built once
    assert RunOptions(layers="40-30-4", batch=4) == RunOptions(layers="40-30-4", batch=4)


def test_a_run_folder_holds_its_settings_and_run_from_reproduces_it(tmp_path, capsys):
    """Issue 37: summary.json records every option that shaped the run (batch, time steps, lr, seed,
    dataset) and where its data came from (SHD-shaped data generated in-process is said so); the
    folder's options.toml re-runs it with `tilesim run --from DIR` to the same step time, and a flag
    given with --from changes the re-run."""
    from tilesim.cli import main

    args = ["--layers", "700-24-20", "--dataset", "shd", "--batch", "4", "--timesteps", "8", "--input-cap", "8"]
    args += ["--max-activity", "0.2", "--steps", "2", "--lr", "0.01", "--seed", "3", "--quiet"]
    assert main(["run", *args, "--out", str(tmp_path / "a")]) == 0
    a = json.loads((tmp_path / "a" / "summary.json").read_text())
    s = a["settings"]
    assert (s["batch"], s["timesteps"], s["lr"], s["seed"], s["dataset"]) == (4, 8, 0.01, 3, "shd")
    assert "out" not in s and "SHD-shaped spikes generated in-process" in a["provenance"]["data"]
    assert (tmp_path / "a" / "options.toml").is_file()
    assert main(["run", "--from", str(tmp_path / "a"), "--quiet", "--out", str(tmp_path / "b")]) == 0
    b = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert b["step_s"] == a["step_s"] and b["settings"] == a["settings"] and b["sections"] == a["sections"]
    assert main(["run", "--from", str(tmp_path / "a"), "--batch", "2", "--quiet", "--out", str(tmp_path / "c")]) == 0
    c = json.loads((tmp_path / "c" / "summary.json").read_text())
    assert c["settings"]["batch"] == 2 and c["settings"]["lr"] == 0.01
    capsys.readouterr()
    assert main(["run", "--from", str(tmp_path / "nothing")]) == 2
    assert "--from: run directory" in capsys.readouterr().err
    assert main(["run", "--from", str(tmp_path / "a"), str(tmp_path / "a" / "options.toml")]) == 2
    assert "--from" in capsys.readouterr().err
