"""Dense float64 NumPy twin of the sparse network (tests only; no numba).

The same semantics as :mod:`tilesim.models.snn.training.network`, written on dense arrays ``[B, N]`` with
masks instead of lists: ``S_l(t)`` = kept real spikes (transmitted), ``M_l(t)`` = kept
entries (gradient slots); capping keeps real spikes in ascending index first, then
gradient-only entries in ascending index, up to N_max. Backward is plain dense BPTT::

    δv_l ← α δv_l + G_l(t) ⊙ σ'(v_l(t));   δI = s δv_l
    dW_l += x_l(t)ᵀ δI;                    G_{l−1}(t−1) += (δI W_lᵀ) ⊙ M_{l−1}(t−1)
    dV_l += S_l(t−1)ᵀ δI;                  G_l(t−1)     += (δI V_lᵀ) ⊙ M_l(t−1)

with ``G_{L−1}(t) = ∂L/∂C ⊙ M_{L−1}(t)`` from the spike-count cross-entropy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ReferenceResult:
    """What :func:`reference_step` returns, all in float64: loss, accuracy, logits, the weight
    gradients ``dW``/``dV`` per layer, and per layer ``[T, B, N]`` the kept real spikes, the kept
    entries (real + gradient-only) and the membrane potentials."""

    loss: float
    accuracy: float
    logits: np.ndarray
    dW: list
    dV: list
    spikes: list  # per layer [T, B, N] bool: kept real spikes
    slots: list  # per layer [T, B, N] bool: kept entries (real + gradient-only)
    v: list  # per layer [T, B, N] float64


def cap_masks(v, threshold, second_threshold, n_max):
    """``(S, M)`` for membrane ``v [B, N]``: the first n_max real spikes in index order, then
    gradient-only entries in index order while room is left."""
    real = v > threshold
    grad = (v > second_threshold) & ~real
    kept_real = real & (np.cumsum(real, axis=1) <= n_max)
    room = n_max - kept_real.sum(axis=1, keepdims=True)
    kept_grad = grad & (np.cumsum(grad, axis=1) <= room)
    return kept_real, kept_real | kept_grad


def surrogate(v, threshold, beta):
    """The surrogate spike derivative ``1 / (beta·|v − threshold| + 1)²`` (element-wise on arrays)."""
    return 1.0 / (beta * np.abs(v - threshold) + 1.0) ** 2


def reference_step(config, W, V, inputs_dense, labels, step: int = 0) -> ReferenceResult:
    """Loss, accuracy and gradients of one batch in float64.

    ``inputs_dense [T, B, N0]``: the data spikes *after* input capping (0/1);
    ``W``, ``V``: weights as in :func:`tilesim.models.snn.training.network.init_weights`; ``step``: updates done
    so far (selects ϑ2 of a scheduled configuration, as ``state.step`` does).
    """
    theta2 = config.second_thresholds_at(step)
    lif = config.lif
    alpha, thr, s, beta = lif.decay, lif.threshold, lif.scale, lif.beta
    T, B = inputs_dense.shape[:2]
    sizes = config.layers
    L = len(sizes) - 1
    W = [np.asarray(w, np.float64) for w in W]
    V = [None if v is None else np.asarray(v, np.float64) for v in V]
    x0 = np.asarray(inputs_dense, np.float64)
    init = []
    for l in range(L):
        m = np.zeros((B, sizes[l + 1]))
        if config.activity == "fixed":
            m[:, : config.n_max[l]] = 1.0
        init.append(m)

    v_all = [np.zeros((T, B, sizes[l + 1])) for l in range(L)]
    S = [np.zeros((T, B, sizes[l + 1]), bool) for l in range(L)]
    M = [np.zeros((T, B, sizes[l + 1]), bool) for l in range(L)]

    def layer_input(l, t):
        if l == 0:
            return x0[t]
        return S[l - 1][t - 1].astype(np.float64) if t >= 1 else init[l - 1]

    def own_prev(l, t):
        return S[l][t - 1].astype(np.float64) if t >= 1 else init[l]

    for l in range(L):
        v = np.zeros((B, sizes[l + 1]))
        for t in range(T):
            current = layer_input(l, t) @ W[l]
            if V[l] is not None:
                current = current + own_prev(l, t) @ V[l]
            v = np.where(v > thr, s * current, alpha * v + s * current)
            v_all[l][t] = v
            S[l][t], M[l][t] = cap_masks(v, thr, theta2[l], config.n_max[l])

    logits = S[-1].sum(axis=0).astype(np.float64)
    z = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    loss = float(np.mean(np.log(np.exp(z).sum(axis=1)) - z[np.arange(B), labels]))
    acc = float(np.mean(np.argmax(logits, axis=1) == labels))
    dlogits = p.copy()
    dlogits[np.arange(B), labels] -= 1.0
    dlogits /= B

    G = [np.zeros((T, B, sizes[l + 1])) for l in range(L)]
    G[-1] = dlogits[None, :, :] * M[-1]
    dW = [np.zeros_like(w) for w in W]
    dV = [None if v is None else np.zeros_like(v) for v in V]
    dv = [np.zeros((B, sizes[l + 1])) for l in range(L)]
    for t in reversed(range(T)):
        for l in reversed(range(L)):
            dv[l] = alpha * dv[l] + G[l][t] * surrogate(v_all[l][t], thr, beta) * M[l][t]
            dI = s * dv[l]
            dW[l] += layer_input(l, t).T @ dI
            if l >= 1 and t >= 1:
                G[l - 1][t - 1] += (dI @ W[l].T) * M[l - 1][t - 1]
            if V[l] is not None:
                dV[l] += own_prev(l, t).T @ dI
                if t >= 1:
                    G[l][t - 1] += (dI @ V[l].T) * M[l][t - 1]
    return ReferenceResult(loss, acc, logits, dW, dV, S, M, v_all)


# --------------------------------------------------------------------------------------
# naive twins of the individual kernels (tests/naive.py style: slow, obvious, float64)
# --------------------------------------------------------------------------------------


def naive_lif_forward(
    W, ids, counts, decay, scale, threshold, V=None, own_initial=None, second_threshold=None, n_max=None
):
    """Membrane sequence (and, with ``V``, the own list) of one layer, loop by loop."""
    W = np.asarray(W, np.float64)
    T, B, _ = ids.shape
    N = W.shape[1]
    v_seq = np.zeros((T, B, N))
    own_ids = np.zeros((T, B, n_max or 0), np.uint32)
    own_counts = np.zeros((T, B, 2), np.int32)
    for b in range(B):
        v = np.zeros(N)
        for t in range(T):
            current = np.zeros(N)
            for i in range(counts[t, b, 0]):
                current += W[ids[t, b, i]]
            if V is not None:
                if t == 0:
                    prev_ids, c0 = own_initial.ids[0, b], own_initial.counts[0, b, 0]
                else:
                    prev_ids, c0 = own_ids[t - 1, b], own_counts[t - 1, b, 0]
                for i in range(c0):
                    current += np.asarray(V, np.float64)[prev_ids[i]]
            v = np.where(v > threshold, scale * current, decay * v + scale * current)
            v_seq[t, b] = v
            if V is not None:
                lst, c0, c1 = naive_compact_one(v, threshold, second_threshold, n_max)
                own_ids[t, b, : len(lst)] = lst
                own_counts[t, b] = (c0, c1)
    return v_seq, own_ids, own_counts


def naive_compact_one(v, threshold, second_threshold, n_max):
    """Loop twin of the kernel's compaction for one membrane vector ``v [N]``: returns ``(ids, real, kept)``
    — the kept neuron indices (real spikes first, then gradient-only, at most ``n_max``), the number of
    real spikes kept and the total kept."""
    real = [k for k in range(v.size) if v[k] > threshold][:n_max]
    grad = [k for k in range(v.size) if second_threshold < v[k] <= threshold]
    lst = (real + grad)[:n_max]
    return lst, len(real), len(lst)


def naive_compact(v_seq, threshold, second_threshold, n_max):
    """:func:`naive_compact_one` over ``v_seq [T, B, N]``: returns ``ids [T, B, n_max]`` (uint32, zero
    padded) and ``counts [T, B, 2]`` (real kept, total kept)."""
    T, B, _ = v_seq.shape
    ids = np.zeros((T, B, n_max), np.uint32)
    counts = np.zeros((T, B, 2), np.int32)
    for t in range(T):
        for b in range(B):
            lst, c0, c1 = naive_compact_one(v_seq[t, b], threshold, second_threshold, n_max)
            ids[t, b, : len(lst)] = lst
            counts[t, b] = (c0, c1)
    return ids, counts


def naive_state_grad(v_seq, ids, counts, g, decay, scale, threshold, beta, V=None):
    """Loop twin of the backward state pass: from the spike gradients ``g [T, B, n_max]`` returns
    ``(dI [T, B, N], g)``; with a recurrent matrix ``V`` the earlier steps' ``g`` gain ``V·dI``."""
    T, B, N = v_seq.shape
    g = np.array(g, np.float64)
    dI = np.zeros((T, B, N))
    for b in range(B):
        dv = np.zeros(N)
        for t in reversed(range(T)):
            dv *= decay
            for i in range(counts[t, b, 1]):
                k = ids[t, b, i]
                dv[k] += g[t, b, i] * surrogate(float(v_seq[t, b, k]), threshold, beta)
            dI[t, b] = scale * dv
            if V is not None and t > 0:
                for i in range(counts[t - 1, b, 1]):
                    g[t - 1, b, i] += np.dot(np.asarray(V, np.float64)[ids[t - 1, b, i]], dI[t, b])
    return dI, g


def naive_weight_grad(dI, ids, counts, n_in):
    """Loop twin of the weight gradient: ``dW [n_in, N]`` summed over the kept real input spikes."""
    T, B, N = dI.shape
    dW = np.zeros((n_in, N))
    for t in range(T):
        for b in range(B):
            for i in range(counts[t, b, 0]):
                dW[ids[t, b, i]] += dI[t, b]
    return dW


def naive_input_grad(W, dI, ids, counts):
    """Loop twin of the input gradient: ``g [T, B, n_max]`` with ``g[t-1] = W[ids[t]]·dI[t]`` for kept entries."""
    T, B, _ = dI.shape
    g = np.zeros(ids.shape)
    for t in range(1, T):
        for b in range(B):
            for i in range(counts[t, b, 1]):
                g[t - 1, b, i] = np.dot(np.asarray(W, np.float64)[ids[t, b, i]], dI[t, b])
    return g


def naive_adam(W, G, m, v, lr, step, beta1=0.9, beta2=0.999, eps=1e-8):
    """Textbook bias-corrected Adam: returns new (W, m, v) in float64."""
    m = beta1 * m + (1 - beta1) * G
    v = beta2 * v + (1 - beta2) * G * G
    m_hat = m / (1 - beta1**step)
    v_hat = v / (1 - beta2**step)
    return W - lr * m_hat / (np.sqrt(v_hat) + eps), m, v
