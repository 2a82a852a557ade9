"""Explanations: exchange matrices, the critical tile, summary.md and `tilesim report`."""

import subprocess
import sys

import numpy as np
import pytest

from tilesim.machine.description import load_machine
from tilesim.mapping.strategies import from_layout
from tilesim.models.snn.outputs.explain import exchange_flows, exchange_matrices, explain_critical
from tilesim.models.snn.placement.fit import place_network, to_placement
from tilesim.models.snn.step.retime import retime
from tilesim.models.snn.training.network import NetworkConfig

CFG = NetworkConfig("64-40-30-6", batch=4, timesteps=12, input_cap=10, max_activity=0.2, activity="fixed")


def test_exchange_matrix_conserves_bytes_and_shows_link_traffic():
    machine = load_machine("gc200", 2)
    m = from_layout(CFG.layers[1:], 2, machine.tiles_per_chip, [(0, 1), (1, 0), (1, 15)], [20, 15, 3], "block")
    pl = to_placement(m, machine)
    pred = retime(None, CFG, pl, machine)
    ex = exchange_matrices(CFG, pl, pred.counters, machine, chip=1, groups=8)
    total = sum(f[-1] for f in exchange_flows(CFG, pl, pred.counters, machine))
    assert ex["chip"].sum() == pytest.approx(total)
    assert sum(ex["totals_bytes"].values()) == pytest.approx(total)
    assert ex["chip"][0, 1] > 0 and ex["chip"][1, 0] > 0  # layer 1 -> 2 lists, gradients back
    assert ex["group"].sum() <= ex["chip"][1, 1] * (1 + 1e-9)
    assert ex["group"].shape == (8, 8) and ex["edges"][-1] == machine.tiles_per_chip


def test_critical_tile_is_explained():
    machine = load_machine("gc200")
    pl = place_network(CFG, machine, 2, "contiguous").placement
    pred = retime(None, CFG, pl, machine)
    from tilesim.outputs.records import label_tile_cycles

    ex = explain_critical(pred.result, CFG, pl, pred.counters, machine, label_tile_cycles(pred.program))
    assert ex["phase"] in pred.result.by_label()
    assert ex["role"] in ("owner", "combiner", "compaction", "reduction")
    from tilesim.models.snn.step.table import KIND_COMPUTE, STEP_ROWS

    if ex["phase"] in {row.label for row in STEP_ROWS if row.kind != KIND_COMPUTE}:
        assert "host" in ex["sentence"] or "fixed cost" in ex["sentence"]
    else:
        assert f"critical tile {ex['tile']}" in ex["sentence"]
    if ex["role"] == "owner" and ex["counter"] is not None:
        assert ex["counter"]["ratio"] >= 1.0 and np.isfinite(ex["counter"]["layer_mean"])


def tilesim(*args):
    return subprocess.run([sys.executable, "-m", "tilesim", *args], capture_output=True, text=True, timeout=300)


def test_run_out_writes_the_explanations_and_report_redraws_them(tmp_path):
    out = tmp_path / "run"
    r = tilesim(
        "run",
        "--layers",
        "64-40-30-6",
        "--batch",
        "4",
        "--timesteps",
        "12",
        "--input-cap",
        "10",
        "--max-activity",
        "0.2",
        "--steps",
        "1",
        "--out",
        str(out),
    )
    assert r.returncode == 0, r.stderr
    md = (out / "summary.md").read_text()
    assert "Predicted time per step" in md and "The critical kernel" in md and "## Memory" in md
    pictures = ("timeline.png", "breakdown.png", "memory.png", "work.png", "exchange.png", "activity.png")
    activity = (out / "activity.png").read_bytes()  # the workload's own picture, from its record (issue 39)
    for name in pictures:
        assert (out / name).stat().st_size > 1000
        (out / name).unlink()
    (out / "summary.md").unlink()
    r = tilesim("report", str(out))
    assert r.returncode == 0, r.stderr
    assert all((out / n).is_file() for n in pictures) and (out / "summary.md").read_text() == md
    assert (out / "activity.png").read_bytes() == activity


def test_report_on_a_folder_without_a_run_exits_2(tmp_path):
    r = tilesim("report", str(tmp_path))
    assert r.returncode == 2 and "Traceback" not in r.stderr and "has no summary.json" in r.stderr


def test_exchange_flows_follow_the_step_table():
    """Senders and receivers come from the step's table, so per exchanging row the chips that
    send (receive) bytes in the timed program are those of its flows; the Poplar stack's fixed-cost
    explanation and LABEL_COUNTERS are read from the same table."""
    from tilesim.models.snn.outputs.explain import LABEL_COUNTERS
    from tilesim.models.snn.stacks import stack_for
    from tilesim.models.snn.step.table import STEP_ROWS
    from tilesim.models.snn.step.timing import build_step_program

    machine = load_machine("gc200", 2)
    TPC = machine.tiles_per_chip
    m = from_layout(CFG.layers[1:], 2, TPC, [(0, 1), (1, 0), (1, 15)], [20, 15, 3], "block")
    pl = to_placement(m, machine)
    pred = retime(None, CFG, pl, machine)
    prog = build_step_program(CFG, pl, pred.counters, machine)
    label_of = {row.exchange: row.label for row in STEP_ROWS if row.exchange}
    sends, gets = {}, {}
    for what, src, _, dst, _, _ in exchange_flows(CFG, pl, pred.counters, machine):
        label = label_of[what.split(" ", 2)[-1]]
        sends.setdefault(label, set()).update((np.asarray(src) // TPC).tolist())
        gets.setdefault(label, set()).update((np.asarray(dst) // TPC).tolist())
    assert set(sends) == set(label_of.values())
    for label, senders in sends.items():
        at = prog.label_id == prog.labels.index(label)
        chips_in = set(np.flatnonzero(prog.bytes_in[at].reshape(-1, 2, TPC).sum(axis=(0, 2))).tolist())
        assert gets[label] == chips_in, label
        if label != "loss":  # the loss gradients' senders pay nothing
            chips_out = set(np.flatnonzero(prog.bytes_out[at].reshape(-1, 2, TPC).sum(axis=(0, 2))).tolist())
            assert senders == chips_out, label
    # the per-layer replicate rows, layer by layer: layer 2 (chip 1) copies its own list on chip 1
    # and its input list (layer 1's) on chip 0
    rep = np.flatnonzero(prog.label_id == prog.labels.index("bwd: replicate lists"))
    L = CFG.n_layers
    for l in range(L):
        flow = [
            f
            for f in exchange_flows(CFG, pl, pred.counters, machine)
            if f[0] == f"layer {l + 1} replicated lists (backward)"
        ]
        out = prog.bytes_out[rep[l::L]].reshape(-1, 2, TPC).sum(axis=(0, 2))
        assert set((flow[0][1] // TPC).tolist()) == set(np.flatnonzero(out).tolist()), l
    poplar = stack_for(machine)
    assert "fixed cost" in poplar.explain("bwd: replicate lists", False)
    assert poplar.explain("fwd: state update", False) is None
    assert set(LABEL_COUNTERS) == {row.label for row in STEP_ROWS if row.counters}
