"""One snnTorch model (issue 50 part 2): `tilesim run --implementation snntorch` and `tilesim validate` time the
same call; the input is sent as the measured script sends it; the per-call overhead and the mechanisms around
the op list are named assumptions in the record and in `compare`; each mechanism on a hand-counted toy."""

import json
from collections import Counter
from dataclasses import replace

import pytest

from tilesim.cli import main

TOY = ["--layers", "12-6-3", "--caps", "2-2", "--batch", "4", "--timesteps", "5", "--input-cap", "4", "--steps", "1"]


def test_run_and_validate_time_the_same_call_within_2_percent():
    """The held-out logs' network (784-1000-10, B 128, T 25, Adam, gc200): `run` and `validate` agree."""
    from tilesim.models.snn.commands.options import RunOptions
    from tilesim.models.snntorch.measured import read_snntorch_cases, shipped_snntorch_cases, validate_snntorch
    from tilesim.models.snntorch.run import run_snntorch

    (path,) = shipped_snntorch_cases()
    rows = validate_snntorch(path)
    predicted = {r["predicted"] for r in rows}
    assert len(predicted) == 1  # every row is the same call
    run = run_snntorch(
        RunOptions(layers="784-1000-10", batch=128, timesteps=25, steps=1, implementation="snntorch", machine="gc200")
    )
    validate_s = 128 / predicted.pop()
    assert run.predicted_step_s == pytest.approx(validate_s, rel=0.02)
    case = read_snntorch_cases(path)[0]
    assert case.machine == "gc200" and case.spec.input_dtype == "fp16" and case.spec.input_shape == "frame"


@pytest.mark.parametrize(
    "flags, input_bytes",
    [
        ([], 2 * 4 * 12),  # fp16 frame [B, N0], as train_fcn.py sends it
        (["--input-dtype", "fp32"], 4 * 4 * 12),
        (["--input-dtype", "fp32", "--input-shape", "sequence"], 4 * 5 * 4 * 12),
        (["--input-shape", "sequence"], 2 * 5 * 4 * 12),
    ],
)
def test_the_input_dtype_and_shape_set_the_host_bytes_counted_by_hand(flags, input_bytes, capsys):
    """Toy 12-6-3, B 4, T 5: the host moves the input, the int32 labels (4 · 4 B) and the returned float32
    ``spk_rec`` [5, 4, 3] and loss (4 · (60 + 1) B)."""
    assert main(["run", *TOY, "--implementation", "snntorch", "--json", *flags]) == 0
    out = json.loads(capsys.readouterr().out)
    section = next(s for s in out["sections"] if s["title"] == "snnTorch on PopTorch")["data"]
    assert section["input_bytes"] == input_bytes
    from tilesim.models.snntorch.step import host_bytes

    assert host_bytes((12, 6, 3), 4, 5, input_bytes) == input_bytes + 16 + 4 * 61


def test_the_sparse_run_refuses_the_snntorch_input_options(capsys):
    assert main(["run", *TOY, "--input-dtype", "fp32"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--input-dtype" in err and "--implementation snntorch" in err


def test_the_call_overhead_is_a_named_assumption_in_the_record_and_in_compare(tmp_path, capsys):
    st, sp = tmp_path / "st", tmp_path / "sp"
    assert main(["run", *TOY, "--implementation", "snntorch", "--quiet", "--out", str(st)]) == 0
    assert main(["run", *TOY, "--quiet", "--out", str(sp)]) == 0
    capsys.readouterr()
    rec = json.loads((st / "summary.json").read_text())
    named = [a for s in rec["sections"] for a in (s["data"].get("assumptions") or ())]
    assert any("PopTorch per-call host overhead 0.30 ms" in a and "band 0.1-1.0 ms" in a for a in named)
    assert "Named assumptions: PopTorch per-call host overhead" in (st / "summary.md").read_text()
    assert main(["compare", str(sp), str(st), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    row = next(r for r in rows if r["item"] == "named assumptions")
    assert "PopTorch per-call host overhead" in row["values"][1]
    assert "CallOpx copies" in row["values"][1]


def _toy_call(**kw):
    from tilesim.models.snntorch.call import SnnTorchCall

    return SnnTorchCall((4, 3, 2), 2, 3, **kw)


def test_the_fp16_input_is_cast_once_per_step():
    """HalfUpcastToFloat: an fp16 frame meets fp32 weights before every fc1 — T = 3 casts of B · N0 = 8 values."""
    from tilesim.models.snntorch.ops import op_counts, snntorch_ops

    half = snntorch_ops((4, 3, 2), 2, 3, input_cast=True)
    full = snntorch_ops((4, 3, 2), 2, 3)
    casts = [o for o in half if o.name == "L1 input cast"]
    assert len(casts) == 1 and casts[0].per_step and casts[0].args == (8, 1, 0)
    assert op_counts(half, 3)["map"] == op_counts(full, 3)["map"] + 3
    assert _toy_call().input_cast and not _toy_call(input_dtype="fp32").input_cast


def test_the_call_copies_of_a_two_layer_toy_are_the_ones_counted_by_hand():
    """4-3-2, B 2, T 3, fp32 frame, every step's forward and backward body one outlined subgraph whose
    inputs and outputs CallOpx copies at every call (aliasZeroCopy off). Bytes per call:

    * forward in: input 2·4·4 = 32; L1 weight 48, bias 12, membrane 24; L2 weight 24, bias 8, membrane 16 → 164;
    * forward out: L1 membrane, spikes, mem - threshold 3·24; L2 3·16 → 120;
    * backward in: L1 carried grad 24, mem - threshold 24, layer input 32; L2 carried 16, loss slice 16, layer
      input 24, weight 24 → 160;
    * backward out: L1 dW 48, db 12, carried 24; L2 dW 24, db 8, carried 16 → 132.

    576 B per step, 1,728 B per call of T = 3; one Copy program per tensor: 13 forward + 13 backward, each run 3
    times = 78 copy supersteps; merged: one in and one out per body, 12."""
    from tilesim.machine.description import load_machine
    from tilesim.models.snntorch.mechanisms import Mechanisms, step_boundaries
    from tilesim.models.snntorch.step import snntorch_step
    from tilesim.workload import time_workload

    call = _toy_call(input_dtype="fp32")
    b = step_boundaries(call)
    total = {(body, d): sum(t.nbytes for t in ts if t.direction == d) for body, ts in b.items() for d in ("in", "out")}
    assert total == {("forward", "in"): 164, ("forward", "out"): 120, ("backward", "in"): 160, ("backward", "out"): 132}
    m = load_machine("gc200")

    def copies(c):
        program = snntorch_step(c, m).program(m)
        n = Counter(program.labels[i].startswith("call copies/") for i in program.label_id)[True]
        r = time_workload(snntorch_step(c, m), m, keep_timeline=False).result
        return n, r

    n, with_copies = copies(call)
    _, without = copies(replace(call, mechanisms=Mechanisms(alias_zero_copy=True)))
    n_merged, merged = copies(replace(call, mechanisms=Mechanisms(copy_programs="merged")))
    assert n == 78 and n_merged == 12
    assert with_copies.bytes_onchip.sum() - without.bytes_onchip.sum() == 3 * 576
    assert merged.bytes_onchip.sum() - without.bytes_onchip.sum() == 3 * 576
    assert with_copies.total_s > merged.total_s > without.total_s  # fewer syncs merged; none aliased


def test_merge_duplicate_ops_runs_the_frame_fc_and_the_resets_once_when_nothing_is_outlined():
    """4-3-2, B 2, T 3, fp16 frame, outline none: fc1's cast, matmul and bias add read the same tensors at every
    step (3 → 1 each), each layer's reset ``mem - threshold`` and spike op repeat the previous step's fire
    (3 → 1 each, 2 layers) and its ``beta.clamp`` reads the same buffer (3 → 1, 2 layers). Per call: matmuls
    15 → 13; maps 28·3 + 26 + 3 casts = 113 → 113 - 2·2 - 4·2 - 2·2 = 97 (inplacing off, to count the merge
    alone). A sequence input is not merged (each step reads its own slice); outlined bodies are not merged."""
    from tilesim.machine.description import load_machine
    from tilesim.models.snntorch.mechanisms import Mechanisms
    from tilesim.models.snntorch.ops import op_counts
    from tilesim.models.snntorch.step import snntorch_step

    m = load_machine("gc200")
    none = Mechanisms(outline="none", inplace=False)
    counts = lambda c: op_counts(snntorch_step(c, m).ops, 3)  # noqa: E731
    full = _toy_call(mechanisms=Mechanisms(inplace=False))
    assert counts(full)["matmul"] == 15 and counts(full)["map"] == 113
    merged = counts(_toy_call(mechanisms=none))
    assert merged["matmul"] == 13 and merged["map"] == 97
    seq = counts(_toy_call(input_shape="sequence", mechanisms=none))
    assert seq["matmul"] == 15 and seq["map"] == 113 - 4 * 2 - 2 * 2


def test_the_call_copies_of_single_op_outlining_are_the_ones_counted_by_hand():
    """4-3-2, B 2, T 3, fp32 frame, every matmul and spike op its own subgraph (outline "op"). Per step:

    * L1 fc matmul in 32 + 48, out 24 (104); its two spike ops 24 in + 24 out each (96);
    * L2 fc matmul in 24 + 24, out 16 (64); its two spike ops 16 + 16 each (64);
    * L2 weight grad in 24 + 16, out 24 (64); L2 input grad in 16 + 24, out 24 (64);
    * L1 spike op grad in 24 + 24, out 24 (72); L1 weight grad in 32 + 24, out 48 (104).

    632 B per step, 1,896 per call; 26 tensors per step (78 copy supersteps), merged 10 calls x in/out x 3 = 60."""
    from tilesim.machine.description import load_machine
    from tilesim.models.snntorch.mechanisms import Mechanisms, outlined_calls
    from tilesim.models.snntorch.step import snntorch_step
    from tilesim.workload import time_workload

    call = _toy_call(input_dtype="fp32", mechanisms=Mechanisms(outline="op"))
    calls = outlined_calls(call)
    assert len(calls) == 10 and sum(len(ts) for ts in calls.values()) == 26
    assert sum(t.nbytes for ts in calls.values() for t in ts) == 632
    m = load_machine("gc200")

    def run(c):
        program = snntorch_step(c, m).program(m)
        n = Counter(program.labels[i].startswith("call copies/") for i in program.label_id)[True]
        return n, time_workload(snntorch_step(c, m), m, keep_timeline=False).result

    n, r = run(call)
    n_merged, _ = run(replace(call, mechanisms=Mechanisms(outline="op", copy_programs="merged")))
    _, none = run(replace(call, mechanisms=Mechanisms(outline="op", alias_zero_copy=True)))
    assert n == 78 and n_merged == 60
    assert r.bytes_onchip.sum() - none.bytes_onchip.sum() == 3 * 632


def test_the_gap_table_starts_from_the_validated_call_and_fits_nothing():
    """`python -m tilesim.models.snntorch.gap`: the default setting is the call `validate` predicts; every
    setting's prediction moves with the per-call overhead one for one; the measured range is the logs'."""
    from tilesim.models.snntorch.gap import format_gap, gap_rows
    from tilesim.models.snntorch.measured import shipped_snntorch_cases, validate_snntorch
    from tilesim.models.snntorch.mechanisms import Mechanisms

    rows = gap_rows(overheads=(1e-4, 3e-4))
    (path,) = shipped_snntorch_cases()
    validated = 128 / validate_snntorch(path)[0]["predicted"]
    default = next(r for r in rows if r.mechanisms == Mechanisms() and r.call_s == 3e-4)
    assert default.predicted_s == pytest.approx(validated, rel=1e-6)
    for a, b in zip(rows[::2], rows[1::2]):
        assert b.predicted_s - a.predicted_s == pytest.approx(2e-4)
    assert default.measured_s == pytest.approx((128 / 60904.244129325016, 128 / 48371.10658617893))
    assert "left unexplained" in format_gap(rows)


def test_inplacing_makes_the_clone_the_stacks_and_the_gradient_slices_views():
    """4-3-2, B 2, T 3 (fp16 frame: 113 maps per call without inplacing). PopART's Inplace pattern leaves no
    program for each layer's reset clone (2 per step), the output layer's gradient slice (1 per step) and the
    two stacks (once): 113 - 3·3 - 2 = 102 maps; the time drops by what those ops cost."""
    from tilesim.machine.description import load_machine
    from tilesim.models.snntorch.mechanisms import Mechanisms
    from tilesim.models.snntorch.ops import op_counts
    from tilesim.models.snntorch.step import snntorch_step
    from tilesim.workload import time_workload

    m = load_machine("gc200")
    on, off = _toy_call(), _toy_call(mechanisms=Mechanisms(inplace=False))
    assert on.mechanisms.inplace
    assert op_counts(snntorch_step(on, m).ops, 3)["map"] == 102
    assert op_counts(snntorch_step(off, m).ops, 3)["map"] == 113
    gone = {o.name for o in snntorch_step(off, m).ops} - {o.name for o in snntorch_step(on, m).ops}
    assert gone == {"L1 reset: clone", "L2 reset: clone", "L2 stack grad slice", "stack spk_rec", "stack mem_rec"}
    t = lambda c: time_workload(snntorch_step(c, m), m, keep_timeline=False).step_s  # noqa: E731
    assert t(on) < t(off)
