"""PopSparse as the simulator runs it: the static planner's choice, the dynamic matmul, the paper's cases."""

import csv

import numpy as np
import pytest

from tilesim.errors import ConfigError, SramOverflowError
from tilesim.models.linear.blocksparse import StaticBlockCosts, plan_block_sparse
from tilesim.models.linear.dynamicsparse import DynamicCosts, plan_dynamic_sparse
from tilesim.models.linear.layers import random_block_layout
from tilesim.models.linear.measured import read_sparse_cases, shipped_sparse_cases, validate_sparse
from tilesim.models.linear.planner import PlanTarget
from tilesim.models.linear.popsparse_plan import _tiles_for_bands, band_boundaries, choose_static_partition

BOW = dict(tiles=1472, sram_bytes=638_976)  # a Bow IPU: 6 workers per tile


def test_bands_hold_equal_blocks_greedily():
    # columns with 3, 0, 1, 2, 2, 4 blocks; 12 blocks in 3 bands: at least 4 each, cut where the count reaches it
    bounds, per, widest = band_boundaries(np.array([3, 0, 1, 2, 2, 4]), 3)
    assert bounds == (0, 3, 5, 6) and per == (4, 4, 4) and widest == 2  # band 0 has an empty column


def test_tiles_go_to_bands_in_proportion_in_whole_pairs():
    # 100 and 300 blocks on 10 tiles in pairs: floor(2.5) = 2 tiles, then the rest (8) to the last band
    assert _tiles_for_bands((100, 300), 10, 2) == (2, 8)
    assert _tiles_for_bands((5, 5, 5), 4, 2) == ()  # three bands cannot each have a pair of four tiles


def test_parts_get_at_least_an_equal_share_of_tile_pairs_as_build_tile_partition_for_n():
    # buildTilePartitionForN: max(ceil(G size / (1 + n)) - 1, ceil(G / parts)) grains a part, G = 736 pairs of 1472
    from tilesim.models.linear.popsparse_plan import _tile_partition

    # two parts of 8 columns: the proportional share ceil(736 * 8 / 17) - 1 = 346 is below the equal 368
    assert _tile_partition([8, 8], 1472, 2) == [736, 736]
    # 24, 24, 16 columns: ceil(736 * 24 / 65) - 1 = 271 pairs (542 tiles) beats the equal 246; the last takes 388
    assert _tile_partition([24, 24, 16], 1472, 2) == [542, 542, 388]
    # 10 parts of 28 and one of 4 columns on 32 tiles: 2 pairs each, the tiles run out before the last parts
    assert _tile_partition([28] * 9 + [4], 32, 2) == [4] * 8 + [0, 0]


def test_fast_paths_give_what_the_band_by_band_and_tile_by_tile_ones_give():
    # validate's speed (issue 40): many bands are allocated with NumPy, the planner's codelet estimates take
    # Python integers; both must give the band-by-band allocation and the per-tile array's numbers
    from tilesim.models.linear.popsparse_plan import _tile_wants, _tiles_for_bands_stepwise

    rng = np.random.default_rng(3)
    for _ in range(300):
        per = tuple(int(x) for x in rng.integers(1, int(rng.choice([3, 60, 3000])), int(rng.integers(64, 130))))
        tiles, grain = int(rng.choice([130, 200, 736, 1472])), int(rng.choice([1, 2]))
        stepwise = _tiles_for_bands_stepwise(_tile_wants(per, tiles, grain), tiles, grain)
        assert _tiles_for_bands.__wrapped__(per, tiles, grain) == stepwise
    c = StaticBlockCosts()
    rows, blocks, n = rng.integers(0, 40, 50), rng.integers(0, 90, 50), rng.integers(1, 600, 50)
    for block, eb in ((1, 2), (1, 4), (4, 2), (8, 4), (16, 2), (16, 4)):
        tiled = c.cycles(rows, blocks, n, block, eb, 6, eb)
        assert [c.cycles(int(r), int(b), int(j), block, eb, 6, eb) for r, b, j in zip(rows, blocks, n)] == list(tiled)


def test_static_choice_is_the_cheapest_estimate_within_memory():
    lay = random_block_layout(1024, 1024, 16, 1 / 8, seed=1)
    kw = dict(block=16, element_bytes=2, tiles=64, workers=6, exchange_bytes_per_cycle=4, tile_grain=2,
              vertex=StaticBlockCosts())  # fmt: skip
    free = choose_static_partition(lay, 256, sram_bytes=10**9, memory_proportion=0.6, **kw)
    below = int(free.estimate_bytes / 0.6) - 1  # the fastest candidate no longer meets the bound
    tight = choose_static_partition(lay, 256, sram_bytes=below, memory_proportion=0.6, **kw)
    assert tight.estimate_bytes < free.estimate_bytes and tight.estimate_cycles >= free.estimate_cycles
    with pytest.raises(SramOverflowError, match="no partition fits.*Could not find valid partition"):
        choose_static_partition(lay, 256, sram_bytes=100, memory_proportion=0.6, **kw)


def test_every_partial_row_goes_to_the_result_and_partials_are_the_input_type():
    lay = random_block_layout(1024, 1024, 16, 1 / 16, seed=0)
    plan = plan_block_sparse(lay, 256, PlanTarget(precision="fp16", **BOW), block=16, workers=6)
    assert plan.partials_precision == "fp16"
    reduce = [p for p in plan.phases if p.name in ("sparse-reduce-copy", "sparse-reduce")]
    assert reduce[-1].name == "sparse-reduce"  # reduceMany into the linearly mapped result, whatever the bands
    sent = sum(int(p.bytes_out.sum()) for p in reduce)  # single-source rows by a Copy, the others reduced
    assert sent == int((plan.rows * 16 * plan.part_cols).sum()) * 2 == sum(int(p.bytes_in.sum()) for p in reduce)


def test_dynamic_codelet_estimates_counted_by_hand():
    c = DynamicCosts()
    # block 16, fp16, FP32 partials: load 64 cycles, 2 loads, inner 24 + 4 z - 3; x 2 rows of y 3 blocks, z 5
    sup = 40 + 46 + 56 + 2 * (3 * (64 + 3 + 24) + 1) + 2
    work = 23 + 2 * 3 * 2 * (24 + 4 * 5 - 3)
    assert c.block(2, 3, 5, 16, False, 6) == 6 * work + sup
    # element-wise fp16, z = 8: worker 28 + x (15 + 3 y)
    assert c.elementwise(4, 7, 8, False, 6) == 6 * (28 + 4 * (15 + 3 * 7)) + 30 + 47 + 46


def test_static_explain_names_the_estimate_the_proportion_bounds_and_what_the_plan_holds():
    from tilesim.models.linear.planner import explain_plan

    lay = random_block_layout(1024, 1024, 16, 1 / 4, seed=2)
    plan = plan_block_sparse(lay, 512, PlanTarget(precision="fp16", **BOW), block=16, workers=6)
    assert 0 < plan.estimate_temp_bytes <= 0.6 * 638_976
    text = explain_plan(plan, sram_bytes=638_976)
    built = int(plan.temp_bytes[int(plan.memory_bytes().argmax())])
    assert f"PopSparse's planner estimate {plan.estimate_temp_bytes:,}" in text and f"holds {built:,}" in text


def test_grad_a_codelet_estimates_counted_by_hand():
    from tilesim.models.linear.dynamicsparse import _transpose_cycles

    c = DynamicCosts()
    # the GradA block codelet keeps no X: no supervisor cycle per row and 3 worker cycles more per block
    sup = 40 + 46 + 56 + 2 * (3 * (64 + 3 + 24)) + 2
    assert c.block(2, 3, 5, 16, False, 6, retain_x=False) == 6 * (23 + 2 * 3 * 2 * (24 + 4 * 5)) + sup
    # transpose element-wise, fp16, z = 8: 20 + x (18 + 10 ceil(y / 6)); supervisor 30 + 44 + 68 per bucket
    assert c.transpose_elementwise(4, 8, 13, False, 6, buckets=2) == 6 * (20 + 4 * (18 + 10 * 3)) + 30 + 2 * 112
    # fp32, z = 3: 23 + x (24 + 8 + (2 + 3) y' + 4 y'), y' = ceil(7 / 6) = 2
    assert c.transpose_elementwise(5, 3, 7, True, 6) == 6 * (23 + 5 * (24 + 8 + 5 * 2 + 4 * 2)) + 30 + 112
    # 16x16 fp16 blocks, 4 x 4 grains: 29 + n (18 + 4 (12 + 4 (4 - 2))) per worker, 13 blocks over 6 workers
    assert _transpose_cycles(13, 16, 16, False, 6) == 7 + 6 * (29 + 3 * (18 + 4 * (12 + 8)))


def test_dynamic_plan_weighs_its_grad_a_pass(monkeypatch):
    # popsparse::dynamic::sparseDenseMatMul plans with doGradAPass = true: the estimate is forward + GradA and the
    # partition is not the forward's fastest; GradA runs on it with X and Y swapped (P_x partials reduced)
    from tilesim.models.linear import dynamicsparse as ds

    q = ds._Problem(16, 1 / 16, 1, 256, 256, 2048, 4096, 2, 4, 6, 1472)
    best, _ = ds._search(q, DynamicCosts(), 0.6 * 638_976)
    assert best.estimate > best.fwd_estimate > 0
    with monkeypatch.context() as mp:  # the forward alone would choose another partition, faster for itself
        mp.setattr(ds, "_estimate", lambda q, s, v: (ds._pass_cost(q, s, ds._view(q, s), v)[0], 0, 0))
        alone, _ = ds._search(q, DynamicCosts(), 0.6 * 638_976)
    assert (alone.px, alone.py, alone.pz) != (best.px, best.py, best.pz) and alone.estimate < best.fwd_estimate
    plan = plan_dynamic_sparse(
        4096, 4096, 2048, PlanTarget(precision="fp16", **BOW), density=1 / 16, block=16, workers=6
    )
    assert plan.split == (best.px, best.py, best.pz) and plan.estimate_cycles == best.estimate
    gx = plan.grad_a
    assert gx is not None and gx.split == plan.split and gx.pass_name == "GradA"
    names = [p.name for p in gx.phases]
    assert names[0] == "dyn-transpose" and ("dyn-reduce" in names) == (plan.split[0] > 1)
    assert int(gx.input_bytes[0]) == -(-256 // best.px) * 16 * best.zg * 2  # the output gradient's slice


def test_dynamic_is_slower_than_static_at_the_same_density_and_sizes_buckets_as_popsparse():
    # the paper: dynamic sparse runs slower than static (1.9x vs 4.9x dense at 4096, block 16, 1/16, best batches;
    # 2048 is nearer static's best than 1024 since its scatter-add is popops' reduceMany, issue 40)
    lay = random_block_layout(4096, 4096, 16, 1 / 16, seed=0)
    static = plan_block_sparse(lay, 2048, PlanTarget(precision="fp16", **BOW), block=16, workers=6)
    dyn = plan_dynamic_sparse(
        4096, 4096, 2048, PlanTarget(precision="fp16", **BOW), density=1 / 16, block=16, workers=6
    )
    assert dyn.predicted_cycles > 1.5 * static.predicted_cycles
    px, py, pz = dyn.split
    # addNumNonZeroGroupsPerBucket: the 4096 non-zero blocks spread over every tile used, x 1.3, rounded
    assert dyn.bucket_blocks == int(-(-4096 // (px * py * pz)) * 1.3 + 0.5)
    assert dyn.memory_by_category(0)["input_bytes"] == int(dyn.input_bytes[0]) > 0
    assert 0 < dyn.estimate_cycles and dyn.phases[-1].name in ("dyn-reduce", "dyn-cast")
    assert int(dyn.temp_bytes.max()) == dyn.estimate_temp_bytes <= 0.6 * 638_976  # what the proportion bounds
    with pytest.raises(ConfigError, match="block = 2"):
        plan_dynamic_sparse(64, 64, 4, PlanTarget(**BOW), density=0.5, block=2, workers=6)


def test_dynamic_batch_split_is_a_factor_of_the_batch_groups():
    # factorOf(groups.z, partition.z): Z parts of equal size; element-wise groups the batch by the vector width
    for n, block, precision, groups in ((1000, 16, "fp16", 1000), (1000, 1, "fp16", 250), (1000, 1, "fp32", 500)):
        plan = plan_dynamic_sparse(
            1024, 1024, n, PlanTarget(precision=precision, **BOW), density=1 / 8, block=block, workers=6
        )
        assert groups % plan.split[2] == 0


def test_dynamic_partials_as_popsparse_validates_them():
    # validateOptions: element-wise accumulates in FP32, and partials are never narrower than the input
    for block, precision, partials, got in ((1, "fp16", "fp16", "fp32"), (16, "fp32", "fp16", "fp32"),
                                            (16, "fp16", "fp16", "fp16")):  # fmt: skip
        target = PlanTarget(precision=precision, partials_precision=partials, **BOW)
        plan = plan_dynamic_sparse(1024, 1024, 64, target, density=1 / 8, block=block, workers=6)
        assert plan.partials_precision == got, (block, precision, partials)


def test_dynamic_buckets_run_one_after_another():
    # the supervisor syncs between sub-groups: P_z buckets cost P_z worker passes, not one pass over them all
    from tilesim.models.linear.dynamicsparse import _mm_cycles, _Problem, _split

    q = _Problem(16, 1 / 16, 1, 64, 64, 512, 256, 2, 4, 6, 1472)
    one, four = _split(q, 4, 1, 1), _split(q, 4, 1, 4)
    c = DynamicCosts()
    assert _mm_cycles(q, one, c) == c.block(one.x_nz, one.y_nz, -(-512 // 6), 16, False, 6)
    # four buckets of 16 x 4 / 4 = 16 blocks over 5 rows (16 // 4 + 1) of ceil(16 / 5) = 4, 128 columns each
    per = c.block(5, 4, -(-128 // 6), 16, False, 6) - 40
    assert _mm_cycles(q, four, c) == 4 * per + 40


def test_shipped_paper_cases_read_and_name_their_figure():
    (path,) = [p for p in shipped_sparse_cases() if p.name == "popsparse_bow.csv"]
    cases = read_sparse_cases(path)
    assert len(cases) > 300 and not [c for c in cases if c.problem]
    # the density-1/16 rows guided the model's development: calibration rows, not held out (issue 40)
    assert all(c.calibrate == (c.spec.density == 1 / 16) for c in cases)
    with open(path) as fh:
        assert all("sparsity-benchmarks@bab5449" in r["source"] for r in csv.DictReader(fh))


def _write_rows(path, rows):
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def _time_errors(tmp_path, names) -> list:
    (path,) = [p for p in shipped_sparse_cases() if p.name == "popsparse_bow.csv"]
    with open(path) as fh:
        rows = [r for r in csv.DictReader(fh) if r["case"] in names]
    got = validate_sparse(_write_rows(tmp_path / "rows.csv", rows))
    assert len(got) == len(names)
    return [r["measured"] / r["predicted"] - 1 for r in got]  # the rows are rates: time goes as 1 / rate


def test_one_sixteenth_calibration_rows_within_30_percent(tmp_path):
    # issue 27's check: density 1/16, FP16, 4096 wide, blocks 16 and 1, static: time within 30 % (calibration rows
    # since issue 40: the model's development followed them)
    errors = _time_errors(tmp_path, ("static_b16_fp16_4096_d16_best", "static_b1_fp16_4096_d16_best"))
    assert all(abs(e) < 0.30 for e in errors), errors


def test_dynamic_one_sixteenth_rows_within_30_percent(tmp_path):
    # the same rows run dynamic: +9 % (block 16) and -16 % (block 1) in time; -20 % and -32 % when the partition
    # was chosen for the forward alone, -39 % and -44 % before the buckets and bucket-by-bucket codelet
    errors = _time_errors(tmp_path, ("dynamic_b16_fp16_4096_d16_best", "dynamic_b1_fp16_4096_d16_best"))
    assert all(abs(e) < 0.30 for e in errors), errors


def test_dynamic_layer_moves_its_pattern_and_matches_the_dense_twin():
    from tilesim.models.linear.layers import DynamicSparseLinear

    layer = DynamicSparseLinear(64, 32, 4, density=0.25, max_density=0.3, seed=3)
    rng = np.random.default_rng(0)
    x, g = rng.standard_normal((5, 64)), rng.standard_normal((5, 32))
    new = random_block_layout(32, 64, 4, 0.3, seed=9)
    moved = layer.repattern(new)
    assert moved.nnz_blocks == int(new.sum()) and layer.nnz_blocks == 32  # the original is untouched
    kept = new & layer.layout
    w_old, w_new = layer.dense_matrix(), moved.dense_matrix()
    for r, c in zip(*np.nonzero(kept)):  # kept blocks keep their values, new ones start at zero
        sl = np.s_[r * 4 : r * 4 + 4, c * 4 : c * 4 + 4]
        np.testing.assert_array_equal(w_new[sl], w_old[sl])
    assert not w_new[np.repeat(np.repeat(new & ~layer.layout, 4, 0), 4, 1)].any()
    moved = moved.repattern(new)  # and a layer with random values on the new pattern
    object.__setattr__(moved, "blocks", rng.standard_normal(moved.blocks.shape))
    y, cache = moved.forward(x)
    np.testing.assert_allclose(y, x @ moved.dense_matrix().T, atol=1e-12)
    gx, (gb, _) = moved.backward(g, cache)
    np.testing.assert_allclose(gx, g @ moved.dense_matrix(), atol=1e-12)
    with pytest.raises(ConfigError, match="layout blocks = 128: must be 1 .. capacity = 39"):
        layer.repattern(np.ones((8, 16), bool))


PAPER_BLOCK16_GAIN = {4: 1.6, 8: 2.4, 16: 5.0, 32: 5.1}
"""Static block 16 over dense at the best batch, 4096 wide, FP16, density 1/4 ... 1/32 (the paper's density
figure, ``ipu_density``: each method's best rate over the batches swept)."""


@pytest.fixture(scope="module")
def block16_gains(tmp_path_factory):
    """The model's static block-16 gain over dense at the best batch, per density (issue 40's done-when)."""
    (path,) = [p for p in shipped_sparse_cases() if p.name == "popsparse_bow.csv"]
    names = {f"static_b16_fp16_4096_d{d}_best": d for d in PAPER_BLOCK16_GAIN}
    with open(path) as fh:
        rows = [r for r in csv.DictReader(fh) if r["case"] in names]
    # dense: the best of every batch (its figure sweeps them all)
    dense = dict(rows[0], case="dense_fp16_4096_best", method="dense", density="1/1", block="0", best_of="")
    small = _write_rows(tmp_path_factory.mktemp("gain") / "rows.csv", [*rows, dense])
    got = {r["case"]: r["predicted"] for r in validate_sparse(small)}
    best_dense = got.pop("dense_fp16_4096_best")  # its non-zero rate is the dense rate
    return {names[c]: rate / (best_dense / names[c]) for c, rate in got.items()}


@pytest.mark.parametrize("d", [4, 8, 16, 32])
def test_block16_gain_over_dense_at_the_best_batch_within_30_percent_of_the_papers(block16_gains, d):
    # issue 40's done-when: at every density the gain is within 30 % of the paper's
    assert abs(block16_gains[d] / PAPER_BLOCK16_GAIN[d] - 1) < 0.30, block16_gains


def test_best_of_takes_the_best_of_the_rows_batches_only(tmp_path):
    # a best row with best_of "64 256" is the better of the 64 and 256 rows, not a larger batch's rate
    base = dict(workload="sparse-matmul", machine="bow", method="static", precision="fp16", m=1024, k=1024,
                density="1/4", block=16, measured_tflops=1, use="check", source="test")  # fmt: skip
    rows = [dict(base, case="n64", n=64, best_of=""), dict(base, case="n256", n=256, best_of=""),
            dict(base, case="n1024", n=1024, best_of=""), dict(base, case="best", n="best", best_of="64 256"),
            dict(base, case="every", n="best", best_of="")]  # fmt: skip
    got = {r["case"]: r["predicted"] for r in validate_sparse(_write_rows(tmp_path / "rows.csv", rows))}
    assert got["best"] == max(got["n64"], got["n256"]) < got["n1024"] <= got["every"]


@pytest.mark.parametrize(
    "n, best_of, says",
    [("best", "64 x", "must be batches"), ("best", "0 64", "must be batches"), (256, "64", "only for n = best")],
)
def test_a_bad_best_of_names_the_row_and_the_column(tmp_path, n, best_of, says):
    row = dict(workload="sparse-matmul", case="r1", machine="bow", method="static", precision="fp16", m=1024,
               k=1024, n=n, density="1/4", block=16, measured_tflops=1, best_of=best_of, source="test")  # fmt: skip
    (case,) = read_sparse_cases(_write_rows(tmp_path / "rows.csv", [row]))
    assert case.spec is None and "r1: best_of" in case.problem and says in case.problem


def test_the_papers_best_rows_are_the_best_of_the_heat_maps_batches_but_at_one_sixteenth():
    # the named assumption of the paper's sweep (models/linear/measured.py): the heat map's batches at 1/4, 1/8,
    # 1/32; every batch of BEST_OF at 1/16 (its block-size and feature-size figures and FP32 table)
    (path,) = [p for p in shipped_sparse_cases() if p.name == "popsparse_bow.csv"]
    best = [c for c in read_sparse_cases(path) if c.spec.n == 0]
    assert len(best) == 20
    for c in best:
        assert c.spec.best_of == (() if c.spec.density == 1 / 16 else (4, 16, 64, 256, 1024)), c.case
