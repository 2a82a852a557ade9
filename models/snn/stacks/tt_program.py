"""The tt-metal SNN training step as a tilesim :class:`tilesim.program.Program`: one fused TT-Metalium
program per step, its per-core kernels timed by :mod:`tilesim.models.snn.stacks.tt_kernels`.

Supersteps (``S = 2T + 4``), each a phase of the program whose cores hand data on through circular
buffers and semaphores (the preset's ``sync_cycles``: a semaphore round trip):

``host: input to DRAM, dispatch``   the input batch crosses PCIe to DRAM (a host transfer) and the program
                                    is dispatched (per-step dispatch measured by Tenstorrent: :func:`dispatch_s`),
                                    booked as host time.
``fwd: spikes`` × T                 every layer at once (the one-step delay between layers): each core's
                                    reader, compute and writer kernels (synaptic input on the FPU or the
                                    SFPU, LIF, threshold, local compaction of its own neurons' spikes); the
                                    exchange: each core's list multicast to the next layer's cores (and its
                                    own for a recurrent layer), in rectangles (a multicast tree per sender);
                                    cross-chip: the list over Ethernet (a link flow per chip pair).
``loss``                            the output layer's cores: loss and its gradient on their own neurons.
``bwd: gradients`` × T              every layer at once, t descending: the owner reduces the partials
                                    that arrived for its own list entries, state gradient, dW, and the
                                    input-gradient partials, sent to the owner core of each input entry.
``optimizer``                       SGD / Adam on each core's weights (streamed from DRAM where L1 cannot
                                    hold them).
``host: loss to host``              the per-sample loss back over PCIe.

No IPU term: no compaction or combiner tiles (each core compacts its own spikes), no PopLibs calls, no
vertex overheads, no per-worker dW copies, no host variable sync. The IPU's cost model is never read.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

import numpy as np

from tilesim.errors import ConfigError, config_message
from tilesim.models.snn.placement.roles import grad_targets
from tilesim.models.snn.stacks.tt_costs import TensixCosts, architecture_note, default_tensix_costs, tensix_architecture
from tilesim.models.snn.stacks.tt_kernels import FPU, choose, fpu_cycles, overlapped
from tilesim.models.snn.stacks.tt_memory import residency, sequence_bytes
from tilesim.models.snn.stacks.tt_noc import (
    gather_fixed,
    max_packet_bytes,
    message_fixed,
    multicast_messages,
    unicast_messages,
)
from tilesim.models.tensix.matmul import load_matmul_costs
from tilesim.program import SYNC_ALL, SYNC_CHIP, Program

__all__ = [
    "HOST_IN",
    "FWD",
    "LOSS",
    "BWD",
    "OPT",
    "HOST_OUT",
    "LABELS",
    "HOST_LABELS",
    "TtLayer",
    "TtReport",
    "tt_layers",
    "build_tt_program",
    "dispatch_s",
    "DISPATCH_BENCHMARK",
]

HOST_IN = "host: input to DRAM, dispatch"
FWD = "fwd: spikes (reader | compute | writer)"
LOSS = "loss"
BWD = "bwd: gradients (reader | compute | writer)"
OPT = "optimizer"
HOST_OUT = "host: loss to host"
LABELS = (HOST_IN, FWD, LOSS, BWD, OPT, HOST_OUT)
HOST_LABELS = (HOST_IN, HOST_OUT)

DISPATCH_BENCHMARK = "BM_pgm_dispatch/all_processors_all_cores_32_rta"
"""The dispatch benchmark row a step's program is charged (tt_dispatch.csv): every core, all five RISC-Vs,
32 unique runtime arguments per core, no trace (the step's program passes each core its buffers' addresses);
band: the traced all-cores row (a replayed trace) to the traced maxed-config row (tt_dispatch.csv)."""


@lru_cache(maxsize=1)
def _dispatch_rows() -> tuple:
    with resources.as_file(resources.files("tilesim.models.snn.stacks") / "tt_dispatch.csv") as p:
        with open(p, newline="") as f:
            return tuple(csv.DictReader(f))


def dispatch_s(machine, benchmark: str = DISPATCH_BENCHMARK) -> float:
    """Seconds to dispatch one program on ``machine`` (its architecture's row, :func:`tensix_architecture`:
    Blackhole's p150, or the Wormhole n300's: the same Wormhole chip on n150, T3000 and Galaxy), from
    tt_dispatch.csv."""
    dev = {"blackhole": "blackhole p150", "wormhole_b0": "wormhole_b0 n300"}[tensix_architecture(machine)]
    for row in _dispatch_rows():
        if f"device={dev};" in row["configuration"] and f"benchmark={benchmark};" in row["configuration"]:
            return float(row["value"]) * 1e-6
    raise ConfigError(config_message("dispatch benchmark", benchmark, f"has no row for {dev}", "see tt_dispatch.csv"))


@dataclass(frozen=True)
class TtLayer:
    """Where layer ``l`` works: its cores (global tile ids, ascending: the counters' order), neurons per
    core, each core's chip and chip-local tile, its fan-in."""

    l: int
    tiles: np.ndarray
    owned: np.ndarray
    chip: np.ndarray
    local: np.ndarray
    fan_in: int

    @property
    def chips(self) -> tuple:
        return tuple(int(c) for c in np.unique(self.chip))


def tt_layers(config, placement, machine) -> list[TtLayer]:
    """The :class:`TtLayer` of every layer of ``config`` under ``placement``."""
    out, TPC = [], machine.tiles_per_chip
    rec = config.recurrent if isinstance(config.recurrent, tuple) else (bool(config.recurrent),) * config.n_layers
    for l, (tl, local) in enumerate(placement.groupings):
        owned = np.bincount(local, minlength=tl.size).astype(np.float64)
        fan = config.layers[l] + (config.layers[l + 1] if rec[l] else 0)
        out.append(TtLayer(l, np.asarray(tl, np.int64), owned, tl // TPC, tl % TPC, int(fan)))
    return out


@dataclass
class TtReport:
    """What the stack chose for one step on one machine: the unit per layer and kernel, the DRAM
    residency per layer, the dispatch seconds, the cores used and idle."""

    choices: list = field(default_factory=list)
    residency: list = field(default_factory=list)
    dispatch_s: float = 0.0
    cores_used: int = 0
    cores: int = 0
    chips_used: int = 0
    chips: int = 0
    note: str | None = None  # an assumption the machine file forced (tt_costs.architecture_note)

    def lines(self) -> list[str]:
        idle = " (the rest idle: no more is faster)" if self.cores_used < self.cores else ""
        out = [
            f"tt-metal: {self.cores_used} of {self.cores} Tensix cores, {self.chips_used} of {self.chips} chips{idle}",
            f"program dispatch per step {self.dispatch_s * 1e6:.2f} us ({DISPATCH_BENCHMARK}, tt_dispatch.csv)",
        ]  # fmt: skip
        out += [c.line() for c in self.choices]
        out += [r.line() for r in self.residency if r.streams]
        return out + ([self.note] if self.note else [])


def _loc(counters, phase: str, l: int, name: str) -> np.ndarray:
    """float64 [T, cores of layer l]: a per-step counter of the layer's cores (the counters' order)."""
    pc = counters.get(phase, l)
    if pc.local_steps is None:
        raise ConfigError(
            config_message("counters", "totals only", "need per-step arrays", "record with per_step_counters=True")
        )
    return pc.local_steps[pc.row(name)].astype(np.float64)


def _dram_cpb(machine, costs: TensixCosts, sharers) -> np.ndarray:
    """Cycles per byte a core streams from DRAM: its share of ``dram_efficiency`` of the chip's GDDR6 rate
    among ``sharers`` cores of its chip (an array per core)."""
    rate = machine.chip.dram_bytes_per_s * costs.dram_efficiency
    if rate <= 0:
        raise ConfigError(
            config_message(
                "machine.chip.dram_bytes_per_s",
                machine.chip.dram_bytes_per_s,
                "must be > 0 for the tt-metal stack",
                "give the chip's DRAM rate (EVIDENCE.md §4.1)",
            )  # fmt: skip
        )
    return machine.clock_hz * np.maximum(np.asarray(sharers, np.float64), 1.0) / rate


@dataclass(frozen=True)
class _Ctx:
    """What every layer's kernels are timed from (built once per program)."""

    cfg: object
    counters: object
    machine: object
    costs: TensixCosts
    layers: list
    where: list
    streaming: np.ndarray  # per chip: cores whose layer streams from DRAM
    cols: int
    rows: int
    rec: tuple
    has_in: list
    feeds: list  # per layer: the layers its list goes to (the next; itself if recurrent)
    senders: list  # per layer: the layers that send it input-gradient partials
    force: dict
    g: float  # the NoC model's cycles of one gathered read in flight
    l1_cpb: float  # cycles per byte through the L1 port
    unpack_cpb: float  # cycles per byte through the unpacker (the tilesim matmul model's)

    def wcpb(self, ly, dram: bool) -> np.ndarray | float:
        """Cycles per byte of a tensor of layer ``ly``: from DRAM (its chip's streaming share) or L1."""
        return _dram_cpb(self.machine, self.costs, self.streaming[ly.chip]) if dram else self.l1_cpb


def _fpu_per_core(ctx: _Ctx, ly, m, k, n) -> np.ndarray:
    """[cores] matrix-engine cycles of an ``m × k · k × n`` product on each core; ``"n_c"`` for the core's neurons."""
    return np.array(
        [
            fpu_cycles(
                int(nc) if m == "n_c" else m,
                int(nc) if k == "n_c" else k,
                int(nc) if n == "n_c" else n,
                ctx.machine,
                ctx.costs,
            )
            for nc in ly.owned
        ]  # fmt: skip
    )


def _forward(ctx: _Ctx, ly, report: TtReport, lists: list) -> np.ndarray:
    """[T, cores] cycles of layer ``ly``'s forward phase per time step (tt_kernels' equations), its unit chosen."""
    c, cfg, r = ctx.costs, ctx.cfg, ctx.where[ly.l]
    B, T, n_c, N_in = cfg.batch, cfg.timesteps, ly.owned, ly.fan_in
    rows = _loc(ctx.counters, "state_update", ly.l, "synaptic_adds") / np.maximum(n_c, 1.0)
    wcpb = ctx.wcpb(ly, r.weights_dram)
    sp_r = rows * (ctx.g + n_c * c.weight_bytes * wcpb)
    sp_c = rows * c.sfpu(n_c, c.sfpu_add_cycles) + rows * n_c * c.weight_bytes * ctx.unpack_cpb
    dn_r = B * N_in * 2.0 / c.densify_bytes_per_cycle + rows
    if r.weights_dram:
        dn_r = dn_r + N_in * n_c * c.weight_bytes * wcpb
    dn_c = _fpu_per_core(ctx, ly, B, N_in, "n_c")[None, :] * np.ones((T, 1))
    density = float(rows.mean(axis=1).sum() / max(B * N_in * T, 1))
    ch = choose(ly.l, "forward", np.maximum(dn_r, dn_c), np.maximum(sp_r, sp_c), density, ctx.force.get("forward", ""))
    report.choices.append(ch)
    dense = ch.unit == FPU
    lif = c.sfpu(B * n_c, c.lif_cycles) + 2 * B * n_c * c.state_bytes * ctx.unpack_cpb
    reader = dn_r if dense else sp_r
    if ly.l == 0 and ctx.machine.chip.dram_bytes_per_s > 0:  # the input list of the time step, from DRAM
        nbytes = 4.0 * B * (cfg.input_cap + 1)  # (every core of layer 1 reads it; the chip's cores share DRAM)
        reader = reader + ctx.g + nbytes * _dram_cpb(ctx.machine, c, np.bincount(ly.chip)[ly.chip])
    compute = (dn_c if dense else sp_c) + lif
    writer = B * n_c * c.compact_cycles_per_neuron * np.ones((T, 1))
    if r.seq_dram:  # the time step's history (state, lists) written to DRAM for the backward pass
        writer = writer + sequence_bytes(cfg, ly.l, n_c) * ctx.wcpb(ly, True)
    k = int(max(1, np.ceil(lists[ly.l].max(initial=0.0) / max_packet_bytes())))  # packets of the longest list
    for m in ctx.feeds[ly.l]:  # per target layer: its cores on the sender's chip in rectangles
        tm = ctx.layers[m]
        for chip in ly.chips:
            on = ly.chip == chip
            dst = tm.local[tm.chip == chip]
            if dst.size:
                writer[:, on] += multicast_messages(dst, ly.local[on], ctx.cols, ctx.rows, k)[None, :]
            remote = sum(1 for x in tm.chips if x != chip)
            writer[:, on] += remote * message_fixed(1, None, k)  # to the Ethernet core, per remote chip
    moved = (N_in * n_c * c.weight_bytes * np.ones((T, 1))) if dense else rows * n_c * c.weight_bytes
    return overlapped(reader, compute, writer, np.ceil(moved / c.page_bytes))


def _backward(ctx: _Ctx, ly, report: TtReport) -> np.ndarray:
    """[T, cores] cycles of layer ``ly``'s backward phase per time step (t ascending), its units chosen."""
    c, cfg, r, l = ctx.costs, ctx.cfg, ctx.where[ly.l], ly.l
    B, T, n_c, N_in = cfg.batch, cfg.timesteps, ly.owned, ly.fan_in
    nz = np.maximum(n_c, 1.0)
    e_own = _loc(ctx.counters, "state_grad", l, "slots_applied")
    P = sum(ctx.layers[m].tiles.size for m in ctx.senders[l])  # partials per own entry
    state = c.sfpu(P * e_own, c.sfpu_add_cycles) + c.sfpu(B * n_c, c.surrogate_cycles)
    state = state + 4 * B * n_c * c.state_bytes * ctx.unpack_cpb
    rows = _loc(ctx.counters, "weight_grad", l, "grad_adds") / nz
    dcpb = ctx.wcpb(ly, r.dw_dram)
    sp_rw = rows * (ctx.g + n_c * c.grad_bytes * dcpb)  # dW rows read, and written back
    sp_c = rows * c.sfpu(n_c, c.sfpu_add_cycles)
    dn_c = (_fpu_per_core(ctx, ly, N_in, B, "n_c") + N_in * n_c * c.grad_bytes * ctx.unpack_cpb)[None, :] * np.ones(
        (T, 1)
    )
    dn_r = B * N_in * 2.0 / c.densify_bytes_per_cycle + rows
    if r.dw_dram:
        dn_r = dn_r + 2 * N_in * n_c * c.grad_bytes * dcpb
    density = float(rows.mean(axis=1).sum() / max(B * N_in * T, 1))
    ch = choose(l, "dW", np.maximum(dn_r, dn_c), np.maximum(sp_rw, sp_c), density, ctx.force.get("dW", ""))
    report.choices.append(ch)
    if ch.unit == FPU:
        reader, compute, writer = dn_r, dn_c + state, np.zeros((T, n_c.size))
    else:
        reader, compute, writer = sp_rw, sp_c + state, sp_rw
    if r.seq_dram:  # the time step's history read back from DRAM
        reader = reader + sequence_bytes(cfg, l, n_c) * ctx.wcpb(ly, True)
    if ctx.has_in[l]:
        s_in = _loc(ctx.counters, "input_grad", l, "macs") / nz
        wcpb = ctx.wcpb(ly, r.weights_dram)
        di_sp_r = s_in * (ctx.g + n_c * c.weight_bytes * wcpb)
        di_sp_c = s_in * (c.sfpu(n_c, c.sfpu_add_cycles) + c.reduce_cycles)
        busy = s_in.sum(axis=1, keepdims=True) > 0  # no partials at t = 0
        di_dn_c = np.where(busy, _fpu_per_core(ctx, ly, B, "n_c", N_in)[None, :], 0.0)
        di_dn_r = (N_in * n_c * c.weight_bytes * wcpb if r.weights_dram else 0.0) * busy
        density = float(s_in.mean(axis=1).sum() / max(B * N_in * T, 1))
        ch = choose(l, "dIn", np.maximum(di_dn_r, di_dn_c), np.maximum(di_sp_r, di_sp_c), density,
                    ctx.force.get("dIn", ""))  # fmt: skip
        report.choices.append(ch)
        dense = ch.unit == FPU
        reader = reader + (di_dn_r if dense else di_sp_r)
        compute = compute + (di_dn_c if dense else di_sp_c)
        for t_layer in grad_targets(ctx.rec, l):  # one partial message per owner core on the sender's chip
            tl = ctx.layers[t_layer]
            for chip in ly.chips:
                on = ly.chip == chip
                msgs = unicast_messages(tl.local[tl.chip == chip], ly.local[on], ctx.cols)
                msgs += sum(1 for x in tl.chips if x != chip) * message_fixed(1)
                writer[:, on] += (s_in[:, on] > 0) * msgs[None, :]
    return overlapped(reader, compute, writer, np.ceil(rows * n_c * c.grad_bytes / c.page_bytes))


def _optimizer(ctx: _Ctx, ly) -> np.ndarray:
    """[cores] cycles of the optimizer on layer ``ly``'s weights: read w and dW, write w (and Adam's two
    moments), from L1 or DRAM, overlapped with the SFPU's update."""
    c, r, adam = ctx.costs, ctx.where[ly.l], ctx.cfg.optimizer == "adam"
    upd = ctx.counters.get("optimizer", ly.l).local_totals[0].astype(np.float64)
    compute = c.sfpu(upd, c.sgd_cycles * (2.0 if adam else 1.0))
    moved = (
        2 * c.weight_bytes * ctx.wcpb(ly, r.weights_dram)
        + c.grad_bytes * ctx.wcpb(ly, r.dw_dram)
        + (16.0 if adam else 0.0) * ctx.wcpb(ly, r.opt_dram)
    )
    return overlapped(upd * moved, compute, 0.0, np.ceil(upd * c.weight_bytes / c.page_bytes))


class _Transfers:
    """The on-chip messages of the program, explicit (``Program.transfers``): the fabric times each exchange
    row's messages with the event model (:meth:`tilesim.machine.fabric.MeshFabric.transfer_cycles`: each flow on
    its route, flows sharing a link or a port sharing its bandwidth, a multicast once over each link of its
    tree), not from per-tile totals."""

    def __init__(self):
        self.parts: list = []
        self.groups = 0

    def multicast(self, k: int, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray) -> None:
        """Each core of ``src`` sends its ``nbytes`` (same order) once, as one multicast to every core of ``dst``."""
        keep = nbytes > 0
        src, nbytes = src[keep], nbytes[keep]
        if not src.size or not dst.size:
            return
        n, m = src.size, dst.size
        g = self.groups + np.repeat(np.arange(n), m)
        self.groups += n
        self.parts.append((np.full(n * m, k), np.repeat(src, m), np.tile(dst, n), np.repeat(nbytes, m), g))

    def unicast(self, k: int, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray) -> None:
        """Every core of ``src`` sends ``nbytes[j]`` bytes to core ``dst[j]`` (one message per pair)."""
        keep = nbytes > 0
        dst, nbytes = dst[keep], nbytes[keep]
        if not src.size or not dst.size:
            return
        n, m = src.size, dst.size
        self.parts.append(
            (np.full(n * m, k), np.repeat(src, m), np.tile(dst, n), np.tile(nbytes, n), np.full(n * m, -1))
        )

    def columns(self) -> tuple | None:
        """``(step, src, dst, bytes, group)`` for :meth:`tilesim.program.Program.from_arrays` (None: none)."""
        if not self.parts:
            return None
        cols = [np.concatenate(c) for c in zip(*self.parts)]
        return (cols[0].astype(np.int32), cols[1], cols[2], cols[3].astype(np.float64), cols[4].astype(np.int32))


def _list_traffic(ctx: _Ctx, lists: list, b_in, b_out, flows: list, f0: int, xfer: _Transfers) -> None:
    """The forward exchanges: each core's list (``lists[l]``, [T, cores] bytes) to every core of the layers it
    feeds, one multicast per chip (explicit: ``xfer``); to another chip over Ethernet (one link flow per chip
    pair and time step, written into the receivers' L1 by the Ethernet cores, off the Tensix grid)."""
    T = ctx.cfg.timesteps
    for ly in ctx.layers:
        lb, copies = lists[ly.l], np.zeros(ly.tiles.size)
        for m in ctx.feeds[ly.l]:
            tm = ctx.layers[m]
            for chip in ly.chips:
                on = ly.chip == chip
                sent = lb[:, on].sum(axis=1)
                b_in[f0 : f0 + T, tm.tiles] += sent[:, None]
                local = bool((tm.chip == chip).any())
                copies[on] = np.maximum(copies[on], float(local))
                if local:
                    here = tm.tiles[tm.chip == chip]
                    for t in range(T):
                        xfer.multicast(f0 + t, ly.tiles[on], here, lb[t, on])
                for d in tm.chips:
                    if d != chip:
                        copies[on] += 1
                        flows += [(f0 + t, chip, d, float(sent[t])) for t in range(T) if sent[t] > 0]
        b_out[f0 : f0 + T, ly.tiles] += lb * copies[None, :]


def _partial_traffic(ctx: _Ctx, b_in, b_out, flows: list, b0: int, xfer: _Transfers) -> None:
    """The backward exchanges: each core's input-gradient partials of time t (4·s_in bytes) to the owner core
    of each entry (its list of t − 1): an owner receives 4·e·P bytes from the P cores of the sending layer,
    4·e from each (explicit unicasts on a chip: ``xfer``); across chips in proportion to the entries each chip
    owns."""
    T = ctx.cfg.timesteps
    for ly in ctx.layers:
        if not ctx.has_in[ly.l]:
            continue
        s_in = _loc(ctx.counters, "input_grad", ly.l, "macs") / np.maximum(ly.owned, 1.0)
        for t_layer in grad_targets(ctx.rec, ly.l):
            tl = ctx.layers[t_layer]
            e = _loc(ctx.counters, "state_grad", t_layer, "slots_applied")
            for t in range(1, T):  # partials of time t go to the owners' entries of t - 1
                k = b0 + (T - 1 - t)
                b_out[k, ly.tiles] += 4.0 * s_in[t]
                b_in[k, tl.tiles] += 4.0 * e[t - 1] * ly.tiles.size
                tot = e[t - 1].sum()
                for chip in ly.chips:
                    mine, theirs = ly.chip == chip, tl.chip == chip
                    if theirs.any():
                        xfer.unicast(k, ly.tiles[mine], tl.tiles[theirs], 4.0 * e[t - 1, theirs])
                    sent = 4.0 * s_in[t, ly.chip == chip].sum()
                    for d in tl.chips:
                        if d != chip and sent > 0 and tot > 0:
                            flows.append((k, chip, d, sent * e[t - 1, tl.chip == d].sum() / tot))


def build_tt_program(step, machine, costs: TensixCosts | None = None, force: dict | None = None):
    """``(program, report)``: the step's :class:`tilesim.program.Program` on ``machine`` and its
    :class:`TtReport`. ``step``: an SNN step (its config, placement and per-step counters; its IPU cost
    model is never read); ``force``: ``{kernel: unit}`` pins a unit (tests)."""
    costs = costs or default_tensix_costs()
    cfg, counters = step.config, step.counters
    L, T, B = cfg.n_layers, cfg.timesteps, cfg.batch
    C, TPC, N = machine.chips, machine.tiles_per_chip, machine.total_tiles
    rec = cfg.recurrent if isinstance(cfg.recurrent, tuple) else (bool(cfg.recurrent),) * L
    layers = tt_layers(cfg, step.placement, machine)
    where = [residency(cfg, ly.l, ly.owned, costs, machine) for ly in layers]
    streaming = np.zeros(C)
    for ly, r in zip(layers, where):
        if r.streams:
            np.add.at(streaming, ly.chip, 1.0)
    has_in = [any(p.phase == "input_grad" and p.layer == l for p in counters.phases) for l in range(L)]
    ctx = _Ctx(
        cfg, counters, machine, costs, layers, where, streaming,
        machine.fabric.cols or TPC, machine.fabric.rows or 1, rec, has_in,
        feeds=[[m for m in (l + 1, l) if (m == l + 1 and m < L) or (m == l and rec[l])] for l in range(L)],
        senders=[[m for m in range(L) if has_in[m] and l in grad_targets(rec, m)] for l in range(L)],
        force=force or {}, g=gather_fixed(), l1_cpb=1.0 / float(machine.chip.local_bytes_per_cycle),
        unpack_cpb=1.0 / load_matmul_costs().unpack_bytes_per_cycle,
    )  # fmt: skip
    S = 2 * T + 4
    f0, loss_k, b0, opt_k = 1, T + 1, T + 2, 2 * T + 2  # fwd t: superstep f0 + t; bwd t: b0 + (T - 1 - t)
    comp, b_in, b_out = np.zeros((S, N)), np.zeros((S, N)), np.zeros((S, N))
    report = TtReport(
        dispatch_s=dispatch_s(machine), cores=N, chips=C, residency=where, note=architecture_note(machine)
    )
    # each core's list per time step: its entries and 2 counts per sample, 4 bytes each
    lists = [4.0 * (_loc(counters, "spike_detect", ly.l, "entries_kept") + 2 * B) * (ly.owned > 0) for ly in layers]
    for ly in layers:
        comp[f0 : f0 + T, ly.tiles] += _forward(ctx, ly, report, lists)
        comp[b0 : b0 + T, ly.tiles] += _backward(ctx, ly, report)[::-1]
        comp[opt_k, ly.tiles] += _optimizer(ctx, ly)
    out = layers[-1]
    comp[loss_k, out.tiles] += costs.sfpu(B * out.owned, costs.surrogate_cycles)  # loss and its gradient
    flows: list = []
    xfer = _Transfers()
    _list_traffic(ctx, lists, b_in, b_out, flows, f0, xfer)
    _partial_traffic(ctx, b_in, b_out, flows, b0, xfer)
    comp[0, :] += report.dispatch_s * machine.clock_hz
    first, last = int(layers[0].chip[0]), int(out.chip[0])
    host = (
        np.array([0, S - 1], np.int32),
        np.array([first, last], np.int32),
        np.array([T * B * 4.0 * (cfg.input_cap + 1) + 4.0 * B, 4.0 * B]),
    )
    scope = np.full(S, SYNC_CHIP, np.int32)
    if flows:
        scope[sorted({f[0] for f in flows})] = SYNC_ALL
    broadcast = np.zeros(S, bool)
    broadcast[f0 : f0 + T] = True  # the lists go as multicast trees
    used = np.unique(np.concatenate([ly.tiles for ly in layers]))
    report.cores_used, report.chips_used = int(used.size), int(np.unique(used // TPC).size)
    program = Program.from_arrays(
        chips=C,
        tiles_per_chip=TPC,
        compute_cycles=comp,
        labels=LABELS,
        label_id=np.array([0] + [1] * T + [2] + [3] * T + [4, 5], np.int32),
        sync_scope=scope,
        bytes_in=b_in,
        bytes_out=b_out,
        flows=tuple(np.asarray(x) for x in zip(*flows)) if flows else None,
        host=host,
        transfers=xfer.columns(),
        name="snn training step (tt-metal)",
        broadcast=broadcast,
    )
    return program, report
