"""Per-tile SRAM of the SNN training step (snn-on-ipu.md §3.2; ipu-hardware.md §3.3), and its
memory over the step's program steps (:func:`program_steps`).

Every tensor is a Poplar variable of the one op that runs the step, allocated for the whole
program (PopVision's always-live): the overflow check sees the same bytes as before lifetimes
existed. What changes over the step is the *data* the recorded sequences hold: the membrane
state sequence v[T, B, n] and the spike id/count sequences [T, B, N_max + 2] are written one time
step at a time by ``dynamicUpdate`` during the forward pass and read back one time step at a time,
in reverse, by ``dynamicSlice`` during the backward pass (snn-on-ipu.md §3.3 step 8, §3.4 step 1);
the input sequence arrives whole by infeed and is read the same way. Their held bytes grow over the
forward pass to the loss and fall over the backward pass (:func:`recorded_liveness`)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from tilesim.machine.memory import EntryGroup, Liveness, MemoryLedger
from tilesim.mapping.core import Mapping
from tilesim.models.snn.placement.roles import layer_layout
from tilesim.models.snn.step.counters import (
    CACHE_BYTES,
    layer_memory,
)
from tilesim.models.snn.step.traits import TableTraits, check_layer_chips, poplar_traits
from tilesim.models.snn.training.network import NetworkConfig
from tilesim.running.memo import lru_in

SRAM_REMEDY_NPT = "lower --neurons-per-tile (the 6 per-worker dW copies grow with fan-in x neurons per tile), "
SRAM_REMEDY_CORE = "reduce --batch or --timesteps (the state history is T x B x n), use SGD instead of Adam"


def sram_remedy(placement: Mapping, layers_span_chips: bool = False) -> str:
    """What can help an SNN SRAM overflow under ``placement``: fewer neurons per tile only where a tile
    holds more than one; more chips where layers share a chip or, on a stack whose layers may span chips
    (``layers_span_chips``), always (else a layer's neurons sit on one chip, so once every layer has a
    chip of its own, more chips cannot help: that layer must fit on its chip)."""
    npt = max(placement.neurons_per_tile(), default=1)
    chips = [c for l in range(placement.n_layers) for c in placement.chips_of_layer(l)]
    shared = layers_span_chips or len(set(chips)) < len(chips)  # a chip holding neurons of two layers
    first = SRAM_REMEDY_NPT if npt > 1 else ""
    last = (
        ", or spread the network over more chips (--chips)"
        if shared
        else "; every layer already has a chip of its own and one layer's neurons must fit on one chip, so more "
        "chips cannot help"
    )
    return first + SRAM_REMEDY_CORE + last


MAX_TIME_GROUPS = 100
"""Time steps drawn one by one in the liveness plot up to this many; beyond, in this many groups."""


@lru_cache(maxsize=8)
def _time_groups(T: int) -> tuple[tuple[int, int], ...]:
    """Consecutive time steps (first, last) per program step of a pass: one each up to
    :data:`MAX_TIME_GROUPS`, else that many groups as even as possible."""
    n = min(T, MAX_TIME_GROUPS)
    edges = [T * k // n for k in range(n + 1)]
    return tuple((edges[k], edges[k + 1] - 1) for k in range(n))


def _span(lo: int, hi: int) -> str:
    return f"{lo}" if lo == hi else f"{lo}-{hi}"


@lru_cache(maxsize=8)
def program_steps(T: int) -> tuple[str, ...]:
    """The training step's program steps in order (timing.py's module docstring): the forward pass
    per time step (``fwd t=0`` …), ``loss``, the backward pass per time step in reverse
    (``bwd t=T-1`` …), ``dW reduce``, ``optimizer``; time steps grouped beyond :data:`MAX_TIME_GROUPS`."""
    groups = _time_groups(T)
    return (
        tuple(f"fwd t={_span(lo, hi)}" for lo, hi in groups)
        + ("loss",)
        + tuple(f"bwd t={_span(hi, lo)}" for lo, hi in reversed(groups))
        + ("dW reduce", "optimizer")
    )


@lru_cache(maxsize=16)
def recorded_liveness(T: int, whole_at_start: bool = False) -> Liveness:
    """A sequence of T per-time-step values kept for the backward pass: allocated for the whole
    program; at a forward step holding the values written so far (all of them if ``whole_at_start``:
    the input sequence, which arrives by infeed before the pass), all of them at the loss, at a
    backward step the values not yet consumed (that step's and earlier ones), none after the pass."""
    groups = _time_groups(T)
    fwd = tuple(1.0 if whole_at_start else (hi + 1) / T for _, hi in groups)
    bwd = tuple((hi + 1) / T for _, hi in reversed(groups))
    return Liveness(held=fwd + (1.0,) + bwd + (0.0, 0.0))


# code and bookkeeping bytes per tile (ipu-hardware.md §3.3): a vertex's state holds ~3 SPAN
# edges + a 4 B scalar; each codelet's machine code; control code per compute set the tile
# takes part in; exchange code per instruction; worker + supervisor stacks. The per-edge,
# per-compute-set and per-exchange-instruction bytes are those of
# :class:`tilesim.models.linear.planner.OverheadConstants` (their one home, with their sources).
VERTEX_EDGES = 3  # [S]-based: the SNN vertices' SPAN edges (list, weights/state, output)
VERTEX_SCALAR_BYTES = 4  # [S] one 32-bit scalar field
CODELET_BYTES = 600  # [U] order of a compiled C++ codelet; not published
STACK_BYTES = 6 * 512 + 1024  # [U] worker stacks + supervisor stack


@lru_cache(maxsize=1)
def _code_bytes() -> tuple:
    """(vertex state, control code per compute set, exchange code per instruction) bytes."""
    from tilesim.models.linear.phases import OverheadConstants  # deferred: an SNN run never needs the linear package

    o = OverheadConstants()
    return (
        VERTEX_EDGES * o.vertex_edge_bytes + VERTEX_SCALAR_BYTES,
        o.control_code_bytes_per_compute_set,
        o.exchange_instruction_bytes,
    )


def _owner_memory(
    config: NetworkConfig, placement: Mapping, l: int, n_max_in: int, recurrent: bool, dw_copies: int
) -> list:
    """The entries of layer ``l`` on its own tiles, [(category, bytes [n_local], label)]: its
    variables (§3.2), receive buffers, vertex state and code. They depend on how many neurons
    each tile owns, not on where the tiles are. ``dw_copies``: the stack's dW copies per tile
    (:attr:`tilesim.models.snn.step.traits.TableTraits.dw_copies`; one weight-gradient vertex each)."""
    T, B = config.timesteps, config.batch
    _, local = placement.groupings[l]
    n_local = int(local.max()) + 1 if local.size else 0
    roles = {
        "weights": "variables:weights",
        "dw_worker_copies": "variables:gradients",
        "dw_final": "variables:gradients",
        "optimizer_state": "variables:optimizer",
        "state_sequence": "variables:state",
        "state": "variables:state",
        "input_grad_partials": "variables:activations",
    }
    mem = layer_memory(
        config.layers[l], config.layers[l + 1], T, B, n_max_in, local, n_local, config.optimizer, recurrent, dw_copies
    )
    recorded = recorded_liveness(T)
    out = [
        (roles[key], arr, f"layer {l + 1} {key.replace('_', ' ')}") + ((recorded,) if key == "state_sequence" else ())
        for key, arr in mem.items()
        if arr.any()
    ]
    n_own = np.bincount(local, minlength=n_local).astype(np.int64)
    vertices = 3 * B + dw_copies + B + B * n_own  # update, grads, flags per (neuron, sample)
    const = np.ones(n_local)
    state_bytes, control_bytes, exchange_bytes = _code_bytes()
    out += [
        (
            "exchange_buffers",
            B * 4.0 * ((n_max_in + 1) + (n_max_in + 2) + 2 * config.n_max[l] + 2) * const,
            f"layer {l + 1} receive buffers (input list, replicated inputs, slot ids + g)",
        ),
        ("vertex_state", state_bytes * vertices, f"layer {l + 1} vertex state"),
        ("vertex_code", CODELET_BYTES * 6 * const, f"layer {l + 1} codelets"),
        ("control_code", control_bytes * 8 * const, f"layer {l + 1} compute-set control"),
        ("exchange_code", exchange_bytes * (B * 6 + 16) * const, f"layer {l + 1} exchange code"),
    ]
    return EntryGroup(out)


def _part_tiles(ly) -> list:
    """(owner tiles, their count) of each chip part of a layer that spans chips."""
    return [(ly.tiles[p.first : p.stop], p.stop - p.first) for p in ly.parts]


def _entries_nbytes(entries) -> int:
    return sum(np.asarray(e[1]).nbytes for e in entries)


def snn_memory(
    config: NetworkConfig,
    placement: Mapping,
    machine,
    ledger: MemoryLedger | None = None,
    cache: dict | None = None,
    stack: TableTraits | None = None,
) -> MemoryLedger:
    """Per-tile SRAM of the training step: every tensor of §3.2 plus buffers, vertex state and code.
    ``ledger``: a :class:`MemoryLedger` (default) or a :class:`tilesim.machine.memory.MemoryTotals` for a
    search; ``cache`` (a dict the caller keeps) reuses the owner-tile entries of layers whose
    neuron grouping is unchanged (a :class:`BytesLRU` keyed by layer, grouping, config and dW copies).
    ``stack``: the traits of the table program's stack (default: Poplar's,
    :func:`tilesim.models.snn.step.traits.poplar_traits`)."""
    st = stack or poplar_traits(machine.chip.workers_per_tile)
    check_layer_chips(placement, st)
    dw_copies = st.dw_copies
    T, B = config.timesteps, config.batch
    led = ledger or MemoryLedger(machine, remedy=sram_remedy(placement, st.layers_span_chips), steps=program_steps(T))
    led.set_steps(program_steps(T))
    TPC = machine.tiles_per_chip
    nmax = config.n_max
    lay = layer_layout(config, placement, TPC)
    rec = config.recurrent if isinstance(config.recurrent, tuple) else (bool(config.recurrent),) * config.n_layers
    mine = None if cache is None else lru_in(cache, ("memory",), CACHE_BYTES, _entries_nbytes)
    for l, ly in enumerate(lay):
        n_max_in = config.input_cap if l == 0 else nmax[l - 1]
        key = None if mine is None else (l, placement.groupings[l][1].tobytes(), config, dw_copies)
        entries = None if key is None else mine.get(key)
        if entries is None:
            entries = _owner_memory(config, placement, l, n_max_in, bool(rec[l]), dw_copies)
            if key is not None:
                mine[key] = entries
        led.add_group(entries, ly.tiles)
        # spike id/count sequences [T, B, N_max] + [T, B, 2], spread over the layer's chip (tile 0 of chip 0
        # free) under Poplar, over the layer's own tiles on a dataflow stack (ExecutionStack.chip_sequences):
        # on each chip of a layer that spans chips its own tiles keep a whole copy
        seq_tiles = slice(ly.chip * TPC + (1 if ly.chip == 0 else 0), (ly.chip + 1) * TPC)
        n_seq = seq_tiles.stop - seq_tiles.start
        if not st.chip_sequences:
            seq_tiles, n_seq = ly.tiles, ly.tiles.size
        for where, n_on in [(seq_tiles, n_seq)] if not ly.split else _part_tiles(ly):
            led.add(
                "variables:sequences",
                4.0 * T * B * (nmax[l] + 2) / n_on,
                where,
                f"layer {l + 1} spike sequence",
                recorded_liveness(T),
            )
        for p in ly.parts:  # each chip part's compaction tiles hold its flags and its chunk list
            led.add(
                "exchange_buffers",
                4.0 * (2 * -(-p.n // p.f) + nmax[l] + 2),
                p.comp_tiles,
                f"layer {l + 1} compaction flags and chunk list",
            )
    # the data input sequence [T, B, input_cap] ids + counts, spread over chip 0
    led.add(
        "variables:inputs",
        4.0 * T * B * (config.input_cap + 1) / (TPC - 1),
        slice(1, TPC),
        "input spike sequence",
        recorded_liveness(T, whole_at_start=True),
    )
    for c in lay[0].chips[1:] if lay[0].split else ():  # a first layer's other chips record the input too
        led.add(
            "variables:inputs",
            4.0 * T * B * (config.input_cap + 1) / TPC,
            slice(c * TPC, (c + 1) * TPC),
            "input spike sequence (a chip of a split first layer)",
            recorded_liveness(T),
        )
    used = np.zeros(machine.total_tiles, bool)
    for ly in lay:
        used[ly.tiles] = True
        used[ly.comp_tiles] = True
    led.add("stack", STACK_BYTES, np.flatnonzero(used), "worker and supervisor stacks")
    return led
