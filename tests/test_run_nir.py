"""`tilesim run --model graph.nir`: the graph's sizes, weights and LIF constants drive the run."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

nir = pytest.importorskip("nir")


def graph(n0=40, n1=24, n2=5, tau=0.02):
    rng = np.random.default_rng(1)

    def lif(n):
        return nir.LIF(tau=np.full(n, tau), r=np.full(n, 10.0), v_leak=np.zeros(n), v_threshold=np.ones(n))

    return nir.NIRGraph(
        nodes={
            "in": nir.Input(np.array([n0])),
            "fc1": nir.Linear(weight=rng.normal(size=(n1, n0)).astype(np.float32)),
            "lif1": lif(n1),
            "fc2": nir.Linear(weight=rng.normal(size=(n2, n1)).astype(np.float32)),
            "lif2": lif(n2),
            "out": nir.Output(np.array([n2])),
        },
        edges=[("in", "fc1"), ("fc1", "lif1"), ("lif1", "fc2"), ("fc2", "lif2"), ("lif2", "out")],
    )


def tilesim(*args):
    return subprocess.run(
        [sys.executable, "-m", "tilesim", *args], capture_output=True, text=True, timeout=300, check=False
    )


RUN = ["--batch", "4", "--timesteps", "10", "--input-cap", "8", "--max-activity", "0.25", "--steps", "1", "--json"]


def test_run_takes_sizes_and_weights_from_the_graph(tmp_path):
    nir.write(tmp_path / "g.nir", graph())
    r = tilesim("run", "--model", str(tmp_path / "g.nir"), *RUN)
    assert r.returncode == 0, r.stderr
    net = json.loads(r.stdout)["network"]
    assert net["layers"] == [40, 24, 5] and net["neurons"] == 29 and net["weights"] == 40 * 24 + 24 * 5


def test_graph_and_layers_must_agree_and_bad_nodes_are_refused(tmp_path):
    nir.write(tmp_path / "g.nir", graph())
    r = tilesim("run", "--model", str(tmp_path / "g.nir"), "--layers", "40-20-5", *RUN)
    assert r.returncode == 2 and "must match the NIR graph's 40-24-5" in r.stderr and "Traceback" not in r.stderr
    g = graph()
    g.nodes["lif1"] = nir.IF(r=np.full(24, 10.0), v_threshold=np.ones(24))
    nir.write(tmp_path / "if.nir", g)
    r = tilesim("run", "--model", str(tmp_path / "if.nir"), *RUN)
    assert r.returncode == 2 and "lif1" in r.stderr and "Traceback" not in r.stderr


def test_map_search_takes_the_graph(tmp_path):
    nir.write(tmp_path / "g.nir", graph())
    r = tilesim(
        "map-search",
        "--model",
        str(tmp_path / "g.nir"),
        "--batch",
        "4",
        "--timesteps",
        "10",
        "--input-cap",
        "8",
        "--max-activity",
        "0.25",
        "--budget-s",
        "1",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["baseline"]["neurons_per_tile"] == [2, 2]


FIXTURES = Path(__file__).parent / "fixtures" / "nir"  # written by snnTorch 1.0 / Norse 1.1 (make_fixtures.py)


def test_snntorch_graph_warns_once_and_runs_at_its_own_step():
    r = tilesim("run", "--model", str(FIXTURES / "snntorch_leaky.nir"), *RUN)
    assert r.returncode == 0, r.stderr
    warned = [line for line in r.stderr.splitlines() if "warning" in line]
    assert len(warned) == 1 and warned[0].startswith("tilesim: warning: NIR layer '1' (and every layer): alpha = ")
    assert "--dt 0.0001 --discretization euler" in warned[0]
    nir_summary = json.loads(r.stdout)["network"]["nir"]
    assert nir_summary["warnings"] == [warned[0].removeprefix("tilesim: warning: ")]
    assert (nir_summary["dt_s"], nir_summary["dt_source"]) == (1e-3, "default")
    r = tilesim(
        "run", "--model", str(FIXTURES / "snntorch_leaky.nir"), "--dt", "1e-4", "--discretization", "euler", *RUN
    )
    assert r.returncode == 0, r.stderr
    assert "warning" not in r.stderr
    nir_summary = json.loads(r.stdout)["network"]["nir"]
    assert nir_summary["warnings"] == [] and abs(nir_summary["alpha"] - 0.9) < 1e-6


def test_norse_graph_with_a_batch_dimension_runs():
    r = tilesim("run", "--model", str(FIXTURES / "norse_lif_batch.nir"), *RUN)
    assert r.returncode == 0, r.stderr
    net = json.loads(r.stdout)["network"]
    assert net["layers"] == [12, 8, 3] and net["nir"]["graph_batch"] == 4 and len(net["nir"]["warnings"]) == 1


def test_dt_that_contradicts_the_graph_is_refused(tmp_path):
    g = graph()
    g.metadata = {"dt": 1e-4}
    nir.write(tmp_path / "g.nir", g)
    r = tilesim("run", "--model", str(tmp_path / "g.nir"), "--dt", "1e-3", *RUN)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1] == (
        "tilesim: error: dt = 0.001: differs from the NIR graph's metadata "
        "dt = 0.0001 s; drop --dt to use the graph's step (or change "
        "graph.metadata['dt'])"
    )
