"""Static block-sparse layer (PopSparse-style): kernels against the dense NumPy twin, planner, times."""

import numpy as np
import pytest

from tilesim.errors import ConfigError
from tilesim.models.linear.blocksparse import StaticBlockCosts, plan_block_sparse
from tilesim.models.linear.layers import BlockSparseLinear, random_block_layout
from tilesim.models.linear.planner import PlanTarget

BOW = dict(tiles=1472, sram_bytes=638_976)  # a Bow IPU: 6 workers per tile


@pytest.mark.parametrize("block,density,seed", [(1, 0.1, 4), (4, 0.3, 0), (8, 0.125, 1), (16, 1.0, 2), (16, 0.02, 3)])
def test_forward_backward_match_dense_twin(block, density, seed):
    layer = BlockSparseLinear(64, 48, block, density=density, seed=seed)
    rng = np.random.default_rng(seed)
    x, g = rng.standard_normal((7, 64)), rng.standard_normal((7, 48))
    w = layer.dense_matrix()
    y, cache = layer.forward(x)
    np.testing.assert_allclose(y, x @ w.T, rtol=1e-12, atol=1e-12)
    gx, (gb, gbias) = layer.backward(g, cache)
    np.testing.assert_allclose(gx, g @ w, rtol=1e-12, atol=1e-12)
    gw = g.T @ x
    ref = np.stack(
        [
            gw[r * block : (r + 1) * block, c * block : (c + 1) * block]
            for r, c in zip(layer.block_rows, layer.block_cols)
        ]
    )
    np.testing.assert_allclose(gb, ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gbias, g.sum(axis=0))
    assert layer.n_params == layer.nnz_blocks * block * block + 48


def test_layout_has_exact_block_count_and_clear_errors():
    lay = random_block_layout(256, 256, 16, 1 / 16, seed=5)
    assert lay.shape == (16, 16) and int(lay.sum()) == 16
    with pytest.raises(ConfigError, match=r"density = 0: must be in \(0, 1\]"):
        random_block_layout(64, 64, 16, 0)
    with pytest.raises(ConfigError, match=r"n_out = 60: must be a multiple of block = 16"):
        random_block_layout(60, 64, 16, 0.5)
    with pytest.raises(ConfigError, match=r"block = 5: must be one of \(1, 4, 8, 16\)"):
        plan_block_sparse(np.ones((4, 4), bool), 8, PlanTarget(**BOW), block=5, workers=6)


def test_static_block_cycles_hand_computed():
    v = StaticBlockCosts()
    # fp16 block 16, one row, one block, 6 columns (1 per worker): 30 + 13*6 + (1*6 + 17 + (16 + 64 + 19*6)) = 325
    assert v.cycles([1], [1], [6], 16, 2, 6, 2).tolist() == [325]
    # fp32 partials add PopSparse's zeroing: 16*6*4 B = 48 64-bit stores -> 6 * (12 + 8)
    assert v.cycles([1], [1], [6], 16, 2, 6, 4).tolist() == [325 + 120]
    assert v.cycles([0], [0], [6], 16, 2, 6, 2).tolist() == [0]


def test_elementwise_cycles_hand_computed():
    """Block 1 (issue 27): PopSparse's element-wise estimate, rows split over the 6 workers."""
    v = StaticBlockCosts()
    # fp16, 6 rows (1 per worker), 12 non-zeros (2 per row), 16 columns: 6 (33 + 1 (11 + 2 (14 + 3))) = 468
    assert v.cycles([6], [12], [16], 1, 2, 6, 4).tolist() == [468]
    # fp16 n = 8 is specialised: 6 (31 + 1 (8 + 3)) = 252; fp32 n = 6: 6 (31 + 12 + (10 + 3) + (10 + 2)) = 408
    assert v.cycles([6], [12], [8], 1, 2, 6, 4).tolist() == [252]
    assert v.cycles([6], [12], [6], 1, 4, 6, 4).tolist() == [408]
    # 12 rows: two per worker; no partials zeroing for block 1 whatever the partials type
    assert v.cycles([12], [24], [16], 1, 2, 6, 2).tolist() == [6 * (33 + 2 * 45)]


def test_elementwise_plan_runs_on_the_workers_and_counts_every_nonzero():
    lay = random_block_layout(1024, 1024, 1, 1 / 16, seed=0)
    plan = plan_block_sparse(lay, 256, PlanTarget(precision="fp16", **BOW), block=1, workers=6)
    assert int(plan.macs.sum()) == int(lay.sum()) * 256
    assert plan.phases[0].unit == "vector"  # no AMP for element-wise sparsity
    assert plan.bands <= 128 and plan.n_split <= 32  # PopSparse's search bounds
    # per non-zero, element-wise is slower than 16x16 blocks at the same density
    b16 = plan_block_sparse(
        random_block_layout(1024, 1024, 16, 1 / 16, seed=0),
        256,
        PlanTarget(precision="fp16", **BOW),
        block=16,
        workers=6,
    )
    assert plan.predicted_cycles > b16.predicted_cycles


def test_plan_accounts_every_block_and_time_falls_with_density():
    times = []
    for density in (1 / 4, 1 / 16, 1 / 64):
        lay = random_block_layout(4096, 4096, 16, density, seed=0)
        plan = plan_block_sparse(lay, 2048, PlanTarget(precision="fp16", **BOW), block=16, workers=6)
        assert int(plan.macs.sum()) == int(lay.sum()) * 256 * 2048
        assert int(plan.blocks.sum()) == int(lay.sum()) * plan.n_split
        assert int(plan.memory_bytes().max()) <= BOW["sram_bytes"]
        times.append(plan.predicted_cycles)
    assert times[0] > times[1] > times[2]


def test_layer_density_one_sixteenth_fits_and_is_faster_than_dense():
    from tilesim.models.linear.timing import BlockSparseConfig, time_layer

    sparse = time_layer(
        "block-sparse",
        4096,
        2048,
        "bow",
        precision="fp16",
        backward=False,
        block_sparse=BlockSparseConfig(density=1 / 16, block=16),
    )
    dense = time_layer("dense", 4096, 2048, "bow", precision="fp16", backward=False)
    assert sparse.fits and dense.fits
    assert sparse.step_s < dense.step_s / 2
    assert sparse.params == 4096 * 16 * 16 + 4096  # 4096 non-zero blocks of 16 x 16 + bias


def test_layer_command_takes_block_one(capsys):
    import json

    from tilesim.cli import main

    argv = ["layer", "--kind", "block-sparse", "--block", "1", "--density", "1/16", "--n", "1024", "--batch", "256"]
    assert main([*argv, "--precision", "fp16", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["step_s"] > 0 and out["fits"]


def test_static_reduce_is_popops_reduce_many_by_default():
    """The scatter-add is costed as popops' ``reduceMany`` runs it (issue 40): a ``Copy`` of the single-source rows,
    then one compute set of reduce vertices, slower than adds at the vector rate at a small batch."""
    lay = random_block_layout(1024, 1024, 16, 1 / 16, seed=0)
    target = PlanTarget(precision="fp16", **BOW)
    plan = plan_block_sparse(lay, 4, target, block=16, workers=6)
    old = plan_block_sparse(lay, 4, target, block=16, workers=6, reduce_vertex="vector")
    assert [p.name for p in plan.phases] == ["sparse-mm", "sparse-reduce-copy", "sparse-reduce"]
    copy, red = plan.phases[1], plan.phases[2]
    assert int(copy.compute_cycles.max()) == 0 and copy.has_exchange
    assert int(red.compute_cycles.max()) > 6 * 16 > int(old.phases[1].compute_cycles.max())
    assert plan.predicted_cycles > old.predicted_cycles
    with pytest.raises(ConfigError, match="reduce_vertex"):
        plan_block_sparse(lay, 4, target, block=16, workers=6, reduce_vertex="fast")


def test_scatter_add_counted_by_hand_at_the_destination():
    """4 block rows of 0, 1, 2 and 3 sources, n = 4, block 16, FP16 on 8 tiles: the output (grain 4 · 4) puts 32
    elements on each tile, two tiles a row; row 0 is left alone, row 1 is copied, rows 2 and 3 are reduced at the
    destination (2 · 8 + 2 · 8 + 90 = 122 < 8 + 4 + 32 + 180 for d = 2), each on 2 workers (3 merged reductions of
    one row each: ceil(6 / 3)) of 16 outputs: STRIDED_REDUCE 16 + 4 (3 + 8 + 3 + d - 1) = 76 (d = 2), 80 (d = 3)."""
    from tilesim.models.linear.blocksparse import scatter_add
    from tilesim.models.linear.phases import SuperstepCosts

    sa = scatter_add(np.array([0, 1, 2, 3]), 4, 1, 16, 2, 8, 6, SuperstepCosts())
    assert sa.out_el.tolist() == [32] * 8
    assert sa.copy_in_el.tolist() == [0, 0, 32, 32, 0, 0, 0, 0]
    assert sa.reduce_in_el.tolist() == [0, 0, 0, 0, 64, 64, 96, 96]
    assert sa.compute.tolist() == [0, 0, 0, 0, 6 * 76, 6 * 76, 6 * 80, 6 * 80]
    assert not sa.write_in_el.any() and not sa.write_out_el.any()


def test_final_reduce_stage_works_in_the_partials_type():
    """popops' final stage takes the partials' own type as ``inVertexType`` (``reduceFirstDim2D`` passes
    ``in.elementType()``; PopSparse's partials are the input type): FP16 grains 8 / 4 / 16, FP32 4 / 2 / 8, and the
    spread results are written back in it. 1,024 FP16 outputs of 2 sources on one of 64 tiles: at the destination
    512 + 2 · 256 + 90 = 1,114 cycles; spread (16 a tile) 16 + 2 · 4 + 1024 · 2 / 4 + 180 = 716 < 1,114 (written
    back as FP32 it would be 1,228, and stay at the destination)."""
    from tilesim.models.linear.blocksparse import final_stage_grains, reduce_at_destination

    assert final_stage_grains(2) == (8, 4, 16) and final_stage_grains(4) == (4, 2, 8)
    at = np.array([1024] + [0] * 63)
    assert not reduce_at_destination(at, 2, 2, 64, 90, 4.0)
    assert reduce_at_destination(np.array([64] + [0] * 63), 2, 2, 64, 90, 4.0)  # 32 + 32 + 90 < 8 + 4 + 32 + 180


def test_scatter_add_spreads_a_large_reduction_over_every_tile():
    """One row of 8 sources, n = 1024, block 16, among 16 rows on 64 tiles: its 16,384 outputs sit 4,096 a tile on
    tiles 0-3; at the destination 2048 + 8 · 1024 + 90 = 10,330 cycles > spread over all 64 tiles (256 each):
    1024 + 8 · 64 + 2048 + 180 = 3,764 (results written back as FP16, the partials' type), so popops reduces it
    spread and writes the results back. 6 workers (the one reduction), FP16 grain 8: 6 vertices of 6 grains (48
    outputs), 16 + 12 (3 + 8 + 3 + 7) = 268 each."""
    from tilesim.models.linear.blocksparse import scatter_add
    from tilesim.models.linear.phases import SuperstepCosts

    sa = scatter_add(np.array([8] + [0] * 15), 1024, 1, 16, 2, 64, 6, SuperstepCosts())
    assert sa.reduce_in_el.tolist() == [256 * 8] * 64
    assert sa.write_out_el.tolist() == [256] * 64
    assert sa.write_in_el.tolist() == [4096] * 4 + [0] * 60
    assert sa.compute.tolist() == [6 * 268] * 64
