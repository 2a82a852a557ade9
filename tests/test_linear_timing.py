"""Timing/memory integration: engine vs planner cycles, ledger categories, step composition."""

import numpy as np
import pytest

from tilesim.errors import ConfigError, SramOverflowError
from tilesim.machine.description import load_machine
from tilesim.models.linear.phases import SuperstepCosts, phases_cycles
from tilesim.models.linear.planner import PlanTarget
from tilesim.models.linear.schedules import butterfly_schedule, dense_schedule
from tilesim.models.linear.shl import TABLE4_PARAMS
from tilesim.models.linear.steps import butterfly_backward_schedule, circulant_schedules, fastfood_schedules
from tilesim.models.linear.timing import layer_params, machine_costs, time_layer, time_parts, time_shl

GC200 = load_machine("gc200")


def test_engine_matches_planner_cycles():
    costs = machine_costs(GC200)
    s = dense_schedule(512, 512, 50, PlanTarget(tiles=1472, sram_bytes=638_976, flops_per_cycle=32, costs=costs))
    t = time_parts([("fwd", s)], GC200)
    assert t.step_s * GC200.clock_hz == pytest.approx(phases_cycles(s.phases, costs), abs=1)


def test_butterfly_backward_counts_work():
    costs = SuperstepCosts()
    f = butterfly_schedule(256, 50, PlanTarget(tiles=1472, sram_bytes=638_976))
    b = butterfly_backward_schedule(f, 256, 50, costs=costs)
    grad = [p for p in b.phases if p.name.startswith("butterfly-grad")]
    assert [p.name for p in grad] == [f"butterfly-grad-{k}" for k in range(7, -1, -1)]
    for p in grad:
        assert int(p.macs.sum()) == 4 * 50 * 256


def test_fastfood_and_circulant_schedules():
    kw = dict(tiles=1472, sram_bytes=638_976)
    ff, ffb = fastfood_schedules(1024, 50, PlanTarget(**kw))
    assert ff.compute_sets == 2 * 10 + 1
    h = [p for p in ff.phases if p.name.startswith("fastfood-h")]
    assert sum(int(p.macs.sum()) for p in h) >= 2 * 50 * 1024 * 10  # >= 2 n log2 n adds per sample
    cf, cb = circulant_schedules(1024, 50, PlanTarget(**kw))
    assert cf.compute_sets == 2 * 9
    assert cb.compute_sets > cf.compute_sets
    with pytest.raises(ConfigError, match=r"n = 1000: must be a power of two"):
        fastfood_schedules(1000, 50, PlanTarget(**kw))


def test_shl_step_memory_categories_and_params():
    for method in ("baseline", "butterfly"):
        t = time_shl(method)
        assert t.params == TABLE4_PARAMS[method]
        assert t.fits and 0 < t.max_tile_bytes <= GC200.chip.sram_bytes
        cats = t.ledger.by_category()
        for c in (
            "variables:activations",
            "variables:weights",
            "vertex_state",
            "vertex_code",
            "control_code",
            "exchange_code",
        ):
            assert cats.get(c, 0) > 0, c
        assert t.step_s == pytest.approx(sum(t.part_s.values()))
    assert layer_params("pixelfly", 1024) + 10_250 == TABLE4_PARAMS["pixelfly"]
    assert layer_params("butterfly", 1024) + 1024 + 10_250 == TABLE4_PARAMS["butterfly"]


def test_overheads_grow_with_compute_sets():
    small, big = time_layer("butterfly", 64), time_layer("butterfly", 1024)
    assert big.compute_sets > small.compute_sets
    over = lambda t: sum(t.ledger.by_category().get(c, 0) for c in ("control_code", "vertex_state"))  # noqa: E731
    assert over(big) > over(small)


def test_report_mode_marks_overflow_instead_of_raising():
    t = time_layer("dense", 8192, 50)  # training: weights, gradients and momentum of 67M parameters
    assert not t.fits and t.max_tile_bytes > GC200.chip.sram_bytes and t.overflow_tiles > 0


def test_mesh_machine_runs_and_unknown_kind():
    t = time_shl("low-rank", machine="mesh-demo")
    assert t.step_s > 0
    with pytest.raises(ConfigError, match=r"kind = 'conv'"):
        time_layer("conv", 64)
    from tilesim.models.linear.schedules import pixelfly_schedule

    with pytest.raises(
        SramOverflowError, match=r"block-sparse matmul \(m, k, n\) = \(1024, 1024, 50\).*no partition fits"
    ):
        pixelfly_schedule(1024, 50, 16, 16, 32, PlanTarget(tiles=4, sram_bytes=100_000, flops_per_cycle=32), workers=6)


# ---- op-by-op (PopTorch) lowering -------------------------------------------------------------
def _vertices():
    from tilesim.machine.description import load_machine
    from tilesim.models.linear.lowering import PoplibsSliceCosts, PoplibsVertexCosts

    m = load_machine("gc200")
    return dict(vertex=PoplibsVertexCosts.for_machine(m), slice_costs=PoplibsSliceCosts.for_machine(m))


def test_poplibs_vertex_constants_follow_the_machine():
    """Issue 14: supervisor overhead and worker count come from the machine, not from lowering.py."""
    from dataclasses import replace

    from tilesim.machine.description import load_machine
    from tilesim.models.linear.timing import step_costs

    m = load_machine("gc200")
    m2 = replace(m, chip=replace(m.chip, supervisor_overhead_cycles=20, workers_per_tile=4))
    assert step_costs(m, "poptorch").vector_fixed_cycles == 11 + 6 * 29
    assert step_costs(m2, "poptorch").vector_fixed_cycles == 20 + 4 * 29


def test_poplibs_vertex_cycles_hand_computed():
    from tilesim.machine.description import load_machine
    from tilesim.models.linear.lowering import PoplibsVertexCosts, poplibs_costs

    v = PoplibsVertexCosts.for_machine(load_machine("gc200"))
    assert (v.supervisor_cycles, v.workers) == (11, 6)  # from the machine file, their one home
    # 70 fp32 elements: 12 per worker (ceil 70/6) -> 6 vectors of 2 -> 11 + 6 * (29 + 3 * 6) = 293
    assert v.cycles(np.array([70, 0]), 4).tolist() == [293, 0]
    c = poplibs_costs(SuperstepCosts(), v)
    assert c.vector_fixed_cycles == 11 + 6 * 29 and c.vector_bytes_per_cycle == pytest.approx(8 / 3)
    with pytest.raises(ConfigError, match="workers"):
        PoplibsVertexCosts(supervisor_cycles=11, workers=0)


def test_poptorch_butterfly_op_count():
    from tilesim.models.linear.lowering import poptorch_layer

    kw = dict(target=PlanTarget(tiles=1472, sram_bytes=638_976, flops_per_cycle=32), **_vertices())
    f, b = poptorch_layer("butterfly", 256, 50, kw)
    # per factor: mul + pair-sum (2 x 8); two bias adds
    assert f.compute_sets == 2 * 8 + 2
    # per factor: expand, grad-x mul + sum, grad-t mul, grad-t sum (2 stages), pad; accumulate; 2 bias grads
    names = [p.name for p in b.phases]
    assert sum(n.startswith("bfly-grad-t-pad") for n in names) == 8 and "bfly-grad-t-accumulate" in names
    _, b0 = poptorch_layer("butterfly", 256, 50, kw, input_grad=False)
    assert len(b.phases) - len(b0.phases) == 2  # the first factor's grad-x mul and sum
    with pytest.raises(ConfigError, match="lowering"):
        poptorch_layer("circulant", 256, 50, kw)


def test_poptorch_pixelfly_ops_follow_embedding_bag_lowering():
    from tilesim.models.linear.lowering import poptorch_layer

    kw = dict(target=PlanTarget(tiles=1472, sram_bytes=638_976, flops_per_cycle=32), **_vertices())
    f, b = poptorch_layer("pixelfly", 1024, 50, kw, input_grad=False)
    names = [p.name for p in f.phases]
    bags = 1024 // 16  # Table 4 configuration: block 16 -> 64 bags
    assert sum(n.startswith("pf-bag-gather-") for n in names) == bags
    assert sum(n.startswith("pf-bag-sum-") and not n.endswith("partial") for n in names) == bags
    bnames = [p.name for p in b.phases]
    for op in ("pf-concat-grad-", "pf-bag-sum-grad-", "pf-gather-grad-zero-", "pf-gather-grad-update-"):
        assert sum(n.startswith(op) for n in bnames) == bags, op
    assert bnames.count("pf-gather-grad-sum") == 1
    # the 64 full-size partial gradients (1280 blocks x 16 x 50) are live at the Sum
    zero = next(p for p in b.phases if p.name == "pf-gather-grad-zero-0")
    assert int(zero.macs.sum()) == 1280 * 16 * 50
    _, b_in = poptorch_layer("pixelfly", 1024, 50, kw)
    assert len(b_in.phases) > len(b.phases)  # input gradient: low-rank matmul + bmm
    # fewer, larger bags are cheaper (paper Table 5: block size dominates the time)
    t16 = time_layer("pixelfly", 1024, 50, lowering="poptorch")
    t64 = time_layer(
        "pixelfly", 1024, 50, lowering="poptorch", pixelfly=dict(block_size=64, butterfly_size=16, lowrank_size=32)
    )
    assert t64.step_s < t16.step_s and t64.compute_sets < t16.compute_sets


def test_poptorch_lowering_is_slower_per_factor_than_fused():
    fused = time_layer("butterfly", 1024, 50, backward=False)
    pt = time_layer("butterfly", 1024, 50, backward=False, lowering="poptorch", host_io=True)
    assert pt.compute_sets > fused.compute_sets and pt.step_s > fused.step_s
    assert pt.host_s > 0 and fused.host_s == 0
    with pytest.raises(ConfigError, match="lowering"):
        time_layer("dense", 64, lowering="xla")


def test_poptorch_shl_step_parts_and_params():
    t = time_shl("fastfood", lowering="poptorch")
    assert t.params == TABLE4_PARAMS["fastfood"] and t.fits
    assert set(t.part_s) == {
        "hidden-fwd",
        "act-fwd",
        "classifier-fwd",
        "loss",
        "classifier-bwd",
        "act-bwd",
        "hidden-bwd",
        "update",
    }


# ---- issue 21: dense matmul throughput on Bow from counted work ------------------------------------
@pytest.mark.parametrize("batch", [1024, 2048])
def test_dense_fp16_4096_throughput_on_bow(batch):
    t = time_layer("dense", 4096, batch, "bow", precision="fp16", backward=False)
    tflops = 2 * batch * 4096 * 4096 / t.step_s / 1e12
    assert t.fits and 150 < tflops < 260  # peak 1472 x 128 x 1.85 GHz = 349 TFLOP/s


def test_serial_plan_engine_time_equals_predicted_cycles():
    from tilesim.machine.description import load_machine
    from tilesim.models.linear.planner import plan_matmul
    from tilesim.models.linear.timing import machine_costs, time_parts

    m = load_machine("bow")
    plan = plan_matmul(
        2048,
        4096,
        4096,
        PlanTarget(
            tiles=m.tiles_per_chip,
            sram_bytes=m.chip.sram_bytes,
            flops_per_cycle=m.chip.fp16_flops_per_cycle,
            precision="fp16",
            costs=machine_costs(m),
        ),
    )
    assert plan.serial_k * plan.serial_n > 1
    t = time_parts([("mm", plan)], m)
    assert t.step_s * m.clock_hz == pytest.approx(plan.predicted_cycles, rel=1e-9)
    assert t.compute_sets == len(plan.phases)  # a Repeat body is one compute set


def test_forward_only_ledger_counts_weights_once_and_no_gradients_or_momentum():
    inference = time_layer("dense", 256, 50, backward=False)
    training = time_layer("dense", 256, 50)
    plan = inference.schedules[0][1].parts[0]  # the weights are the matmul's B home chunks
    assert inference.memory_by_category["variables:activations"] >= int(plan.home_bytes.max())
    assert "variables:weights" not in inference.memory_by_category
    assert "variables:gradients" not in inference.memory_by_category
    assert "variables:optimizer" not in inference.memory_by_category
    assert "variables:gradients" in training.memory_by_category and "variables:optimizer" in training.memory_by_category


def test_breakdown_adds_up_to_the_device_step():
    """Issue 20: `tilesim shl --json` put the host input into breakdown_s but not into step_s."""
    from tilesim.models.linear.timing import time_shl

    t = time_shl("dense", 50, "gc200")
    assert t.host_s > 0
    assert sum(t.breakdown_s.values()) == pytest.approx(t.step_s, rel=1e-9)
