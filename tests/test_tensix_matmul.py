"""Dense matmul on Tensix cores: the per-core plan counted by hand, each mechanism's cost, L1
refusals, and the measured GEMM tables (Wormhole fitted, Blackhole held out)."""

import json
from dataclasses import replace

import numpy as np
import pytest

from tilesim.errors import ConfigError, SramOverflowError
from tilesim.machine.description import load_machine
from tilesim.models.tensix.matmul import MatmulCosts, MatmulSpec, load_matmul_costs, plan_matmul, time_matmul
from tilesim.models.tensix.measured import fit_matmul, shipped_matmul_cases, validate_matmul

WH = load_machine("wormhole-n150")


def test_plan_counted_by_hand():
    """1024 x 2048 x 512 BFLOAT16 HiFi2 on 4 x 2 cores: 32 x 64 x 16 tiles; per core 16 x 4 output
    tiles (32 / 2 rows, 16 / 4 columns), sub-block 2 x 4 (h·w = 8, widest); 16·4·64 = 4096 tile
    products of 16 x 2 cycles = 131,072 math cycles; unpack 4096 · (1/2 + 1/4) · 2048 / 128 =
    49,152 cycles; DRAM: (1024·2048 + 2048·512 + 1024·512) · 2 B = 7,340,032 B at 288 GB/s and
    1 GHz = 25,486 cycles (not the bound)."""
    spec = MatmulSpec(1024, 2048, 512, "BFLOAT16", "HiFi2", grid_x=4, grid_y=2)
    plan = plan_matmul(spec, WH, MatmulCosts(unpack_bytes_per_cycle=128.0, launch_cycles=1000.0))
    assert (plan.mt, plan.kt, plan.nt, plan.block_m, plan.block_n, plan.subblock) == (32, 64, 16, 16, 4, (2, 4))
    assert plan.math_cycles == 131072 and plan.unpack_cycles == 49152
    assert plan.dram_bytes == 7340032 and plan.dram_cycles == pytest.approx(7340032 / 288e9 * 1e9)
    assert plan.bound == "compute (math + unpack)"
    t, _, result = time_matmul(spec, WH, MatmulCosts(128.0, 1000.0))
    assert t * 1e9 == pytest.approx(1000 + 131072 + 49152 + WH.chip.sync_cycles)
    assert result.breakdown_s()["compute"] * 1e9 == pytest.approx(131072 + 49152)


def test_the_multicasts_are_timed_on_the_noc_counted_by_hand():
    """64 x 2048 x 128 BFLOAT16 LoFi on 4 x 2 cores of an n150 (8 x 9 torus, 32 B per cycle per port
    and link, 9 cycles per hop, 100 cycles of NoC set-up), every operand in L1: 2 x 64 x 4 tiles, one
    output tile per core. in0: each grid row's first core multicasts its 1 x 64 tiles, 131,072 B, to
    the row's other three cores (one tree per row, the rows' trees share no link): 131,072 / 32 =
    4,096 cycles, the farthest 3 hops away: 100 + 4,096 + 27 = 4,223. in1, on the other NoC: each
    column's first core sends its 64 x 1 tiles down one hop: 100 + 4,096 + 9 = 4,205. The core's
    math + unpack, 64 x 16 + 64 x 2 x 2,048 / 128 = 3,072 cycles, hide behind the slower, 4,223."""
    spec = MatmulSpec(64, 2048, 128, "BFLOAT16", "LoFi", grid_x=4, grid_y=2, in0_storage="L1", out_storage="L1")
    spec = replace(spec, in1_storage="L1")
    costs = MatmulCosts(unpack_bytes_per_cycle=128.0, launch_cycles=1000.0)
    plan = plan_matmul(spec, WH, costs)
    assert (plan.block_m, plan.block_n, plan.kt, plan.dram_cycles) == (1, 1, 64, 0.0)
    assert plan.math_cycles + plan.unpack_cycles == 3072
    assert plan.noc_cycles == 4223 and plan.noc_bytes == 2 * 131072 + 4 * 131072
    assert plan.bound == "NoC multicast"
    t, _, _ = time_matmul(spec, WH, costs)
    assert t * 1e9 == pytest.approx(1000 + 4223 + WH.chip.sync_cycles)
    alone = plan_matmul(replace(spec, grid_x=1, grid_y=1), WH, costs)
    assert alone.noc_cycles == 0 and alone.noc_bytes == 0  # one core multicasts nothing


def test_each_mechanism_costs_time():
    spec = MatmulSpec(2048, 2048, 2048, "BFLOAT16", "HiFi2")
    costs = load_matmul_costs()
    full = time_matmul(spec, WH, costs)[0]
    assert time_matmul(spec, WH, replace(costs, launch_cycles=0.0))[0] < full
    assert time_matmul(spec, WH, replace(costs, unpack_bytes_per_cycle=1e9))[0] < full
    assert time_matmul(replace(spec, math_fidelity="LoFi"), WH, costs)[0] < full
    assert time_matmul(replace(spec, dtype="BFLOAT8_B"), WH, costs)[0] < full  # fewer bytes to unpack
    slow_dram = replace(WH, chip=replace(WH.chip, dram_bytes_per_s=1e9))
    t, plan, _ = time_matmul(spec, slow_dram, costs)
    assert plan.bound == "DRAM" and t > 10 * full


def test_l1_overflow_and_a_machine_without_a_matrix_engine_are_refused():
    with pytest.raises(SramOverflowError, match="matmul blocks"):
        time_matmul(MatmulSpec(8192, 8192, 8192, in0_storage="L1", out_storage="L1", grid_x=2, grid_y=2), WH)
    with pytest.raises(ConfigError, match="has no matrix engine"):
        time_matmul(MatmulSpec(64, 64, 64), load_machine("bow"))
    with pytest.raises(ConfigError, match=r"math_fidelity = 'HiFi8': must be one of LoFi, HiFi2, HiFi3, HiFi4"):
        MatmulSpec(64, 64, 64, math_fidelity="HiFi8")


def test_shipped_constants_are_the_wormhole_fit_and_blackhole_is_held_out():
    fit = fit_matmul(shipped_matmul_cases())
    costs = load_matmul_costs()
    assert costs.unpack_bytes_per_cycle == pytest.approx(fit.tables["matmul"]["unpack_bytes_per_cycle"], rel=2e-3)
    assert costs.launch_cycles == pytest.approx(fit.tables["matmul"]["launch_cycles"], rel=2e-3)
    rows = validate_matmul(shipped_matmul_cases()[0])
    fitted = [abs(r["error_pct"]) for r in rows if r["use"] == "calibrate"]
    held = [abs(r["error_pct"]) for r in rows if r["use"] == "check"]
    assert all(r["machine"] == "wormhole-n150" for r in rows if r["use"] == "calibrate")
    assert len(fitted) == 47 and len(held) == 78
    assert np.mean(fitted) < 12 and np.mean(held) < 25


def test_matmul_command(capsys, tmp_path):
    from tilesim.cli import main

    assert main(["matmul", "--m", "1024", "--k", "1024", "--n", "1024", "--grid", "8x8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["per_core_block_tiles"] == [4, 4] and out["predicted_ns"] > 0
    assert main(["matmul", "--grid", "8by8"]) == 2
    assert "--grid = '8by8': must be COLSxROWS" in capsys.readouterr().err
    bad = tmp_path / "mine.csv"
    lines = shipped_matmul_cases()[0].read_text().splitlines()
    bad.write_text("\n".join([lines[0], lines[1].replace(",HiFi2,", ",HiFi9,", 1), lines[2]]) + "\n")
    rows = validate_matmul(bad)
    assert rows[0]["problem"] and "HiFi9" in rows[0]["problem"] and rows[1]["predicted"] > 0
    assert main(["calibrate", str(shipped_matmul_cases()[0]), "--out", str(tmp_path / "fit.toml")]) == 0
    assert "unpack_bytes_per_cycle" in (tmp_path / "fit.toml").read_text()
