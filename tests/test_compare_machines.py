"""`tilesim compare RUN --machines A,B --out DIR` (issue 38, part 4): one network and batch on several
machines, side by side, each column the figures `tilesim run` gives on that machine."""

import json

import pytest

from tilesim.cli import main
from tilesim.errors import ConfigError
from tilesim.models.snn.commands.cli import write_run_outputs
from tilesim.models.snn.commands.options import options_from_mapping
from tilesim.models.snn.commands.run import run_training
from tilesim.models.snn.stacks import stack_class
from tilesim.outputs.compare import machine_spec

TINY = {"layers": "64-32-4", "caps": "8-4", "batch": 8, "timesteps": 10, "steps": 1, "activity": "fixed"}


@pytest.fixture(scope="module")
def cmp(tmp_path_factory):
    """A toy run on gc200, re-run on gc200 and mesh-demo by `compare --machines`; the pictures of
    the runs are not drawn (compare reads summary.json and arrays.npz)."""
    root = tmp_path_factory.mktemp("machines")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("tilesim.outputs.report._draw", lambda *a, **k: [])
        write_run_outputs(root / "toy", run_training(options_from_mapping({**TINY, "machine": "gc200"})))
        code = main(["compare", str(root / "toy"), "--machines", "gc200,mesh-demo", "--out", str(root / "cmp")])
    assert code == 0
    return root


def _row(data, section, item):
    return next(r for r in data["rows"] if r["section"] == section and r["item"] == item)


@pytest.mark.parametrize("col,machine,stack", [(0, "gc200", "poplar"), (1, "mesh-demo", "csl")])
def test_each_column_is_what_tilesim_run_gives_on_that_machine(cmp, capsys, col, machine, stack):
    """Throughput, step time, phases, SRAM headroom, what limits it and the stack's named
    assumptions: the column of ``machine`` against `tilesim run --machine <it> --json`."""
    data = json.loads((cmp / "cmp" / "compare.json").read_text())
    assert [r["name"] for r in data["runs"]] == ["gc200", "mesh-demo"]
    assert data["comparable"] and data["rank_by"] == "throughput"  # one network: ranked by samples/s
    argv = ["run", "--json", "--quiet", "--machine", machine]
    for k, v in TINY.items():
        argv += [f"--{k}", str(v)]
    assert main(argv) == 0
    run = json.loads(capsys.readouterr().out)
    assert _row(data, "rank", "throughput")["values"][col] == run["samples_per_s"]
    assert _row(data, "rank", "time per step")["values"][col] == run["predicted_step_s"]
    for phase, seconds in run["breakdown_s"].items():
        if seconds:
            assert _row(data, "phase", phase)["values"][col] == seconds
    mem = run["memory"]
    assert (
        _row(data, "limits", "SRAM headroom (fullest tile)")["values"][col]
        == mem["budget_bytes"] - mem["max_tile_bytes"]
    )
    top = max(("compute", "exchange", "sync", "links", "host"), key=lambda p: run["breakdown_s"][p])
    assert _row(data, "limits", "limited by")["values"][col].startswith(top + " (")
    assert _row(data, "limits", "named assumptions")["values"][col] == "; ".join(stack_class(stack).assumptions())
    assert data["runs"][col]["machine"] == machine


def test_the_table_names_both_machines_and_what_limits_them(cmp):
    md = (cmp / "cmp" / "compare.md").read_text()
    assert "| | `gc200` | `mesh-demo` |" in md and "## What limits each run" in md
    assert (cmp / "cmp" / "gc200" / "summary.json").is_file() and (cmp / "cmp" / "compare.html").is_file()


def test_machine_specs_and_bad_arguments(cmp, capsys):
    assert machine_spec("bow:16") == ("bow", 16, "bow-x16")
    assert machine_spec("wse2") == ("wse2", None, "wse2")
    with pytest.raises(ConfigError, match="--machines"):
        machine_spec("bow:0")
    assert main(["compare", str(cmp / "toy"), "--machines", "gc200,mesh-demo"]) == 2  # no --out
    assert "--machines" in capsys.readouterr().err
    out = str(cmp / "again")
    assert main(["compare", str(cmp / "toy"), "--machines", "gc200,gc200", "--out", out]) == 2
    assert "names a machine twice" in capsys.readouterr().err
