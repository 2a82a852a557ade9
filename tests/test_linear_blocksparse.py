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


def test_static_reduce_charges_popops_reduce_vertices():
    """The scatter-add of the partials costs popops' reduce vertices (at least ``W (33 + 30)`` on every tile
    owning outputs), not the vector unit's add rate: the per-matmul fixed cost of PopSparse at small batches."""
    from tilesim.models.linear.ampestimate import popops_reduce_tile_cycles

    lay = random_block_layout(4096, 4096, 16, 1 / 16, seed=0)
    target = PlanTarget(precision="fp16", **BOW)
    plan = plan_block_sparse(lay, 4, target, block=16, workers=6, reduce_vertex="popops")
    old = plan_block_sparse(lay, 4, target, block=16, workers=6)
    red, red_old = plan.phases[1], old.phases[1]
    assert red.name == "sparse-reduce"
    owners = plan.output_bytes > 0
    assert (red.compute_cycles[owners] >= 6 * 63).all()
    t = int(np.argmax(owners))
    outputs = int(plan.output_bytes[t]) // 2
    partials = -(-int(red.bytes_in[t]) // 2 // outputs)
    assert int(red.compute_cycles[t]) in {
        int(popops_reduce_tile_cycles(outputs, partials, g, False)) for g in (1, 2)
    }  # one region, or two where a block row's segment ends inside the tile's slice
    assert int(red_old.compute_cycles.max()) < 100 < plan.predicted_cycles - old.predicted_cycles
    with pytest.raises(ConfigError, match="reduce_vertex"):
        plan_block_sparse(lay, 4, target, block=16, workers=6, reduce_vertex="fast")
