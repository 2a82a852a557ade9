"""Matmul tile planner and layer phase schedules: invariants, AMP fit, memory budget, errors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilesim.errors import ConfigError, SramOverflowError
from tilesim.models.linear.ampestimate import amp_target
from tilesim.models.linear.phases import OverheadConstants, SuperstepCosts, overhead_breakdown, overhead_bytes_per_tile
from tilesim.models.linear.planner import PlanTarget, build_matmul_plan, plan_matmul
from tilesim.models.linear.schedules import butterfly_schedule, dense_schedule, lowrank_schedule, pixelfly_schedule

GC200 = dict(sram_bytes=638_976, flops_per_cycle=32)  # fp32 AMP: 32 flop/cycle/tile


def test_amp_estimate_is_near_tessellate_ipus_measured_fp16_blocks():
    # PopLibs' AMP vertex estimate (the one the planner uses) against tessellate-ipu's Bow measurements of
    # [N, 16] @ [16, 16] FP16 (331 + 4 N cycles, fitted there): +7 % at N = 16, within 1 % from N = 256
    for rows, band in ((16, 0.08), (256, 0.01), (2048, 0.01)):
        plan = build_matmul_plan(rows, 16, 16, (1, 1, 1), tiles=1, flops_per_cycle=128, precision="fp16")
        assert abs(int(plan.amp_cycles[0]) / (331 + 4 * rows) - 1) < band


def test_plan_shapes_and_totals():
    plan = plan_matmul(1024, 1024, 1024, PlanTarget(tiles=1472, **GC200))
    for name in (
        "macs",
        "amp_cycles",
        "bytes_in",
        "bytes_out",
        "data_bytes",
        "compute_sets",
        "vertices",
        "exchange_programs",
    ):
        assert getattr(plan, name).shape == (1472,)
    assert int(plan.macs.sum()) == 1024**3
    assert plan.tiles_used <= 1472
    assert int(plan.memory_bytes().max()) <= GC200["sram_bytes"]
    assert plan.predicted_cycles == sum(p.cycles(SuperstepCosts()) for p in plan.phases)
    if plan.split_k > 1:
        assert [p.name for p in plan.phases] == ["matmul", "reduce"]
        assert int(plan.reduce_adds.sum()) == (plan.split_k - 1) * 1024 * 1024
        assert int(plan.compute_sets.max()) == 2


@settings(max_examples=30, deadline=None)
@given(
    m=st.integers(1, 300),
    k=st.integers(1, 300),
    n=st.integers(1, 300),
    tiles=st.integers(1, 40),
    extra=st.integers(1, 40),
    fp16=st.booleans(),
)
def test_planner_invariants(m, k, n, tiles, extra, fp16):
    kw = dict(sram_bytes=200_000, flops_per_cycle=128 if fp16 else 32, precision="fp16" if fp16 else "fp32")
    try:
        small = plan_matmul(m, k, n, PlanTarget(tiles=tiles, **kw))
    except SramOverflowError:
        return
    assert int(small.macs.sum()) == m * k * n
    assert int(small.memory_bytes().max()) <= kw["sram_bytes"]
    assert (small.amp_cycles[small.macs == 0] == 0).all()
    big = plan_matmul(m, k, n, PlanTarget(tiles=tiles + extra, **kw))
    assert big.predicted_cycles <= small.predicted_cycles


def test_one_more_tile_is_never_slower_when_the_reduce_estimate_is_not_monotone():
    # PopLibs' reduce estimate costs 211 outputs more than 212 (a remainder of the vector width): the closed form
    # takes the slowest tile's, as the built plan does, so (5, 5, 1) on 25 tiles is not preferred to (4, 3, 2)
    kw = dict(sram_bytes=200_000, flops_per_cycle=128, precision="fp16")
    small, big = (plan_matmul(216, 216, 24, PlanTarget(tiles=t, **kw)) for t in (24, 25))
    assert big.predicted_cycles <= small.predicted_cycles


def test_precision_changes_bytes():
    a = build_matmul_plan(64, 64, 64, (2, 2, 2), tiles=8, flops_per_cycle=32)
    b = build_matmul_plan(64, 64, 64, (2, 2, 2), tiles=8, flops_per_cycle=128, precision="fp16")
    np.testing.assert_array_equal(a.bytes_in, 2 * b.bytes_in)
    assert (b.data_bytes < a.data_bytes).all()
    assert b.predicted_cycles < a.predicted_cycles


def test_overflow_is_a_clear_error():
    with pytest.raises(
        SramOverflowError,
        match=r"no plan fits, even with serial splits.*the smallest.*needs \d+ B "
        r".*> sram_bytes = 1000 B.*use more tiles",
    ):
        plan_matmul(256, 256, 256, PlanTarget(tiles=4, sram_bytes=1000, flops_per_cycle=32))


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(m=0, k=4, n=4, tiles=4, sram_bytes=10**6, flops_per_cycle=32), r"m = 0: must be an integer >= 1"),
        (dict(m=4, k=4, n=4, tiles=4, sram_bytes=10**6, flops_per_cycle=0), r"flops_per_cycle = 0: must be > 0"),
        (
            dict(m=4, k=4, n=4, tiles=4, sram_bytes=10**6, flops_per_cycle=32, precision="fp8"),
            r"precision = 'fp8': must be one of",
        ),
    ],
)
def test_bad_planner_arguments(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        plan_matmul(kwargs.pop("m"), kwargs.pop("k"), kwargs.pop("n"), PlanTarget(**kwargs))


def test_bad_split_and_costs():
    with pytest.raises(ConfigError, match=r"split = \(2, 2, 2\): uses 8 tiles > tiles = 4"):
        build_matmul_plan(8, 8, 8, (2, 2, 2), tiles=4, flops_per_cycle=32)
    with pytest.raises(ConfigError, match=r"exchange_bytes_per_cycle = 0: must be > 0"):
        SuperstepCosts(exchange_bytes_per_cycle=0)


def test_overhead_constants_and_breakdown():
    plan = build_matmul_plan(64, 64, 64, (2, 2, 2), tiles=8, flops_per_cycle=32)
    parts = overhead_breakdown(plan)
    c = OverheadConstants()
    # every working tile: one AMP vertex (3 edges) + one reduce vertex (k-split 2 -> 3 edges)
    np.testing.assert_array_equal(parts["vertexInstanceState"], 2 * c.vertex_state_base_bytes + 6 * c.vertex_edge_bytes)
    assert (parts["internalExchangeCode"] % c.exchange_instruction_bytes == 0).all()
    np.testing.assert_array_equal(overhead_bytes_per_tile(plan), sum(parts.values()))


def test_butterfly_schedule_has_log2n_phases_and_permutation_exchanges():
    s = butterfly_schedule(1024, 50, PlanTarget(tiles=1472, sram_bytes=638_976))
    assert [p.name for p in s.phases] == [f"butterfly-{k}" for k in range(10)]
    f = 1024 // s.partition["features"]
    for k, p in enumerate(s.phases):
        assert int(p.macs.sum()) == 2 * 50 * 1024
        assert p.has_exchange == (k == 0 or (1 << k) >= f)
    assert s.compute_sets == 10
    assert int(s.memory_bytes().max()) <= 638_976


def test_structured_schedules_work_and_memory():
    kw = dict(tiles=1472, **GC200)
    d = dense_schedule(1024, 1024, 50, PlanTarget(**kw))
    lr = lowrank_schedule(1024, 1024, 1, 50, PlanTarget(**kw))
    p = pixelfly_schedule(1024, 50, 16, 16, 32, PlanTarget(**kw), workers=6)
    assert int(d.parts[0].macs.sum()) == 50 * 1024 * 1024
    assert d.ops >= 50 * 1024 * 1024
    assert sum(int(part.macs.sum()) for part in lr.parts) == 2 * 50 * 1024
    assert p.phases[0].name == "sparse-mm" and p.phases[-1].name == "pixelfly-sum"  # PopSparse static matmul
    assert int(p.phases[0].macs.sum()) == 50 * 327_680
    assert int(p.memory_bytes().max()) <= GC200["sram_bytes"]
    # more compute sets -> more always-live control code (paper Observation 3)
    control = [
        int(
            overhead_breakdown(butterfly_schedule(n, 50, PlanTarget(tiles=1472, sram_bytes=638_976)))[
                "controlCode"
            ].max()
        )
        for n in (64, 256, 1024)
    ]
    assert control[0] < control[1] < control[2]


def test_schedule_errors():
    with pytest.raises(ConfigError, match=r"n = 1000: must be a power of two"):
        butterfly_schedule(1000, 8, PlanTarget(tiles=16, sram_bytes=10**6))
    with pytest.raises(SramOverflowError, match=r"butterfly n = 1024.*sram_bytes = 100 B"):
        butterfly_schedule(1024, 8, PlanTarget(tiles=2, sram_bytes=100))
    with pytest.raises(ConfigError, match=r"block_size = 5: must be a power of two"):
        pixelfly_schedule(64, 8, 5, 4, 2, PlanTarget(tiles=16, **GC200), workers=6)
    with pytest.raises(ConfigError, match=r"block_size = 2: must be one of \(1, 4, 8, 16\) or a multiple of 16"):
        pixelfly_schedule(64, 8, 2, 4, 2, PlanTarget(tiles=16, **GC200), workers=6)


# ---- issue 21: serial splits, availableMemoryProportion, partials type ------------------------------
BOW_FP16 = dict(tiles=1472, sram_bytes=638_976, flops_per_cycle=128, precision="fp16")


@pytest.mark.parametrize(
    "m,k,n,kw", [(2048, 4096, 4096, BOW_FP16), (1024, 4096, 4096, dict(BOW_FP16, flops_per_cycle=32, precision="fp32"))]
)
def test_published_matmuls_fit_with_serial_splits(m, k, n, kw):
    plan = plan_matmul(m, k, n, PlanTarget(**kw))
    assert plan.serial_k * plan.serial_n > 1
    assert int(plan.macs.sum()) == m * k * n
    assert plan.within_proportion and plan.estimate_temp_bytes <= 0.6 * kw["sram_bytes"]
    assert int(plan.memory_bytes().max()) <= kw["sram_bytes"]
    assert plan.predicted_cycles == sum(p.cycles(SuperstepCosts()) for p in plan.phases)
    assert any(p.repeat == plan.serial_k * plan.serial_n for p in plan.phases)


@pytest.mark.parametrize(
    "split,serial,partials,layout",
    [
        ((3, 2, 5), (1, 1), "fp32", (False, 1)),
        ((4, 3, 2), (2, 1), "fp32", (False, 1)),
        ((2, 1, 3), (4, 2), "fp16", (False, 1)),
        ((5, 1, 1), (2, 1), "fp32", (False, 1)),
        ((1, 4, 4), (1, 4), "fp16", (False, 1)),
        ((3, 2, 4), (1, 1), "fp32", (True, 2)),
        ((4, 3, 2), (2, 1), "fp32", (True, 2)),
        ((1, 4, 4), (1, 4), "fp16", (True, 2)),
        ((2, 3, 6), (1, 2), "fp32", (True, 2)),
    ],
)
def test_closed_form_matches_built_plan(split, serial, partials, layout):
    from tilesim.models.linear.planner import _closed_form

    m, k, n, tiles = 100, 96, 64, 60
    costs = SuperstepCosts()
    plan = build_matmul_plan(
        m,
        k,
        n,
        split,
        tiles=tiles,
        flops_per_cycle=128,
        precision="fp16",
        partials_precision=partials,
        serial=serial,
        costs=costs,
        operands_in_place=layout[0],
        exchange_bus_tiles=layout[1],
    )
    pm, pk, pn, total, temp, data = _closed_form(
        m,
        k,
        n,
        serial[0],
        serial[1],
        tiles,
        2,
        2 if partials == "fp16" else 4,
        amp_target("fp16", 128),
        layout,
        costs,
    )
    i = int(np.flatnonzero((pm == split[0]) & (pk == split[1]) & (pn == split[2]))[0])
    assert int(total[i]) == plan.predicted_cycles
    assert int(temp[i]) == plan.estimate_temp_bytes
    built = int(plan.data_bytes.max())  # in place: the closed form bounds what tile 0 receives from above
    assert built <= int(data[i]) <= built + (2 * 2 if layout[0] else 0)  # by at most one element of A and of B
    assert int(plan.macs.sum()) == m * k * n


def test_output_channel_serial_split_exchanges_the_input_once():
    # poplin's broadcastInputBeforeLoop (ConvModel.cpp): with S_n > 1 the A blocks, the same in every pass, are
    # exchanged once before the Repeat loop; each pass moves only its B blocks
    kw = dict(tiles=60, flops_per_cycle=128, precision="fp16", operands_in_place=True)
    plan = build_matmul_plan(100, 96, 64, (2, 3, 6), serial=(1, 4), **kw)
    first, *loop = plan.phases
    assert first.name == "input-broadcast" and first.repeat == 1 and not first.vertices.any()
    assert int(first.bytes_in.max()) > 0 and all(p.name != "input-broadcast" for p in loop)
    matmul = next(p for p in loop if p.name == "matmul")
    assert matmul.repeat == 4
    b_recv = plan.depth * plan.cols - (plan.depth * plan.cols) // plan.split_m  # the B block less its own share
    assert np.array_equal(matmul.bytes_in, np.where(plan.macs > 0, b_recv * 2, 0))
    # an input-channel split slices the input: it moves in every pass, with no broadcast
    assert all(
        p.name != "input-broadcast" for p in build_matmul_plan(100, 96, 64, (2, 3, 6), serial=(4, 1), **kw).phases
    )


def test_serial_slice_copies_the_whole_weight_share():
    # poplin's dynamic slice copies every tile's share of the pass's weights (Convolution.cpp,
    # dynamicSliceWithOutput), sent on or not: with P_m = 1 nothing of B is sent, all of it is sliced
    plan = build_matmul_plan(8, 64, 64, (1, 4, 4), serial=(1, 2), tiles=16, flops_per_cycle=128, precision="fp16",
                             operands_in_place=True)  # fmt: skip
    sliced = next(p for p in plan.phases if p.name == "serial-slice")
    assert np.array_equal(sliced.macs, plan.depth * plan.cols)  # one pass's B block (k_t x n_t), all held here


def test_serial_splits_are_one_kind_at_a_time():
    from tilesim.models.linear.planner import _serial_pairs

    pairs = _serial_pairs(4096, 4096, 64)  # ConvModel.cpp: "Only support one kind of serial split at a time"
    assert (1, 1) in pairs and (64, 1) in pairs and (1, 64) in pairs
    assert all(min(p) == 1 for p in pairs)


def test_memory_proportion_bounds_poplins_temporary_estimate():
    # ConvModel.cpp totalTempBytes: the tile's whole A and B blocks and its partials block (+ the S_k accumulator);
    # the reduction's receive buffer and the slice copy are not in it (the live bytes are)
    plan = build_matmul_plan(100, 96, 64, (3, 2, 5), tiles=60, flops_per_cycle=128, precision="fp16")
    r, d, c = (int(a[0]) for a in (plan.rows, plan.depth, plan.cols))
    assert plan.estimate_temp_bytes == (r * d + d * c) * 2 + r * c * 4
    assert plan.estimate_temp_bytes != int(plan.temp_bytes.max())
    acc = build_matmul_plan(100, 96, 64, (3, 1, 5), serial=(2, 1), tiles=60, flops_per_cycle=128, precision="fp16")
    r, d, c = (int(a[0]) for a in (acc.rows, acc.depth, acc.cols))
    assert acc.estimate_temp_bytes == (r * d + d * c) * 2 + r * c * 4 + r * c * 4


def test_memory_proportion_bounds_temporary_bytes():
    kw = dict(tiles=64, sram_bytes=200_000, flops_per_cycle=32)
    loose = plan_matmul(512, 512, 512, PlanTarget(memory_proportion=1.0, **kw))
    tight = plan_matmul(512, 512, 512, PlanTarget(memory_proportion=0.2, **kw))
    assert tight.estimate_temp_bytes <= 0.2 * 200_000 < loose.estimate_temp_bytes
    assert tight.predicted_cycles >= loose.predicted_cycles and tight.within_proportion
    least = plan_matmul(512, 512, 512, PlanTarget(memory_proportion=0.0, **kw))  # PopLibs: 0 = least temporary memory
    assert not least.within_proportion and least.estimate_temp_bytes <= tight.estimate_temp_bytes
    with pytest.raises(ConfigError, match=r"memory_proportion = 1.5: must be in \[0, 1\]"):
        plan_matmul(64, 64, 64, PlanTarget(memory_proportion=1.5, **kw))


def test_fp16_partials_halve_partial_bytes():
    a = build_matmul_plan(64, 256, 64, (2, 4, 2), tiles=16, flops_per_cycle=128, precision="fp16")
    b = build_matmul_plan(
        64, 256, 64, (2, 4, 2), tiles=16, flops_per_cycle=128, precision="fp16", partials_precision="fp16"
    )
    assert int(b.partial_bytes.max()) * 2 == int(a.partial_bytes.max())
    assert b.predicted_cycles < a.predicted_cycles


def test_matmul_beyond_chip_sram_names_smallest_plan_and_fix():
    # 2 GB of fp32 operands: more than 1472 x 624 KiB in every plan
    with pytest.raises(
        SramOverflowError,
        match=r"\(2097152, 256, 2\) fp32 on 1472 tiles: no plan fits, even with serial "
        r"splits.*the smallest.*needs \d+ B of data on tile 0 > sram_bytes = "
        r"638976 B; the operands and result alone are \d+ B per tile: use more",
    ):
        plan_matmul(2097152, 256, 2, PlanTarget(tiles=1472, **GC200))


def test_explain_lists_partition_serial_categories_and_phases():
    from tilesim.models.linear.planner import explain_plan

    text = explain_plan(plan_matmul(2048, 4096, 4096, PlanTarget(**BOW_FP16)), SuperstepCosts(), 638_976)
    for piece in (
        "(P_m, P_k, P_n)",
        "serial splits (S_k, S_n)",
        "availableMemoryProportion",
        "home_bytes",
        "operand_bytes",
        "phase matmul",
        "predicted",
    ):
        assert piece in text
