"""snnTorch's dense IPU build as a second implementation (`tilesim run --implementation snntorch`, issue 42
part 7): its op list counted by hand, the run folder it writes, the machines it refuses, and the sparse
default left as it was."""

import json
from collections import Counter

import pytest

from tilesim.cli import main

TINY = [
    "--layers",
    "12-6-3",
    "--caps",
    "2-2",
    "--batch",
    "4",
    "--timesteps",
    "5",
    "--input-cap",
    "4",
    "--steps",
    "2",
    "--quiet",
]


def test_the_op_list_of_a_two_layer_toy_is_the_one_counted_by_hand():
    """4-3-2, B 2, T 3. Forward per step and layer: fc matmul, bias add and Leaky's ten maps (reset: sub,
    spike op, clone; state: mul, sub, beta clamp (one element), mul, add; fire: sub, spike op). Loss once: two
    stacks, the sum over time, max, sub-exp, exp-sum, log-NLL, the softmax gradient and its expand over time (6 maps, 3
    reductions). Backward per step: output layer slice, beta*grad, add, bias reduce, weight-grad and
    input-grad matmuls; hidden layer spike-op grad, beta*grad, add, bias reduce, weight-grad matmul. Once:
    one Sum per parameter tensor (4) and Adam's five maps per tensor (20: the gradient unscale, two moments,
    the updater, the variable update)."""
    from tilesim.models.snntorch.ops import op_counts, snntorch_ops

    ops = snntorch_ops((4, 3, 2), batch=2, timesteps=3)
    per_step = Counter(o.kind for o in ops if o.per_step)
    once = Counter(o.kind for o in ops if not o.per_step)
    assert per_step == {"matmul": 2 + 3, "map": 2 * 11 + 3 + 3, "reduce": 2}
    assert once == {"map": 6 + 20, "reduce": 3, "sum": 4}
    assert op_counts(ops, 3) == {"matmul": 15, "map": 28 * 3 + 26, "reduce": 2 * 3 + 3, "sum": 4, "total": 138}
    shapes = {o.name: o.args for o in ops if o.kind == "matmul"}
    assert shapes == {
        "L1 fc matmul": (2, 4, 3),
        "L2 fc matmul": (2, 3, 2),
        "L2 weight grad matmul": (2, 2, 3),
        "L2 input grad matmul": (2, 2, 3),
        "L1 weight grad matmul": (3, 2, 4),
    }
    assert [o.part for o in ops].index("loss") == 24  # the loss follows the whole forward loop


def test_a_per_step_op_runs_once_per_time_step_and_its_code_exists_once():
    from tilesim.machine.description import load_machine
    from tilesim.models.snntorch.call import SnnTorchCall
    from tilesim.models.snntorch.step import snntorch_step

    m = load_machine("gc200")
    step = snntorch_step(SnnTorchCall((4, 3, 2), 2, 3, input_dtype="fp32", input_shape="sequence"), m)
    program = step.program(m)
    labels = Counter(program.labels[i] for i in program.label_id)
    assert labels["forward/L1 fc bias add"] == 3 and labels["loss/log-nll"] == 1
    assert labels["host/poptorch call overhead"] == 1 and labels["host-input"] == 1
    ledger = step.memory(m)
    table = ledger.by_category(int(ledger.per_tile().argmax()))
    assert table["variables:optimizer"] > 0 and table["variables:gradients"] > 0


def test_run_snntorch_on_gc200_writes_the_usual_outputs_and_compares_with_the_sparse_run(tmp_path, capsys):
    st, sp = tmp_path / "st", tmp_path / "sp"
    assert main(["run", *TINY, "--implementation", "snntorch", "--machine", "gc200", "--out", str(st)]) == 0
    out = capsys.readouterr().out
    assert "per training call" in out and "PopTorch per-call host overhead" in out
    for name in ("summary.json", "summary.md", "report.html", "trace.json", "memory.png", "timeline.png", "work.png",
                 "options.toml"):  # fmt: skip
        assert (st / name).is_file(), name
    rec = json.loads((st / "summary.json").read_text())
    assert rec["workload"] == "snn" and rec["settings"]["implementation"] == "snntorch"
    assert rec["throughput"]["unit"] == "samples/s" and rec["step_s"] > 3e-4  # the call overhead is in it
    assert rec["breakdown_s"]["host"] >= 3e-4
    training = next(s for s in rec["sections"] if s["title"] == "Training")["data"]
    assert len(training["loss"]) == 2 and all(x > 0 for x in training["loss"])
    assert main(["report", str(st)]) == 0
    assert main(["run", *TINY, "--out", str(sp)]) == 0
    capsys.readouterr()
    assert main(["compare", str(sp), str(st), "--json"]) == 0
    c = json.loads(capsys.readouterr().out)
    assert c["comparable"] and len(c["ranking"]) == 2  # one workload: ranked by samples/s
    differs = {r["item"] for r in c["rows"] if r["section"] == "differs"}
    assert "implementation" in differs


@pytest.mark.parametrize(
    "flags, field",
    [
        (["--machine", "wormhole-n150"], "--machine = 'wormhole-n150'"),
        (["--machine", "gc200x2"], "--machine = 'gc200x2'"),
        (["--machine", "bow", "--chips", "2"], "--chips = 2"),
    ],
)
def test_snntorch_refuses_other_machines(flags, field, capsys):
    assert main(["run", *TINY, "--implementation", "snntorch", *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err
    if "--machine" in field:
        assert "allowed machines: gc200, bow" in err


def test_the_sparse_default_is_unchanged():
    """The default implementation is the sparse one; its settings (summary.json, options.toml) carry no
    new key, an explicit `implementation = "sparse"` is the same run, and the sparse library refuses to
    run the other implementation silently."""
    from tilesim.errors import ConfigError
    from tilesim.models.snn.commands.options import RunOptions, option_names, resolved_settings
    from tilesim.models.snn.commands.run import run_training

    opts = RunOptions(layers="12-6-3", caps=(2, 2), batch=4, timesteps=5, input_cap=4, steps=1)
    assert opts.implementation == "sparse"
    snntorch_only = {"implementation", "input_dtype", "input_shape"}
    assert set(resolved_settings(opts)) == set(option_names()) - {"out", "json", *snntorch_only}
    explicit = RunOptions(
        layers="12-6-3", caps=(2, 2), batch=4, timesteps=5, input_cap=4, steps=1, implementation="sparse"
    )
    assert resolved_settings(explicit) == resolved_settings(opts)
    a, b = run_training(opts).to_dict(), run_training(explicit).to_dict()
    for key in ("predicted_step_s", "breakdown_s", "loss", "memory"):
        assert a[key] == b[key]
    with pytest.raises(ConfigError, match="implementation"):
        run_training(
            RunOptions(layers="12-6-3", caps=(2, 2), batch=4, timesteps=5, input_cap=4, implementation="snntorch")
        )


def test_validate_reads_the_held_out_snntorch_logs(capsys):
    from tilesim.models.snntorch.measured import shipped_snntorch_cases

    (path,) = shipped_snntorch_cases()
    assert main(["validate", str(path), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 12 and {r["workload"] for r in rows} == {"snntorch"}
    assert {r["use"] for r in rows} == {"check"}  # held out: nothing is fitted to them
    assert all(r["error_pct"] is not None for r in rows)


def test_the_dense_backward_is_the_gradient_of_the_loss():
    """One leaky layer kept below threshold (no reset, no surrogate on the path: the loss reads the
    membrane): the bias and weight gradients of the NumPy BPTT through time match central differences."""
    import numpy as np

    from tilesim.models.snntorch.train import dense_gradients, init_dense

    rng = np.random.default_rng(3)
    net = init_dense((6, 4), lr=1e-3, seed=1)
    net.W[0] *= 0.05
    net.b[0] *= 0.05
    x = (rng.random((7, 5, 6)) < 0.4).astype(np.float32)
    labels = rng.integers(0, 4, 5)
    first, (gW, gb) = dense_gradients(net, x, labels)
    assert first.spikes_per_step == (0.0,)  # below threshold: the membrane is linear in the weights
    eps = 1e-3
    for p, g, idx in ((net.b[0], gb, (2,)), (net.W[0], gW, (1, 3)), (net.W[0], gW, (4, 0))):
        p[idx] += eps
        up = dense_gradients(net, x, labels)[0].loss
        p[idx] -= 2 * eps
        down = dense_gradients(net, x, labels)[0].loss
        p[idx] += eps
        assert abs((up - down) / (2 * eps) - g[idx]) < 2e-2 * max(1.0, abs(g[idx]))
