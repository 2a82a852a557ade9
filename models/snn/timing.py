"""One sparse-BPTT training step as a BSP program, and its per-tile SRAM, on a tile machine.

The supersteps follow the authors' IPU implementation (snn-on-ipu.md §3.3, §3.4, §7; the
``sparse_layer`` custom op of ``jrfinkbeiner/graphcore_snn`` as benchmarked in Sept 2022): one
Poplar op runs the whole network and time loop; the vertex compute sets hold *all* layers at
once (the one-step delay between layers), but the PopLibs calls around them
(``dynamicSlice``/``dynamicUpdate`` of the sequences, ``Copy`` programs, ``poprand``,
``mulInPlace``) are issued *per layer*, each its own compute set or exchange with its own sync.
Each compute set's time comes from the per-tile work counters of the functional run
(``models.snn.counters``) through a :class:`tilesim.costs.CostModel`; a superstep's exchange
carries what the *next* superstep needs. Rows per time step, with ``L`` weight layers:

Forward, for t = 0 … T−1
  ``fwd: slice inputs``  loop counter, ``dynamicSlice`` of the data input, 2(L−1) ``Copy`` of each
                         layer's list into the next layer's input buffer; exchange: every owner
                         tile receives its sample lists, B·(N_max_in+1)·4 bytes (broadcast).
  ``fwd: state update``  owner tiles: gather weight rows of the input list, LIF update (B vertices),
                         then the dense two-threshold flags (one vertex per neuron and sample);
                         exchange: the flags (8·n·B bytes per owner tile) go to the compaction tiles.
  ``fwd: compaction``    L ``poprand`` calls, then B·2·f compaction tiles per layer (f from the
                         neuron count, §3.3 step 5) scan their chunk of flags on 6 workers and merge
                         the 6 chunk lists; exchange: tile lists to the per-sample combiners.
  ``fwd: combine``       one combiner per (layer, sample) merges 2·f lists, spikes first, up to
                         N_max; exchange: the list to the sequence slice and the next layer's input
                         buffer (a link flow if that layer sits on another chip).
  ``fwd: update sequences``  3L ``dynamicUpdate`` (v, ids, counts).
``loss``                 output tiles turn the last layer's list dense (sparse2dense) and send the
                         slot gradients g back.
Backward, for t = T−1 … 0
  ``bwd: slice sequences``  2 index updates and 5L+1 ``dynamicSlice``.
  ``bwd: replicate lists``  one row per layer: 5 ``Copy`` programs replicate the layer's own list
                         and g (state grad) and its input list (weight grad) onto every owner tile
                         (separate programs per layer, so these exchanges add up over layers).
                         Broadcast receives count 1/tiles_per_supertile of their bytes: both
                         tiles of a supertile take the same data at 8 B/cycle (§3.2).
  ``bwd: state grad``    B vertices per tile scan their sample's whole slot list, apply the
                         surrogate to their own slots; then per layer a ``Copy`` and a
                         ``mulInPlace`` (δI = 10(1−α)δv).
  ``bwd: weight+input grad``  dW += input rows × δI (6 worker vertices, private dW copies), then
                         the input-gradient partials (one vertex per sample); exchange: partials
                         to the stage-1 reduction, spread over the chip's tiles.
  ``bwd: reduce input grad``  stage-1 sums and the stage-2 ``reduceMany``.
``dW reduce`` (zeroing, 6 copies → 1), ``optimizer`` (Adam or SGD), once per step, and
``host: variable sync``: after every device execution of ``steps_per_execution`` steps the
framework copies the trainable state (weights and optimizer slots) to the host; amortised per
step: ``host_sync_cycles_per_byte`` · 4·(1 + slots)·weights on the chip / steps_per_execution.
The input sequence (T·B·(input_cap+1)·4 bytes) arrives once per step by host infeed.

Superstep overhead. A compute set costs ``compute_set_cycles`` on every tile (control code,
vertex launch) on top of its vertices; every superstep costs the machine's sync and exchange
fixed cycles. The PopLibs calls listed above are *folded* into the row they precede: a row
standing for ``k`` compute sets and ``c`` exchange-only copies adds ``k·compute_set_cycles`` of
compute to every tile (tile 0 of chip 0 is left free, as in the authors' op) and
``(k + c − 1)·sync`` / ``(k + c − 1)·exchange_fixed`` cycles that the breakdown books as sync /
exchange (``Program.sync_extra_cycles`` / ``exchange_extra_cycles``).

Multi-chip: one Poplar graph spans all chips, so every superstep syncs all chips (§3.6).

Changes against the first version (which had 6 rows per time step): the per-layer PopLibs
supersteps, the per-compute-set cost, the per-layer replicate exchanges, the dense-flag and
tile-combine compute sets, the host infeed and the amortised variable sync were added after
comparing with the 12 measured Bow steps (``models/snn/calibration``); the coefficients are
fitted by ``tilesim calibrate``.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import numpy as np

from models.snn.counters import WORKERS_PER_TILE, WorkCounters, layer_memory
from models.snn.network import NetworkConfig
from models.snn.placement import Placement
from tilesim.costs import CostModel, barrel_tile_cycles, load_costs
from tilesim.errors import MappingError, require
from tilesim.memory import MemoryLedger
from tilesim.program import Program

__all__ = ["default_costs", "uncalibrated_costs", "compaction_spread", "build_step_program", "snn_memory",
           "PHASE_LABELS", "STEPS_PER_EXECUTION"]

PHASE_LABELS = ("fwd: slice inputs", "fwd: state update", "fwd: compaction", "fwd: combine",
                "fwd: update sequences", "loss", "bwd: slice sequences", "bwd: replicate lists",
                "bwd: state grad", "bwd: weight+input grad", "bwd: reduce input grad",
                "dW reduce", "optimizer", "host: variable sync")
STEPS_PER_EXECUTION = 52     # the calibration runs: one device execution per epoch of 52 steps


@lru_cache(maxsize=1)
def default_costs() -> CostModel:
    """The shipped calibrated cost model (``tilesim/presets/costs/snn.toml``; read once)."""
    with resources.as_file(resources.files("tilesim") / "presets" / "costs" / "snn.toml") as p:
        return load_costs(p)


def uncalibrated_costs() -> CostModel:
    """Version 0: first-principles instruction counts, before any fit (``models/snn/costs.toml``)."""
    with resources.as_file(resources.files("models.snn") / "costs.toml") as p:
        return load_costs(p)


def compaction_spread(n: int) -> int:
    """f: tiles per (sample, threshold) the dense→sparse step spreads a layer of n neurons over
    (§3.3 step 5: w = ⌊n/64⌋ + [n mod 64 > 32] workers; f = max(⌊w/6⌋ + [w mod 6 ≥ 2], 1))."""
    w = n // 64 + int(n % 64 > 32)
    return max(w // 6 + int(w % 6 >= 2), 1)


@dataclass(frozen=True)
class _Layer:
    chip: int
    tiles: np.ndarray          # owner tiles (global)
    comp_tiles: np.ndarray     # compaction tiles (global), B·2·f of them
    comb_tiles: np.ndarray     # combiner tiles (global), B of them
    f: int


def _layout(config: NetworkConfig, placement: Placement, tiles_per_chip: int) -> list[_Layer]:
    B = config.batch
    out = []
    chip_layers: dict[int, list[int]] = {}
    for l, ton in enumerate(placement.tile_of_neuron):
        chips = np.unique(ton // tiles_per_chip)
        if chips.size != 1:
            raise MappingError(f"layer {l + 1} spans chips {chips.tolist()}: the sparse op needs each "
                               "layer on one chip; use a placement that keeps layers whole")
        chip_layers.setdefault(int(chips[0]), []).append(l)
    for l, ton in enumerate(placement.tile_of_neuron):
        chip = int(ton[0] // tiles_per_chip)
        n = config.layers[l + 1]
        f = compaction_spread(n)
        # compaction tiles of all layers on a chip are spread evenly over that chip (§3.3)
        mine = chip_layers[chip]
        counts = [B * 2 * compaction_spread(config.layers[k + 1]) for k in mine]
        total = sum(counts)
        first = sum(counts[:mine.index(l)])
        slots = (np.arange(first, first + counts[mine.index(l)]) * tiles_per_chip) // max(total, tiles_per_chip)
        comp = chip * tiles_per_chip + (slots % tiles_per_chip)
        out.append(_Layer(chip, np.unique(ton).astype(np.int64), comp.astype(np.int64),
                          comp[::2 * f][:B].astype(np.int64), f))
    return out


def build_step_program(config: NetworkConfig, placement: Placement, counters: WorkCounters, machine,
                       costs: CostModel | None = None, name: str = "snn training step",
                       steps_per_execution: int = STEPS_PER_EXECUTION, cache: dict | None = None) -> Program:
    """The BSP program of one training step, from the step's per-step counters.

    ``counters`` must hold per-step arrays (``train_step(..., per_step_counters=True)`` or
    ``count_work(activity, placement, per_step=True)``). ``steps_per_execution``: training steps
    per device execution, over which the host variable sync is amortised. ``cache`` (a dict the
    caller keeps, e.g. across a mapping search) reuses each layer's position-independent terms
    while its counters are the same objects.

    Per-layer work is computed on the layer's own tiles and written straight into the rows of
    the program's arrays (row views), so a re-timing costs a few passes over ``[S, tiles]``.
    """
    costs = costs or default_costs()
    require(isinstance(steps_per_execution, (int, np.integer)) and steps_per_execution >= 1,
            "steps_per_execution", steps_per_execution, "must be an integer >= 1")
    C, TPC = machine.chips, machine.tiles_per_chip
    N = machine.total_tiles
    if placement.n_tiles != N:
        raise MappingError(f"placement n_tiles = {placement.n_tiles}: machine {machine.name} has {N} tiles; "
                           "build the placement for this machine")
    T, B = config.timesteps, config.batch
    L = config.n_layers
    nmax = config.n_max
    lay = _layout(config, placement, TPC)
    rec = config.recurrent if isinstance(config.recurrent, tuple) else (bool(config.recurrent),) * L
    workers = machine.chip.workers_per_tile
    sup = machine.chip.supervisor_overhead_cycles
    cs_cycles = costs.coef("compute_set_cycles")
    sync_c = float(machine.group_sync_cycles(C))
    exch_c = float(machine.chip.exchange_fixed_cycles)
    active = np.ones(N)
    active[0] = 0.0                                   # tile 0 of chip 0 is outside the op's graph
    in_graph = [any(p.phase == "input_grad" and p.layer == l for p in counters.phases) for l in range(L)]
    any_in = any(in_graph)

    def overhead(n_cs, n_copy=0):
        """Compute cycles on every tile of a row standing for n_cs compute sets and n_copy copies
        (their extra syncs and exchange set-ups are booked as sync / exchange: :func:`folded`)."""
        return active * (n_cs * cs_cycles)

    def folded(n_cs, n_copy=0):
        """Supersteps folded into a row beyond the row itself."""
        return max(n_cs + n_copy - 1, 0)

    def loc(phase, layer, cname):
        """float64 [T, n_local]: a per-step counter on the layer's own tiles (= ``_Layer.tiles``)."""
        pc = counters.get(phase, layer)
        if pc.local_steps is None:
            raise ValueError("counters need per-step arrays: use per_step_counters=True")
        return pc.local_steps[pc.row(cname)].astype(np.float64)

    def cycles(work, vertices):
        return barrel_tile_cycles(work, vertices, workers, sup)

    def chip_cols(c):
        return slice(c * TPC, (c + 1) * TPC)

    chip_acc: dict = {}

    def chip_add(name, view, c, values):
        """Add ``values`` ([T] or scalar) to every tile of chip ``c`` in ``view`` — collected per
        view and chip, applied once at the end (one pass per row instead of one per layer)."""
        if name not in chip_acc:
            chip_acc[name] = (view, np.zeros((T, C)))
        chip_acc[name][1][:, c] += values

    def cols(tiles):
        """A slice for a run of consecutive tiles (cheap views), else the index array."""
        if tiles.size and tiles[-1] - tiles[0] + 1 == tiles.size:
            return slice(int(tiles[0]), int(tiles[-1]) + 1)
        return tiles

    uniq: dict = {}

    def spread(target, tiles, values):
        """target[:, tiles] += values for tiles that may repeat (values [T] or scalar)."""
        key = id(tiles)
        if key not in uniq:
            u, cnt = np.unique(tiles, return_counts=True)
            uniq[key] = (cols(u), cnt.astype(np.float64))
        u, cnt = uniq[key]
        v = np.asarray(values, np.float64)
        target[:, u] += (v[:, None] if v.ndim else v) * cnt[None, :]

    vc = costs.coef("vertex_calls")
    # a broadcast reaches both tiles of a supertile at once: 8 B/cycle per pair (§3.2)
    pair = float(machine.chip.tiles_per_supertile)
    RF, RB = 5, 4 + L
    S = RF * T + 1 + RB * T + 3
    compute = np.zeros((S, N), np.float32)      # the program's own dtype: no conversion copy
    bytes_in = np.zeros((S, N), np.float32)
    bytes_out = np.zeros((S, N), np.float32)
    # row views: forward rows 5t + k; backward rows s0 + RB·(T−1−t) + k, indexed here by t
    s0 = RF * T + 1
    F, Fi, Fo = (a[:RF * T].reshape(T, RF, N) for a in (compute, bytes_in, bytes_out))
    Bc, Bi, Bo = (a[s0:s0 + RB * T].reshape(T, RB, N)[::-1] for a in (compute, bytes_in, bytes_out))
    f0_in, f0_out = Fi[:, 0], Fo[:, 0]
    f1, f1_in, f1_out = F[:, 1], Fi[:, 1], Fo[:, 1]
    f2, f2_in, f2_out = F[:, 2], Fi[:, 2], Fo[:, 2]
    f3, f3_in, f3_out = F[:, 3], Fi[:, 3], Fo[:, 3]
    def layer_terms(l, ly):
        """Everything of layer ``l`` that does not depend on where its tiles are: per-tile
        [T, n_local] arrays and per-step [T] vectors (cached across calls by the caller)."""
        n_l = config.layers[l + 1]
        d = {}
        recv = loc("state_update", l, "bytes_received")
        d["f0_in"] = recv / pair
        d["f0_out"] = (recv[:, 0] if ly.tiles.size else np.zeros(T)) / TPC
        vert = loc("state_update", l, "vertices")
        work = costs.worker_cycles({
            "synaptic_adds": loc("state_update", l, "synaptic_adds"),
            "neurons_updated": loc("state_update", l, "neurons_updated")}) + vc * vert
        flags = loc("spike_detect", l, "neurons_scanned")
        d["f1"] = cycles(work, vert) + cycles(costs.coef("neurons_scanned") * flags + vc * flags, flags)
        d["f1_out"] = loc("spike_detect", l, "bytes_sent")
        # combine: merge the entries actually kept (real + gradient-only) per sample
        kept = loc("spike_detect", l, "entries_kept").sum(axis=1)              # [T] over tiles
        d["f3"] = cycles(costs.coef("list_entries_merged") * (kept / B + 2 * ly.f) + vc, 1)
        # replicated lists: own ids + counts + g (state grad), the input list (weight grad)
        own = loc("state_grad", l, "bytes_received")
        inp = loc("weight_grad", l, "bytes_received")
        d["rep_in"] = (own + inp) / pair
        d["one_in"] = inp[:, 0] if ly.tiles.size else np.zeros(T)
        d["one_own"] = own[:, 0] if ly.tiles.size else np.zeros(T)
        vert = loc("state_grad", l, "vertices")
        work = costs.worker_cycles({
            "slots_scanned": loc("state_grad", l, "slots_scanned"),
            "slots_applied": loc("state_grad", l, "slots_applied"),
            "neurons_updated": loc("state_grad", l, "neurons_updated")}) + vc * vert
        d["b1"] = cycles(work, vert)
        wv = loc("weight_grad", l, "vertices")
        wg = cycles(costs.worker_cycles({"grad_adds": loc("weight_grad", l, "grad_adds")}) + vc * wv, wv)
        if in_graph[l]:
            iv = loc("input_grad", l, "vertices")
            wg += cycles(costs.worker_cycles({"macs": loc("input_grad", l, "macs")}) + vc * iv, iv)
            partials = loc("input_grad", l, "partial_bytes")
            d["b2_out"] = partials
            d["b2_in"] = partials.sum(axis=1) / TPC
            adds = loc("input_grad", l, "reduction_adds").sum(axis=1) / TPC
            d["b3"] = cycles(costs.coef("reduction_adds") * adds + vc * 6, 6)
        d["b2"] = wg
        return d

    def terms_of(l, ly):
        if cache is None:
            return layer_terms(l, ly)
        ref = counters.get("state_update", l).local_steps
        key = ("build", l)
        hit = cache.get(key)
        if hit is not None and hit[0] is ref and hit[1] is costs and hit[2] == (T, B, TPC, pair, workers, sup):
            return hit[3]
        d = layer_terms(l, ly)
        cache[key] = (ref, costs, (T, B, TPC, pair, workers, sup), d)   # holding ref keeps its id unique
        return d

    # ---- forward ------------------------------------------------------------------------------
    flows_fwd: list[tuple] = []          # (src chip, dst chip, bytes)
    terms = [terms_of(l, ly) for l, ly in enumerate(lay)]
    for l, ly in enumerate(lay):
        n_l = config.layers[l + 1]
        tl = cols(ly.tiles)
        d = terms[l]
        # input lists broadcast to every owner tile; the senders pay one copy, spread over the chip
        f0_in[:, tl] += d["f0_in"]
        chip_add("f0_out", f0_out, ly.chip, d["f0_out"])
        f1[:, tl] += d["f1"]
        f1_out[:, tl] += d["f1_out"]
        chunk = -(-n_l // ly.f)                          # neurons per compaction tile
        spread(f1_in, ly.comp_tiles, 4.0 * chunk)        # one uint32 per neuron and threshold
        # compaction: 6 chunk vertices per tile scan their flags, then one vertex merges them
        comp_work = costs.coef("flags_scanned") * chunk + vc * 6
        tile_list = min(nmax[l], chunk)
        comb1 = costs.coef("list_entries_merged") * tile_list + vc
        spread(f2, ly.comp_tiles, float(cycles(comp_work, 6) + cycles(comb1, 1)))
        spread(f2_out, ly.comp_tiles, 4.0 * (tile_list + 1))
        spread(f2_in, ly.comb_tiles, 4.0 * (tile_list + 1) * 2 * ly.f)
        spread(f3, ly.comb_tiles, d["f3"])
        list_bytes = 4.0 * (nmax[l] + 2)
        spread(f3_out, ly.comb_tiles, list_bytes)
        # the list lands in the sequence slice (spread over the chip)
        chip_add("f3_in", f3_in, ly.chip, B * list_bytes / TPC)
        if l + 1 < L and lay[l + 1].chip != ly.chip:
            flows_fwd.append((ly.chip, lay[l + 1].chip, B * list_bytes))
    rows_f = [(3, 2 * (L - 1)), (2, 0), (2 + L, 0), (1, 0), (3 * L, 0)]
    F += np.stack([overhead(*r) for r in rows_f])

    # ---- loss ---------------------------------------------------------------------------------
    out = lay[-1]
    loss = compute[RF * T]
    loss += overhead(3)
    loss[out.tiles] += float(cycles(costs.coef("loss_entries") * B * nmax[-1] / out.tiles.size + vc, 1))
    bytes_in[RF * T, out.tiles] = B * (8.0 * nmax[-1] + 8)

    # ---- backward: rows slice, replicate × L, state grad, weight+input grad, reduce -------------
    b1, b2, b3 = Bc[:, 1 + L], Bc[:, 2 + L], Bc[:, 3 + L]
    b2_in, b2_out, b3_in, b3_out = Bi[:, 2 + L], Bo[:, 2 + L], Bi[:, 3 + L], Bo[:, 3 + L]
    flows_rep: list[tuple] = []          # (layer, src chip, dst chip, bytes)
    flows_b3: list[tuple] = []
    for l, ly in enumerate(lay):
        tl = cols(ly.tiles)
        d = terms[l]
        Bi[:, 1 + l, tl] += d["rep_in"]
        src = lay[l - 1] if l > 0 else ly
        chip_add(f"rep_out{l}", Bo[:, 1 + l], ly.chip, d["one_own"] / TPC)
        chip_add(f"rep_out{l}", Bo[:, 1 + l], src.chip, d["one_in"] / TPC)
        if l > 0 and src.chip != ly.chip:
            flows_rep.append((l, src.chip, ly.chip, float(d["one_in"][0])))
        b1[:, tl] += d["b1"]
        if in_graph[l]:
            b2_out[:, tl] += d["b2_out"]
            # stage-1 reduction spread over every tile of the layer's chip
            chip_add("b2_in", b2_in, ly.chip, d["b2_in"])
            chip_add("b3", b3, ly.chip, d["b3"])
            # the reduced slot gradients go to the layer below (and, if recurrent, to this layer)
            for k in ([l - 1] if l > 0 else []) + ([l] if rec[l] else []):
                g_bytes = B * (8.0 * nmax[k] + 8)
                chip_add("b3_out", b3_out, ly.chip, g_bytes / TPC)
                chip_add("b3_in", b3_in, lay[k].chip, g_bytes / TPC)
                if lay[k].chip != ly.chip:
                    flows_b3.append((ly.chip, lay[k].chip, g_bytes))
        b2[:, tl] += d["b2"]
    for view, acc in chip_acc.values():
        for c in np.flatnonzero(acc.any(axis=0)):
            view[:, chip_cols(c)] += acc[:, c][:, None]
    rows_b = [(5 * L + 3, 0)] + [(0, 5)] * L + [(1 + L, L), (1 + int(any_in), 0), (3 if any_in else 0, 0)]
    Bc += np.stack([overhead(*r) for r in rows_b])

    # ---- once per step --------------------------------------------------------------------------
    dwr, opt, host_sync = compute[S - 3], compute[S - 2], compute[S - 1]
    dwr += overhead(2 + L)
    opt += overhead(2 * L)
    weights_on_chip = np.zeros(C)
    key = "adam_updates" if config.optimizer == "adam" else "sgd_updates"
    for l, ly in enumerate(lay):
        pc = counters.get("optimizer", l)
        upd = pc.local_totals[0].astype(np.float64)                          # weights per tile
        weights_on_chip[ly.chip] += upd.sum()
        nw = np.where(upd > 0, WORKERS_PER_TILE, 0)
        dwr[cols(pc.tiles)] += cycles(costs.coef("dw_reduce_adds") * (WORKERS_PER_TILE - 1) * upd / WORKERS_PER_TILE
                                + costs.coef("dw_zero_writes") * WORKERS_PER_TILE * upd / WORKERS_PER_TILE, nw)
        opt[cols(pc.tiles)] += cycles(costs.coef(key) * upd / WORKERS_PER_TILE, nw)
    slots = 2 if config.optimizer == "adam" else 0
    sync_bytes = 4.0 * (1 + slots) * weights_on_chip / steps_per_execution          # per chip
    host_sync += (costs.coef("host_sync_cycles_per_byte") * np.repeat(sync_bytes, TPC)) * active

    label_id = np.concatenate([np.tile([0, 1, 2, 3, 4], T), [5], np.tile([6] + [7] * L + [8, 9, 10], T),
                               [11, 12, 13]]).astype(np.int32)
    n_folded = np.concatenate([np.tile([folded(*r) for r in rows_f], T), [folded(3)],
                               np.tile([folded(*r) for r in rows_b], T), [folded(2 + L), folded(2 * L), 0]])
    flows = []
    for t in range(T):
        flows += [(RF * t + 3, a, b, nb) for a, b, nb in flows_fwd]
        s = s0 + RB * t                         # backward iteration for time step T-1-t
        flows += [(s + 1 + l, a, b, nb) for l, a, b, nb in flows_rep]
        flows += [(s + RB - 1, a, b, nb) for a, b, nb in flows_b3]
    f_arr = tuple(np.asarray(x) for x in zip(*flows)) if flows else None
    infeed = T * B * 4.0 * (config.input_cap + 1) + 4.0 * B
    host = (np.array([0], np.int32), np.array([lay[0].chip], np.int32), np.array([infeed]))
    scope = np.full(S, 0 if C > 1 else -1, np.int32)
    return Program.from_arrays(chips=C, tiles_per_chip=TPC, compute_cycles=compute, labels=PHASE_LABELS,
                               label_id=label_id, sync_scope=scope, bytes_in=bytes_in, bytes_out=bytes_out,
                               flows=f_arr, host=host, name=name,
                               sync_extra=n_folded * sync_c, exchange_extra=n_folded * exch_c)


# code and bookkeeping bytes per tile (ipu-hardware.md §3.3): a vertex's state holds ~3 SPAN
# edges (8 B each) + 4 B; each codelet's machine code; control code per compute set the tile takes
# part in; 4 B per exchange instruction; worker + supervisor stacks.
VERTEX_STATE_BYTES = 28          # [S]-based: 3 x SPAN (8 B) + 4 B scalar
CODELET_BYTES = 600              # [U] order of a compiled C++ codelet; not published
CONTROL_BYTES_PER_COMPUTE_SET = 32   # [U] no public constant (§3.3); to be calibrated
EXCHANGE_CODE_BYTES_PER_INSTR = 4    # [S] DynamicSlice planner (§3.3)
STACK_BYTES = 6 * 512 + 1024     # [U] worker stacks + supervisor stack


def snn_memory(config: NetworkConfig, placement: Placement, machine, ledger: MemoryLedger | None = None) -> MemoryLedger:
    """Per-tile SRAM of the training step: every tensor of §3.2 plus buffers, vertex state and code."""
    led = ledger or MemoryLedger(machine, remedy=(
        "lower --neurons-per-tile (the 6 per-worker dW copies grow with fan-in x neurons per tile), "
        "reduce --batch or --timesteps (the state history is T x B x n), use SGD instead of Adam, "
        "or spread the network over more chips (--chips)"))
    TPC = machine.tiles_per_chip
    T, B = config.timesteps, config.batch
    nmax = config.n_max
    lay = _layout(config, placement, TPC)
    rec = config.recurrent if isinstance(config.recurrent, tuple) else (bool(config.recurrent),) * config.n_layers
    roles = {"weights": "variables:weights", "dw_worker_copies": "variables:gradients",
             "dw_final": "variables:gradients", "optimizer_state": "variables:optimizer",
             "state_sequence": "variables:state", "state": "variables:state",
             "input_grad_partials": "variables:activations"}
    for l, ly in enumerate(lay):
        n_in = config.layers[l]
        n_max_in = config.input_cap if l == 0 else nmax[l - 1]
        mem = layer_memory(n_in, config.layers[l + 1], T, B, n_max_in, placement.tile_of_neuron[l],
                           placement.n_tiles, config.optimizer, bool(rec[l]))
        for key, arr in mem.items():
            if arr.any():
                led.add(roles[key], arr[ly.tiles], ly.tiles, f"layer {l + 1} {key.replace('_', ' ')}")
        # spike id/count sequences [T, B, N_max] + [T, B, 2], spread over the layer's chip (tile 0 of chip 0 free)
        chip_tiles = np.arange(ly.chip * TPC + (1 if ly.chip == 0 else 0), (ly.chip + 1) * TPC)
        led.add("variables:spikes", 4.0 * T * B * (nmax[l] + 2) / chip_tiles.size, chip_tiles,
                f"layer {l + 1} spike sequence")
        led.add("exchange_buffers", B * 4.0 * ((n_max_in + 1) + (n_max_in + 2) + 2 * nmax[l] + 2), ly.tiles,
                f"layer {l + 1} receive buffers (input list, replicated inputs, slot ids + g)")
        led.add("exchange_buffers", 4.0 * (2 * -(-config.layers[l + 1] // ly.f) + nmax[l] + 2), ly.comp_tiles,
                f"layer {l + 1} compaction flags and chunk list")
        n_own = placement.neurons_owned(l)[ly.tiles]
        vertices = 3 * B + WORKERS_PER_TILE + B + B * n_own       # update, grads, flags per (neuron, sample)
        led.add("vertex_state", VERTEX_STATE_BYTES * vertices, ly.tiles, f"layer {l + 1} vertex state")
        led.add("vertex_code", CODELET_BYTES * 6, ly.tiles, f"layer {l + 1} codelets")
        led.add("control_code", CONTROL_BYTES_PER_COMPUTE_SET * 8, ly.tiles, f"layer {l + 1} compute-set control")
        led.add("exchange_code", EXCHANGE_CODE_BYTES_PER_INSTR * (B * 6 + 16), ly.tiles, f"layer {l + 1} exchange code")
    # the data input sequence [T, B, input_cap] ids + counts, spread over chip 0
    tiles0 = np.arange(1, TPC)
    led.add("variables:inputs", 4.0 * T * B * (config.input_cap + 1) / tiles0.size, tiles0, "input spike sequence")
    used = np.unique(np.concatenate([ly.tiles for ly in lay] + [ly.comp_tiles for ly in lay]))
    led.add("stack", STACK_BYTES, used, "worker and supervisor stacks")
    return led
