"""PopLibs' AMP vertex estimate (models/linear/ampestimate.py) and the operands created in the plan's layout."""

from dataclasses import replace

import numpy as np
import pytest

from tilesim.errors import ConfigError
from tilesim.models.linear.ampestimate import (
    amp_target,
    cast_cycles,
    conv1x1_cycles,
    conv1x1_worker_cycles,
    reduce_cycles,
)
from tilesim.models.linear.planner import PlanTarget, build_matmul_plan, plan_matmul

FP16 = amp_target("fp16", 128)
FP32 = amp_target("fp32", 32)


def test_ipu2_amp_constants():
    # 16 conv units x 16 weights at 4 cycles per field element = the chip's 64 MAC/cycle (FP16);
    # 8 x 16 at 8 cycles = 16 MAC/cycle (FP32); 64 cycles of 64-bit coefficient loads per group pair
    assert (FP16.conv_units, FP16.weights_per_unit, FP16.load_cycles) == (16, 16, 64)
    assert (FP32.conv_units, FP32.weights_per_unit, FP32.load_cycles) == (8, 16, 64)


def test_fp16_one_group_pair_by_hand():
    # getConvPartial1x1SupervisorCycleEstimate, FP16 in, FP32 partials, 16 units, G_in = G_out = 1, field 60:
    # each of 6 workers 10 elements: with zeroing 37 + 4 (10 - 3) - 7 = 58; inner = max(6*58, 6*58 + 14) = 362
    # outer = 50 + 6 * 7 + 12 + 1 + 10 + 1 + (19 - 1 + 7 + 64 + 362) = 567
    assert int(conv1x1_cycles(60, 16, 16, FP16)) == 567
    # near the tessellate-ipu fit 331 + 4 N of the same vertex shape
    for n in (60, 600, 2048):
        assert abs(int(conv1x1_cycles(n, 16, 16, FP16)) - (331 + 4 * n)) <= 20


def test_fp32_small_field_by_hand():
    # field 4 over 6 workers: 4 workers do one element (47 cycles, no zeroing), 2 idle: inner 6 * 47 = 282
    # (6 * 49 with zeroing, zero_per 4: 47 + (2 + 4) = 53 -> 318); G_in = 2, G_out = 3:
    # 50 + 0 + 12 + 1 + 1 * (15 - 1 + 1 + 3 * (19 + 6 + 64 + 282)) + 10 + 1 + 3 * (19 - 1 + 7 + 64 + 318)
    assert int(conv1x1_worker_cycles(1, FP32, zeroing=False)) == 47
    assert int(conv1x1_worker_cycles(1, FP32, zeroing=True)) == 53
    expected = 50 + 12 + 1 + (15 - 1 + 1 + 3 * (19 + 6 + 64 + 282)) + 10 + 1 + 3 * (19 - 1 + 7 + 64 + 318)
    assert int(conv1x1_cycles(4, 32, 24, FP32)) == expected


def test_output_channels_padded_to_the_conv_units():
    # 4 output channels cost one whole group of 8 (FP32) or 16 (FP16)
    assert int(conv1x1_cycles(64, 256, 4, FP32)) == int(conv1x1_cycles(64, 256, 8, FP32))
    assert int(conv1x1_cycles(64, 256, 4, FP16)) == int(conv1x1_cycles(64, 256, 16, FP16))
    assert int(conv1x1_cycles(64, 256, 17, FP16)) > int(conv1x1_cycles(64, 256, 16, FP16))
    assert np.array_equal(conv1x1_cycles(np.array([0, 4]), 16, 16, FP16) > 0, [False, True])


def test_poplibs_estimate_in_the_planner():
    kw = dict(tiles=1, flops_per_cycle=32, precision="fp32")
    plan = build_matmul_plan(4, 32, 24, (1, 1, 1), **kw)
    assert int(plan.amp_cycles[0]) == int(conv1x1_cycles(4, 32, 24, FP32))
    # an AMP slower than one input channel per conv unit has no PopLibs estimate: refused, naming the rate
    with pytest.raises(ConfigError, match="flops_per_cycle = 4"):
        build_matmul_plan(4, 32, 24, (1, 1, 1), tiles=1, flops_per_cycle=4, precision="fp16")


def test_operands_in_place_move_only_replicas():
    # P_m = 1: each weight (B) block is used by one tile, which already holds it: nothing of B moves;
    # the A block of a row of P_n = 4 tiles is spread over them: each receives the other 3/4
    kw = dict(tiles=8, flops_per_cycle=32, precision="fp32")
    flat = build_matmul_plan(4, 64, 64, (1, 2, 4), **kw)
    placed = build_matmul_plan(4, 64, 64, (1, 2, 4), operands_in_place=True, **kw)
    a_block, b_block = 4 * 32, 32 * 16
    assert int(flat.bytes_in[0]) == (a_block + b_block) * 4
    assert int(placed.bytes_in[0]) == (a_block - a_block // 4) * 4
    assert int(placed.bytes_out[0]) == a_block // 4 * 4  # its share of A, multicast; its B block stays
    assert int(placed.home_bytes[:8].sum()) == (4 * 64 + 64 * 64) * 4  # every element on one tile
    target = PlanTarget(tiles=8, sram_bytes=600_000, flops_per_cycle=32, precision="fp32")
    in_place = replace(target, operands_in_place=True)
    assert plan_matmul(4, 64, 64, in_place).predicted_cycles < plan_matmul(4, 64, 64, target).predicted_cycles


def test_reduce_and_cast_by_hand():
    # getReduceCycleEstimate, FP32 partials, FP16 out, 96 outputs of 3 partials: 24 loops of 4, 4 per worker,
    # 3 cycles per partial per loop + 6: (32 + (3 * 3 + 6) * 4) * 6
    assert int(reduce_cycles(96, 3, False, True)) == (32 + (3 * 3 + 6) * 4) * 6
    # 97 outputs: one more (odd) loop, a ragged remainder: + 2 * 3 + 13
    assert int(reduce_cycles(97, 3, False, True)) == (32 + 2 * 3 + 13 + (3 * 3 + 6) * 4) * 6
    # estimateCastCycles: 100 outputs, 17 per worker, ceil(17 / 2) = 9 loads: (9 + 26) * 6
    assert int(cast_cycles(100)) == (9 + 26) * 6
    assert int(reduce_cycles(0, 3, False, True)) == 0 == int(cast_cycles(0))


def test_poplibs_reduce_and_cast_phases():
    kw = dict(tiles=8, flops_per_cycle=128, precision="fp16")
    split = build_matmul_plan(16, 64, 32, (1, 2, 1), **kw)  # P_k = 2: each tile reduces half the 16 x 32 block
    reduce = [p for p in split.phases if p.name == "reduce"][0]
    assert int(reduce.compute_cycles[0]) == int(reduce_cycles(16 * 32 // 2, 2, False, True))
    whole = build_matmul_plan(16, 64, 32, (1, 1, 1), **kw)  # FP32 partials of an unsplit k are cast to FP16
    assert [p.name for p in whole.phases] == ["matmul", "cast"]
    assert int(whole.phases[1].compute_cycles[0]) == int(cast_cycles(16 * 32))


def test_supertile_pairs_receive_a_broadcast_input_together():
    # P_n = 2: both tiles of a supertile need the same A block: each receives its half at twice the rate
    kw = dict(tiles=4, flops_per_cycle=32, precision="fp32", operands_in_place=True)
    alone = build_matmul_plan(64, 64, 64, (1, 1, 2), **kw)
    shared = build_matmul_plan(64, 64, 64, (1, 1, 2), exchange_bus_tiles=2, **kw)
    a_recv = 64 * 64 // 2  # the other tile's share of the 64 x 64 A block
    assert int(alone.phases[0].bytes_in[0]) == a_recv * 4
    assert int(shared.phases[0].bytes_in[0]) == a_recv // 2 * 4
    assert np.array_equal(shared.bytes_in, alone.bytes_in)  # as many bytes arrive; only faster
    odd = build_matmul_plan(64, 64, 63, (1, 1, 3), exchange_bus_tiles=2, tiles=4, flops_per_cycle=32, precision="fp32")
    assert np.array_equal(odd.phases[0].bytes_in, odd.bytes_in)  # P_n = 3 does not fill the buses


@pytest.mark.parametrize(
    "split, serial", [((2, 2, 4), (1, 1)), ((1, 4, 8), (1, 1)), ((2, 1, 4), (1, 2)), ((4, 2, 2), (2, 1))]
)
def test_closed_form_matches_the_built_plan_with_poplibs_estimates_in_place(split, serial):
    from tilesim.models.linear.phases import SuperstepCosts
    from tilesim.models.linear.planner import _closed_form

    m, k, n, tiles, costs = 96, 128, 64, 64, SuperstepCosts()
    kw = dict(operands_in_place=True, exchange_bus_tiles=2, costs=costs)
    plan = build_matmul_plan(m, k, n, split, tiles=tiles, flops_per_cycle=128, precision="fp16", serial=serial, **kw)
    pm, pk, pn, total, temp, _ = _closed_form(m, k, n, *serial, tiles, 2, 4, amp_target("fp16", 128), (True, 2), costs)
    i = int(np.flatnonzero((pm == split[0]) & (pk == split[1]) & (pn == split[2]))[0])
    assert int(total[i]) == plan.predicted_cycles
    assert int(temp[i]) == plan.estimate_temp_bytes  # what availableMemoryProportion bounds


def test_popops_reduce_vertex_matches_hand_evaluated_poplibs_formula():
    """getCyclesEstimateForReduce (popops, ADD, DEFAULT vertex) evaluated by hand: 7 + 26 entry/state, per region
    16 + 6 + 2 log2(acc) + 2, per accumulator vector 5 + store + 1, per partial per vector 10 + 6 + 3, and the
    remainder bits of the outputs (FP16: acc 8, store 2 min(w, 4) + 1; FP32: acc 4, store 2 min(w, 2) + 1)."""
    from tilesim.models.linear.ampestimate import popops_reduce_tile_cycles, popops_reduce_vertex_cycles

    assert int(popops_reduce_vertex_cycles(16, 2, 1, False)) == 33 + 30 + 2 * 15 + 2 * 2 * 19  # 169
    # 11 outputs, 5 partials: one vector loop and remainder bits 1 and 2
    hand = 33 + (30 + 15 + 5 * 19) + (4 + 3 + 50 + 5 * 6) + (4 + 5 + 50 + 5 * 6)
    assert int(popops_reduce_vertex_cycles(11, 5, 1, False)) == hand == 349
    assert int(popops_reduce_vertex_cycles(4, 3, 1, True)) == 33 + (28 + 11 + 3 * 19)  # 129
    assert int(popops_reduce_vertex_cycles([0, 8], [3, 0], 1, False).sum()) == 0
    # 13 regions of 8 on 6 workers: the busiest worker runs 3 regions, the tile 6 times that
    assert int(popops_reduce_tile_cycles(104, 2, 13, False)) == 6 * (33 + 3 * (30 + 15 + 2 * 19))


def test_popops_strided_reduce_matches_hand_evaluated_poplibs_formula():
    """``getCyclesEstimateForStridedReduce`` (ADD, no update): 16 + ceil(o / e) (3 + post + 3 + d - 1), e = 4 FP16
    / 2 FP32 outputs a loop, post = 8 FP16 / 5 FP32."""
    from tilesim.models.linear.ampestimate import popops_strided_reduce_cycles

    assert int(popops_strided_reduce_cycles(16, 4, False)) == 16 + 4 * (3 + 8 + 3 + 3)  # 84
    assert int(popops_strided_reduce_cycles(6, 3, True)) == 16 + 3 * (3 + 5 + 3 + 2)  # 55
    assert int(popops_strided_reduce_cycles(5, 2, False)) == 16 + 2 * (3 + 8 + 3 + 1)  # a partial loop counts
    assert popops_strided_reduce_cycles([0, 8], [3, 0], False).tolist() == [0, 0]
