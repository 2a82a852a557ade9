"""L1 of the tt-metal SNN step per Tensix core, and which of a layer's tensors stream from DRAM.

Per core of a layer with ``n_c`` neurons, fan-in ``N_in``, batch ``B``, ``T`` time steps (bytes; formats
from :class:`tilesim.models.snn.stacks.tt_costs.TensixCosts`):

* firmware-reserved L1: ``MEM_MAP_END`` of the architecture plus the 69 KiB kernel-config buffer (the
  kernels' binaries, runtime arguments, circular-buffer configs), ``variables:other``;
* circular buffers: 6 of them (input lists, weight rows or tiles, accumulators, state, list out,
  partials), each ``cb_pages`` pages of ``page_bytes`` (``exchange_buffers``);
* state: v, δv, I and δI of the batch (4·B·n_c·4) and the membrane sequence for BPTT (T·B·n_c·4)
  (``variables:state`` / ``variables:sequences``); the lists the core received and sent, recorded for
  the backward pass (T·B·(N_max_in + N_max + 4)·4, ``variables:sequences``), and one step's partials
  (B·N_max_in·4, ``variables:activations``);
* weights N_in·n_c·wb, dW N_in·n_c·gb, optimizer state (Adam: 2·N_in·n_c·4; SGD none).

When a layer's fullest core would overflow, its tensors go to DRAM in the order of :data:`STREAM_ORDER` until
it fits (:func:`residency`): the recorded history first (each byte written once forward and read once
backward: :func:`sequence_bytes` per core and time step), then the weights, dW and the optimizer state; a
TT-Metal program keeps them in DRAM buffers that its reader and writer kernels stream. No IPU categories: no
codelets, vertex state, worker stacks or exchange code.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tilesim.machine.memory import MemoryLedger
from tilesim.models.snn.stacks.tt_costs import TensixCosts

__all__ = ["Residency", "residency", "core_bytes", "sequence_bytes", "tt_ledger", "N_CBS", "STREAM_ORDER"]

N_CBS = 6
"""Circular buffers per core (module docstring)."""


@dataclass(frozen=True)
class Residency:
    """Where layer ``layer``'s tensors live: in L1 or streamed from DRAM (``seq_dram``: the recorded history,
    the membrane sequence and the lists, written once per time step forward and read back once backward)."""

    layer: int
    weights_dram: bool = False
    dw_dram: bool = False
    opt_dram: bool = False
    seq_dram: bool = False

    @property
    def streams(self) -> bool:
        return self.weights_dram or self.dw_dram or self.opt_dram or self.seq_dram

    def line(self) -> str:
        what = [
            n
            for n, on in (
                ("the recorded history", self.seq_dram),
                ("weights", self.weights_dram),
                ("dW", self.dw_dram),
                ("optimizer state", self.opt_dram),
            )
            if on
        ]
        return f"layer {self.layer + 1}: {', '.join(what)} streamed from DRAM (L1 cannot hold them)"


STREAM_ORDER = ("seq_dram", "weights_dram", "dw_dram", "opt_dram")
"""What goes to DRAM first when L1 overflows: the recorded history (each byte crosses twice per step), then the
weights (read once per time step, sparse rows only where the list is sparse), dW (read and written per time
step), the optimizer state (once per step but the largest under Adam)."""


def core_bytes(config, l: int, n_c, costs: TensixCosts, machine, where: Residency | None = None) -> dict:
    """Bytes per core of layer ``l`` with ``n_c`` neurons (array), by (ledger category, label)."""
    n_c = np.asarray(n_c, np.float64)
    B, T = config.batch, config.timesteps
    rec = config.recurrent[l] if isinstance(config.recurrent, tuple) else bool(config.recurrent)
    n_in = config.layers[l] + (config.layers[l + 1] if rec else 0)
    nmax_in = config.input_cap if l == 0 else config.n_max[l - 1]
    slots = 2 if config.optimizer == "adam" else 0
    w = where or Residency(l)
    one = np.ones_like(n_c)
    seq = 0.0 if w.seq_dram else 1.0
    return {
        ("variables:other", "firmware-reserved L1 (MEM_MAP_END + kernel config)"): one
        * costs.firmware_reserved_bytes(machine),
        ("exchange_buffers", "circular buffers"): N_CBS * costs.cb_pages * costs.page_bytes * one,
        ("variables:state", "v, dv, I, dI"): 4 * B * n_c * costs.state_bytes,
        ("variables:sequences", "membrane sequence"): seq * T * B * n_c * costs.state_bytes,
        ("variables:sequences", "recorded lists"): seq * T * B * (nmax_in + config.n_max[l] + 4) * costs.id_bytes * one,
        ("variables:activations", "input-gradient partials"): B * nmax_in * 4.0 * one,
        ("variables:weights", "weights"): (not w.weights_dram) * n_in * n_c * costs.weight_bytes,
        ("variables:gradients", "dW"): (not w.dw_dram) * n_in * n_c * costs.grad_bytes,
        ("variables:optimizer", "optimizer state"): (not w.opt_dram) * slots * n_in * n_c * 4.0,
    }


def sequence_bytes(config, l: int, n_c) -> np.ndarray:
    """Bytes per core and time step of layer ``l``'s recorded history (its neurons' membrane state and the
    input and own lists at their caps): what a core streams to DRAM forward and back backward."""
    B = config.batch
    nmax_in = config.input_cap if l == 0 else config.n_max[l - 1]
    return B * np.asarray(n_c, np.float64) * 4.0 + B * (nmax_in + config.n_max[l] + 4) * 4.0


def residency(config, l: int, n_c, costs: TensixCosts, machine) -> Residency:
    """The least streaming (:data:`STREAM_ORDER`) that fits layer ``l``'s fullest core in L1 (everything in
    DRAM if even that overflows: the ledger then reports the overflow). A machine without device DRAM
    streams nothing."""
    if machine.chip.dram_bytes_per_s <= 0:
        return Residency(l)
    n_max = np.asarray([np.max(n_c)]) if np.size(n_c) else np.zeros(1)
    budget = float(machine.chip.sram_bytes)
    on: dict = {}
    for k in range(len(STREAM_ORDER) + 1):
        r = Residency(l, **on)
        if sum(float(v[0]) for v in core_bytes(config, l, n_max, costs, machine, r).values()) <= budget:
            return r
        if k < len(STREAM_ORDER):
            on[STREAM_ORDER[k]] = True
    return Residency(l, **on)


def tt_ledger(config, layers, where, costs: TensixCosts, machine, totals=None) -> MemoryLedger:
    """The step's L1 ledger: every core of every layer (``layers``: :class:`tt_program.TtLayer`); into
    ``totals`` (a :class:`tilesim.machine.memory.MemoryTotals`, a search's) where given."""
    ledger = (
        totals
        if totals is not None
        else MemoryLedger(
            machine,
            remedy="spread the network over more cores or chips (more cores per layer), lower --batch or "
            "--timesteps (the state history is T x B x n per core)",
        )
    )
    for ly, r in zip(layers, where):
        for (cat, label), v in core_bytes(config, ly.l, ly.owned, costs, machine, r).items():
            if np.any(v):
                ledger.add(cat, np.asarray(v, np.int64), ly.tiles, label=f"layer {ly.l + 1} {label}")
    return ledger
