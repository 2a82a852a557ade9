"""One sparse-BPTT training step as a BSP program, and its per-tile SRAM, on a tile machine.

The supersteps follow the IPU implementation (snn-on-ipu.md §3.3, §3.4, §7). Each superstep's
compute comes from the per-tile work counters of the functional run (``models.snn.counters``)
through a :class:`tilesim.costs.CostModel`; its exchange carries the data the *next* superstep
needs. All layers advance in the same supersteps (the one-step delay between layers):

Forward, for t = 0 … T−1
  ``fwd: state update``  owner tiles: gather weight rows of the input list, LIF update, write the
                         two dense threshold flags; exchange: the flags (8·n·B bytes per owner
                         tile) go to the layer's compaction tiles.
  ``fwd: compaction``    B·2·f compaction tiles per layer (f from the neuron count, §3.3 step 5)
                         scan their chunk of flags on 6 workers; exchange: chunk lists to the
                         per-sample combiners.
  ``fwd: combine``       one combiner per (layer, sample) merges f lists, spikes first, up to
                         N_max; exchange: the list is broadcast to every owner tile of the next
                         layer (B·(N_max+1)·4 bytes each), and the data input of step t+1 to the
                         first layer's tiles; a layer boundary that crosses chips is a link flow.
``loss``                 output tiles turn the last layer's list dense (sparse2dense) and send
                         the slot gradients g back to the output layer's tiles.
Backward, for t = T−1 … 0
  ``bwd: state grad``    owner tiles scan their sample's whole slot list, apply the surrogate to
                         their own slots, δv ← αδv, δI = 10(1−α)δv; exchange: the replicated
                         input lists for the weight gradient.
  ``bwd: weight+input grad``  dW += input rows × δI (6 worker vertices, private dW copies) and
                         the input-gradient partials (one vertex per sample); exchange: partials
                         to the reduction, spread over the chip's tiles.
  ``bwd: reduce input grad``  stage-1/2 sums; exchange: g of layer l−1 to its owner tiles (a link
                         flow if layer l−1 sits on another chip).
``dW reduce`` (6 copies → 1) and ``optimizer`` (Adam or SGD), once per step.

Multi-chip: one Poplar graph spans all chips, so every superstep syncs all chips (§3.6).
"""
from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import numpy as np

from models.snn.counters import WORKERS_PER_TILE, WorkCounters, layer_memory
from models.snn.network import NetworkConfig
from models.snn.placement import Placement
from tilesim.costs import CostModel, barrel_tile_cycles, load_costs
from tilesim.errors import MappingError
from tilesim.memory import MemoryLedger
from tilesim.program import Program

__all__ = ["default_costs", "compaction_spread", "build_step_program", "snn_memory", "PHASE_LABELS"]

PHASE_LABELS = ("fwd: state update", "fwd: compaction", "fwd: combine", "loss",
                "bwd: state grad", "bwd: weight+input grad", "bwd: reduce input grad",
                "dW reduce", "optimizer")


def default_costs() -> CostModel:
    """The shipped cost model (``models/snn/costs.toml``)."""
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
            raise MappingError(f"layer {l} spans chips {chips.tolist()}: the sparse op needs each "
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
                       costs: CostModel | None = None, name: str = "snn training step") -> Program:
    """The BSP program of one training step, from the step's per-step counters.

    ``counters`` must hold per-step arrays (``train_step(..., per_step_counters=True)`` or
    ``count_work(activity, placement, per_step=True)``).
    """
    costs = costs or default_costs()
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

    def per_step(phase, layer, cname):
        pc = counters.get(phase, layer)
        if pc.per_step is None:
            raise ValueError("counters need per-step arrays: use per_step_counters=True")
        return pc.per_step[pc.row(cname)].astype(np.float64)     # [T, N]

    def cycles(work, vertices):
        return barrel_tile_cycles(work, vertices, workers, sup)

    zeros = lambda: np.zeros((T, N))  # noqa: E731
    # ---- forward ------------------------------------------------------------------------------
    f1, f1_out, f1_in = zeros(), zeros(), zeros()
    f2, f2_out, f2_in = zeros(), zeros(), zeros()
    f3, f3_out, f3_in = zeros(), zeros(), zeros()
    flows_fwd: list[tuple] = []          # (t, src chip, dst chip, bytes)
    for l, ly in enumerate(lay):
        n_l = config.layers[l + 1]
        work = costs.worker_cycles({
            "synaptic_adds": per_step("state_update", l, "synaptic_adds"),
            "neurons_updated": per_step("state_update", l, "neurons_updated"),
            "neurons_scanned": per_step("spike_detect", l, "neurons_scanned")})
        vert = per_step("state_update", l, "vertices")
        work += costs.coef("vertex_calls") * vert
        f1 += cycles(work, vert)
        f1_out += per_step("spike_detect", l, "bytes_sent")
        flags_per_tile = 4.0 * -(-n_l // ly.f)          # one uint32 per neuron and threshold
        np.add.at(f1_in, (slice(None), ly.comp_tiles), flags_per_tile)
        # compaction: 6 chunk vertices per tile scan their flags
        comp_work = costs.coef("flags_scanned") * flags_per_tile / 4 + costs.coef("vertex_calls") * 6
        np.add.at(f2, (slice(None), ly.comp_tiles), float(cycles(comp_work, 6)))
        chunk_list = 4.0 * (min(nmax[l], -(-n_l // ly.f)) + 1)
        np.add.at(f2_out, (slice(None), ly.comp_tiles), chunk_list)
        np.add.at(f2_in, (slice(None), ly.comb_tiles), chunk_list * 2 * ly.f)
        # combine: merge the entries actually kept (real + gradient-only) per sample
        kept = per_step("spike_detect", l, "entries_kept").sum(axis=1)          # [T] over tiles
        comb_work = (costs.coef("list_entries_merged") * (kept / B + 2 * ly.f)
                     + costs.coef("vertex_calls"))
        np.add.at(f3, (slice(None), ly.comb_tiles), cycles(comb_work, 1)[:, None])
        list_bytes = 4.0 * (nmax[l] + 2)
        np.add.at(f3_out, (slice(None), ly.comb_tiles), list_bytes)
        if l + 1 < L:
            nxt = lay[l + 1]
            np.add.at(f3_in, (slice(None), nxt.tiles), B * list_bytes)
            if nxt.chip != ly.chip:
                flows_fwd.append((ly.chip, nxt.chip, B * list_bytes))
    # data input of the next step to layer 0's tiles (dynamicSlice of the stored input sequence)
    in_bytes = B * 4.0 * (config.input_cap + 1)
    f3_in[:, lay[0].tiles] += in_bytes
    f3_out[:, lay[0].comp_tiles] += in_bytes / max(lay[0].comp_tiles.size, 1)   # multicast: one copy

    # ---- loss ---------------------------------------------------------------------------------
    out = lay[-1]
    loss = np.zeros(N)
    loss[out.tiles] = float(cycles(costs.coef("loss_entries") * B * nmax[-1] / out.tiles.size
                                   + costs.coef("vertex_calls"), 1))
    loss_in = np.zeros(N)
    loss_in[out.tiles] = B * (8.0 * nmax[-1] + 8)

    # ---- backward -----------------------------------------------------------------------------
    b1, b1_out, b1_in = zeros(), zeros(), zeros()
    b2, b2_out, b2_in = zeros(), zeros(), zeros()
    b3, b3_out, b3_in = zeros(), zeros(), zeros()
    flows_b2: list[tuple] = []
    flows_b3: list[tuple] = []
    for l, ly in enumerate(lay):
        vert = per_step("state_grad", l, "vertices")
        work = costs.worker_cycles({
            "slots_scanned": per_step("state_grad", l, "slots_scanned"),
            "slots_applied": per_step("state_grad", l, "slots_applied"),
            "neurons_updated": per_step("state_grad", l, "neurons_updated")}) + costs.coef("vertex_calls") * vert
        b1 += cycles(work, vert)
        # replicated input lists for the weight gradient (input spikes of this layer)
        rep = per_step("weight_grad", l, "bytes_received")
        b1_in += rep
        # exchange is multicast: the senders pay one copy of the B input lists, split among them
        src = lay[l - 1] if l > 0 else lay[0]
        one_copy = rep[:, ly.tiles[0]] if ly.tiles.size else np.zeros(T)
        np.add.at(b1_out, (slice(None), src.comb_tiles), (one_copy / max(src.comb_tiles.size, 1))[:, None])
        if l > 0 and lay[l - 1].chip != ly.chip:
            flows_b2.append((lay[l - 1].chip, ly.chip, float(rep[0, ly.tiles[0]]) if ly.tiles.size else 0.0))
        wv = per_step("weight_grad", l, "vertices")
        work_w = costs.worker_cycles({"grad_adds": per_step("weight_grad", l, "grad_adds")}) + costs.coef("vertex_calls") * wv
        has_in = any(p.phase == "input_grad" and p.layer == l for p in counters.phases)
        if has_in:
            iv = per_step("input_grad", l, "vertices")
            work_w = work_w + costs.worker_cycles({"macs": per_step("input_grad", l, "macs")}) + costs.coef("vertex_calls") * iv
            b2 += cycles(work_w, wv + iv)
            partials = per_step("input_grad", l, "partial_bytes")
            b2_out += partials
            # stage-1/2 reduction spread over every tile of the layer's chip
            chip_tiles = np.arange(ly.chip * TPC, (ly.chip + 1) * TPC)
            share = partials.sum(axis=1) / TPC                                   # [T]
            b2_in[:, chip_tiles] += share[:, None]
            adds = per_step("input_grad", l, "reduction_adds").sum(axis=1) / TPC
            b3[:, chip_tiles] += cycles(costs.coef("reduction_adds") * adds + costs.coef("vertex_calls") * 6, 6)[:, None]
            # the reduced slot gradients go to the layer below (and, if recurrent, to this layer)
            dests = ([l - 1] if l > 0 else []) + ([l] if rec[l] else [])
            for d in dests:
                g_bytes = B * (8.0 * nmax[d] + 8)
                b3_out[:, chip_tiles] += g_bytes / TPC
                b3_in[:, lay[d].tiles] += g_bytes
                if lay[d].chip != ly.chip:
                    flows_b3.append((ly.chip, lay[d].chip, g_bytes))
        else:
            b2 += cycles(work_w, wv)

    # ---- once per step --------------------------------------------------------------------------
    dwr = np.zeros(N)
    opt = np.zeros(N)
    for l, ly in enumerate(lay):
        upd = counters.get("optimizer", l).tile_totals[0].astype(np.float64)   # weights per tile
        dwr += cycles(costs.coef("dw_reduce_adds") * (WORKERS_PER_TILE - 1) * upd / WORKERS_PER_TILE,
                      np.where(upd > 0, WORKERS_PER_TILE, 0))
        key = "adam_updates" if config.optimizer == "adam" else "sgd_updates"
        opt += cycles(costs.coef(key) * upd / WORKERS_PER_TILE, np.where(upd > 0, WORKERS_PER_TILE, 0))

    # ---- assemble: forward t = 0..T-1, loss, backward t = T-1..0, dW reduce, optimizer ----------
    rev = slice(None, None, -1)
    comp_rows = [np.stack([f1, f2, f3], axis=1).reshape(3 * T, N), loss[None],
                 np.stack([b1[rev], b2[rev], b3[rev]], axis=1).reshape(3 * T, N), dwr[None], opt[None]]
    in_rows = [np.stack([f1_in, f2_in, f3_in], axis=1).reshape(3 * T, N), loss_in[None],
               np.stack([b1_in[rev], b2_in[rev], b3_in[rev]], axis=1).reshape(3 * T, N),
               np.zeros((1, N)), np.zeros((1, N))]
    out_rows = [np.stack([f1_out, f2_out, f3_out], axis=1).reshape(3 * T, N), np.zeros((1, N)),
                np.stack([b1_out[rev], b2_out[rev], b3_out[rev]], axis=1).reshape(3 * T, N),
                np.zeros((1, N)), np.zeros((1, N))]
    compute = np.concatenate(comp_rows)
    bytes_in = np.concatenate(in_rows)
    bytes_out = np.concatenate(out_rows)
    S = compute.shape[0]
    label_id = np.concatenate([np.tile([0, 1, 2], T), [3], np.tile([4, 5, 6], T), [7, 8]]).astype(np.int32)
    flows = []
    for t in range(T):
        flows += [(3 * t + 2, a, b, nb) for a, b, nb in flows_fwd]
        s_bwd = 3 * T + 1 + 3 * t
        flows += [(s_bwd, a, b, nb) for a, b, nb in flows_b2]
        flows += [(s_bwd + 2, a, b, nb) for a, b, nb in flows_b3]
    f_arr = tuple(np.asarray(x) for x in zip(*flows)) if flows else None
    scope = np.full(S, 0 if C > 1 else -1, np.int32)
    return Program.from_arrays(chips=C, tiles_per_chip=TPC, compute_cycles=compute, labels=PHASE_LABELS,
                               label_id=label_id, sync_scope=scope, bytes_in=bytes_in, bytes_out=bytes_out,
                               flows=f_arr, name=name)


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
                led.add(roles[key], arr[ly.tiles], ly.tiles, f"layer {l} {key.replace('_', ' ')}")
        # spike id/count sequences [T, B, N_max] + [T, B, 2], spread over the layer's chip (tile 0 of chip 0 free)
        chip_tiles = np.arange(ly.chip * TPC + (1 if ly.chip == 0 else 0), (ly.chip + 1) * TPC)
        led.add("variables:spikes", 4.0 * T * B * (nmax[l] + 2) / chip_tiles.size, chip_tiles,
                f"layer {l} spike sequence")
        led.add("exchange_buffers", B * 4.0 * ((n_max_in + 1) + (n_max_in + 2) + 2 * nmax[l] + 2), ly.tiles,
                f"layer {l} receive buffers (input list, replicated inputs, slot ids + g)")
        led.add("exchange_buffers", 4.0 * (2 * -(-config.layers[l + 1] // ly.f) + nmax[l] + 2), ly.comp_tiles,
                f"layer {l} compaction flags and chunk list")
        n_own = placement.neurons_owned(l)[ly.tiles]
        vertices = 3 * B + WORKERS_PER_TILE + B + B * n_own       # update, grads, flags per (neuron, sample)
        led.add("vertex_state", VERTEX_STATE_BYTES * vertices, ly.tiles, f"layer {l} vertex state")
        led.add("vertex_code", CODELET_BYTES * 6, ly.tiles, f"layer {l} codelets")
        led.add("control_code", CONTROL_BYTES_PER_COMPUTE_SET * 8, ly.tiles, f"layer {l} compute-set control")
        led.add("exchange_code", EXCHANGE_CODE_BYTES_PER_INSTR * (B * 6 + 16), ly.tiles, f"layer {l} exchange code")
    # the data input sequence [T, B, input_cap] ids + counts, spread over chip 0
    tiles0 = np.arange(1, TPC)
    led.add("variables:inputs", 4.0 * T * B * (config.input_cap + 1) / tiles0.size, tiles0, "input spike sequence")
    used = np.unique(np.concatenate([ly.tiles for ly in lay] + [ly.comp_tiles for ly in lay]))
    led.add("stack", STACK_BYTES, used, "worker and supervisor stacks")
    return led
