"""``tilesim shl | layer | exchange-bench``: JSON keys, exit codes, one-line errors."""

import json

import numpy as np
import pytest

from tilesim.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_shl_json_keys(capsys):
    code, out, _ = run(capsys, "shl", "--method", "butterfly", "--json")
    assert code == 0
    d = json.loads(out)
    for key in ("params", "max_tile_bytes", "fits", "step_s"):
        assert key in d
    assert d["params"] == 16_390 and d["fits"] is True and d["step_s"] > 0
    assert set(d["part_s"]) >= {"hidden-fwd", "hidden-bwd", "update"}


def test_layer_json_and_text(capsys):
    code, out, _ = run(capsys, "layer", "--kind", "dense", "--n", "1000", "--json")
    d = json.loads(out)
    assert code == 0 and d["params"] == 1000 * 1000 + 1000
    assert d["forward_s"] > 0 and d["backward_s"] > 0
    code, out, _ = run(capsys, "layer", "--kind", "fastfood", "--n", "256")
    assert code == 0 and "compute sets" in out


def test_exchange_bench_json(capsys):
    code, out, _ = run(
        capsys,
        "exchange-bench",
        "--machine",
        "gc200",
        "--src",
        "0",
        "--dst",
        "1,644",
        "--bytes",
        "64,4096,65536",
        "--json",
    )
    rows = json.loads(out)
    assert code == 0 and len(rows) == 6
    assert set(rows[0]) >= {"src", "dst", "bytes", "cycles"}
    by = {(r["dst"], r["bytes"]): r["cycles"] for r in rows}
    assert by[(1, 4096)] == by[(644, 4096)] == 100 + 4096 / 4


@pytest.mark.parametrize(
    "argv,match",
    [
        (("layer", "--kind", "butterfly", "--n", "1000"), r"n = 1000: must be a power of two"),
        (("layer", "--kind", "dense", "--n", "0"), r"--n = 0: must be >= 1"),
        (("shl", "--method", "baseline", "--batch", "0"), r"--batch = 0: must be >= 1"),
        (("exchange-bench", "--machine", "mesh-demo", "--dst", "1,644"), r"--dst = 644: must be a tile in 0..255"),
        (("shl", "--method", "baseline", "--machine", "nosuch"), r"nosuch"),
        (("layer", "--kind", "low-rank", "--n", "64", "--operands", "in-place"), r"--operands = 'in-place': applies"),
        (
            ("layer", "--kind", "dense", "--n", "64", "--batch", "4", "--precision", "fp16", "--machine", "mesh-demo"),
            r"flops_per_cycle = 4.0: is below one fp16 input channel per conv unit",
        ),
    ],
)
def test_bad_input_exits_2_without_traceback(capsys, argv, match):
    import re

    code, _, err = run(capsys, *argv)
    assert code == 2
    assert "Traceback" not in err and re.search(match, err), err


# ---- issue 21 / issue 20 -----------------------------------------------------------------------------
@pytest.mark.parametrize("batch,precision", [("2048", "fp16"), ("1024", "fp32")])
def test_issue21_layers_fit_with_a_plan(capsys, batch, precision):
    code, out, _ = run(
        capsys,
        "layer",
        "--kind",
        "dense",
        "--n",
        "4096",
        "--batch",
        batch,
        "--machine",
        "bow",
        "--precision",
        precision,
        "--forward-only",
        "--json",
        "--explain",
    )
    d = json.loads(out)
    assert code == 0 and d["fits"] is True
    text = "\n".join(d["explain"])
    assert "serial splits (S_k, S_n)" in text and "phase matmul" in text


def test_layer_block_sparse_and_options(capsys):
    code, out, _ = run(
        capsys,
        "layer",
        "--kind",
        "block-sparse",
        "--n",
        "4096",
        "--batch",
        "2048",
        "--machine",
        "bow",
        "--precision",
        "fp16",
        "--density",
        "1/16",
        "--block",
        "16",
        "--forward-only",
        "--explain",
    )
    assert code == 0 and "static block-sparse matmul" in out and "fits = True" in out
    # --explain says why the sparse layer is faster or slower than the dense one of the same shape
    import re

    from tilesim.models.linear.timing import time_layer

    m = re.search(r"sparse ([\d,.]+) us, dense ([\d,.]+) us: sparse ([\d.]+)x (faster|slower)", out)
    assert m, out
    dense = time_layer("dense", 4096, 2048, "bow", precision="fp16", backward=False)
    assert float(m.group(2).replace(",", "")) == pytest.approx(dense.step_s * 1e6, abs=0.06)
    sp, de = (float(m.group(i).replace(",", "")) for i in (1, 2))
    assert float(m.group(3)) == pytest.approx(max(sp, de) / min(sp, de), abs=0.01)
    assert "the difference is mostly" in out and "per useful multiply-add" in out
    code, _, err = run(capsys, "layer", "--kind", "dense", "--n", "256", "--density", "0.5")
    assert code == 2 and "--density/--block = 0.5: only apply to --kind block-sparse or dynamic-sparse" in err
    code, _, err = run(capsys, "layer", "--kind", "dense", "--n", "256", "--memory-proportion", "2")
    assert code == 2 and "memory_proportion = 2.0: must be in [0, 1]" in err


def test_layer_that_exceeds_the_chip_is_a_clear_error(capsys):
    code, _, err = run(
        capsys,
        "layer",
        "--kind",
        "dense",
        "--n",
        "65536",
        "--batch",
        "4096",
        "--machine",
        "bow",
        "--precision",
        "fp16",
        "--forward-only",
    )
    assert code == 2 and "Traceback" not in err
    # 65536^2 fp16 weights alone are 8.6 GB, 9x the chip's SRAM: refused before any plan is searched
    assert "n = 65536: a dense layer of batch 4096 holds at least" in err and "of SRAM on bow's 1,472 tiles" in err
    assert "give a smaller n (or batch), fp16, or a machine with more SRAM per chip" in err


def test_shl_dense_is_the_baseline(capsys):
    code, out, err = run(capsys, "shl", "--method", "dense", "--json")
    d_dense = json.loads(out)
    assert code == 0 and err == ""
    code, out, err = run(capsys, "shl", "--method", "baseline", "--json")
    assert code == 0 and "paper's name of 'dense'" in err
    assert json.loads(out)["step_s"] == d_dense["step_s"]


def test_layer_dynamic_sparse_runs_and_explains(capsys):
    code, out, _ = run(
        capsys, "layer", "--kind", "dynamic-sparse", "--n", "1024", "--batch", "64", "--precision", "fp16",
        "--density", "1/16", "--block", "1", "--explain",
    )  # fmt: skip
    assert code == 0 and "dynamic sparse matmul (m, k, n) = (1024, 1024, 64), block 1" in out
    assert "partition (P_x, P_y, P_z)" in out and "backward" in out and "versus the dense layer" in out
    assert "the GradA pass (input gradient)" in out and "forward" in out and "GradA" in out.split("estimate")[1]
    code, out, _ = run(capsys, "layer", "--kind", "dynamic-sparse", "--n", "1024", "--block", "16", "--json")
    assert code == 0 and json.loads(out)["kind"] == "dynamic-sparse" and json.loads(out)["block"] == 16


def test_layer_in_place_reproduces_validates_dense_row(capsys, tmp_path):
    # one definition of the dense matmul: `tilesim layer --operands in-place` is the number `tilesim validate`
    # predicts for the PopSparse paper's dense row (same AMP/reduce/cast estimates, bus sharing, operand layout)
    import csv

    from tilesim.models.linear.measured import shipped_sparse_cases, validate_sparse

    (path,) = [p for p in shipped_sparse_cases() if p.name == "popsparse_bow.csv"]
    with open(path) as fh:
        rows = [r for r in csv.DictReader(fh) if r["case"] == "dense_fp16_1024_n4"]
    one = tmp_path / "row.csv"
    with open(one, "w", newline="") as fh:
        w = csv.DictWriter(fh, list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    (got,) = validate_sparse(one)
    m, n = int(rows[0]["m"]), int(rows[0]["n"])
    flags = ("layer", "--kind", "dense", "--n", str(m), "--batch", str(n), "--precision", "fp16", "--forward-only")
    steps = {}
    for operands in ("in-place", "previous-op"):
        code, out, _ = run(capsys, *flags, "--machine", rows[0]["machine"], "--operands", operands, "--json")
        assert code == 0
        steps[operands] = json.loads(out)["step_s"]
    tflops = 2.0 * m * m * n / steps["in-place"] / 1e12
    assert abs(tflops - got["predicted"]) <= 0.005 + 1e-9, (tflops, got)  # validate prints 2 decimals
    assert steps["previous-op"] > steps["in-place"]  # a layer whose input comes from the previous op moves it


def test_layer_pattern_matmul_bench_times_the_benchmarks_own_layout(capsys):
    # issue 40: --pattern matmul_bench plans createProblem's pattern (seed 123), not the default random draw
    from tilesim.models.linear.benchpattern import benchmark_layout
    from tilesim.models.linear.timing import BlockSparseConfig, time_layer

    argv = ("layer", "--kind", "block-sparse", "--n", "1024", "--batch", "256", "--machine", "bow",
            "--precision", "fp16", "--density", "1/8", "--forward-only", "--json")  # fmt: skip
    code, out, _ = run(capsys, *argv, "--pattern", "matmul_bench")
    got = json.loads(out)
    cfg = BlockSparseConfig(density=1 / 8, pattern="matmul_bench")
    assert code == 0 and got["pattern"] == "matmul_bench"
    assert np.array_equal(cfg.layout(1024), benchmark_layout(1024, 1024, 16, 1 / 8))
    want = time_layer("block-sparse", 1024, 256, "bow", precision="fp16", backward=False, block_sparse=cfg)
    assert got["step_s"] == pytest.approx(want.step_s)
    code, out, _ = run(capsys, *argv)
    assert code == 0 and json.loads(out)["pattern"] == "random" and json.loads(out)["step_s"] != got["step_s"]
    code, _, err = run(capsys, "layer", "--kind", "dynamic-sparse", "--n", "256", "--pattern", "matmul_bench")
    assert code == 2 and "--pattern = 'matmul_bench': only applies to --kind block-sparse" in err
