"""The csl stack's native SNN training step: weight blocks on PEs, spikes as wavelets, chains of
partial sums, timed from counted work with the PE's own costs.

Program (layout: :mod:`tilesim.models.snn.stacks.csl_layout`; costs: :mod:`tilesim.models.snn.stacks.csl_costs`).
Every layer runs at once in each superstep (the one-step delay between layers, as in the authors'
op). With ``s_r(t)`` / ``k_r(t)``: spikes / kept slots (Σ over the batch) of a layer's input in
in-block ``r`` at step ``t``; ``n_c``: neurons of out-block ``c``; ``m``: neurons of a state PE;
``o_c(t)`` / ``κ_c(t)``: spikes / kept slots of out-block ``c``; ``B`` batch; ``k.*`` the costs:

``host: input stream``  the step's input lists, T·B·(input_cap+1)·4 bytes, from the host to the
    feeder PEs at the west edge; feeder: ``B·task + (s + B)·tx`` (``+ s·scalar`` where layer 0 re-sends:
    the feeder sets a bit per id); exchange: the feeders multicast layer 0's t = 0 lists (ids and one
    end-of-list wavelet per sample) along its lines. The host streams a time step at a time (memcpy) into
    feeders that hold two steps (:data:`FEEDER_STEPS`): step t + 1's lists arrive while step t's go out,
    so only the first step's need precede the forward pass; the row books the whole stream before it
    (an upper bound; band down to one step's share).
``fwd: synaptic adds`` (t)  weight PE (r, c): ``B·(task + 2·dsd) + s·(rx + scalar + dsd) + s·n_c/fmac
    + B·n_c/fadd``: receive the spike ids, add a weight row of ``n_c`` per spike into the [B, n_c]
    accumulator, then stream the accumulator down the column (``@fadds`` fabric-in + memory → fabric-out);
    exchange: the column chains, ``4·B·n_c`` bytes per link of column ``c`` (pipelined: the busiest
    link's bytes plus the chain's hops).
``fwd: neuron update`` (t)  state PE: ``B·(task + dsd + m·rx) + B·neuron_ops·(dsd + m/mem) + o·(scalar + tx)``
    (o its share of ``o_c``; none from the output layer or at the last step, whose lists no layer reads);
    exchange: each column's spike ids (+ one end-of-list wavelet per sample) multicast along the next
    layer's line ``c``; the feeders send layer 0's next lists (as in the host row).
``loss``  the output layer's state PEs: ``B·(task + neuron_grad_ops·(dsd + m/mem))``.
``bwd: state grad`` (t, reversed)  state PE: ``B·task + κ·(rx + scalar) + B·neuron_grad_ops·(dsd + m/mem)``;
    exchange: δI (``4·B·n_c``) multicast up the column. Where layer ``l`` re-sends its input bitmasks
    (below), the layer below's state PEs also send this step's spike and kept bitmasks of their samples
    (``w = 2·b·ceil(m/32)`` words: ``+ task + dsd + w·tx``) along layer ``l``'s lines (the forward spikes'
    route); layer 0's feeders its input's spike bitmask (``B·ceil(n/32)`` words).
``bwd: weight+input grad`` (t)  weight PE: ``B·(task + 3·dsd + n_c·rx) + s·(scalar + dsd + n_c/fmac)
    + k·(scalar + dsd + n_c/fmac) + k/fadd``: dW += δI rows for the recorded input spikes, one
    partial dot product per input slot, then the partials streamed along the line towards the layer
    below (layer 0: no input gradient); where the layer re-sends, ``+ task + dsd + W_r·rx`` to take the
    ``W_r`` words of its line (:func:`resend_words`); exchange: the line chains, ``4·k_r`` bytes, ending on
    the layer below's state PEs of column ``r`` (the slot gradients g of its next backward step).
``optimizer``  weight PE: ``2·dsd + n_in·n_c·sgd_ops/mem`` (Adam: ``adam_ops``).

Exchange time: the mesh fabric's closed form (:class:`tilesim.machine.fabric.MeshFabric`) on each
row's per-PE bytes, with the busiest link's bytes and the longest route given by the program (a
chain's links each carry its vector once; a line's multicast crosses each link of the line once;
the routes' bounds of :func:`tilesim.models.snn.stacks.csl_layout.build_layout`, the same in any band):
what the fabric's proportional rule would spread over the wafer stays on the rows and columns it
uses. [U] a chain is pipelined (band: up to ``R`` times the drain if it were not). Against the event
model on the program's own routes (:func:`row_transfers`, ``tests/test_stack_csl.py``):
``closed - hops <= events <= closed`` per row (the events take a chain's hops at once).

What PEs keep (:func:`pe_bytes`, :func:`state_bytes`, :func:`feeder_bytes`): a weight PE records its
input's spike and kept bitmasks over T (2·T·B words of 32 neurons) where they fit; else it keeps only the
current step's and the layer **re-sends** them (above): SRAM traded for traffic and a task per backward
step. Re-sending only adds work, so :func:`choose_layout` records wherever the weight PEs hold it and the
block-size search keeps the fastest layout that fits. A column's neurons go to the fewest state PEs that
hold their history (v over T, the own list's bitmasks); if one neuron's whole-batch history does not
fit, the batch is split over state PEs too (``batch_split``, the fewest state PEs in all: each takes its
neurons for its samples; the shares of the chains, multicasts and gradients follow
:meth:`~tilesim.models.snn.stacks.csl_layout.LayerBlocks.state_share`).

Counts (:func:`block_counts`): per out-block from the counters' per-tile spike tallies
(``spike_detect``: ``spikes_kept``, ``entries_kept``), exact; a layer's input at step ``t`` is the
layer below's list of ``t − 1``. Assumed (:data:`INPUT_SPLITS`): the data input's spikes, and every
layer's step −1 list, spread over the in-blocks in proportion to their neurons (``uniform``;
``worst``: every block takes as many as it can, the band's upper end).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from tilesim.errors import ConfigError, MappingError, config_message
from tilesim.machine.fabric import make_fabric
from tilesim.machine.memory import MemoryLedger
from tilesim.models.snn.stacks.csl_costs import WseCosts, default_wse_costs
from tilesim.models.snn.stacks.csl_layout import (
    BLOCK_CANDIDATES,
    LayerBlocks,
    Layout,
    block_partition,
    build_layout,
    check_colors,
    equal_blocks,
)
from tilesim.program import SYNC_CHIP, CompactProgram
from tilesim.program.rows import ChipPeaks
from tilesim.program.validation import flow_columns

__all__ = [
    "ROW_LABELS",
    "HOST_LABEL",
    "INPUT_SPLITS",
    "BlockCounts",
    "block_counts",
    "pe_bytes",
    "state_bytes",
    "feeder_bytes",
    "resend_words",
    "FEEDER_STEPS",
    "planned_counts",
    "choose_layout",
    "step_rows",
    "estimate_cycles",
    "build_program",
    "csl_memory",
]

HOST_LABEL = "host: input stream"
ROW_LABELS = (
    HOST_LABEL,
    "fwd: synaptic adds",
    "fwd: neuron update",
    "loss",
    "bwd: state grad",
    "bwd: weight+input grad",
    "optimizer",
)
INPUT_SPLITS = ("uniform", "worst")
"""How the data input's spikes (and each layer's step −1 list) spread over in-blocks (module docstring)."""
ADAM_OPS = 10.0
"""[D] FP32 vector ops per weight of an Adam update (two moments, bias-corrected step, dW = 0); band 8-14."""


@dataclass(frozen=True)
class BlockCounts:
    """One layer's per-block counts (floats, Σ over the batch): ``s_in``/``k_in`` [T, R] spikes / kept
    slots of its input per in-block; ``o_out``/``kap_out`` [T, C] of its own list per out-block."""

    s_in: np.ndarray
    k_in: np.ndarray
    o_out: np.ndarray
    kap_out: np.ndarray


def _recurrent(config) -> bool:
    rec = getattr(config, "recurrent", False)
    return bool(np.any(rec)) if not isinstance(rec, bool) else rec


def layer_blocks(config, placement, b: int) -> list | None:
    """The out-blocks of every layer (whole placement tiles, <= ``b`` neurons) and in-blocks; depth 0
    (set by :func:`choose_layout`); None if a placement tile holds more than ``b`` neurons."""
    out = []
    prev = equal_blocks(int(config.layers[0]), b)
    for l in range(config.n_layers):
        _, local = placement.groupings[l]
        owned = np.bincount(local).astype(np.int64)
        if owned.max(initial=0) > b:
            return None
        tb = block_partition(owned, b)
        sizes = np.bincount(tb, weights=owned).astype(np.int64)
        out.append(LayerBlocks(l, prev, sizes, tb, 0))
        prev = sizes
    return out


def _by_block(arr: np.ndarray, tile_block: np.ndarray, C: int) -> np.ndarray:
    """[T, n_local] per-tile values summed into [T, C] per out-block (``tile_block`` nondecreasing)."""
    starts = np.flatnonzero(np.r_[True, np.diff(tile_block) != 0])
    out = np.add.reduceat(arr.astype(np.float64), starts, axis=1)
    assert out.shape[1] == C
    return out


def _spread(total: np.ndarray, sizes: np.ndarray, share: np.ndarray, B: int, split: str) -> np.ndarray:
    """[T] spike totals over in-blocks: by their neurons (``uniform``), or each block as many as it can take
    (``worst``: B·its neurons, at most the total; the band's upper end)."""
    if split == "uniform":
        return total[:, None] * share[None, :]
    return np.minimum(total[:, None], B * sizes[None, :].astype(np.float64))


def block_counts(config, counters, blocks: list, split: str = "uniform") -> list:
    """Per-layer :class:`BlockCounts` from per-step ``counters`` (module docstring)."""
    if split not in INPUT_SPLITS:
        raise ConfigError(config_message("input split", split, f"must be one of {INPUT_SPLITS}", 'e.g. "uniform"'))
    T, B = int(config.timesteps), int(config.batch)
    out = []
    for l, lb in enumerate(blocks):
        sd = counters.get("spike_detect", l)
        if sd.local_steps is None:
            raise ConfigError(
                config_message(
                    "counters", "totals only", "the csl program needs per-step counters", "count_work(per_step=True)"
                )
            )
        o_out = _by_block(sd.local_steps[sd.row("spikes_kept")], lb.tile_block, lb.C)
        kap_out = _by_block(sd.local_steps[sd.row("entries_kept")], lb.tile_block, lb.C)
        su = counters.get("state_update", l)
        rows_fwd = su.step_totals[su.row("synaptic_adds")] / float(config.layers[l + 1])  # [T] Σ_b input spikes
        n_in = float(config.layers[l])
        share = lb.in_sizes / n_in

        if l == 0:
            s_in = _spread(rows_fwd, lb.in_sizes, share, B, split)
        else:
            prev = out[l - 1]
            s_in = np.empty((T, lb.R))
            s_in[1:] = prev.o_out[:-1]
            s_in[:1] = _spread(rows_fwd[:1], lb.in_sizes, share, B, split)
        k_in = np.zeros((T, lb.R))
        if l > 0:
            k_in[1:] = out[l - 1].kap_out[:-1]
        out.append(BlockCounts(s_in, k_in, o_out, kap_out))
    return out


def planned_counts(config, blocks: list) -> list:
    """Per-layer :class:`BlockCounts` at the lists' caps (every list full: ``B·n_max`` entries per step,
    spread over the blocks by their neurons): what the layout is compiled for, before any data."""
    T, B = int(config.timesteps), int(config.batch)
    caps = (int(config.input_cap), *(int(n) for n in config.n_max))
    out = []
    for l, lb in enumerate(blocks):
        cin = B * caps[l] * lb.in_sizes / float(config.layers[l])
        cout = B * caps[l + 1] * lb.out_sizes / float(config.layers[l + 1])
        s_in = np.broadcast_to(cin, (T, lb.R)).copy()
        k_in = s_in.copy() if l > 0 else np.zeros((T, lb.R))
        k_in[:1] = 0.0
        o = np.broadcast_to(cout, (T, lb.C)).copy()
        out.append(BlockCounts(s_in, k_in, o, o.copy()))
    return out


def pe_bytes(config, costs: WseCosts, n_in: int, n_out: int, resend_words: float | None = None) -> int:
    """SRAM of a weight PE holding a ``n_in x n_out`` block: W and dW (+ Adam's two moments), the
    [B, n_out] accumulator and δI, the input's spike and kept bitmasks, the [B, n_in] received-list and
    partials buffers, code and reserved. The bitmasks: recorded over T (2·T·B words of 32 neurons), or, if
    the layer re-sends them (``resend_words``: the words one backward step brings, :func:`resend_words`),
    only the current step's."""
    T, B = int(config.timesteps), int(config.batch)
    slots = 2 if config.optimizer == "adam" else 0
    words = -(-n_in // 32)
    masks = 8 * T * B * words if resend_words is None else 4 * float(resend_words)
    return int(
        4 * n_in * n_out * (2 + slots)
        + 8 * B * n_out
        + masks
        + 4 * B * (n_in + 1)
        + 4 * B * n_in
        + costs.code_bytes
        + costs.reserved_bytes
    )


def state_bytes(config, costs: WseCosts, m: int, b: int | None = None) -> int:
    """SRAM of a state PE of ``m`` neurons and ``b`` samples (default the batch; fewer where the batch is
    split over state PEs): v over T steps (BPTT), v / δv / δI, the own list's spike and kept bitmasks
    (2·T·b words of 32 neurons), the chain's incoming [b, m] share and the slot gradients g, code and
    reserved."""
    T = int(config.timesteps)
    b = int(config.batch) if b is None else int(b)
    words = -(-m // 32)
    return int(4 * T * b * m + 12 * b * m + 8 * T * b * words + 8 * b * m + costs.code_bytes + costs.reserved_bytes)


FEEDER_STEPS = 2
"""Time steps of input lists a feeder holds: the one being sent and the next one arriving (double-buffered)."""


def feeder_bytes(config, costs: WseCosts, n: int, resend: bool = False) -> int:
    """SRAM of a feeder PE: :data:`FEEDER_STEPS` steps of its in-block's input lists (B·(min(n, cap)+1) words
    a step: the host streams the input a time step at a time), and, if layer 0 re-sends its input bitmasks
    (``resend``), the in-block's spike bitmasks over T (T·B words of 32 neurons), code."""
    T, B = int(config.timesteps), int(config.batch)
    cap = min(n, int(config.input_cap))
    masks = 4 * T * B * -(-n // 32) if resend else 0
    return int(4 * FEEDER_STEPS * B * (cap + 1) + masks + costs.code_bytes + costs.reserved_bytes)


def resend_words(blocks: list, l: int, B: int) -> np.ndarray:
    """[R] words one backward step re-sends along each line of layer ``l``: layer 0's feeders the in-block's
    spike bitmask (B words of 32 neurons: layer 0 has no input gradient, so no kept mask); else each of the
    layer below's state PEs of column ``r`` its spike and kept bitmasks of its samples (2·b·ceil(m/32))."""
    lb = blocks[l]
    if l == 0:
        return B * -(-lb.in_sizes // 32).astype(np.float64)
    below = blocks[l - 1]
    per = 2.0 * below.state_batch(B) * -(-below.state_sizes // 32)  # [d, C_below]
    return per.sum(axis=0)


def _depth(config, costs, n_out_max: int, budget: int) -> tuple | None:
    """(state PEs per column, batch split): the fewest state PEs holding all ``n_out_max`` neurons' whole
    batch; if even one neuron's whole-batch history does not fit, the batch split over the fewest groups
    of state PEs for which some neuron split fits (then the fewest state PEs in all); None if even one
    neuron of one sample does not fit."""
    B = int(config.batch)
    for d in range(1, n_out_max + 1):
        if state_bytes(config, costs, -(-n_out_max // d)) <= budget:
            return d, 1
    best = None
    for q in range(2, B + 1):
        if best is not None and q >= best[0] * best[1]:  # q groups alone are as many state PEs as the best
            break
        b = -(-B // q)
        if state_bytes(config, costs, 1, b) > budget:
            continue
        d = next(d for d in range(1, n_out_max + 1) if state_bytes(config, costs, -(-n_out_max // d), b) <= budget)
        if best is None or d * q < best[0] * best[1]:
            best = (d, q)
    return None if best is None else (best[0] * best[1], best[1])


def _blocks_fit(config, costs, blocks, budget, why: dict | None = None) -> list | None:
    """``blocks`` with their state PEs and their bitmask choice, or None if a PE overflows SRAM. Each layer
    records its input bitmasks where its weight PEs can hold them over T (re-sending only adds work), else
    re-sends them if that fits."""
    B = int(config.batch)
    out = []
    for lb in blocks:
        dq = _depth(config, costs, int(lb.out_sizes.max()), budget)
        if dq is None:
            if why is not None:
                why["state"] = True
            return None
        out.append(replace(lb, depth=dq[0], batch_split=dq[1]))
    for l, lb in enumerate(out):
        ni, no = int(lb.in_sizes.max()), int(lb.out_sizes.max())
        if pe_bytes(config, costs, ni, no) <= budget:
            continue
        if pe_bytes(config, costs, ni, no, float(resend_words(out, l, B).max())) > budget:
            return None
        out[l] = replace(lb, resend=True)
    if feeder_bytes(config, costs, int(out[0].in_sizes.max()), out[0].resend) > budget:
        return None
    return out


def _check(config, machine) -> None:
    if machine.chips != 1:
        raise MappingError(
            f"the csl stack's program runs on one wafer; {machine.name} has {machine.chips} chips: "
            "use one chip (--chips 1) or another stack (--stack tt-metal)"
        )
    if machine.fabric.kind != "mesh":
        raise MappingError(
            f"the csl stack's program needs a 2-D mesh of PEs; {machine.name}'s fabric is {machine.fabric.kind!r}: "
            "use a mesh machine (wse2, wse3, mesh-demo) or its own vendor's stack (--stack auto)"
        )
    if _recurrent(config):
        raise MappingError(
            "the csl stack's program has no recurrent weights (a layer's own list as a second input): "
            "use a feed-forward network or --stack poplar"
        )


# ---------------------------------------------------------------------------------------------------
# rows at block level


@dataclass
class _Row:
    """One superstep at block level: per layer the weight PEs' and state PEs' compute ([R, C] / [d, C]),
    bytes out / in; the feeders' ([R_0]); the busiest link's bytes and the longest route; host bytes."""

    label: str
    w_comp: list
    s_comp: list
    f_comp: np.ndarray
    w_out: list
    w_in: list
    s_out: list
    s_in: list
    f_out: np.ndarray
    link: float = 0.0
    hops: float = -1.0
    broadcast: bool = False
    host_bytes: float = 0.0
    exchange: bool = False
    resent: list | None = None  # bwd: state grad: per layer the bitmask bytes each state PE re-sends [d, C]


def _empty_row(label, blocks) -> _Row:
    z = lambda shape: np.zeros(shape)  # noqa: E731
    return _Row(
        label,
        [z((lb.R, lb.C)) for lb in blocks],
        [z((lb.depth, lb.C)) for lb in blocks],
        z(blocks[0].R),
        [z((lb.R, lb.C)) for lb in blocks],
        [z((lb.R, lb.C)) for lb in blocks],
        [z((lb.depth, lb.C)) for lb in blocks],
        [z((lb.depth, lb.C)) for lb in blocks],
        z(blocks[0].R),
    )


def _feeder_send(s: np.ndarray, B: int, record: bool, k: WseCosts) -> np.ndarray:
    """A feeder sending one step's lists (``s`` ids and B ends): a task per sample, a wavelet per id and end;
    where layer 0 re-sends its bitmasks (``record``), the feeder also sets a bit per id."""
    return B * k.task_cycles + (s + B) * k.wavelet_tx_cycles + (s * k.spike_scalar_cycles if record else 0.0)


def _host_row(config, blocks: list, counts: list, k: WseCosts):
    """The input stream; the feeders multicast layer 0's t = 0 lists."""
    T, B = int(config.timesteps), int(config.batch)
    r = _empty_row(HOST_LABEL, blocks)
    r.host_bytes = 4.0 * T * B * (int(config.input_cap) + 1)
    b0 = 4.0 * (counts[0].s_in[0] + B)
    r.f_out = b0.copy()
    r.f_comp = _feeder_send(counts[0].s_in[0], B, blocks[0].resend, k)
    r.w_in[0] += b0[:, None]
    r.link, r.hops, r.broadcast, r.exchange = float(b0.max()), float(blocks[0].C), True, True
    return r


def _synaptic_row(t: int, B: int, S: int, blocks: list, counts: list, k: WseCosts):
    """Forward, time step ``t``: each weight PE adds the rows of its in-block's spikes; the sums go down the
    column chain to the state PEs."""
    r = _empty_row("fwd: synaptic adds", blocks)
    link = hops = 0.0
    for l, (lb, c) in enumerate(zip(blocks, counts)):
        n = lb.out_sizes[None, :].astype(np.float64)
        s = c.s_in[t][:, None]
        r.w_comp[l] = (
            B * (k.task_cycles + 2 * k.dsd_setup_cycles)
            + s * (k.wavelet_rx_cycles + k.spike_scalar_cycles + k.dsd_setup_cycles)
            + s * n / k.fmac_f32_per_cycle
            + B * n / k.fadd_f32_per_cycle
        )
        vec = 4.0 * B * n
        r.w_out[l] = np.broadcast_to(vec, (lb.R, lb.C)).copy()
        r.w_in[l] = r.w_out[l].copy()
        r.w_in[l][0] = 0.0  # the chain's first PE receives nothing
        r.s_in[l] = 4.0 * lb.state_batch(B) * lb.state_sizes
        link, hops = max(link, float(vec.max())), max(hops, S)
    r.link, r.hops, r.exchange = link, hops, True
    return r


def _update_row(t: int, T: int, B: int, blocks: list, counts: list, k: WseCosts):
    """Forward, time step ``t``: the state PEs update their neurons and multicast the column's ids along the
    next layer's line; the feeders send layer 0's next lists."""
    L = len(blocks)
    r = _empty_row("fwd: neuron update", blocks)
    link = hops = 0.0
    for l, (lb, c) in enumerate(zip(blocks, counts)):
        m = lb.state_sizes.astype(np.float64)
        b = lb.state_batch(B).astype(np.float64)
        # the ids go to the next layer's step t + 1: none from the output layer, none at the last step
        send = l + 1 < L and t + 1 < T
        o = c.o_out[t][None, :] * lb.state_share(B) if send else 0.0
        r.s_comp[l] = (
            b * (k.task_cycles + k.dsd_setup_cycles)
            + b * m * k.wavelet_rx_cycles
            + b * k.neuron_ops * (k.dsd_setup_cycles + m / k.mem_op_per_cycle)
            + o * (k.spike_scalar_cycles + k.wavelet_tx_cycles)
        )
        if send:  # the column's ids multicast along the next layer's line c
            r.s_out[l] = 4.0 * (o + b)
            line = 4.0 * (c.o_out[t] + float(b.sum()))  # [C]: what each PE of line c receives
            r.w_in[l + 1] += line[:, None]
            link = max(link, float(line.max()))
            hops = max(hops, blocks[l + 1].C + lb.depth + blocks[l + 1].depth)
    if t + 1 < T:  # the feeders' next lists for layer 0
        f = 4.0 * (counts[0].s_in[t + 1] + B)
        r.f_out = f
        r.f_comp = _feeder_send(counts[0].s_in[t + 1], B, blocks[0].resend, k)
        r.w_in[0] += f[:, None]
        link, hops = max(link, float(f.max())), max(hops, blocks[0].C + 1)
    r.link, r.hops, r.broadcast, r.exchange = link, hops, True, link > 0
    return r


def _loss_row(B: int, blocks: list, k: WseCosts):
    """The output layer's loss and its gradient at its state PEs."""
    r = _empty_row("loss", blocks)
    m = blocks[-1].state_sizes.astype(np.float64)
    b = blocks[-1].state_batch(B).astype(np.float64)
    r.s_comp[-1] = b * (k.task_cycles + k.neuron_grad_ops * (k.dsd_setup_cycles + m / k.mem_op_per_cycle))
    return r


def _state_grad_row(t: int, B: int, S: int, blocks: list, counts: list, k: WseCosts):
    """Backward, time step ``t``: the state PEs' gradients; δI goes up the column to the weight PEs. Where a
    layer re-sends its input bitmasks, the layer below's state PEs (layer 0: the feeders) multicast this
    step's along the layer's lines, the forward spikes' route."""
    L = len(blocks)
    r = _empty_row("bwd: state grad", blocks)
    r.resent = [np.zeros((lb.depth, lb.C)) for lb in blocks]
    link = hops = 0.0
    for l, (lb, c) in enumerate(zip(blocks, counts)):
        m = lb.state_sizes.astype(np.float64)
        b = lb.state_batch(B).astype(np.float64)
        kap = c.kap_out[t][None, :] * lb.state_share(B) if l + 1 < L else 0.0
        r.s_comp[l] = (
            b * k.task_cycles
            + kap * (k.wavelet_rx_cycles + k.spike_scalar_cycles)
            + b * k.neuron_grad_ops * (k.dsd_setup_cycles + m / k.mem_op_per_cycle)
        )
        r.s_out[l] = 4.0 * b * m  # δI up the column
        vec = 4.0 * B * lb.out_sizes.astype(np.float64)
        r.w_in[l] = np.broadcast_to(vec[None, :], (lb.R, lb.C)).copy()
        link, hops = max(link, float(vec.max())), max(hops, S)
        if not lb.resend:
            continue
        line = 4.0 * resend_words(blocks, l, B)  # [R]: what each PE of line r receives
        r.w_in[l] += line[:, None]
        link = max(link, float(line.max()))
        if l == 0:  # the feeders' spike bitmasks of this step
            r.f_out = line.copy()
            r.f_comp = k.task_cycles + k.dsd_setup_cycles + line / 4.0 * k.wavelet_tx_cycles
            hops = max(hops, lb.C + 1)
        else:  # the layer below's state PEs, each its samples' spike and kept bitmasks
            below = blocks[l - 1]
            words = 2.0 * below.state_batch(B) * -(-below.state_sizes // 32)
            r.resent[l - 1] = 4.0 * words
            r.s_out[l - 1] = r.s_out[l - 1] + 4.0 * words
            r.s_comp[l - 1] = r.s_comp[l - 1] + k.task_cycles + k.dsd_setup_cycles + words * k.wavelet_tx_cycles
            hops = max(hops, lb.C + below.depth + lb.depth)
    r.link, r.hops, r.broadcast, r.exchange = link, hops, True, True
    return r


def _grad_row(t: int, B: int, blocks: list, counts: list, k: WseCosts):
    """Backward, time step ``t``: dW on the weight PEs, and the input-gradient partials reduced along each
    line onto the layer below's column."""
    r = _empty_row("bwd: weight+input grad", blocks)
    link = hops = 0.0
    for l, (lb, c) in enumerate(zip(blocks, counts)):
        n = lb.out_sizes[None, :].astype(np.float64)
        s = c.s_in[t][:, None]
        kk = c.k_in[t][:, None]
        per = k.spike_scalar_cycles + k.dsd_setup_cycles
        r.w_comp[l] = (
            B * (k.task_cycles + 3 * k.dsd_setup_cycles)
            + B * n * k.wavelet_rx_cycles
            + (s + kk) * per
            + (s + kk) * n / k.fmac_f32_per_cycle
            + kk / k.fadd_f32_per_cycle
        )
        if lb.resend:  # this step's re-sent bitmasks: a task and a fabric-input DSD
            got = resend_words(blocks, l, B)[:, None]
            r.w_comp[l] = r.w_comp[l] + k.task_cycles + k.dsd_setup_cycles + got * k.wavelet_rx_cycles
        if l > 0 and c.k_in[t].any():  # the partials along line r, onto the layer below's column r
            vec = 4.0 * c.k_in[t]  # [R]
            r.w_out[l] = np.broadcast_to(vec[:, None], (lb.R, lb.C)).copy()
            r.w_in[l] = r.w_out[l].copy()
            r.w_in[l][:, -1] = 0.0  # the line's far end starts the chain
            below = blocks[l - 1]
            r.s_in[l - 1] += vec[None, :] * below.state_share(B)
            link = max(link, float(vec.max()))
            hops = max(hops, lb.C + lb.depth + below.depth)
    r.link, r.hops, r.exchange = link, hops, link > 0
    return r


def _optimizer_row(config, blocks: list, k: WseCosts):
    """Once per step: every weight PE updates its block."""
    ops = ADAM_OPS if config.optimizer == "adam" else k.sgd_ops
    r = _empty_row("optimizer", blocks)
    for l, lb in enumerate(blocks):
        w = lb.in_sizes[:, None].astype(np.float64) * lb.out_sizes[None, :]
        r.w_comp[l] = 2 * k.dsd_setup_cycles + w * ops / k.mem_op_per_cycle
    return r


def step_rows(config, blocks: list, counts: list, costs: WseCosts) -> list:
    """The step's supersteps at block level (module docstring), in program order."""
    T, B = int(config.timesteps), int(config.batch)
    S = max(max(lb.C, lb.R + lb.depth) for lb in blocks)  # the cell side: a column's longest route
    rows: list = [_host_row(config, blocks, counts, costs)]
    for t in range(T):
        rows.append(_synaptic_row(t, B, S, blocks, counts, costs))
        rows.append(_update_row(t, T, B, blocks, counts, costs))
    rows.append(_loss_row(B, blocks, costs))
    for t in reversed(range(T)):
        rows.append(_state_grad_row(t, B, S, blocks, counts, costs))
        rows.append(_grad_row(t, B, blocks, counts, costs))
    rows.append(_optimizer_row(config, blocks, costs))
    return rows


def _row_peaks(r: _Row) -> tuple:
    """(max compute, max port bytes in, max port bytes out) of a block-level row."""
    comp = max([float(a.max(initial=0.0)) for a in (*r.w_comp, *r.s_comp)] + [float(r.f_comp.max(initial=0.0))])
    bin_ = max(float(a.max(initial=0.0)) for a in (*r.w_in, *r.s_in))
    bout = max([float(a.max(initial=0.0)) for a in (*r.w_out, *r.s_out)] + [float(r.f_out.max(initial=0.0))])
    return comp, bin_, bout


def _exchange_cycles(machine, rows: list) -> np.ndarray:
    """The mesh fabric's exchange cycles of each row from its port peaks and the program's link peaks."""
    fab = make_fabric(machine)
    pk = np.array([_row_peaks(r)[1:] for r in rows]).reshape(len(rows), 2)
    link = np.array([[r.link] for r in rows])
    hops = np.array([[r.hops] for r in rows])
    cyc, _ = fab.exchange_cycles(pk[:, 0, None, None], pk[:, 1, None, None], None, (link, hops))
    return cyc[:, 0] * np.array([r.exchange for r in rows])


def estimate_cycles(machine, rows: list) -> float:
    """Device cycles of the step (Σ over supersteps of the slowest PE, the machine's sync and the
    exchange): what the engine gives for the program :func:`build_program` makes of ``rows``."""
    comp = sum(_row_peaks(r)[0] for r in rows)
    return float(comp + _exchange_cycles(machine, rows).sum() + len(rows) * machine.chip.sync_cycles)


def _no_layout(config, machine, budget: int, why: dict, costs: WseCosts) -> str:
    """The one-line error when no block size fits, naming the limit that bound and the fix."""
    cols, rows = machine.fabric.cols, machine.fabric.rows
    head = f"the csl program fits no layout of {config.n_layers} weight layers on {machine.name}: "
    if len(why["placement"]) == len(BLOCK_CANDIDATES):
        return head + (
            f"the placement puts more neurons on a tile than the largest block ({BLOCK_CANDIDATES[-1]}); "
            "place with fewer neurons per tile (--neurons-per-tile 1)"
        )
    sram = [b for b in why["sram"] if b not in why["fabric"]]
    if why["state"]:
        T = int(config.timesteps)
        one = state_bytes(config, costs, 1, 1)
        return head + (
            f"one neuron's history for one sample (v and two list bitmasks over {T} time steps, 12·T + 20 B, "
            f"plus code: {one:,} B) needs more than the {budget:,} B of SRAM of a state PE, even with the batch "
            "split over state PEs; reduce --timesteps (a state PE keeps BPTT's whole history)"
        )
    if sram:
        return head + (
            f"the blocks its {cols} x {rows} fabric can hold ({min(sram)} or more neurons a side) need more "
            f"than {budget:,} B of SRAM per PE at batch {config.batch} and {config.timesteps} time steps; "
            "reduce --batch or --timesteps, use SGD instead of Adam, or use a bigger fabric"
        )
    return head + (
        f"even blocks of {BLOCK_CANDIDATES[-1]} neurons a side leave cells too big for its {cols} x {rows} "
        "fabric; use a bigger fabric (e.g. wse2) or fewer and smaller layers"
    )


def choose_layout(config, placement, machine, costs: WseCosts | None = None) -> Layout:
    """The :class:`Layout` with the least step time at the lists' caps (:func:`planned_counts`: the layout
    is compiled before the data) among :data:`BLOCK_CANDIDATES` that fit (module docstring of
    :mod:`tilesim.models.snn.stacks.csl_layout`), each with its state PEs (and batch split) and its layers'
    bitmask choice, record or re-send (:func:`_blocks_fit`); a :class:`MappingError` naming the fix if none
    fits."""
    costs = costs or default_wse_costs()
    _check(config, machine)
    colors = check_colors(costs)
    budget = int(machine.chip.sram_bytes)
    cols, nrows = machine.fabric.cols, machine.fabric.rows
    best = None
    why = {"placement": [], "sram": [], "fabric": [], "state": False}
    for b in BLOCK_CANDIDATES:
        blocks = layer_blocks(config, placement, b)
        if blocks is None:
            why["placement"].append(b)
            continue
        fitted = _blocks_fit(config, costs, blocks, budget, why)
        if fitted is None:
            why["sram"].append(b)
            # would the cells fit if the PEs did? (what to tell the user)
            if build_layout([replace(lb, depth=1) for lb in blocks], b, cols, nrows, colors) is None:
                why["fabric"].append(b)
            continue
        layout = build_layout(fitted, b, cols, nrows, colors)
        if layout is None:
            why["fabric"].append(b)
            continue
        rows = step_rows(config, fitted, planned_counts(config, fitted), costs)
        cyc = estimate_cycles(machine, rows)
        if best is None or cyc < best[0]:
            best = (cyc, layout)
    if best is None:
        raise MappingError(_no_layout(config, machine, budget, why, costs))
    return best[1]


# ---------------------------------------------------------------------------------------------------
# the program


@dataclass(frozen=True, eq=False)
class _BlockRows:
    """The program's rows rebuilt per tile on demand (a :class:`tilesim.program.ChipRowSource`)."""

    layout: Layout
    rows: tuple
    tiles: int

    def chip_rows(self, chip: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        S = len(self.rows)
        out = [np.zeros((S, self.tiles), np.float32) for _ in range(3)]
        for s, r in enumerate(self.rows):
            for a, (w, st, f) in zip(
                out, ((r.w_comp, r.s_comp, r.f_comp), (r.w_in, r.s_in, None), (r.w_out, r.s_out, r.f_out))
            ):
                _scatter(a[s], self.layout, w, st, f)
        return out[0], out[1], out[2]

    def touched_rows(self, chip: int) -> np.ndarray:
        return np.arange(len(self.rows))


def _scatter(dst: np.ndarray, layout: Layout, w: list, s: list, f) -> None:
    for l in range(len(layout.layers)):
        dst[layout.weight_tiles[l].ravel()] += w[l].ravel()
        dst[layout.state_tiles[l].ravel()] += s[l].ravel()
    if f is not None:
        dst[layout.feeder_tiles] += f


def _argmax_tile(layout: Layout, w: list, s: list, f) -> tuple[float, int]:
    best, tile = 0.0, 0
    for l in range(len(layout.layers)):
        for arr, tiles in ((w[l], layout.weight_tiles[l]), (s[l], layout.state_tiles[l])):
            if arr.size and arr.max() > best:
                i = int(arr.argmax())
                best, tile = float(arr.ravel()[i]), int(tiles.ravel()[i])
    if f is not None and f.size and f.max() > best:
        i = int(f.argmax())
        best, tile = float(f[i]), int(layout.feeder_tiles[i])
    return best, tile


def build_program(layout: Layout, rows: list, machine, name: str = "snn training step (csl)") -> CompactProgram:
    """The :class:`tilesim.program.CompactProgram` of ``rows`` on ``layout``: per superstep the slowest
    PE and the busiest ports (with their tiles), the program's link peaks and routes, per tile and
    label the compute summed over the step, the host stream; rows rebuilt per tile on demand."""
    S, N = len(rows), machine.tiles_per_chip
    labels = tuple(dict.fromkeys(r.label for r in rows))
    label_id = np.array([labels.index(r.label) for r in rows], np.int32)
    comp, ctile = np.zeros((S, 1)), np.zeros((S, 1), np.int64)
    pin, tin, pout, tout = np.zeros((S, 1)), np.zeros((S, 1), np.int64), np.zeros((S, 1)), np.zeros((S, 1), np.int64)
    link, hops, row_bytes = np.zeros((S, 1)), np.full((S, 1), -1.0), np.zeros(S)
    label_tiles = np.zeros((len(labels), N))
    for s, r in enumerate(rows):
        comp[s, 0], ctile[s, 0] = _argmax_tile(layout, r.w_comp, r.s_comp, r.f_comp)
        _scatter(label_tiles[label_id[s]], layout, r.w_comp, r.s_comp, r.f_comp)
        if r.exchange:
            pin[s, 0], tin[s, 0] = _argmax_tile(layout, r.w_in, r.s_in, None)
            pout[s, 0], tout[s, 0] = _argmax_tile(layout, r.w_out, r.s_out, r.f_out)
            link[s, 0], hops[s, 0] = r.link, r.hops
            row_bytes[s] = sum(float(a.sum()) for a in (*r.w_out, *r.s_out)) + float(r.f_out.sum())
    erow = np.where([r.exchange for r in rows], np.arange(S), -1).astype(np.int32)
    hs = [s for s, r in enumerate(rows) if r.host_bytes > 0]
    host_rows = (hs, [0] * len(hs), [rows[s].host_bytes for s in hs])
    return CompactProgram(
        name=name,
        chips=1,
        tiles_per_chip=N,
        labels=labels,
        label_id=label_id,
        sync_scope=np.full(S, SYNC_CHIP, np.int32),
        partitions=(),
        peaks=ChipPeaks(comp, ctile, erow, pin, tin, pout, tout, row_bytes, link_bytes=link, hops=hops),
        label_tile_cycles=label_tiles,
        onchip_bytes=row_bytes[:, None].copy(),
        **flow_columns(None, host_rows),
        sync_extra_cycles=np.zeros(S),
        exchange_extra_cycles=np.zeros(S),
        rows=_BlockRows(layout, tuple(rows), N),
        exchange_broadcast=np.array([r.broadcast for r in rows], bool),
    )


def csl_memory(config, layout: Layout, machine, costs: WseCosts | None = None) -> MemoryLedger:
    """Per-PE SRAM of the program: the PE's own categories only (weights, dW, optimizer moments, state
    and recorded sequences, buffers, the program's code), no IPU categories."""
    costs = costs or default_wse_costs()
    T, B = int(config.timesteps), int(config.batch)
    led = MemoryLedger(machine, remedy="a smaller batch or fewer time steps, SGD instead of Adam, or a bigger fabric")
    code = costs.code_bytes + costs.reserved_bytes
    slots = 2 if config.optimizer == "adam" else 0
    for l, lb in enumerate(layout.layers):
        wt = layout.weight_tiles[l].ravel()
        ni = np.repeat(lb.in_sizes, lb.C).astype(np.int64)
        no = np.tile(lb.out_sizes, lb.R).astype(np.int64)
        led.add("variables:weights", 4 * ni * no, wt, f"layer {l + 1} weight block")
        led.add("variables:gradients", 4 * ni * no, wt, f"layer {l + 1} dW block")
        if slots:
            led.add("variables:optimizer", 4 * slots * ni * no, wt, f"layer {l + 1} Adam moments")
        led.add("variables:activations", 8 * B * no, wt, f"layer {l + 1} accumulator and dI")
        if lb.resend:
            got = np.repeat(resend_words(list(layout.layers), l, B), lb.C).astype(np.int64)
            led.add("variables:sequences", 4 * got, wt, f"layer {l + 1} input bitmasks of the step (re-sent)")
        else:
            led.add("variables:sequences", 8 * T * B * (-(-ni // 32)), wt, f"layer {l + 1} input spike bitmasks")
        led.add("exchange_buffers", 4 * B * (2 * ni + 1), wt, f"layer {l + 1} input list and partials buffers")
        led.add("control_code", np.full(wt.size, code), wt, "PE program code and runtime")
        stt = layout.state_tiles[l].ravel()
        m = lb.state_sizes.ravel().astype(np.int64)
        b = np.broadcast_to(lb.state_batch(B), lb.state_sizes.shape).ravel().astype(np.int64)
        led.add(
            "variables:sequences", 4 * T * b * m + 8 * T * b * (-(-m // 32)), stt, f"layer {l + 1} v and list sequences"
        )
        led.add("variables:state", 12 * b * m, stt, f"layer {l + 1} v, dv, dI")
        led.add("exchange_buffers", 8 * b * m, stt, f"layer {l + 1} chain share and slot gradients")
        led.add("control_code", np.full(stt.size, code), stt, "PE program code and runtime")
    ft = layout.feeder_tiles
    cap = np.minimum(layout.layers[0].in_sizes, int(config.input_cap)).astype(np.int64)
    led.add("variables:inputs", 4 * FEEDER_STEPS * B * (cap + 1), ft, "input lists of two time steps (feeders)")
    if layout.layers[0].resend:
        words = -(-layout.layers[0].in_sizes // 32).astype(np.int64)
        led.add("variables:sequences", 4 * T * B * words, ft, "input spike bitmasks over T (feeders, re-sent)")
    led.add("control_code", np.full(ft.size, code), ft, "PE program code and runtime")
    return led


def row_transfers(layout: Layout, row: _Row, B: int) -> tuple:
    """The explicit transfers ``(src, dst, bytes, group)`` a row's exchange stands for on ``layout`` (group
    >= 0: one multicast), to time it through the event model
    (:meth:`tilesim.machine.fabric.MeshFabric.transfer_cycles`): each chain as its hops PE to PE (a state PE
    passes on what is not its share), each line or column multicast as one tree from its sender; ``B`` the
    batch (the state PEs' shares)."""
    out: list = []
    group = [0]

    def uni(a, b, nb):
        if nb > 0:
            out.append((int(a), int(b), float(nb), -1))

    def multi(a, dsts, nb):
        if nb > 0:
            out.extend((int(a), int(t), float(nb), group[0]) for t in np.asarray(dsts).ravel())
            group[0] += 1

    L = len(layout.layers)
    for r in range(layout.layers[0].R):  # the feeders into layer 0's lines
        multi(layout.feeder_tiles[r], layout.weight_tiles[0][r], row.f_out[r])
    for l, lb in enumerate(layout.layers):
        W, St = layout.weight_tiles[l], layout.state_tiles[l]
        if row.label == "fwd: synaptic adds":
            cols = layout.fabric[0]
            for c in range(lb.C):
                far = np.argsort(-np.abs(W[:, c] // cols - St[0, c] // cols) - np.abs(W[:, c] % cols - St[0, c] % cols))
                chain = [*W[far, c].tolist(), *St[::-1, c].tolist()]  # farthest line first, then the state PEs
                left = float(row.w_out[l][0, c])
                for i in range(len(chain) - 1):
                    if i >= lb.R:  # a state PE keeps its share
                        left -= float(row.s_in[l][lb.depth - (i - lb.R) - 1, c])
                    uni(chain[i], chain[i + 1], left)
        elif row.label == "fwd: neuron update" and l + 1 < L:
            for k in range(lb.depth):
                for c in range(lb.C):
                    multi(St[k, c], layout.weight_tiles[l + 1][c], row.s_out[l][k, c])
        elif row.label == "bwd: state grad":
            side = row.resent[l] if row.resent is not None else np.zeros_like(row.s_out[l])
            for k in range(lb.depth):
                for c in range(lb.C):
                    multi(St[k, c], W[:, c], row.s_out[l][k, c] - side[k, c])  # δI up the column
                    if l + 1 < L:  # the re-sent bitmasks along the next layer's line c
                        multi(St[k, c], layout.weight_tiles[l + 1][c], side[k, c])
        elif row.label == "bwd: weight+input grad" and l > 0:
            below = layout.state_tiles[l - 1]
            for r in range(lb.R):
                for c in range(lb.C - 1, 0, -1):
                    uni(W[r, c], W[r, c - 1], row.w_out[l][r, c])
                share = layout.layers[l - 1].state_share(B)
                for k in range(below.shape[0]):  # the line's sums, each state PE its share
                    uni(W[r, 0], below[k, r], row.w_out[l][r, 0] * share[k, r])
    if not out:
        z = np.zeros(0, np.int64)
        return z, z, np.zeros(0), z
    a = np.array(out, dtype=object)
    return a[:, 0].astype(np.int64), a[:, 1].astype(np.int64), a[:, 2].astype(np.float64), a[:, 3].astype(np.int64)
