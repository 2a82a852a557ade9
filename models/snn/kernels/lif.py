"""Numba kernels of sparse BPTT for one LIF layer (snn-on-ipu.md §1.4, §3.3, §3.4).

Three layers per kernel (STUMPY style): a public function that validates and prepares, an
``@njit(parallel=True)`` driver (``_…_driver``) and serial ``@njit`` inner loops (``_…_one``).
Kernels take only arrays and scalars. Inner loops index only with ``range`` variables on
slices (``W[j, k0:k1]`` then ``row[kk]``): an index like ``k0 + kk`` that numba cannot prove
non-negative gets a wrap-around check per element, which stops LLVM from vectorising (5–10×). The math of a
layer never looks at the neuron-to-tile
placement; each public function returns, next to its math, the per-time-step work it did
(rows gathered, slots scanned, ...) from which :mod:`tilesim.models.snn.step.counters` builds per-tile
counters. Notation (one layer, ``N_in`` inputs, ``N`` neurons, list capacity ``n_max``):

* ``in_ids [T, B, n_in_max]`` uint32 and ``in_counts [T, B, 2]`` int32: the layer's *input*
  list at step t (for layers ≥ 1 already delayed by one step); ``in_counts[..., 0]`` ids are
  transmitted (used by the state update and the weight gradient), ``in_counts[..., 1]`` ids
  are gradient slots (receive the input-spike gradient).
* ``decay`` = α, ``scale`` = 10(1−α), ``threshold`` = ϑ1, ``second_threshold`` = ϑ2.
"""

from __future__ import annotations

from contextlib import contextmanager

import numba
import numpy as np
from numba import prange

from tilesim.errors import require
from tilesim.models.snn.kernels.jit import COLUMN_ALIGN, PARALLEL, SERIAL
from tilesim.models.snn.kernels.spikes import SpikeList

# Entries (time steps x samples x neurons) a layer must have for its kernels to run on every
# thread: below, a parallel region's fork and join cost more than the work. Measured on the
# 2-core development machine (2026-11, issue 15): a 770-layer network of 984-neuron layers at
# T 10, B 24 (236k entries per layer) took 3.4 s per step on one thread, the same on two idle
# cores, and 21 s on two threads while another process held one core (every region waits for
# its descheduled thread). The 2-layer demo (100 x 48 x 1460 = 7M entries) keeps every thread.
PARALLEL_MIN_ENTRIES = 1_000_000


@contextmanager
def threads_for(entries: int):
    """``with threads_for(entries):`` the kernels called inside use every thread if ``entries``
    (the largest layer's T x B x N) reaches :data:`PARALLEL_MIN_ENTRIES`, else one; the thread
    count is restored afterwards. The kernels' results do not depend on it (fixed summation
    order, no write races)."""
    before = numba.get_num_threads()
    if entries < PARALLEL_MIN_ENTRIES and before > 1:
        numba.set_num_threads(1)
    try:
        yield
    finally:
        if numba.get_num_threads() != before:
            numba.set_num_threads(before)


def column_block(n_columns: int) -> int:
    """Columns per work item of the weight-gradient scatter: one share per thread, rounded up
    to :data:`~tilesim.models.snn.kernels.jit.COLUMN_ALIGN`. Never changes results (the summation order of
    every dW element is fixed: t, then b, then list slot)."""
    share = -(-n_columns // max(numba.get_num_threads(), 1))
    return max(COLUMN_ALIGN, -(-share // COLUMN_ALIGN) * COLUMN_ALIGN)


# ---------------------------------------------------------------------------------------
# forward: synaptic input and LIF integration (non-recurrent layers; one item per sample
# and column block — whole rows here: gathers of full rows vectorise best)
# ---------------------------------------------------------------------------------------


@numba.njit(**SERIAL)
def _gather_rows_one(W, ids, count, k0, width, out):
    """out[0:width] = Σ_{i<count} W[ids[i], k0:k0+width]."""
    for kk in range(width):
        out[kk] = 0.0
    i = 0
    while i + 4 <= count:
        r0 = W[ids[i], k0 : k0 + width]
        r1 = W[ids[i + 1], k0 : k0 + width]
        r2 = W[ids[i + 2], k0 : k0 + width]
        r3 = W[ids[i + 3], k0 : k0 + width]
        for kk in range(width):
            out[kk] += (r0[kk] + r1[kk]) + (r2[kk] + r3[kk])
        i += 4
    while i < count:
        row = W[ids[i], k0 : k0 + width]
        for kk in range(width):
            out[kk] += row[kk]
        i += 1


@numba.njit(**SERIAL)
def _lif_update_one(v, current, width, decay, scale, threshold):
    """State-based reset LIF on ``width`` neurons, in place:
    v ← scale·I if v > ϑ1 else α·v + scale·I."""
    for kk in range(width):
        if v[kk] > threshold:
            v[kk] = scale * current[kk]
        else:
            v[kk] = decay * v[kk] + scale * current[kk]


@numba.njit(**PARALLEL)
def _forward_driver(W, in_ids, in_count0, out, integrate, decay, scale, threshold, block):
    T, B = in_count0.shape
    N = W.shape[1]
    n_blocks = (N + block - 1) // block
    for item in prange(n_blocks * B):
        blk = item // B
        b = item - blk * B
        k0 = blk * block
        width = min(block, N - k0)
        cur = np.empty(block, np.float32)
        v = np.zeros(block, np.float32)
        for t in range(T):
            _gather_rows_one(W, in_ids[t, b], in_count0[t, b], k0, width, cur)
            dst = out[t, b, k0 : k0 + width]
            if integrate:
                _lif_update_one(v, cur, width, decay, scale, threshold)
                for kk in range(width):
                    dst[kk] = v[kk]
            else:
                for kk in range(width):
                    dst[kk] = cur[kk]


def _check_list(ids, counts, T, B, name):
    require(
        ids.ndim == 3 and ids.shape[:2] == (T, B) and ids.dtype == np.uint32,
        f"{name}.ids",
        (ids.shape, str(ids.dtype)),
        f"must be uint32 [{T}, {B}, n_max]",
    )
    require(
        counts.shape == (T, B, 2) and counts.dtype == np.int32,
        f"{name}.counts",
        (counts.shape, str(counts.dtype)),
        f"must be int32 [{T}, {B}, 2]",
    )


def _check_weights(W, name="W"):
    require(
        W.ndim == 2 and W.dtype == np.float32 and W.flags.c_contiguous,
        f"{name}",
        (W.shape, str(W.dtype)),
        "must be a C-contiguous float32 [N_in, N_out] array",
    )


def lif_forward(W, inputs: SpikeList, decay: float, scale: float, threshold: float):
    """Membrane sequence of a non-recurrent LIF layer.

    .. math::
        I_t[b,k] = \\sum_{i < c_0(t,b)} W[\\mathrm{id}_i, k], \\qquad
        v_t = \\begin{cases} s\\,I_t & v_{t-1} > ϑ_1 \\\\ α v_{t-1} + s\\,I_t & \\text{else}
        \\end{cases},\\quad v_{-1} = 0

    Returns ``(v_seq [T, B, N] float32, rows_gathered [T] int64)`` where ``rows_gathered[t]``
    = Σ_b c0(t, b) is the number of weight rows each neuron summed at step t.
    """
    _check_weights(W)
    T, B = inputs.counts.shape[:2]
    _check_list(inputs.ids, inputs.counts, T, B, "inputs")
    count0 = np.ascontiguousarray(inputs.counts[..., 0])
    v_seq = np.empty((T, B, W.shape[1]), np.float32)
    _forward_driver(
        W,
        inputs.ids,
        count0,
        v_seq,
        True,
        np.float32(decay),
        np.float32(scale),
        np.float32(threshold),
        max(W.shape[1], 1),
    )
    return v_seq, count0.sum(axis=1, dtype=np.int64)


def synaptic_input(W, inputs: SpikeList):
    """``I [T, B, N]`` float32 with ``I_t[b, :] = Σ_{i<c0} W[id_i, :]`` (no integration)."""
    _check_weights(W)
    T, B = inputs.counts.shape[:2]
    _check_list(inputs.ids, inputs.counts, T, B, "inputs")
    count0 = np.ascontiguousarray(inputs.counts[..., 0])
    out = np.empty((T, B, W.shape[1]), np.float32)
    _forward_driver(W, inputs.ids, count0, out, False, np.float32(0), np.float32(0), np.float32(0), max(W.shape[1], 1))
    return out


# ---------------------------------------------------------------------------------------
# spike detection and compaction into the canonical list
# ---------------------------------------------------------------------------------------


@numba.njit(**SERIAL)
def _compact_one(v, threshold, second_threshold, n_max, ids_out):
    """Canonical list of one (t, b): ids with v > ϑ1 ascending, then ϑ2 < v ≤ ϑ1 ascending,
    cut at n_max. Returns (kept real, kept total); padding slots are set to 0."""
    n = 0
    for k in range(v.shape[0]):
        if n >= n_max:
            break
        if v[k] > threshold:
            ids_out[n] = k
            n += 1
    c0 = n
    for k in range(v.shape[0]):
        if n >= n_max:
            break
        x = v[k]
        if x > second_threshold and not (x > threshold):
            ids_out[n] = k
            n += 1
    for i in range(n, n_max):
        ids_out[i] = 0
    return c0, n


@numba.njit(**PARALLEL)
def _compact_driver(v_seq, threshold, second_threshold, ids, counts):
    T, B, _ = v_seq.shape
    n_max = ids.shape[2]
    for item in prange(T * B):
        t = item // B
        b = item - t * B
        c0, c1 = _compact_one(v_seq[t, b], threshold, second_threshold, n_max, ids[t, b])
        counts[t, b, 0] = c0
        counts[t, b, 1] = c1


def compact_spikes(v_seq, threshold: float, second_threshold: float, n_max: int) -> SpikeList:
    """The canonical sparse list of a membrane sequence ``v_seq [T, B, N]``: real spikes
    (``v > ϑ1``, strict) ascending, then gradient-only entries (``ϑ2 < v ≤ ϑ1``) ascending,
    cut at ``n_max``; counts = (kept real, kept total)."""
    require(
        v_seq.ndim == 3 and v_seq.dtype == np.float32,
        "v_seq",
        (v_seq.shape, str(v_seq.dtype)),
        "must be float32 [T, B, N]",
    )
    require(n_max >= 0, "n_max", n_max, "must be >= 0")
    T, B, _ = v_seq.shape
    ids = np.empty((T, B, n_max), np.uint32)
    counts = np.empty((T, B, 2), np.int32)
    _compact_driver(v_seq, np.float32(threshold), np.float32(second_threshold), ids, counts)
    return SpikeList(ids, counts)


# ---------------------------------------------------------------------------------------
# forward of a recurrent layer: per sample, step by step (own spikes of t−1 feed step t)
# ---------------------------------------------------------------------------------------


@numba.njit(**PARALLEL)
def _recurrent_forward_driver(
    I_ff, V, init_ids, init_count0, decay, scale, threshold, second_threshold, v_seq, ids, counts
):
    T, B, N = I_ff.shape
    n_max = ids.shape[2]
    for b in prange(B):
        v = np.zeros(N, np.float32)
        cur = np.empty(N, np.float32)
        for t in range(T):
            if t == 0:
                _gather_rows_one(V, init_ids[b], init_count0[b], 0, N, cur)
            else:
                _gather_rows_one(V, ids[t - 1, b], counts[t - 1, b, 0], 0, N, cur)
            for k in range(N):
                cur[k] += I_ff[t, b, k]
            _lif_update_one(v, cur, N, decay, scale, threshold)
            for k in range(N):
                v_seq[t, b, k] = v[k]
            c0, c1 = _compact_one(v, threshold, second_threshold, n_max, ids[t, b])
            counts[t, b, 0] = c0
            counts[t, b, 1] = c1


def lif_forward_recurrent(
    W,
    V,
    inputs: SpikeList,
    initial: SpikeList,
    decay: float,
    scale: float,
    threshold: float,
    second_threshold: float,
    n_max: int,
):
    """Forward of a layer with recurrent weights ``V [N, N]``.

    ``I_t = Σ_{i<c0(in,t)} W[id_i] + Σ_{i<c0(own,t−1)} V[id_i]`` where the own list at
    t = −1 is ``initial``; v and the canonical list as in :func:`lif_forward` /
    :func:`compact_spikes`. Returns ``(v_seq, own_list, rows_gathered [T])`` where
    ``rows_gathered[t]`` counts input rows plus own recurrent rows.
    """
    _check_weights(W)
    _check_weights(V, "V")
    N = W.shape[1]
    require(V.shape == (N, N), "V.shape", V.shape, f"must be [{N}, {N}]")
    require(initial.n_max == n_max, "initial.n_max", initial.n_max, f"must equal n_max = {n_max}")
    T, B = inputs.counts.shape[:2]
    I_ff = synaptic_input(W, inputs)
    v_seq = np.empty((T, B, N), np.float32)
    ids = np.empty((T, B, n_max), np.uint32)
    counts = np.empty((T, B, 2), np.int32)
    _recurrent_forward_driver(
        I_ff,
        V,
        initial.ids[0],
        np.ascontiguousarray(initial.counts[0, :, 0]),
        np.float32(decay),
        np.float32(scale),
        np.float32(threshold),
        np.float32(second_threshold),
        v_seq,
        ids,
        counts,
    )
    own = SpikeList(ids, counts)
    rows = inputs.counts[..., 0].sum(axis=1, dtype=np.int64)
    rows += own.shifted(initial).counts[..., 0].sum(axis=1, dtype=np.int64)
    return v_seq, own, rows


# ---------------------------------------------------------------------------------------
# backward: state gradient (δv recursion over t), per sample
# ---------------------------------------------------------------------------------------


@numba.njit(**SERIAL)
def _surrogate(x, threshold, beta):
    """SuperSpike σ'(v) = 1 / (β|v − ϑ1| + 1)²."""
    d = beta * abs(x - threshold) + 1.0
    return 1.0 / (d * d)


@numba.njit(**SERIAL)
def _apply_slots_one(dv, v, ids, g, count1, threshold, beta):
    """δv[id_i] += g_i σ'(v[id_i]) for i < count1."""
    for i in range(count1):
        k = ids[i]
        dv[k] += g[i] * _surrogate(v[k], threshold, beta)


@numba.njit(**SERIAL)
def _dot_row_one(W, j, x):
    s = np.float32(0.0)
    row = W[j]
    for k in range(x.shape[0]):
        s += row[k] * x[k]
    return s


@numba.njit(**PARALLEL)
def _state_grad_driver(v_seq, ids, counts, g, decay, scale, threshold, beta, V, recurrent, dI):
    T, B, N = v_seq.shape
    for b in prange(B):
        dv = np.zeros(N, np.float32)
        for tt in range(T):
            t = T - 1 - tt
            for k in range(N):
                dv[k] *= decay
            _apply_slots_one(dv, v_seq[t, b], ids[t, b], g[t, b], counts[t, b, 1], threshold, beta)
            for k in range(N):
                dI[t, b, k] = scale * dv[k]
            if recurrent and t > 0:
                for i in range(counts[t - 1, b, 1]):
                    g[t - 1, b, i] += _dot_row_one(V, ids[t - 1, b, i], dI[t, b])


def state_grad(v_seq, own: SpikeList, g, decay: float, scale: float, threshold: float, beta: float, V=None):
    """Backward through the membrane: ``δI [T, B, N]`` float32.

    For t = T−1 … 0:  δv ← α δv;  δv[id_i] += g_i σ'(v_t[id_i]) for slots i < c1(t, b);
    δI_t = 10(1−α) δv (``scale``). The reset path carries no gradient.

    ``g [T, B, n_max]`` holds the slot gradients of the layer's own list. With recurrent
    weights ``V`` the gradient into the own slots of t−1 is added *before* step t−1 is
    processed: ``g[t−1, b, i] += V[id_i, :] · δI_t[b, :]`` for i < c1(t−1, b); ``g`` is then
    updated in place (pass a copy). Returns ``(dI, slots_scanned [T])`` with
    ``slots_scanned[t] = Σ_b c1(t, b)``.
    """
    require(
        v_seq.ndim == 3 and v_seq.dtype == np.float32,
        "v_seq",
        (v_seq.shape, str(v_seq.dtype)),
        "must be float32 [T, B, N]",
    )
    T, B, N = v_seq.shape
    _check_list(own.ids, own.counts, T, B, "own")
    require(
        g.shape == own.ids.shape and g.dtype == np.float32,
        "g",
        (g.shape, str(g.dtype)),
        f"must be float32 {own.ids.shape}",
    )
    recurrent = V is not None
    if recurrent:
        _check_weights(V, "V")
    else:
        V = np.zeros((1, 1), np.float32)
    dI = np.empty((T, B, N), np.float32)
    _state_grad_driver(
        v_seq,
        own.ids,
        own.counts,
        g,
        np.float32(decay),
        np.float32(scale),
        np.float32(threshold),
        np.float32(beta),
        V,
        recurrent,
        dI,
    )
    return dI, own.counts[..., 1].sum(axis=1, dtype=np.int64)


# ---------------------------------------------------------------------------------------
# backward: weight gradient (blocked over columns: no write races, fixed summation order)
# ---------------------------------------------------------------------------------------


@numba.njit(**SERIAL)
def _scatter_rows_one(dW, ids, count, x, k0, width):
    """dW[ids[i], k0:k0+width] += x[k0:k0+width] for i < count."""
    src = x[k0 : k0 + width]
    for i in range(count):
        row = dW[ids[i], k0 : k0 + width]
        for kk in range(width):
            row[kk] += src[kk]


@numba.njit(**PARALLEL)
def _weight_grad_driver(dI, in_ids, in_count0, dW, block):
    T, B, N = dI.shape
    n_blocks = (N + block - 1) // block
    for blk in prange(n_blocks):
        k0 = blk * block
        width = min(block, N - k0)
        for t in range(T):
            for b in range(B):
                _scatter_rows_one(dW, in_ids[t, b], in_count0[t, b], dI[t, b], k0, width)


def weight_grad(dI, inputs: SpikeList, n_in: int, out=None):
    """``dW[j, k] = Σ_{t,b} Σ_{i<c0(t,b)} [id_i = j] δI_t[b, k]`` (transmitted inputs only).

    Accumulates into ``out`` when given (float32 ``[n_in, N]``). Returns
    ``(dW, rows_scattered [T])`` with ``rows_scattered[t] = Σ_b c0(t, b)``.
    """
    require(dI.ndim == 3 and dI.dtype == np.float32, "dI", (dI.shape, str(dI.dtype)), "must be float32 [T, B, N]")
    T, B, N = dI.shape
    _check_list(inputs.ids, inputs.counts, T, B, "inputs")
    if out is None:
        out = np.zeros((n_in, N), np.float32)
    require(
        out.shape == (n_in, N) and out.dtype == np.float32,
        "out",
        (out.shape, str(out.dtype)),
        f"must be float32 [{n_in}, {N}]",
    )
    count0 = np.ascontiguousarray(inputs.counts[..., 0])
    _weight_grad_driver(dI, inputs.ids, count0, out, column_block(N))
    return out, count0.sum(axis=1, dtype=np.int64)


# ---------------------------------------------------------------------------------------
# backward: gradient into the input slots (the previous layer's slots of step t−1)
# ---------------------------------------------------------------------------------------


@numba.njit(**PARALLEL)
def _input_grad_driver(W, dI, in_ids, in_count1, g_prev):
    T, B, N = dI.shape
    for item in prange((T - 1) * B):
        t = 1 + item // B
        b = item - (t - 1) * B
        x = dI[t, b]
        for i in range(in_count1[t, b]):
            g_prev[t - 1, b, i] = _dot_row_one(W, in_ids[t, b, i], x)


def input_grad(W, dI, inputs: SpikeList):
    """Slot gradients of the previous layer: ``g_prev [T, B, n_in_max]`` float32 with

    ``g_prev[t−1, b, i] = Σ_k W[id_i, k] δI_t[b, k]`` for i < c1_in(t, b), t ≥ 1

    where ``inputs`` is this layer's (delayed) input list, so slot i of input step t is slot i
    of the previous layer's own list at t−1. ``g_prev[T−1] = 0`` and steps of t = 0 (the
    initial list) receive nothing. Returns ``(g_prev, slots [T])`` with
    ``slots[t] = Σ_b c1_in(t, b)`` for t ≥ 1 and 0 at t = 0.
    """
    _check_weights(W)
    T, B, N = dI.shape
    _check_list(inputs.ids, inputs.counts, T, B, "inputs")
    g_prev = np.zeros(inputs.ids.shape, np.float32)
    count1 = np.ascontiguousarray(inputs.counts[..., 1])
    if T > 1:
        _input_grad_driver(W, dI, inputs.ids, count1, g_prev)
    slots = count1.sum(axis=1, dtype=np.int64)
    slots[0] = 0
    return g_prev, slots


# ---------------------------------------------------------------------------------------
# optimizers (float32 state, in place)
# ---------------------------------------------------------------------------------------


@numba.njit(**PARALLEL)
def _adam_driver(W, G, m, v, lr_t, beta1, beta2, eps_t):
    rows, cols = W.shape
    for j in prange(rows):
        for k in range(cols):
            g = G[j, k]
            mk = beta1 * m[j, k] + (1.0 - beta1) * g
            vk = beta2 * v[j, k] + (1.0 - beta2) * g * g
            m[j, k] = mk
            v[j, k] = vk
            W[j, k] -= lr_t * mk / (np.sqrt(vk) + eps_t)


def adam_update(W, G, m, v, lr: float, step: int, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8) -> None:
    """One Adam step in place (Kingma & Ba, Algorithm 1, in the efficient form):

    m ← β1 m + (1−β1) g;  v ← β2 v + (1−β2) g²;
    W ← W − lr_t · m / (√v + ε̂),  lr_t = lr √(1−β2^s)/(1−β1^s),  ε̂ = ε √(1−β2^s)

    with ``step`` = s ≥ 1 — algebraically equal to the bias-corrected
    ``W − lr m̂/(√v̂ + ε)`` (PyTorch's Adam; ε = 1e-8, the PyTorch default; Keras uses 1e-7).
    """
    require(step >= 1, "step", step, "must be >= 1")
    for name, a in (("G", G), ("m", m), ("v", v)):
        require(
            a.shape == W.shape and a.dtype == np.float32, name, (a.shape, str(a.dtype)), f"must be float32 {W.shape}"
        )
    c2 = np.sqrt(1.0 - beta2**step)
    lr_t = lr * c2 / (1.0 - beta1**step)
    _adam_driver(W, G, m, v, np.float32(lr_t), np.float32(beta1), np.float32(beta2), np.float32(eps * c2))


@numba.njit(**PARALLEL)
def _sgd_driver(W, G, lr):
    rows, cols = W.shape
    for j in prange(rows):
        for k in range(cols):
            W[j, k] -= lr * G[j, k]


def sgd_update(W, G, lr: float) -> None:
    """Plain SGD in place: W ← W − lr·g."""
    require(G.shape == W.shape and G.dtype == np.float32, "G", (G.shape, str(G.dtype)), f"must be float32 {W.shape}")
    _sgd_driver(W, G, np.float32(lr))


# ---------------------------------------------------------------------------------------
# per-tile tallies of list entries (data-dependent counters)
# ---------------------------------------------------------------------------------------


@numba.njit(cache=True)  # serial: a few entries per (step, sample); threads cost more than they save
def _tally_driver(ids, counts, tile_local, out):
    T, B, _ = ids.shape
    for t in prange(T):
        for b in range(B):
            c0 = counts[t, b, 0]
            c1 = counts[t, b, 1]
            for i in range(c1):
                tl = tile_local[ids[t, b, i]]
                out[1, t, tl] += 1
                if i < c0:
                    out[0, t, tl] += 1


def tally_entries(lst: SpikeList, tile_local, n_local: int):
    """int64 ``[2, T, n_local]``: per step and owner tile (local index), the kept real
    spikes (row 0) and kept entries in total (row 1) of the list ``lst``."""
    out = np.zeros((2, lst.timesteps, n_local), np.int64)
    _tally_driver(lst.ids, lst.counts, np.asarray(tile_local, np.int32), out)
    return out
