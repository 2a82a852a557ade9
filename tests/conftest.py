from pathlib import Path

import pytest

from tilesim.machine.description import load_machine

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"


def round_machine(tmp_path: Path, chips: int = 2, tiles: int = 4, **over) -> Path:
    """A machine with round numbers (1 GHz, 1 B/cycle links, no latency) for hand-made timelines."""
    system = dict(
        chips=chips,
        link_bytes_per_s=1e9,
        link_efficiency=1.0,
        link_latency_s=0.0,
        pair_links=1,
        vertical_links=1,
        wrap_links=0,
        links_per_chip=4,
        global_sync_ns_per_hop=15.0,
        host_bytes_per_s=1e9,
        host_latency_s=0.0,
    )
    chip = dict(
        tiles=tiles,
        sram_bytes=1000,
        clock_hz=1e9,
        workers_per_tile=6,
        supervisor_overhead_cycles=0,
        fp32_flops_per_cycle=32,
        fp16_flops_per_cycle=128,
        local_bytes_per_cycle=24,
        exchange_bytes_per_cycle=4,
        exchange_fixed_cycles=100,
        sync_cycles=90,
        tiles_per_supertile=1,
    )
    for k, v in over.items():
        (system if k in system else chip)[k] = v

    def fmt(d):
        return "\n".join(f"{k} = {v!r}" if not isinstance(v, str) else f'{k} = "{v}"' for k, v in d.items())

    text = (
        f'name = "round"\n[chip]\n{fmt(chip)}\n[fabric]\nkind = "all-to-all"\n'
        f'[system]\ntopology = "ladder"\n{fmt(system)}\n'
    )
    p = tmp_path / f"round{chips}.toml"
    p.write_text(text)
    return p


@pytest.fixture
def round2(tmp_path):
    return load_machine(round_machine(tmp_path, chips=2))


@pytest.fixture
def round4(tmp_path):
    return load_machine(round_machine(tmp_path, chips=4))


def run_quick_experiments(out: Path, scripts) -> dict:
    """Run every script's ``--quick`` mode into ``out``; rows of each CSV by script name."""
    import importlib

    from experiments.b_common import read_csv

    rows = {}
    for name in scripts:
        mod = importlib.import_module(f"experiments.{name}")
        assert mod.main(["--quick", "--out", str(out)]) == 0
        assert (out / f"{name}.png").stat().st_size > 0
        rows[name] = read_csv(out / f"{name}.csv")
    return rows


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Each phase's report on the test item (``item.rep_call``), so that a fixture can keep evidence
    of a failure (the browser test's screenshot)."""
    outcome = yield
    rep = outcome.get_result()
    setattr(item, f"rep_{rep.when}", rep)
