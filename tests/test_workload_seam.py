"""Issue 24: a new workload and a new fabric need only new code and one registration line.

The toy workload and the toy fabric below are the worked examples of CONTRIBUTING.md ("Adding a
workload", "Adding a fabric"): nothing in tilesim/ knows them, and their times are counted by hand.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pytest

from tilesim.errors import ConfigError
from tilesim.machine.description import Fabric, Machine, load_machine, machine_from_dict, preset_text
from tilesim.machine.fabric import OnChipFabric, make_fabric, register_fabric
from tilesim.machine.memory import MemoryLedger
from tilesim.outputs.records import SimResult
from tilesim.program import Program, ProgramBuilder
from tilesim.workload import Section, Workload, time_workload

# --- the toy workload: a 1-D halo exchange between neighbouring tiles ---------------------------


@dataclass(frozen=True)
class HaloRing:
    """Every used tile computes ``cycles`` then sends ``halo_bytes`` to each ring neighbour,
    ``iterations`` times; each tile holds ``cells`` float32 cells."""

    tiles: int
    cycles: float
    halo_bytes: float
    iterations: int
    cells: int
    name: str = "halo-ring"

    def program(self, machine: Machine) -> Program:
        b = ProgramBuilder.for_machine(machine, "halo ring")
        used = np.zeros(machine.total_tiles)
        used[: self.tiles] = 1.0
        traffic = 2 * self.halo_bytes * used  # two neighbours, in and out
        b.superstep("iterate", self.cycles * used, bytes_in=traffic, bytes_out=traffic, repeat=self.iterations)
        return b.build()

    def memory(self, machine: Machine) -> MemoryLedger:
        led = MemoryLedger(machine, remedy="use more tiles")
        tiles = np.arange(self.tiles)
        led.add("variables:state", np.full(self.tiles, 4 * self.cells), tiles, label="cells")
        return led

    def book(self, result: SimResult) -> SimResult:
        return result

    def section(self, result: SimResult) -> Section:
        return Section("halo ring", (f"{self.iterations} iterations",), (("iterations", self.iterations),))


# --- the toy fabric: tiles on a bidirectional ring (the one registration line is the decorator) ---


@register_fabric("toy-ring")
class ToyRingFabric(OnChipFabric):
    """Tiles on a bidirectional ring; a tile's exchange also pays the mean ring distance::

    cycles = fixed + ceil(max port bytes / port bpc) + (tiles / 4) · hop_cycles
    """

    def __init__(self, machine: Machine):
        self.fixed = float(machine.chip.exchange_fixed_cycles)
        self.bpc = float(machine.chip.exchange_bytes_per_cycle)
        self.hop = float(machine.fabric.hop_cycles)
        self.mean_hops = machine.tiles_per_chip / 4

    def exchange_cycles(self, bytes_in, bytes_out, rows_transfers=None):
        peak_in, peak_out = bytes_in.max(axis=2), bytes_out.max(axis=2)
        peak = np.maximum(peak_in, peak_out).astype(np.float64)
        crit = np.where(peak_in >= peak_out, bytes_in.argmax(axis=2), bytes_out.argmax(axis=2))
        cycles = np.where(peak > 0, self.fixed + np.ceil(peak / self.bpc) + self.mean_hops * self.hop, 0.0)
        return cycles, crit

    def point_to_point_cycles(self, src: int, dst: int, nbytes: float) -> float:
        d = abs(src - dst)
        return self.fixed + math.ceil(nbytes / self.bpc) + min(d, self.mean_hops * 4 - d) * self.hop


# -------------------------------------------------------------------------------------------------


def _mesh_demo_as(kind: str) -> Machine:
    m = load_machine("mesh-demo")
    return replace(m, fabric=Fabric(kind=kind, cols=16, rows=16, hop_cycles=3, link_bytes_per_cycle=8))


def test_a_toy_workload_is_a_workload_and_times_as_counted_by_hand():
    w = HaloRing(tiles=8, cycles=1000.0, halo_bytes=256.0, iterations=3, cells=1024)
    assert isinstance(w, Workload)
    m = load_machine("mesh-demo")  # 16x16 mesh, 1 GHz, port 8 B/cycle, fixed 20, sync 40, hop 3
    timed = time_workload(w, m)
    # per iteration: compute 1000 + sync 40 + exchange 20 + drain + hops · 3. The fabric knows only
    # per-tile totals (512 B in and out on tiles 0-7 of row 0), so it assumes proportional traffic:
    # each tile draws 512/8 B from every sender; the link 3 -> 4 carries what tiles 0-3 send to
    # tiles 4-7: 4 · 4 · 64 = 1024 B, 128 cycles at 8 B/cycle (the ports: 64); the longest route 0 -> 7
    # is 7 hops
    per_iter = 1000 + 40 + 20 + 1024 / 8 + 7 * 3
    assert timed.step_s == pytest.approx(3 * per_iter / 1e9, rel=1e-12)
    assert w.memory(m).per_tile()[:8].tolist() == [4096] * 8


def test_a_toy_fabric_registered_by_one_line_times_exchange_by_its_rule():
    m = _mesh_demo_as("toy-ring")
    assert isinstance(make_fabric(m), ToyRingFabric)
    w = HaloRing(tiles=8, cycles=1000.0, halo_bytes=256.0, iterations=3, cells=1024)
    per_iter = 1000 + 40 + 20 + 512 / 8 + (256 / 4) * 3
    assert time_workload(w, m).step_s == pytest.approx(3 * per_iter / 1e9, rel=1e-12)
    # the same workload on the mesh and on the all-to-all rule differs only in the exchange term
    mesh = time_workload(w, load_machine("mesh-demo")).result.breakdown_s()
    ring = time_workload(w, m).result.breakdown_s()
    assert mesh["compute"] == ring["compute"] and mesh["sync"] == ring["sync"]
    assert ring["exchange"] > mesh["exchange"]


def test_an_unregistered_fabric_is_refused_with_the_known_kinds():
    doc = preset_text("mesh-demo").replace('kind = "mesh"', 'kind = "hypercube"')
    from tilesim.io import loads_toml

    with pytest.raises(ConfigError, match=r"fabric.kind.*hypercube.*all-to-all.*mesh"):
        machine_from_dict(loads_toml(doc), "m.toml")


# Words that belong to one workload.
WORKLOAD_WORDS = ("neuron", "neurons", "spike", "snn", "loss", "accuracy", "stencil", "theta2", "synaptic", "halo")
ALLOWED: set = set()


def test_the_core_names_no_workload_concept():
    """Issue 24: tilesim/ knows no workload; a workload's words live in its own package (its report
    section comes from its own Workload.section, through tilesim.workload.record_run)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    found = []
    for path in sorted((root / "tilesim").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for i, line in enumerate(path.read_text().splitlines(), 1):
            for w in re.findall(r"[A-Za-z0-9_]+", line.lower()):
                if w in WORKLOAD_WORDS or w.rstrip("s") in WORKLOAD_WORDS:
                    if (rel, w) not in ALLOWED:
                        found.append(f"{rel}:{i}: {w}")
    assert not found, "\n".join(found)


def test_a_toy_workloads_section_reaches_every_output_without_a_registration(tmp_path):
    """Issue 37: Workload.section is the one way a workload adds to the outputs. The toy HaloRing,
    registered nowhere (no pyproject line), gets its section into summary.json, summary.md and
    report.html through record_run, and a re-render from the stored record is byte-identical."""
    import json

    from tilesim.cli import write_outputs
    from tilesim.outputs.report import load_run, render
    from tilesim.workload import record_run

    m = load_machine("gc200")
    ring = HaloRing(tiles=8, cycles=100.0, halo_bytes=64.0, iterations=3, cells=16)
    timed = time_workload(ring, m)
    record = record_run(ring, timed, ledger=ring.memory(m), settings={"iterations": 3})
    write_outputs(tmp_path, record, timed.result, timed.program, ring.memory(m))
    stored = json.loads((tmp_path / "summary.json").read_text())
    assert stored["workload"] == "halo-ring" and stored["format"] == 2
    assert stored["sections"][0] == {"title": "halo ring", "lines": ["3 iterations"], "data": {"iterations": 3}}
    md = (tmp_path / "summary.md").read_text()
    assert "## halo ring\n\n3 iterations\n" in md and "| iterations | `3` |" in md
    assert "<h2>halo ring</h2>" in (tmp_path / "report.html").read_text()
    back, _ = load_run(tmp_path)
    assert back.sections == record.sections and back.step_s == timed.step_s
    render(tmp_path)
    assert (tmp_path / "summary.md").read_text() == md
