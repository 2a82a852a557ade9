"""B1–B8 experiment scripts in --quick mode: they run, write CSV + PNG, and the CSV shows the claim."""

import pytest
from conftest import run_quick_experiments

SCRIPTS = [
    "b1_exchange_distance",
    "b2_skewed_matmul",
    "b3_memory_compute_sets",
    "b4_table1",
    "b5_table4_params",
    "b6_butterfly_breakeven",
    "b7_table4_times",
    "b8_matmul_fit",
]


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    return run_quick_experiments(tmp_path_factory.mktemp("experiments"), SCRIPTS)


def test_b1_distance_independent_on_ipu_not_on_mesh(outputs):
    rows = outputs["b1_exchange_distance"]
    cyc = {(r["machine"], r["pair"], int(r["bytes"])): float(r["cycles"]) for r in rows}
    sizes = {int(r["bytes"]) for r in rows}
    for b in sizes:
        assert cyc[("gc200", "near", b)] == cyc[("gc200", "far", b)]
        assert cyc[("mesh-demo", "far", b)] > cyc[("mesh-demo", "near", b)]
    assert cyc[("gc200", "near", max(sizes))] > cyc[("gc200", "near", min(sizes))]  # size matters


def test_b2_memory_limit_is_reached_and_marked(outputs):
    rows = outputs["b2_skewed_matmul"]
    assert len([r for r in rows if r["fits"] == "True"]) >= 3
    assert any(r["fits"] == "False" for r in rows)


@pytest.mark.xfail(
    strict=True,
    reason="not reproduced within 10 % since every dense matmul uses PopLibs' AMP estimate and the supertile "
    "bus sharing: 30.5-34.8 TFLOP/s over m/n = 2^-10 ... 2^10 (1.14x; 1.00x with the tessellate-ipu fit), "
    "see experiments/README.md B2",
)
def test_b2_flat_throughput_until_memory_limit(outputs):
    fit = [float(r["gflops"]) for r in outputs["b2_skewed_matmul"] if r["fits"] == "True"]
    assert max(fit) / min(fit) < 1.1


def test_b3_overhead_grows_with_compute_sets(outputs):
    rows = [r for r in outputs["b3_memory_compute_sets"] if r["kind"] == "butterfly"]
    cs = [int(r["compute_sets"]) for r in rows]
    over = [int(r["overhead_bytes"]) for r in rows]
    assert cs == sorted(cs) and cs[0] < cs[-1]
    assert over == sorted(over) and over[0] < over[-1]
    for r in outputs["b3_memory_compute_sets"]:
        if r["fits"] == "True":
            assert int(r["control_code_bytes"]) > 0 and int(r["vertex_state_bytes"]) > 0


def test_b4_table1_within_five_percent(outputs):
    for r in outputs["b4_table1"]:
        assert abs(float(r["ratio"]) - 1) < 0.05, r


def test_b5_counts_exact(outputs):
    rows = outputs["b5_table4_params"]
    assert len(rows) == 6
    for r in rows:
        assert int(r["params"]) == int(r["paper_params"])
    assert round(float(next(r for r in rows if r["method"] == "butterfly")["compression_pct"]), 1) == 98.5


def test_b6_break_even_within_factor_two(outputs):
    from experiments.b6_butterfly_breakeven import break_even

    be = break_even(outputs["b6_butterfly_breakeven"], "butterfly", "_pt_host")  # PopTorch + host I/O, as measured
    assert be is not None and 512 <= be <= 2048, be


@pytest.mark.xfail(
    strict=True,
    reason="not reproduced since every dense matmul uses PopLibs' AMP estimate: the fused butterfly beats dense "
    "from N = 64 (paper 1024; 512 with the tessellate-ipu fit), see experiments/README.md B6",
)
def test_b6_fused_break_even_within_factor_two(outputs):
    from experiments.b6_butterfly_breakeven import break_even

    be = break_even(outputs["b6_butterfly_breakeven"], "butterfly", "")
    assert be is not None and 512 <= be <= 2048, be


def test_b7_fused_order(outputs):
    r = {row["method"]: float(row["ratio"]) for row in outputs["b7_table4_times"]}
    assert r["low-rank"] < r["baseline"] and r["circulant"] < r["baseline"]
    assert all(row["fits"] == "True" and row["pt_fits"] == "True" for row in outputs["b7_table4_times"])


def test_b7_fused_pixelfly_slowest(outputs):
    r = {row["method"]: float(row["ratio"]) for row in outputs["b7_table4_times"]}
    assert r["pixelfly"] > r["baseline"] and r["pixelfly"] == max(r.values())


def test_b7_poptorch_lowering_reproduces_butterfly_and_fastfood(outputs):
    r = {row["method"]: float(row["pt_with_host_ratio"]) for row in outputs["b7_table4_times"]}
    assert r["low-rank"] < r["baseline"] < r["butterfly"] < r["fastfood"]  # paper: 0.88 < 1 < 1.53 < 2.46
    assert 1.0 < r["butterfly"] < 2 * 1.53 and 2.46 / 2 < r["fastfood"] < 2 * 2.46
    assert r["pixelfly"] > r["baseline"]


def test_b7_paper_order_baseline_butterfly_pixelfly(outputs):
    # pixelfly lowered op by op from its PyTorch code (PopTorch's per-bag embedding_bag); see README B7
    r = {row["method"]: float(row["pt_with_host_ratio"]) for row in outputs["b7_table4_times"]}
    assert r["baseline"] < r["butterfly"] < r["fastfood"] < r["pixelfly"]  # paper: 1 < 1.53 < 2.46 < 2.90


def test_b8_4096_layer_fits_and_runs_near_published_rates(outputs):
    rows = outputs["b8_matmul_fit"]
    mb = {(r["precision"], float(r["memory_proportion"])): r for r in rows if r["panel"] == "max_batch"}
    assert int(mb[("fp16", 0.6)]["max_batch_within_proportion"]) >= 2048  # PopLibs runs (2048, 4096, 4096) fp16
    assert int(mb[("fp32", 0.6)]["max_batch_within_proportion"]) >= 1024  # and (1024, 4096, 4096) fp32
    tf = {int(r["batch"]): float(r["tflops"]) for r in rows if r["panel"] == "batch" and r["precision"] == "fp16"}
    assert 150 < tf[1024] < 260 and 150 < tf[2048] < 260
    sparse = sorted((float(r["density"]), float(r["time_s"])) for r in rows if r["panel"] == "density")
    assert all(r["fits"] == "True" for r in rows if r["panel"] == "density")
    assert [t for _, t in sparse] == sorted(t for _, t in sparse) and sparse[0][1] < sparse[-1][1]
