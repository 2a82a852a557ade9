import json
import subprocess
import sys

import pytest

from tilesim.cli import main


def run(*args):
    return subprocess.run([sys.executable, "-m", "tilesim", *args], capture_output=True, text=True, timeout=300)


def test_example_writes_outputs(tmp_path):
    r = run("example", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    for f in ("summary.json", "trace.json", "timeline.png", "memory.png", "breakdown.png"):
        assert (tmp_path / f).stat().st_size > 1000
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["chips"] == 4 and s["supersteps"] == 21
    assert sum(s["breakdown_s"].values()) == pytest.approx(s["step_s"])
    trace = json.loads((tmp_path / "trace.json").read_text())
    phases = {e["cat"] for e in trace["traceEvents"] if e["ph"] == "X"}
    assert {"compute", "sync", "exchange", "links", "host"} <= phases
    assert any(e.get("tid", 0) > 0 for e in trace["traceEvents"] if e["ph"] == "X")  # per-tile tracks


def test_machines_json_keys(capsys):
    assert main(["machines", "gc200", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    for k in (
        "tiles",
        "sram_bytes",
        "total_sram_bytes",
        "clock_hz",
        "peak_fp32_flops",
        "peak_fp16_flops",
        "exchange_bytes_per_s",
        "link_bytes_per_s",
    ):
        assert k in d


def test_machines_toml_edit_and_use(tmp_path, capsys):
    assert main(["machines", "gc200", "--toml"]) == 0
    text = capsys.readouterr().out
    assert "# [S]" in text
    p = tmp_path / "big.toml"
    p.write_text(text.replace("sram_bytes = 638976", "sram_bytes = 1048576"))
    assert main(["machines", str(p), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sram_bytes"] == 1048576


@pytest.mark.parametrize(
    "args,needle",
    [
        (["machines", "gc9000"], "machine = 'gc9000': is neither a preset nor a file"),
        (["machines", "gc200", "--chips", "0"], "must be >= 1"),
        (["simulate", "nope.toml"], "program file = 'nope.toml': no such file"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_input_exits_2_without_traceback(args, needle):
    r = run(*args)
    assert r.returncode == 2
    assert needle in r.stderr
    assert "Traceback" not in r.stderr


def test_simulate_overflow_and_report_mode(tmp_path):
    prog = tmp_path / "p.toml"
    prog.write_text(
        '[[superstep]]\ncompute_cycles = 10\n[[memory]]\ncategory = "variables:weights"\ntiles = "3"\nbytes = 700000\n'
    )
    r = run("simulate", str(prog))
    assert r.returncode == 2 and "SRAM overflow on 1 tile(s): tile 3 needs 700,000 B" in r.stderr
    assert "Traceback" not in r.stderr
    r = run("simulate", str(prog), "--memory-check", "report", "--json")
    assert r.returncode == 0
    assert json.loads(r.stdout)["memory"]["overflow_tiles"] == [3]


def test_example_on_another_machine_traces_its_critical_tiles(tmp_path):
    """The example's trace tracks were hard-coded tiles 0 and 736; on pod16 they are the step's critical tiles,
    and a machine the demo program does not fit is a one-line error, not a traceback."""
    r = run("example", "--machine", "pod16", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    trace = json.loads((tmp_path / "trace.json").read_text())
    assert any(e.get("tid", 0) > 0 for e in trace["traceEvents"] if e["ph"] == "X")
    bad = run("example", "--machine", "mesh-demo")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr


def test_run_fixed_activity_times_without_float_math(tmp_path, monkeypatch, capsys):
    """``run --activity fixed``: no weights, no kernels; one step timed as retime(None, ...) does."""
    import tilesim.models.snn.commands.run as R
    from tilesim.models.snn.step.retime import retime

    def boom(*a, **k):
        raise AssertionError("float math at fixed activity")

    monkeypatch.setattr(R, "init_network", boom)
    monkeypatch.setattr(R, "train_step", boom)
    args = ["--layers", "64-48-10", "--batch", "4", "--timesteps", "6", "--activity", "fixed", "--steps", "3"]
    assert main(["run", *args, "--json", "--out", str(tmp_path / "o")]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["loss"] is None and s["accuracy"] is None and len(s["predicted_step_s_per_step"]) == 1
    assert any("no training" in n for n in s["notes"]) and any("3 steps" in n for n in s["notes"])
    opts = R.RunOptions(layers=(64, 48, 10), batch=4, timesteps=6, activity="fixed")
    cfg = R.network_config(opts)
    m = R.load_machine(opts.machine, opts.chips)
    placed = R.place_network(cfg, m, opts.neurons_per_tile, opts.mapping, opts.memory_check)
    assert s["predicted_step_s"] == retime(None, cfg, placed.placement, m).step_s
    assert s["by_phase"] and s["breakdown_s"] and s["explain"]["sentence"]
    md = (tmp_path / "o" / "summary.md").read_text()
    assert "fixed activity: no training, the step is timed at every list's cap" in md
    assert main(["run", *args]) == 0
    text = capsys.readouterr().out
    assert "fixed activity: no training, the step is timed at every list's cap" in text and "loss" not in text


def test_overflow_at_the_fewest_neurons_per_tile_does_not_suggest_fewer():
    """Issue 20: the README sweep's failing points suggested 'lower --neurons-per-tile', which cannot apply."""
    # batch 80: mesh-demo's cores keep one dW copy each (not the IPU's six), so at batch 48 the network fits
    r = run("run", "--layers", "700-256-20", "--batch", "80", "--machine", "mesh-demo", "--steps", "1", "--quiet")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    # mesh-demo's stack (csl) lays out its own weight blocks: the error names the SRAM per PE, never fewer
    # neurons per tile (issue 49: the table program's "1 per tile is the fewest" is gone with it)
    assert "SRAM per PE" in r.stderr and "lower --neurons-per-tile" not in r.stderr
    assert "reduce --batch" in r.stderr


def test_make_demo_is_tilesim_demo(tmp_path, capsys):
    """`make demo` and `tilesim demo` are one thing (they were an SNN run and the core's example program, both
    writing out/demo): the Makefile's demo target calls `tilesim demo`, whose options are the demo's under any
    flag given."""
    from pathlib import Path

    from tilesim.io import read_toml

    make = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    target = make.split("\ndemo:", 1)[1].split("\n\n", 1)[0]
    assert "tilesim demo" in target and "tilesim run" not in target
    out = tmp_path / "d"
    assert main(["demo", "--timesteps", "4", "--batch", "2", "--steps", "1", "--quiet", "--out", str(out)]) == 0
    o = read_toml(out / "options.toml", "options")
    assert (o["layers"], o["dataset"], o["input_cap"], o["max_activity"], o["machine"]) == (
        [700, 1462, 1460, 20],
        "shd",
        48,
        0.05,
        "gc200",
    )
    assert (o["timesteps"], o["batch"], o["steps"]) == (4, 2, 1)  # the flags given win
