"""The matmul planner's shortcuts change no plan (issue 41): the per-tile memory floor never exceeds a built
plan's tile 0, a matmul no partition can fit is refused before its partitions are scored, and plan_matmul chooses
what the implementation before the shortcuts chose (kept below as ``_old_plan_matmul``) on random problems."""

import time

import numpy as np
import pytest

from tilesim.errors import SramOverflowError
from tilesim.models.linear import planner as P
from tilesim.models.linear.phases import OverheadConstants
from tilesim.models.linear.planner import PlanTarget, build_matmul_plan, plan_matmul

PREC = {2: "fp16", 4: "fp32"}


def _old_candidate_table(m, k, n, tiles, sram_bytes, bound, eb, pb, amp_spec, layout, costs, max_serial):
    """``_candidate_table`` as it was before issue 41's shortcuts."""
    cols: dict = {key: [] for key in ("pm", "pk", "pn", "sk", "sn", "total", "temp", "data")}
    for sk, sn in P._serial_pairs(k, n, max_serial):
        fastest_ok = fastest_fit = np.inf
        for split in P._candidates(m, k // sk, n // sn, tiles):
            pm, pk, pn, total, temp0, data0 = P._closed_form(
                m, k, n, sk, sn, tiles, eb, pb, amp_spec, layout, costs, split
            )
            fit = data0 <= sram_bytes
            ok = fit & (temp0 <= bound)
            keep = P._best(ok, total) | P._best(fit, temp0)
            keep[int(np.argmin(data0))] = True
            full = (pm, pk, pn, np.full(pm.shape, sk), np.full(pm.shape, sn), total, temp0, data0)
            for key, v in zip(cols, full):
                cols[key].append(v[keep])
            fastest_ok = min(fastest_ok, total[ok].min()) if ok.any() else fastest_ok
            fastest_fit = min(fastest_fit, total[fit].min()) if fit.any() else fastest_fit
        if sk * sn == 1 and np.isfinite(fastest_ok) and fastest_ok == fastest_fit:
            break
    return {key: np.concatenate(v) for key, v in cols.items()}


def _old_plan_matmul(m, k, n, t: PlanTarget, max_serial=P.MAX_SERIAL_SPLIT):
    """``plan_matmul`` as it was before issue 41's shortcuts (every tried candidate built)."""
    eb, pb = P.require_precision("p", t.precision), P.require_precision("p", t.partials_precision)
    bound = t.memory_proportion * t.sram_bytes
    amp_spec = P.amp_target(t.precision, t.flops_per_cycle, t.workers)
    layout = (t.operands_in_place, t.exchange_bus_tiles)
    c = _old_candidate_table(m, k, n, t.tiles, t.sram_bytes, bound, eb, pb, amp_spec, layout, t.costs, max_serial)
    fit = c["data"] <= t.sram_bytes
    kw = dict(
        tiles=t.tiles, flops_per_cycle=t.flops_per_cycle, precision=t.precision,
        partials_precision=t.partials_precision, costs=t.costs, memory_proportion=t.memory_proportion,
        workers=t.workers, operands_in_place=t.operands_in_place,
        exchange_bus_tiles=t.exchange_bus_tiles,
    )  # fmt: skip
    within = fit & (c["temp"] <= bound)
    for mask, primary, ok in ((within, c["total"], True), (fit, c["temp"], False)):
        order = P._try_order(c, mask, primary, c["total"] if not ok else c["temp"])
        for idx in order[: P.TRY_LIMIT]:
            split = (int(c["pm"][idx]), int(c["pk"][idx]), int(c["pn"][idx]))
            serial = (int(c["sk"][idx]), int(c["sn"][idx]))
            plan = build_matmul_plan(m, k, n, split, serial=serial, within_proportion=ok, **kw)
            if int(plan.memory_bytes(t.overheads).max()) <= t.sram_bytes:
                return plan
    raise P._no_plan_fits(c, m, k, n, t.tiles, t.sram_bytes, t.precision, eb, max_serial)


def _outcome(fn, m, k, n, target):
    try:
        p = fn(m, k, n, target)
    except SramOverflowError:
        return "refused"
    return (p.split, p.serial, p.predicted_cycles, p.within_proportion, int(p.memory_bytes(target.overheads).max()))


def _random_case(rng, tiles):
    m, k, n = (int(x) for x in rng.choice([1, 2, 3, 5, 8, 12, 16, 24, 50, 64, 100, 128, 256, 1000], 3))
    eb, pb = int(rng.choice([2, 4])), int(rng.choice([2, 4]))
    target = PlanTarget(
        tiles=tiles,
        sram_bytes=int(rng.choice([1500, 3000, 6000, 12000, 49152, 638976])),
        flops_per_cycle=float(rng.choice([32.0, 128.0])),
        precision=PREC[eb],
        partials_precision=PREC[pb],
        memory_proportion=float(rng.choice([0.0, 0.3, 0.6, 1.0])),
        operands_in_place=bool(rng.integers(2)),
        exchange_bus_tiles=int(rng.choice([1, 2, 4])),
    )
    return m, k, n, target


def test_floor_never_exceeds_a_built_plans_tile_zero():
    rng = np.random.default_rng(41)
    oc = OverheadConstants()
    for _ in range(400):
        m, k, n, t = _random_case(rng, int(rng.choice([1, 2, 3, 7, 16, 64, 100, 1000, 1472])))
        sk, sn = P._serial_pairs(k, n, 64)[rng.integers(len(P._serial_pairs(k, n, 64)))]
        ks, ns = k // sk, n // sn
        pm = int(rng.integers(1, min(m, t.tiles) + 1))
        pn = int(rng.integers(1, min(ns, t.tiles // pm) + 1))
        pk = int(rng.integers(1, min(ks, t.tiles // (pm * pn)) + 1))
        kw = dict(precision=t.precision, partials_precision=t.partials_precision)
        plan = build_matmul_plan(
            m, k, n, (pm, pk, pn), tiles=t.tiles, flops_per_cycle=t.flops_per_cycle, serial=(sk, sn),
            operands_in_place=t.operands_in_place, exchange_bus_tiles=t.exchange_bus_tiles, **kw,
        )  # fmt: skip
        tile0 = int(plan.memory_bytes(oc)[0])
        eb, pb = (P.require_precision("p", p) for p in (t.precision, t.partials_precision))
        f = P._Floor(m, k, n, t.tiles, eb, pb, t.operands_in_place, oc)
        blocks = (P.ceil_div(m, pm), P.ceil_div(ks, pk), P.ceil_div(ns, pn))
        assert int(P._tile0_floor(f, (sk, sn), (pm, pn), blocks, (pk, pk))) <= tile0
        assert P._memory_floor(f, 64)[0] <= tile0


def test_plans_are_those_of_the_old_planner():
    rng = np.random.default_rng(41)
    outcomes = []
    for tiles in (1, 4, 16, 64, 256, 1472, 5888):
        for _ in range(30):
            m, k, n, target = _random_case(rng, tiles)
            new = _outcome(plan_matmul, m, k, n, target)
            assert new == _outcome(_old_plan_matmul, m, k, n, target), (m, k, n, target)
            outcomes.append(new == "refused")
    assert 20 < sum(outcomes) < len(outcomes) - 20  # both kinds of outcome are compared


@pytest.mark.parametrize("mkn", [(50, 64, 64), (64, 50, 64), (50, 200, 100), (1000, 16, 8)])
def test_wafer_sized_plans_are_those_of_the_old_planner(mkn):
    target = PlanTarget(tiles=850_000, sram_bytes=49152, flops_per_cycle=32.0)
    assert _outcome(plan_matmul, *mkn, target) == _outcome(_old_plan_matmul, *mkn, target)


def test_a_matmul_no_partition_fits_is_refused_before_it_is_searched():
    # a whole wafer (850,000 tiles, 8e7 partitions per serial split): 32 KB is less than any partition needs
    target = PlanTarget(tiles=850_000, sram_bytes=32768, flops_per_cycle=32.0)
    t0 = time.perf_counter()
    with pytest.raises(SramOverflowError, match=r"no plan fits.*needs \d+ B of data on tile 0 > sram_bytes = 32768"):
        plan_matmul(50, 65536, 65536, target)
    assert time.perf_counter() - t0 < 5.0


def _old_conv1x1_cycles(field, in_chans, out_chans, amp):
    """``ampestimate.conv1x1_cycles`` before issue 40 part 4: the outer loop term by term, the inner loops
    element by element."""
    from tilesim.models.linear.ampestimate import _inner

    field, in_chans, out_chans = (np.asarray(a, dtype=np.int64) for a in (field, in_chans, out_chans))
    g_in = -(-in_chans // amp.weights_per_unit)
    g_out = -(-out_chans // amp.conv_units)
    common = 1
    r1, r2 = (0, 0) if amp.float_input else (7, 3)
    load = amp.load_cycles
    with_zero, without = _inner(field, amp, True), _inner(field, amp, False)
    cycles = (
        50
        + amp.workers * (r1 + r2 * (g_in - 1))
        + 12
        + common
        + (g_in - 1) * (15 - common + 1 + g_out * (19 + 6 + load + without))
        + 10
        + 1
        + g_out * (19 - common + 7 + load + with_zero)
    )
    return np.where((field > 0) & (in_chans > 0) & (out_chans > 0), cycles, 0)


def test_amp_estimate_gathered_and_looked_up_is_the_term_by_term_estimate():
    from tilesim.models.linear.ampestimate import amp_target, conv1x1_cycles

    rng = np.random.default_rng(11)
    targets = [amp_target("fp16", 128), amp_target("fp32", 32), amp_target("fp16", 64, workers=4)]
    for _ in range(60):
        amp = targets[int(rng.integers(len(targets)))]
        size = int(rng.integers(1, 400))
        top = int(
            rng.choice([3, 40, 5000, 3 << 20])
        )  # sizes below 2^16 read the tables (widened), larger are worked out
        field, k_t, n_t = (rng.integers(0, top, size) for _ in range(3))
        for args in ((field, k_t, n_t), (field[0], k_t, n_t), (field, int(k_t[0]), n_t), (field, k_t, 0)):
            got, want = conv1x1_cycles(*args, amp), _old_conv1x1_cycles(*args, amp)
            assert got.shape == want.shape and got.dtype == want.dtype and np.array_equal(got, want)
    assert int(conv1x1_cycles(60, 16, 16, targets[0])) == int(_old_conv1x1_cycles(60, 16, 16, targets[0]))


def test_memory_floor_stopping_at_a_fitting_floor_refuses_exactly_what_the_least_refuses():
    rng = np.random.default_rng(43)
    oc = OverheadConstants()
    stopped = 0
    for tiles in (1, 16, 1472):
        for _ in range(25):
            m, k, n, t = _random_case(rng, tiles)
            eb, pb = (P.require_precision("p", p) for p in (t.precision, t.partials_precision))
            f = P._Floor(m, k, n, t.tiles, eb, pb, t.operands_in_place, oc)
            least = P._memory_floor(f, 64)
            sram = float(least[0]) * float(rng.choice([0.5, 0.99, 1.0, 1.01, 3.0]))
            got = P._memory_floor(f, 64, sram)
            assert (got[0] > sram) == (least[0] > sram) and got[0] >= least[0]
            assert got == least if least[0] > sram else got[0] <= sram
            stopped += got != least
    assert stopped > 5  # the shortcut is taken
