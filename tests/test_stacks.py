"""Issue 38 part 1: the execution stack between the SNN workload and the machine.

Every preset builds the step as its vendor's software would (IPU presets: Poplar, today's model;
Tenstorrent: TT-Metal; Cerebras: CSL), a 2-tile toy of each stack is counted by hand, and the
dW worker copies come from the stack and the machine, not a constant."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tilesim.errors import ConfigError
from tilesim.machine.description import Chip, Fabric, load_machine, preset_names
from tilesim.models.snn.placement.contiguous import contiguous_placement
from tilesim.models.snn.placement.fit import to_placement
from tilesim.models.snn.stacks import STACK_CLASSES, STACKS, Stack, stack_for, stack_name
from tilesim.models.snn.stacks.tt_program import dispatch_s
from tilesim.models.snn.step.counters import count_work
from tilesim.models.snn.step.memory import snn_memory
from tilesim.models.snn.step.structure import D2H_BYTES_PER_S
from tilesim.models.snn.step.timing import STEPS_PER_EXECUTION, default_costs
from tilesim.models.snn.step.workload import SnnStep
from tilesim.models.snn.training.activity import fixed_activity
from tilesim.models.snn.training.network import NetworkConfig

# the IPU stack's rows: the Keras/TensorFlow host round trip, the PopLibs sequence copies, the
# reduction of the six per-worker dW copies
IPU_ROWS = ("host: variable sync", "fwd: update sequences", "bwd: slice sequences", "dW reduce")
TINY = dict(layers="20-10-4", batch=2, timesteps=3, input_cap=4, caps=(4, 2), activity="fixed")


def _step(machine, stack: str = "auto", form: str = "compact", **kw):
    """The tiny network's fixed-activity step on ``machine`` (2 neurons per tile, contiguous)."""
    cfg = NetworkConfig(**{**TINY, **kw})
    pl = to_placement(
        contiguous_placement(cfg.layers[1:], 2, machine.chips, tiles_per_chip=machine.tiles_per_chip), machine
    )
    counters = count_work(fixed_activity(cfg), pl, per_step=True)
    return cfg, pl, SnnStep(cfg, pl, counters, form=form, stack=stack)


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_runs_its_vendors_stack(name):
    m = load_machine(name)
    ipu = m.fabric.kind == "all-to-all"
    assert stack_name(m) == ("poplar" if ipu else "tt-metal" if name.startswith(("wormhole", "blackhole")) else "csl")
    cfg, pl, step = _step(m, form="peaks")
    prog = step.program(m)
    labels = set(prog.labels)
    folded = float(np.sum(prog.sync_extra_cycles))  # the PopLibs calls folded into the rows
    entries = stack_for(m).memory(cfg, pl, m).explain_tile(int(pl.tile_of_neuron[0][0]), 50)
    has_copies = any("dw worker copies" in label for label, _, _ in entries)
    if ipu:
        assert set(IPU_ROWS) <= labels and folded > 0 and has_copies
    else:
        assert not labels & set(IPU_ROWS), labels & set(IPU_ROWS)
        assert folded == 0 and not has_copies
        assert any(lab.startswith("host: input") for lab in labels)


def _toy(preset: str, **fabric) -> object:
    """``preset`` cut down to one chip of 2 tiles (tile 0 outside the op, the network on tile 1)."""
    m = load_machine(preset)
    chip = replace(m.chip, tiles=2)
    fab = Fabric(kind=m.fabric.kind, **fabric) if fabric else m.fabric
    return replace(m, name=f"{preset}-2", chip=chip, fabric=fab, system=replace(m.system, chips=1))


TOYS = {
    "poplar": ("gc200", {}),
    "tt-metal": ("wormhole-n150", dict(cols=2, rows=1, hop_cycles=9, link_bytes_per_cycle=32)),
}
"""The two-tile toys (csl lays out its own weight blocks on a grid: its toy is tests/test_stack_csl.py)."""


@pytest.mark.parametrize("stack", sorted(TOYS))
def test_each_stack_on_a_two_tile_toy_counted_by_hand(stack):
    preset, fabric = TOYS[stack]
    m = _toy(preset, **fabric)
    assert isinstance(m.chip, Chip) and m.total_tiles == 2
    # one layer of 2 neurons on tile 1, fan-in 3: 6 weights; T 2, B 1, input cap 2, Adam
    cfg, pl, step = _step(m, form="dense", layers="3-2", batch=1, timesteps=2, input_cap=2, caps=(2,))
    prog = step.program(m)
    costs = default_costs()
    c = costs.coefficients
    labels = list(prog.labels)
    assert labels == [row.label for row in stack_for(m, stack).rows()]
    per_row = {lab: prog.compute_cycles[prog.label_id == i][:, 1].sum() for i, lab in enumerate(labels)}
    upd = 6.0  # weights on tile 1 (fan-in 3 x 2 neurons)
    W = m.chip.workers_per_tile
    infeed = 2 * 1 * 4.0 * (2 + 1) + 4.0 * 1  # T·B·4·(input_cap+1) + 4·B
    if stack == "poplar":
        assert W == 6
        # dW reduce: zero 6 copies and add 5 into one, over 6 worker vertices, + its 3 compute sets (2 + L)
        work = c["dw_reduce_adds"] * 5 * upd / 6 + c["dw_zero_writes"] * 6 * upd / 6
        want = work * 6 / 6 + 1 * m.chip.supervisor_overhead_cycles + 3 * c["compute_set_cycles"]
        assert per_row["dW reduce"] == pytest.approx(want, rel=1e-12)
        # host: the weights and Adam's two slots, device to host and back at the fitted rate, once per epoch
        per_byte = 2 * c["host_copy_ns_per_byte"] * 1e-9 * m.clock_hz
        assert per_row["host: variable sync"] == pytest.approx(per_byte * 4 * 3 * upd / STEPS_PER_EXECUTION, rel=1e-12)
        assert c["host_copy_ns_per_byte"] * 1e-9 > 1 / D2H_BYTES_PER_S  # slower than documented: the fit
        assert list(prog.host_bytes) == [infeed] and list(prog.host_step) == [0]
        assert prog.sync_extra_cycles.sum() > 0  # the folded PopLibs calls
    else:  # tt-metal: its own kernels and costs (tests/test_stack_tt_metal.py counts them by hand)
        assert W == 1 and "dW reduce" not in per_row and "host: variable sync" not in per_row
        assert prog.sync_extra_cycles.sum() == 0 and prog.exchange_extra_cycles.sum() == 0
        # the input batch to DRAM and the program's measured dispatch before the step, the loss (4·B) after it
        assert per_row["host: input to DRAM, dispatch"] == pytest.approx(dispatch_s(m) * m.clock_hz, rel=1e-12)
        assert list(prog.host_bytes) == [infeed, 4.0] and list(prog.host_step) == [0, prog.supersteps - 1]


def test_dw_copies_come_from_the_stack_and_the_machine():
    """The issue: 1.47 MB of the n150's overflow came from six per-worker dW copies it would never
    make. On a Tensix core the dW is one copy (1x the weights); a GC200 tile keeps 6 + 1."""
    cfg = NetworkConfig(layers="700-1462-1460-20", batch=48, timesteps=100, input_cap=48)
    w = 4 * 1462 * 42  # layer 2's weights on a tile of 42 neurons
    n150 = load_machine("wormhole-n150")
    pl = to_placement(contiguous_placement(cfg.layers[1:], 42, 1, tiles_per_chip=72), n150)
    t = int(pl.tile_of_neuron[1][0])
    led = stack_for(n150).memory(cfg, pl, n150)
    assert led.by_category(t)["variables:gradients"] == w  # one dW, no worker copies
    gc200 = load_machine("gc200")
    pl2 = to_placement(contiguous_placement(cfg.layers[1:], 42, 1, tiles_per_chip=1472), gc200)
    assert snn_memory(cfg, pl2, gc200).by_category(t)["variables:gradients"] == 7 * w


def test_stack_option_overrides_the_vendor_and_rejects_unknown():
    gc200, n150 = load_machine("gc200"), load_machine("wormhole-n150")
    assert stack_name(gc200, "tt-metal") == "tt-metal" and stack_name(n150, "poplar") == "poplar"
    assert stack_name(load_machine("mesh-demo")) == "csl"  # no vendor, a mesh without DRAM
    assert stack_name(replace(n150, vendor="")) == "tt-metal"  # no vendor, DRAM beside the cores
    assert stack_name(replace(gc200, vendor="")) == "poplar"  # a user's IPU file: today's model
    with pytest.raises(ConfigError, match="stack"):
        stack_name(gc200, "cuda")
    with pytest.raises(ConfigError, match="vendor"):
        replace(gc200, vendor="nvidia")
    # poplar on a Tensix machine: the IPU rows come back, with the machine's one worker (one dW copy)
    _, _, step = _step(n150, stack="poplar", form="peaks")
    assert set(IPU_ROWS) <= set(step.program(n150).labels)
    assert stack_for(n150, "poplar").traits.dw_copies == 1


def _stack_name_compares(path) -> list:
    """Comparisons (``==``, ``!=``, ``in``) of a stack's name literal in the Python file ``path``."""
    import ast

    names = set(STACKS)
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Compare):
            continue
        for side in (node.left, *node.comparators):
            consts = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
            if any(isinstance(c, ast.Constant) and c.value in names for c in consts):
                out.append(f"{path}:{node.lineno}")
    return out


def test_the_stack_protocol_is_the_only_seam():
    """Issue 49 part 1: a stack is an object passed down (one class per stack, one file each, each a
    :class:`Stack`); no code outside ``models/snn/stacks/`` compares a stack's name."""
    root = Path(__file__).resolve().parents[1]
    stacks_dir = root / "models" / "snn" / "stacks"
    files = [
        p
        for d in ("tilesim", "models", "mapping", "experiments", "benchmarks")
        for p in (root / d).rglob("*.py")
        if stacks_dir not in p.parents
    ]
    assert len(files) > 100
    assert [hit for p in files for hit in _stack_name_compares(p)] == []
    for name, cls in STACK_CLASSES.items():
        st = cls.from_machine(load_machine("gc200"))
        assert isinstance(st, Stack) and st.name == name
        assert (stacks_dir / f"{name.replace('-', '_')}.py").exists()
        assert cls.describe().startswith(name) and cls.assumptions()
