"""A layer across chips (issue 38's last gap): on the dataflow stacks (tt-metal, csl) a layer's neurons may
span chips, with one global merge per (layer, sample) on its head chip, so the math never changes; under
``poplar`` (the authors' op) such a placement is refused; ``spread`` uses every chip of a multi-chip machine."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
from test_mapping_snn import train

from tilesim.cli import main
from tilesim.engine.events import simulate
from tilesim.errors import MappingError, SramOverflowError
from tilesim.machine.description import load_machine
from tilesim.mapping import Mapping
from tilesim.models.snn.placement.fit import neuron_cut, place_network, to_placement
from tilesim.models.snn.stacks.dataflow import DataflowTableStack, dataflow_rows, dataflow_traits
from tilesim.models.snn.step.counters import count_work
from tilesim.models.snn.step.timing import build_step_program
from tilesim.models.snn.step.workload import SnnStep
from tilesim.models.snn.training.activity import fixed_activity
from tilesim.models.snn.training.network import NetworkConfig
from tilesim.workload import step_seconds


def _table_stack(machine):
    """The shared table program's dataflow form (:mod:`tilesim.models.snn.stacks.dataflow`): layers across chips
    are its feature; the native tt-metal and csl programs build their own (issue 49)."""
    rows = dataflow_rows("host: input stream", None, launch=False)
    traits = dataflow_traits("csl", machine, rows, 0.0, False, "wavelet-triggered tasks (dataflow)")
    return DataflowTableStack(traits, machine)


def _same_math(a, b):
    """Two trainings (:func:`test_mapping_snn.train`) give the same spike lists, losses and weights."""
    (sa, ra), (sb, rb) = a, b
    for x, y in zip(ra, rb):
        assert math.isfinite(x.loss) and y.loss == pytest.approx(x.loss, rel=1e-6)
        for la, lb in zip(x.activity.layers, y.activity.layers):
            np.testing.assert_array_equal(la.ids, lb.ids)
            np.testing.assert_array_equal(la.counts, lb.counts)
    for wa, wb in zip(sa.W, sb.W):
        np.testing.assert_allclose(wb, wa, rtol=1e-6, atol=1e-7)


def test_small_network_cut_over_every_galaxy_chip_trains_as_on_one_chip():
    """700-128-128-20 on a 32-chip Galaxy: the neuron cut (what ``map-search`` also tries on a dataflow stack)
    spreads the 276 neurons over all 32 chips (layer 1 over most of them), and training under it gives the very
    spike lists, losses and weights of the paper's contiguous placement (all layers on chip 0). ``auto`` (the
    tt-metal stack's ``rectangles``) keeps the layers whole on the fewest chips that are fastest: on so small a
    network the cut's link hops make the step slower."""
    cfg = NetworkConfig("700-128-128-20", batch=4, timesteps=5, input_cap=20, max_activity=0.1, seed=2)
    galaxy = load_machine("wormhole-galaxy")
    auto = place_network(cfg, galaxy, None, "auto").placement
    cut = to_placement(neuron_cut(cfg, galaxy, 1), galaxy)
    one = place_network(cfg, galaxy, 8, "contiguous").placement  # 16 + 16 + 3 tiles of chip 0
    assert auto.strategy == "rectangles" and auto.chips_used() <= 3 and not auto.spans_chips()
    assert cut.chips_used() == 32 and cut.spans_chips()
    assert one.chips_used() == 1
    ref, got = train(cfg, one, steps=2), train(cfg, cut, steps=2)
    _same_math(ref, got)
    t = step_seconds(SnnStep(cfg, cut, got[1][0].counters), galaxy)
    assert math.isfinite(t) and t > 0
    peaks = SnnStep(cfg, cut, got[1][0].counters, None, form="peaks")  # the search's objective
    assert step_seconds(peaks, galaxy) == pytest.approx(t, rel=1e-6)
    _, on_auto = train(cfg, auto, steps=2)
    assert step_seconds(SnnStep(cfg, auto, on_auto[1].counters), galaxy) < t


def test_neuron_cut_needs_a_stack_whose_layers_span_chips():
    """No neuron cut on one chip or under ``poplar`` (the authors' op keeps a layer on its chip)."""
    cfg = NetworkConfig("700-128-128-20", batch=4, timesteps=5, input_cap=20, max_activity=0.1, seed=2)
    assert neuron_cut(cfg, load_machine("wormhole-galaxy", 1), 1) is None
    assert neuron_cut(cfg, load_machine("bow", 4), 1) is None
    assert neuron_cut(cfg, load_machine("wormhole-galaxy"), 1, "poplar") is None


SRAM_48K = 48_000
"""A 2000-neuron layer needs ~77 KB per core on one 64-core chip, ~52 KB on a chip of its own beside the
output layer's, ~45 KB split over two chips."""


def _tiny_galaxy(chips: int):
    m = load_machine("wormhole-galaxy", chips)
    return replace(m, chip=replace(m.chip, sram_bytes=SRAM_48K))


def test_a_layer_too_big_for_one_chip_places_and_runs_on_two():
    """A 2000-neuron layer that overflows one chip's SRAM (48 KB cores) places on two chips under a dataflow
    table stack (the shared table program's dataflow form, which csl used before its native program; the
    tt-metal stack keeps 101 KiB of L1 for its firmware alone and streams weights from DRAM): ``spread`` with
    a chip per layer overflows, so the neurons are cut over both chips; the step builds and runs; on one chip
    it still overflows."""
    cfg = NetworkConfig("64-2000-6", batch=2, timesteps=4, input_cap=10, max_activity=0.1, seed=1)
    with pytest.raises(SramOverflowError):
        place_network(cfg, _tiny_galaxy(1), None, "auto", stack=_table_stack(_tiny_galaxy(1)))
    two = _tiny_galaxy(2)
    placed = place_network(cfg, two, None, "auto", stack=_table_stack(two))
    assert placed.placement.chips_of_layer(0) == (0, 1)
    assert not placed.ledger.overflow_tiles().size
    state, res = train(cfg, placed.placement, steps=1)
    assert math.isfinite(res[0].loss)
    t = simulate(
        build_step_program(cfg, placed.placement, res[0].counters, two, stack=_table_stack(two).traits), two
    ).total_s
    assert math.isfinite(t) and t > 0


def _split_file(tmp_path, tiles_per_chip: int):
    """A mapping file of 64-40-30-6 whose first layer spans chips 0 and 1."""
    m = Mapping(
        (40, 30, 6),
        2,
        tiles_per_chip,
        (
            np.r_[np.arange(1, 21), tiles_per_chip + np.arange(20)],
            np.arange(21, 51),
            np.arange(51, 57),
        ),
    )
    path = tmp_path / "split.json"
    m.save(path)
    return path


NET = [
    "--layers",
    "64-40-30-6",
    "--batch",
    "4",
    "--timesteps",
    "6",
    "--input-cap",
    "10",
    "--max-activity",
    "0.2",
    "--steps",
    "1",
]


def test_poplar_refuses_a_layer_across_chips_with_one_line(tmp_path, capsys):
    """The same mapping file: refused under poplar (exit 2, one line naming the fix), run under tt-metal."""
    path = _split_file(tmp_path, load_machine("gc200").tiles_per_chip)
    args = ["run", *NET, "--machine", "gc200", "--chips", "2", "--mapping", str(path), "--quiet"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("tilesim: error:")
    assert "layer 1 spans chips [0, 1]" in err and "--stack tt-metal" in err
    assert main([*args, "--stack", "tt-metal", "--json"]) == 0
    assert math.isfinite(json.loads(capsys.readouterr().out)["predicted_step_s"])
    with pytest.raises(MappingError, match="spans chips"):  # the step itself refuses it too
        cfg = NetworkConfig("64-40-30-6", batch=4, timesteps=6, input_cap=10, max_activity=0.2)
        pl = Mapping.from_dict(json.loads(path.read_text()))
        build_step_program(cfg, pl, count_work(fixed_activity(cfg), pl, per_step=True), load_machine("gc200", 2))


def test_two_chip_toy_link_bytes_by_hand():
    """The dataflow table program (the shared table's dataflow form; the native programs: tests/test_stack_tt_metal.py,
    tests/test_stack_csl.py). Layer 1 (100
    neurons, N_max 20) split 50/50 over chips 0 and 1, layer 2 (4 neurons) on chip 0; B 4,
    input cap 5. Per time step, counted by hand:

    * input lists, chip 0 -> 1: B lists of (cap + 1) words: 4 * 4 * 6 = 96 bytes;
    * chunk lists, chip 1 -> 0: the 50-neuron part has f = 1 (w = 0 + [50 mod 64 > 32] = 1 worker, f =
      max(0 + 0, 1)), so B * 2 * 1 = 8 compaction tiles, each a list of min(20, 50) ids + a count:
      8 * 4 * 21 = 672 bytes;
    * the merged list, chip 0 -> 1 (the part there records it): B * 4 * (20 + 2) = 352 bytes;
    * backward, layer 2's slot gradients g of layer 1 to its chip 1: B * (8 * 20 + 8) = 672 bytes.
    """
    cfg = NetworkConfig("8-100-4", batch=4, timesteps=3, input_cap=5, max_activity=0.2, seed=0)
    assert cfg.n_max[0] == 20
    machine = load_machine("wormhole-galaxy", 2)
    tpc = machine.tiles_per_chip
    pl = Mapping((100, 4), 2, tpc, (np.r_[np.arange(1, 51), tpc + np.arange(50)], np.arange(51, 55)))
    counters = count_work(fixed_activity(cfg), pl, per_step=True)
    prog = build_step_program(cfg, pl, counters, machine, stack=_table_stack(machine).traits)
    got: dict = {}
    for s, a, b, n in zip(prog.flow_step, prog.flow_src, prog.flow_dst, prog.flow_bytes):
        key = (prog.labels[prog.label_id[s]], int(a), int(b))
        got[key] = got.get(key, 0.0) + float(n) / cfg.timesteps
    assert got == {
        ("fwd: input lists", 0, 1): 96.0,
        ("fwd: compaction", 1, 0): 672.0,
        ("fwd: combine", 0, 1): 352.0,
        ("bwd: reduce input grad", 0, 1): 672.0,
    }


def test_search_keeps_a_faster_start_it_cannot_walk():
    """``anneal`` evaluates every extra start; one whose layers span chips (the walk cannot move it) is still
    the best when it is the fastest (before: it was evaluated and dropped); no walk step here (2 evaluations)."""
    from tilesim.mapping.search import anneal
    from tilesim.mapping.strategies import contiguous

    start = contiguous((40, 30, 6), 2, 64, 2)
    split = Mapping(
        (40, 30, 6), 2, 64, (np.r_[np.arange(1, 21), 64 + np.arange(20)], np.arange(21, 51), 64 + np.arange(20, 26))
    )
    res = anneal(start, lambda m: 1.0 if m.spans_chips() else 2.0, budget_s=5, max_evals=2, extra_starts=[split])
    assert res.best_value == 1.0 and res.best.spans_chips()


def test_a_split_layers_summary_names_every_chip_it_spans(tmp_path, capsys):
    """The run's summary.json (and so its report page) names every chip of a layer split over chips: layer 1
    of the split file on chips 0 and 1, the others on chip 0 (before, ``chip_of_layer`` said [0, 0, 0])."""
    path = _split_file(tmp_path, load_machine("gc200").tiles_per_chip)
    out = tmp_path / "run"
    args = ["run", *NET, "--machine", "gc200", "--chips", "2", "--mapping", str(path), "--stack", "tt-metal"]
    assert main([*args, "--quiet", "--out", str(out)]) == 0
    network = next(s for s in json.loads((out / "summary.json").read_text())["sections"] if s["title"] == "Network")
    mp = network["data"]["mapping"]
    assert mp["chips_of_layer"] == [[0, 1], [0], [0]] and mp["chips_used"] == 2
    assert "chip_of_layer" not in mp
    assert network["lines"][0].endswith("Layers on chips: layer 1 on chips 0-1; layers 2-3 on chip 0.")
    assert "layer 1 on chips 0-1" in (out / "summary.md").read_text()
