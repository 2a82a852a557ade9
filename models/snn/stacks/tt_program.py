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
from tilesim.models.snn.stacks import tt_kernels as K
from tilesim.models.snn.stacks.tt_costs import TensixCosts, default_tensix_costs
from tilesim.models.snn.stacks.tt_kernels import FPU, choose, fpu_cycles, overlapped
from tilesim.models.snn.stacks.tt_memory import residency
from tilesim.models.snn.stacks.tt_noc import gather_fixed, message_fixed, multicast_messages
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
    """Seconds to dispatch one program on ``machine`` (Blackhole's p150 row where its name says Blackhole,
    else the Wormhole n300 row: the same Wormhole chip on n150, T3000 and Galaxy), from tt_dispatch.csv."""
    dev = "blackhole p150" if "blackhole" in machine.name else "wormhole_b0 n300"
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

    def lines(self) -> list[str]:
        out = [
            f"tt-metal: {self.cores_used} of {self.cores} Tensix cores on {self.chips_used} of {self.chips} chips"
            + (" (the rest idle: the default placement uses no more than is faster)" if self.cores_used < self.cores else ""),
            f"program dispatch per step {self.dispatch_s * 1e6:.2f} us ({DISPATCH_BENCHMARK}, tt_dispatch.csv)",
        ]  # fmt: skip
        out += [c.line() for c in self.choices]
        out += [r.line() for r in self.residency if r.streams]
        return out


def _loc(counters, phase: str, l: int, name: str) -> np.ndarray:
    pc = counters.get(phase, l)
    if pc.local_steps is None:
        raise ConfigError(
            config_message("counters", "totals only", "need per-step arrays", "record with per_step_counters=True")
        )
    return pc.local_steps[pc.row(name)].astype(np.float64)


class _Dram:
    """Cycles per byte a core streams from DRAM: its share of the chip's rate among the chip's streaming cores."""

    def __init__(self, machine, costs: TensixCosts, layers, where):
        rate = machine.chip.dram_bytes_per_s * costs.dram_efficiency
        streaming = np.zeros(machine.chips)
        for ly, r in zip(layers, where):
            if r.streams:
                np.add.at(streaming, ly.chip, 1.0)
        self.cpb = np.where(streaming > 0, machine.clock_hz * np.maximum(streaming, 1.0) / max(rate, 1.0), 0.0)
        if rate <= 0 and streaming.any():
            raise ConfigError(
                config_message("machine.chip.dram_bytes_per_s", 0, "must be > 0 when weights stream from DRAM")
            )

    def of(self, ly) -> np.ndarray:
        return self.cpb[ly.chip]


def build_tt_program(step, machine, costs: TensixCosts | None = None, force: dict | None = None):
    """``(program, report)``: the step's :class:`tilesim.program.Program` on ``machine`` and its
    :class:`TtReport`. ``step``: an SNN step (its config, placement and per-step counters); ``force``:
    ``{kernel: unit}`` pins a unit (tests)."""
    costs = costs or default_tensix_costs()
    cfg, placement, counters = step.config, step.placement, step.counters
    L, T, B = cfg.n_layers, cfg.timesteps, cfg.batch
    C, TPC, N = machine.chips, machine.tiles_per_chip, machine.total_tiles
    cols = machine.fabric.cols or TPC
    rows = machine.fabric.rows or 1
    rec = cfg.recurrent if isinstance(cfg.recurrent, tuple) else (bool(cfg.recurrent),) * L
    layers = tt_layers(cfg, placement, machine)
    where = [residency(cfg, ly.l, ly.owned, costs, machine) for ly in layers]
    dram = _Dram(machine, costs, layers, where)
    l1_cpb = 1.0 / float(machine.chip.local_bytes_per_cycle)
    g = gather_fixed()
    has_in = [any(p.phase == "input_grad" and p.layer == l for p in counters.phases) for l in range(L)]
    S = 2 * T + 4
    f0, loss_k, b0, opt_k = 1, T + 1, T + 2, 2 * T + 2  # superstep of fwd t: f0 + t; bwd t: b0 + (T-1-t)
    comp, b_in, b_out = np.zeros((S, N)), np.zeros((S, N)), np.zeros((S, N))
    flows: list = []
    report = TtReport(dispatch_s=dispatch_s(machine), cores=N, chips=C)
    force = force or {}
    # layers whose lists feed layer m (inputs) and the layers sending partials back to layer l
    feeds = [[m for m in (l + 1, l) if (m == l + 1 and m < L) or (m == l and rec[l])] for l in range(L)]
    partial_senders = [[m for m in range(L) if has_in[m] and l in grad_targets(rec, m)] for l in range(L)]
    lists = []  # per layer: [T, n] bytes of each core's list per time step
    for ly in layers:
        ek = _loc(counters, "spike_detect", ly.l, "entries_kept")
        lists.append(4.0 * (ek + 2 * B) * (ly.owned > 0))
    for ly, r in zip(layers, where):
        l, n_c, N_in = ly.l, ly.owned, ly.fan_in
        nz = np.maximum(n_c, 1.0)
        wcpb = dram.of(ly) if r.weights_dram else l1_cpb
        dcpb = dram.of(ly) if r.dw_dram else l1_cpb
        # ---- forward
        rows_f = _loc(counters, "state_update", l, "synaptic_adds") / nz
        sp_r = rows_f * (g + n_c * costs.weight_bytes * wcpb)
        sp_c = (
            rows_f * costs.sfpu(n_c, costs.sfpu_add_cycles)
            + rows_f * n_c * costs.weight_bytes / K.load_matmul_costs().unpack_bytes_per_cycle
        )
        dn_c = np.array([fpu_cycles(B, N_in, int(n), machine, costs) for n in n_c])[None, :] * np.ones((T, 1))
        dn_r = B * N_in * 2.0 / costs.densify_bytes_per_cycle + rows_f
        if r.weights_dram:
            dn_r = dn_r + N_in * n_c * costs.weight_bytes * dram.of(ly)
        density = float(rows_f.mean(axis=1).sum() / max(B * N_in * T, 1))
        ch = choose(l, "forward", np.maximum(dn_r, dn_c), np.maximum(sp_r, sp_c), density, force.get("forward", ""))
        report.choices.append(ch)
        dense = ch.unit == FPU
        lif = (
            costs.sfpu(B * n_c, costs.lif_cycles)
            + 2 * B * n_c * costs.state_bytes / K.load_matmul_costs().unpack_bytes_per_cycle
        )
        fr = dn_r if dense else sp_r
        fc = (dn_c if dense else sp_c) + lif
        fw = B * n_c * costs.compact_cycles_per_neuron * np.ones((T, 1))
        for m in feeds[l]:  # the list's multicasts: per target layer, its cores on the sender's chip in rectangles
            tm = layers[m]
            for c in ly.chips:
                on = ly.chip == c
                dst = tm.local[tm.chip == c]
                if dst.size:
                    fw[:, on] += multicast_messages(dst, ly.local[on], cols, rows)[None, :]
                remote = [x for x in tm.chips if x != c]
                fw[:, on] += len(remote) * message_fixed(1)  # one message to the Ethernet core per remote chip
        fbytes = (rows_f * n_c * costs.weight_bytes) if not dense else N_in * n_c * costs.weight_bytes * np.ones((T, 1))
        comp[f0 : f0 + T, ly.tiles] += overlapped(fr, fc, fw, np.ceil(fbytes / costs.page_bytes))
        # ---- backward
        e_own = _loc(counters, "state_grad", l, "slots_applied")
        P = sum(layers[m].tiles.size for m in partial_senders[l])
        red = costs.sfpu(P * e_own, costs.sfpu_add_cycles)
        sg = (
            costs.sfpu(B * n_c, costs.surrogate_cycles)
            + 4 * B * n_c * costs.state_bytes / K.load_matmul_costs().unpack_bytes_per_cycle
        )
        rows_b = _loc(counters, "weight_grad", l, "grad_adds") / nz
        dw_sp_r = rows_b * (g + n_c * costs.grad_bytes * dcpb)
        dw_sp_w = rows_b * (g + n_c * costs.grad_bytes * dcpb)
        dw_sp_c = rows_b * costs.sfpu(n_c, costs.sfpu_add_cycles)
        dw_dn_c = (
            np.array([fpu_cycles(N_in, B, int(n), machine, costs) for n in n_c])[None, :]
            + N_in * n_c * costs.grad_bytes / K.load_matmul_costs().unpack_bytes_per_cycle
        )
        dw_dn_c = dw_dn_c * np.ones((T, 1))
        dw_dn_r = (
            B * N_in * 2.0 / costs.densify_bytes_per_cycle
            + rows_b
            + (2 * N_in * n_c * costs.grad_bytes * dram.of(ly) if r.dw_dram else 0.0)
        )
        ch = choose(l, "dW", np.maximum(dw_dn_r, dw_dn_c), np.maximum(np.maximum(dw_sp_r, dw_sp_w), dw_sp_c),
                    float(rows_b.mean(axis=1).sum() / max(B * N_in * T, 1)), force.get("dW", ""))  # fmt: skip
        report.choices.append(ch)
        if ch.unit == FPU:
            br, bc, bw = dw_dn_r, dw_dn_c, np.zeros((T, n_c.size))
        else:
            br, bc, bw = dw_sp_r, dw_sp_c, dw_sp_w
        bc = bc + red + sg
        if has_in[l]:
            s_in = _loc(counters, "input_grad", l, "macs") / nz
            di_sp_r = s_in * (g + n_c * costs.weight_bytes * wcpb)
            di_sp_c = s_in * (costs.sfpu(n_c, costs.sfpu_add_cycles) + costs.reduce_cycles)
            di_dn_c = np.array([fpu_cycles(B, int(n), N_in, machine, costs) for n in n_c])[None, :] * (
                s_in.sum(axis=1, keepdims=True) > 0
            )
            di_dn_r = (N_in * n_c * costs.weight_bytes * dram.of(ly) if r.weights_dram else 0.0) * (s_in > 0)
            ch = choose(l, "dIn", np.maximum(di_dn_r, di_dn_c), np.maximum(di_sp_r, di_sp_c),
                        float(s_in.mean(axis=1).sum() / max(B * N_in * T, 1)), force.get("dIn", ""))  # fmt: skip
            report.choices.append(ch)
            if ch.unit == FPU:
                br, bc = br + di_dn_r, bc + di_dn_c
            else:
                br, bc = br + di_sp_r, bc + di_sp_c
            owners = sum(layers[t].tiles.size for t in grad_targets(rec, l))  # one partial message per owner core
            bw = bw + (s_in > 0) * (message_fixed(1) + max(owners - 1, 0) * g)
        bbytes = rows_b * n_c * costs.grad_bytes
        bt = overlapped(br, bc, bw, np.ceil(bbytes / costs.page_bytes))
        comp[b0 : b0 + T, ly.tiles] += bt[::-1]  # superstep b0 + i is time step T-1-i
        # ---- loss (output layer) and optimizer
        if l == L - 1:
            comp[loss_k, ly.tiles] += costs.sfpu(B * n_c, costs.surrogate_cycles)
        upd = counters.get("optimizer", l).local_totals[0].astype(np.float64)
        per = 2.0 if cfg.optimizer == "adam" else 1.0
        oc = costs.sfpu(upd, costs.sgd_cycles * per)
        o_rw = upd * ((2 * costs.weight_bytes) * (dram.of(ly) if r.weights_dram else l1_cpb)
                      + costs.grad_bytes * (dram.of(ly) if r.dw_dram else l1_cpb)
                      + (16.0 if cfg.optimizer == "adam" else 0.0) * (dram.of(ly) if r.opt_dram else l1_cpb))  # fmt: skip
        comp[opt_k, ly.tiles] += overlapped(o_rw, oc, 0.0, np.ceil(upd * costs.weight_bytes / costs.page_bytes))
    # ---- exchange bytes and link flows
    for ly in layers:
        l = ly.l
        lb = lists[l]  # [T, n]
        for m in feeds[l]:
            tm = layers[m]
            for c in ly.chips:
                on = ly.chip == c
                sent = lb[:, on].sum(axis=1)  # [T]
                b_in[f0 : f0 + T, tm.tiles] += sent[:, None]
                for d in tm.chips:
                    if d != c:
                        for t in range(T):
                            if sent[t] > 0:
                                flows.append((f0 + t, c, d, float(sent[t])))
        out_mult = np.zeros(ly.tiles.size)
        for m in feeds[l]:
            tm = layers[m]
            for c in ly.chips:
                on = ly.chip == c
                out_mult[on] = np.maximum(out_mult[on], 1.0 if (tm.chip == c).any() else 0.0)
                out_mult[on] += sum(1 for d in tm.chips if d != c)
        b_out[f0 : f0 + T, ly.tiles] += lb * out_mult[None, :]
        if has_in[l]:
            s_in = _loc(counters, "input_grad", l, "macs") / np.maximum(ly.owned, 1.0)
            for t_layer in grad_targets(rec, l):
                tl = layers[t_layer]
                e_t = _loc(counters, "state_grad", t_layer, "slots_applied")  # [T, n_t]
                for t in range(1, T):  # partials of time t go to the owners' entries of t - 1
                    k = b0 + (T - 1 - t)
                    b_out[k, ly.tiles] += 4.0 * s_in[t]
                    b_in[k, tl.tiles] += 4.0 * e_t[t - 1] * ly.tiles.size
                    tot = e_t[t - 1].sum()
                    if tot <= 0:
                        continue
                    for c in ly.chips:
                        sent = 4.0 * s_in[t, ly.chip == c].sum()
                        for d in tl.chips:
                            if d != c and sent > 0:
                                flows.append((k, c, d, sent * e_t[t - 1, tl.chip == d].sum() / tot))
    # ---- host rows
    disp = report.dispatch_s * machine.clock_hz
    comp[0, :] += disp
    first, last = int(layers[0].chip[0]), int(layers[-1].chip[0])
    host = (
        np.array([0, S - 1], np.int32),
        np.array([first, last], np.int32),
        np.array([T * B * 4.0 * (cfg.input_cap + 1) + 4.0 * B, 4.0 * B]),
    )
    label_id = np.array([0] + [1] * T + [2] + [3] * T + [4, 5], np.int32)
    scope = np.full(S, SYNC_CHIP, np.int32)
    if flows:
        scope[sorted({f[0] for f in flows})] = SYNC_ALL
    f_arr = tuple(np.asarray(x) for x in zip(*flows)) if flows else None
    broadcast = np.zeros(S, bool)
    broadcast[f0 : f0 + T] = True
    used = np.unique(np.concatenate([ly.tiles for ly in layers])) if layers else np.zeros(0, np.int64)
    report.cores_used, report.chips_used = int(used.size), int(np.unique(used // TPC).size)
    report.residency = where
    program = Program.from_arrays(
        chips=C,
        tiles_per_chip=TPC,
        compute_cycles=comp,
        labels=LABELS,
        label_id=label_id,
        sync_scope=scope,
        bytes_in=b_in,
        bytes_out=b_out,
        flows=f_arr,
        host=host,
        name="snn training step (tt-metal)",
        broadcast=broadcast,
    )
    return program, report
