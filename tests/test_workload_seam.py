"""Issue 24: a new workload and a new fabric need only new code and one registration line.

The toy workload and the toy fabric below are the worked examples of CONTRIBUTING.md ("Adding a
workload", "Adding a fabric"): nothing in tilesim/ knows them, and their times are counted by hand.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from tilesim.errors import ConfigError
from tilesim.machine.description import Fabric, Machine, load_machine, machine_from_dict, preset_text
from tilesim.machine.fabric import make_fabric
from tilesim.workload import Workload, time_workload

# --- the toy workload and the toy fabric: CONTRIBUTING.md's worked examples, the files themselves ------


def _example(name: str):
    """The module ``docs/examples/<name>.py`` (loaded once: a fabric registers its kind on import)."""
    import importlib.util
    import sys
    from pathlib import Path

    key = f"tilesim_example_{name}"
    if key not in sys.modules:
        path = Path(__file__).resolve().parents[1] / "docs" / "examples" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(key, path)
        assert spec is not None and spec.loader is not None
        sys.modules[key] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules[key]


HaloRing = _example("halo_ring").HaloRing
ToyRingFabric = _example("toy_ring_fabric").ToyRingFabric


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
