"""Mappings on the SNN workload: the math never depends on them, re-timing recorded activity
equals a functional run, the CLI takes strategies and files, the search never overflows."""

import json
import subprocess
import sys

import numpy as np
import pytest

from tilesim.engine.events import simulate
from tilesim.errors import MappingError, SramOverflowError
from tilesim.machine.description import load_machine
from tilesim.mapping import STRATEGIES, Mapping
from tilesim.models.snn.placement.fit import place_network, strategy_mapping, to_placement
from tilesim.models.snn.step.retime import retime
from tilesim.models.snn.step.timing import build_step_program
from tilesim.models.snn.training.network import NetworkConfig, init_network, train_step

CFG = NetworkConfig("64-40-30-6", batch=4, timesteps=12, input_cap=10, max_activity=0.2, seed=3, second_threshold=0.5)
REC = NetworkConfig(
    "64-40-30-6", batch=4, timesteps=12, input_cap=10, max_activity=0.2, seed=3, recurrent=(False, True, False)
)


def data(cfg, seed):
    rng = np.random.default_rng(seed)
    x = (rng.random((cfg.timesteps, cfg.batch, cfg.layers[0])) < 0.3).astype(np.uint8)
    return x, rng.integers(0, cfg.layers[-1], cfg.batch)


def train(cfg, placement, steps=3):
    state = init_network(cfg, placement)
    out = []
    for s in range(steps):
        x, y = data(cfg, s)
        out.append(train_step(state, x, y, per_step_counters=True))
    return state, out


@pytest.mark.parametrize("cfg", [CFG, REC], ids=["feedforward", "recurrent"])
def test_training_is_identical_under_every_strategy(cfg):
    machine = load_machine("gc200")
    ref_state, ref = train(cfg, place_network(cfg, machine, 2, "contiguous").placement)
    for name in STRATEGIES[1:]:
        state, res = train(cfg, place_network(cfg, machine, 2, name).placement)
        for a, b in zip(ref, res):
            assert b.loss == pytest.approx(a.loss, rel=1e-6)
        for wa, wb in zip(ref_state.W, state.W):
            np.testing.assert_allclose(wb, wa, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("machine_name, chips", [("gc200", None), ("gc200", 2)])
def test_retime_equals_a_functional_run_under_each_mapping(machine_name, chips):
    machine = load_machine(machine_name, chips)
    cfg = CFG
    base = place_network(cfg, machine, 2, "contiguous")
    _, rec = train(cfg, base.placement, steps=1)
    activity = rec[0].activity
    maps = [strategy_mapping(n, cfg, machine, 2) for n in STRATEGIES]
    if chips == 2:  # put the middle layer on the second chip: spike lists cross the links
        from tilesim.mapping.strategies import from_layout

        maps.append(
            from_layout(
                cfg.layers[1:], 2, machine.tiles_per_chip, [(0, 1), (1, 0), (1, 15)], [20, 15, 3], "block", None, "hand"
            )
        )
    for m in maps:
        placement = to_placement(m, machine)
        _, func = train(cfg, placement, steps=1)  # same seed: same activity
        t_func = simulate(build_step_program(cfg, placement, func[0].counters, machine), machine).total_s
        t_re = retime(activity, cfg, placement, machine).step_s
        assert t_re == pytest.approx(t_func, rel=0.01), m.strategy


def test_retime_cache_gives_the_same_time():
    machine = load_machine("gc200")
    cache = {}
    for name in ("contiguous", "round_robin", "contiguous"):
        pl = to_placement(strategy_mapping(name, CFG, machine, 2), machine)
        assert retime(None, CFG, pl, machine, cache=cache).step_s == retime(None, CFG, pl, machine).step_s
    assert cache


def test_mapping_file_for_another_network_or_machine_is_refused(tmp_path):
    machine = load_machine("gc200")
    m = strategy_mapping("contiguous", CFG, machine, 2)
    m.save(tmp_path / "m.json")
    other = NetworkConfig("64-41-30-6", batch=4, timesteps=12, input_cap=10, max_activity=0.2)
    with pytest.raises(MappingError, match=r"layer sizes \[40, 30, 6\] do not match the network's \[41, 30, 6\]"):
        place_network(other, machine, None, str(tmp_path / "m.json"))
    with pytest.raises(MappingError, match="tiles_per_chip = 1472: machine mesh-demo"):
        place_network(CFG, load_machine("mesh-demo"), None, str(tmp_path / "m.json"))


def test_overflowing_mapping_file_is_refused(tmp_path):
    machine = load_machine("gc200")
    cfg = NetworkConfig("2312-1466-1466-10", batch=48, timesteps=100, input_cap=32)
    bad = Mapping(cfg.layers[1:], 1, 1472, (np.full(1466, 1), np.arange(1466) // 2 + 2, np.full(10, 1000)))
    with pytest.raises(SramOverflowError, match="tile 1"):
        place_network(cfg, machine, None, bad)


def test_unknown_strategy():
    with pytest.raises(MappingError, match="no such file; give a strategy name"):
        place_network(CFG, load_machine("gc200"), 2, "zigzag")


def tilesim(*args):
    return subprocess.run([sys.executable, "-m", "tilesim", *args], capture_output=True, text=True, timeout=300)


NET = [
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
]


def test_cli_run_writes_a_mapping_that_reproduces_the_run(tmp_path):
    a = tilesim("run", *NET, "--mapping", "round_robin", "--out", str(tmp_path / "a"), "--json")
    assert a.returncode == 0, a.stderr
    sa = json.loads(a.stdout)
    assert sa["mapping"]["strategy"] == "round_robin"
    b = tilesim("run", *NET, "--mapping", str(tmp_path / "a" / "mapping.json"), "--json")
    assert b.returncode == 0, b.stderr
    assert json.loads(b.stdout)["predicted_step_s"] == pytest.approx(sa["predicted_step_s"], rel=1e-12)


def test_cli_bad_mapping_exits_2_without_traceback(tmp_path):
    (tmp_path / "m.json").write_text('{"chips": 1, "tiles_per_chip": 1472, "layers": []}')
    r = tilesim("run", *NET, "--mapping", str(tmp_path / "m.json"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "layer sizes [] do not match the network's [40, 30, 6]" in r.stderr


@pytest.mark.slow
def test_cli_map_search_json_and_its_mapping_fits(tmp_path):
    r = tilesim(
        "map-search",
        *NET,
        "--machine",
        "gc200",
        "--chips",
        "2",
        "--budget-s",
        "4",
        "--out",
        str(tmp_path / "best.json"),
        "--json",
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert {"baseline", "best", "evaluated", "wall_s"} <= set(out)
    assert out["best"]["predicted_step_s"] <= out["baseline"]["predicted_step_s"]
    assert out["best"]["mapping_file"] == str(tmp_path / "best.json") and out["evaluated"] > 5
    ok = tilesim(
        "run",
        *NET,
        "--machine",
        "gc200",
        "--chips",
        "2",
        "--mapping",
        str(tmp_path / "best.json"),
        "--memory-check",
        "raise",
        "--json",
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["predicted_step_s"] == pytest.approx(out["best"]["predicted_step_s"], rel=0.05)


@pytest.mark.slow
def test_m1_experiment_quick(tmp_path):
    from experiments import m1_mapping

    assert m1_mapping.main(["--quick", "--out", str(tmp_path)]) == 0
    from experiments.b_common import read_csv

    rows = read_csv(tmp_path / "m1_mapping.csv")
    npt = [r for r in rows if r["part"] == "npt"]
    t = [float(r["predicted_step_s"]) for r in npt]
    mem = [int(r["max_tile_bytes"]) for r in npt]
    assert t == sorted(t) and mem == sorted(mem) and len(set(mem)) == len(mem)
    four = [r for r in rows if r["part"] == "4-chip"]
    assert float(four[-1]["predicted_step_s"]) <= float(four[0]["predicted_step_s"])
    assert (tmp_path / "m1_mapping.png").stat().st_size > 1000


@pytest.mark.parametrize(
    "cfg, chips",
    [(CFG, None), (REC, None), (CFG, 2), (REC, 2)],
    ids=["ff-1chip", "rec-1chip", "ff-2chips", "rec-2chips"],
)
def test_chip_reduced_step_equals_the_simulated_program(cfg, chips):
    """The peaks form (rows reduced to chip peaks as they are emitted, no [S, tiles] arrays), timed by
    makespan_s, gives the engine's time of the full program, for every strategy, a layer on tile 0,
    and layers on two chips."""
    from tilesim.mapping.strategies import from_layout
    from tilesim.models.snn.step.counters import count_work
    from tilesim.models.snn.step.workload import SnnStep
    from tilesim.workload import step_seconds

    def predict_step_s(cfg, pl, counters, machine, cache=None):
        return step_seconds(SnnStep(cfg, pl, counters, cache=cache, form="peaks"), machine)

    machine = load_machine("gc200", chips)
    TPC = machine.tiles_per_chip
    _, rec = train(cfg, place_network(cfg, machine, 2, "contiguous").placement, steps=1)
    maps = [strategy_mapping(n, cfg, machine, 2) for n in STRATEGIES]
    maps.append(
        from_layout(
            cfg.layers[1:], machine.chips, TPC, [(0, 0), (0, 20), (0, 35)], [20, 15, 3], "cyclic", None, "tile 0 used"
        )
    )
    if chips == 2:
        maps.append(from_layout(cfg.layers[1:], 2, TPC, [(1, 0), (0, 1), (1, 15)], [7, 15, 3], "block", None, "hand"))
    cache = {}
    for m in maps:
        pl = to_placement(m, machine)
        counters = count_work(rec[0].activity, pl, per_step=True, cache=cache)
        full = simulate(build_step_program(cfg, pl, counters, machine), machine).total_s
        assert predict_step_s(cfg, pl, counters, machine, cache=cache) == pytest.approx(full, rel=1e-6), m.strategy
        assert predict_step_s(cfg, pl, counters, machine) == pytest.approx(full, rel=1e-6), m.strategy


def test_map_search_on_a_mesh_machine(tmp_path):
    """The chip-reduced step needs an all-to-all fabric; on a mesh the search times full programs."""
    r = tilesim(
        "map-search",
        "--layers",
        "64-40-30-6",
        "--batch",
        "4",
        "--timesteps",
        "6",
        "--max-activity",
        "0.2",
        "--input-cap",
        "10",
        "--machine",
        "mesh-demo",
        "--max-evals",
        "8",
        "--budget-s",
        "30",
        "--json",
        "--quiet",
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["best"]["predicted_step_s"] <= out["baseline"]["predicted_step_s"]


def test_search_memory_totals_equal_the_ledger():
    from tilesim.machine.memory import MemoryTotals
    from tilesim.models.snn.step.memory import snn_memory

    machine = load_machine("gc200", 2)
    cache = {}
    for name in STRATEGIES:
        pl = to_placement(strategy_mapping(name, REC, machine, 2), machine)
        full = snn_memory(REC, pl, machine)
        for _ in range(2):  # the second time from the cache
            fast = snn_memory(REC, pl, machine, MemoryTotals(machine), cache)
            np.testing.assert_array_equal(fast.per_tile(), full.per_tile())
    from dataclasses import replace

    m1 = load_machine("gc200")
    tiny = replace(m1, chip=replace(m1.chip, sram_bytes=30_000))
    pl = to_placement(strategy_mapping("contiguous", REC, tiny, 8), tiny)
    over = snn_memory(REC, pl, tiny).overflow_tiles()
    assert over.size
    np.testing.assert_array_equal(snn_memory(REC, pl, tiny, MemoryTotals(tiny)).overflow_tiles(), over)


@pytest.mark.parametrize("budget", [1, 40_000], ids=["nothing-kept", "some-evicted"])
def test_search_caches_stay_within_their_byte_budget(monkeypatch, budget):
    """The objective's caches (counters, layer terms, chip-row tile sets, memory entries) drop
    least recently used entries beyond their byte budget (a value larger than the whole budget
    is not kept) and give the same times as uncached runs."""
    import tilesim.models.snn.step.counters as counters_mod
    import tilesim.models.snn.step.memory as step_memory_mod
    import tilesim.models.snn.step.timing as timing_mod
    from tilesim.models.snn.placement.search import make_objective

    monkeypatch.setattr(counters_mod, "CACHE_BYTES", budget)
    monkeypatch.setattr(timing_mod, "CACHE_BYTES", budget)
    monkeypatch.setattr(step_memory_mod, "CACHE_BYTES", budget)
    machine = load_machine("gc200", 2)
    _, rec = train(CFG, place_network(CFG, machine, 2, "contiguous").placement, steps=1)
    objective = make_objective(CFG, machine, rec[0].activity)
    fresh = lambda m: make_objective(CFG, machine, rec[0].activity)(m)  # noqa: E731  no cache carried over
    maps = [strategy_mapping(n, CFG, machine, npt) for n in ("contiguous", "round_robin") for npt in (1, 2, 3)]
    for m in maps + maps[::-1]:
        assert objective(m) == fresh(m), m.strategy
    lru = [v for v in objective.cache.values() if hasattr(v, "currsize")]
    assert len(lru) == 4 and all(c.currsize <= budget for c in lru)  # counters, layer terms, chip rows, memory
    assert (budget == 1) == all(len(c) == 0 for c in lru)


def test_map_search_starts_from_a_mapping_file(tmp_path):
    """``map-search --mapping FILE`` evaluates that placement too (a search can resume from its
    own best), so it never reports worse; a missing file is one clear error, exit 2."""
    net = ("--layers", "64-40-30-6", "--batch", "4", "--timesteps", "6", "--max-activity", "0.2", "--input-cap", "10")
    first = tilesim("map-search", *net, "--max-evals", "40", "--out", str(tmp_path / "best.json"), "--json", "--quiet")
    assert first.returncode == 0, first.stderr
    best = json.loads(first.stdout)["best"]["predicted_step_s"]
    again = tilesim(
        "map-search", *net, "--mapping", str(tmp_path / "best.json"), "--max-evals", "5", "--json", "--quiet"
    )
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["best"]["predicted_step_s"] <= best
    bad = tilesim("map-search", *net, "--mapping", str(tmp_path / "missing.json"), "--quiet")
    assert bad.returncode == 2 and "no such file" in bad.stderr and "Traceback" not in bad.stderr


def test_overflow_advice_names_only_what_can_help():
    """Issue 39: with one neuron per tile the overflow still said "lower --neurons-per-tile", and with
    every layer on a chip of its own it still said "spread the network over more chips". The fix now
    offers each only where it can help, and says that one layer's neurons must fit on one chip."""
    cfg = NetworkConfig(layers="700-1462-1460-20", batch=480, timesteps=100, max_activity=0.05, input_cap=48)
    with pytest.raises(SramOverflowError) as alone:
        place_network(cfg, load_machine("gc200", 4), 1, "contiguous")
    fix = str(alone.value).split("fix: ", 1)[1]
    assert "neurons-per-tile" not in fix and "--chips" not in fix and "must fit on one chip" in fix
    with pytest.raises(SramOverflowError) as shared:
        place_network(cfg, load_machine("gc200"), 4, "contiguous")
    fix = str(shared.value).split("fix: ", 1)[1]
    assert "lower --neurons-per-tile" in fix and "more chips (--chips)" in fix
