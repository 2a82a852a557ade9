"""The dense snnTorch network trained for real, in NumPy: what one ``poptorch_model(data, labels)``
call computes (the math of :mod:`tilesim.models.snntorch.ops`), at the run's sizes.

Per layer ``cur = x @ W + b`` for all ``T`` steps at once (``nn.Linear``; the steps of a layer do not
depend on each other's currents), then ``snn.Leaky`` step by step with the subtract reset::

    reset = H(mem - thr)            (detached)
    mem   = beta * (mem - reset * thr) + cur[t]
    spk   = H(mem - thr)            H(x) = 0 if x < 0 else 1   (the FastSigmoid custom op's forward)

``ce_count_loss(mem_rec, labels)``: cross-entropy of the membrane of the output layer summed over the
steps (the tutorial passes ``mem2_rec``); accuracy as the tutorial prints it: ``spk_rec.sum(0).argmax``.
Backward through time with the ``FastSigmoidGrad`` surrogate ``dS/dU = 1 / (|x| + 1)^2``, then
``torch.optim.Adam`` (β 0.9, 0.999, ε 1e-8, bias-corrected). Weights start as ``nn.Linear``'s
``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``. float32 throughout, as ``HalfUpcastToFloat`` runs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tilesim.errors import require

__all__ = ["DenseSnn", "DenseStep", "init_dense", "dense_train_step", "dense_gradients"]

BETA = 0.9  # the tutorial's num_steps = 25, beta = 0.9
THRESHOLD = 1.0  # snn.Leaky's default
ADAM = (0.9, 0.999, 1e-8)  # poptorch.optim.Adam(betas=(0.9, 0.999)), torch's eps


@dataclass
class DenseSnn:
    """Weights ``W[l]`` ``[n_in, n_out]``, biases ``b[l]`` and Adam's moments of a dense snnTorch network."""

    W: list
    b: list
    lr: float
    m: list = field(default_factory=list)
    v: list = field(default_factory=list)
    step: int = 0


@dataclass(frozen=True)
class DenseStep:
    """One training call: its loss, the batch accuracy (spike counts, as the tutorial prints it) and
    the spikes per sample and step of each layer (what the dense program's time does *not* depend on)."""

    loss: float
    accuracy: float
    spikes_per_step: tuple[float, ...]


def init_dense(layers, lr: float, seed: int) -> DenseSnn:
    """``nn.Linear`` initialisation of every layer, Adam's moments at zero."""
    rng = np.random.default_rng(seed)
    W, b = [], []
    for n_in, n_out in zip(layers, layers[1:]):
        bound = 1.0 / np.sqrt(n_in)
        W.append(rng.uniform(-bound, bound, (n_in, n_out)).astype(np.float32))
        b.append(rng.uniform(-bound, bound, n_out).astype(np.float32))
    params = W + b
    return DenseSnn(W, b, float(lr), [np.zeros_like(p) for p in params], [np.zeros_like(p) for p in params])


def _leaky(cur: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Membrane and spikes ``[T, B, n]`` of ``snn.Leaky`` driven by ``cur`` (module docstring)."""
    mem = np.zeros(cur.shape[1:], np.float32)
    mems, spks = np.empty_like(cur), np.empty_like(cur)
    for t in range(cur.shape[0]):
        reset = (mem - THRESHOLD >= 0).astype(np.float32)
        mem = np.float32(BETA) * (mem - reset * np.float32(THRESHOLD)) + cur[t]
        mems[t] = mem
        spks[t] = mem - THRESHOLD >= 0
    return mems, spks


def _through_time(ext: np.ndarray) -> np.ndarray:
    """``dL/dmem[t] = ext[t] + beta · dL/dmem[t+1]`` (the reset is detached)."""
    g = np.empty_like(ext)
    carry = np.zeros(ext.shape[1:], np.float32)
    for t in range(ext.shape[0] - 1, -1, -1):
        carry = ext[t] + np.float32(BETA) * carry
        g[t] = carry
    return g


def _adam(net: DenseSnn, grads: list) -> None:
    b1, b2, eps = ADAM
    net.step += 1
    c1, c2 = 1 - b1**net.step, 1 - b2**net.step
    for i, (p, g) in enumerate(zip(net.W + net.b, grads)):
        net.m[i] = b1 * net.m[i] + (1 - b1) * g
        net.v[i] = b2 * net.v[i] + (1 - b2) * g * g
        p -= (net.lr * (net.m[i] / c1) / (np.sqrt(net.v[i] / c2) + eps)).astype(np.float32)


def dense_train_step(net: DenseSnn, x: np.ndarray, labels: np.ndarray) -> DenseStep:
    """Forward, BPTT and one Adam update of ``net`` (in place) on ``x`` ``[T, B, N0]`` and ``labels`` ``[B]``."""
    step, grads = dense_gradients(net, x, labels)
    _adam(net, grads)
    return step


def dense_gradients(net: DenseSnn, x: np.ndarray, labels: np.ndarray) -> tuple[DenseStep, list]:
    """The loss, accuracy and spike rates of ``net`` on one batch and the gradients of the loss
    (``dW`` of every layer, then ``db``), no update."""
    T, B, n0 = x.shape
    require(n0 == net.W[0].shape[0], "input channels", n0, f"must be {net.W[0].shape[0]}")
    h, ins, mems = x.astype(np.float32), [], []
    rates = []
    for W, b in zip(net.W, net.b):
        ins.append(h)
        mem, spk = _leaky((h.reshape(T * B, -1) @ W + b).reshape(T, B, -1))
        mems.append(mem)
        rates.append(float(spk.sum() / (T * B)))
        h = spk
    count = mems[-1].sum(axis=0)  # [B, C]
    z = count - count.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    labels = np.asarray(labels, np.int64)
    loss = float(-logp[np.arange(B), labels].mean())
    accuracy = float((h.sum(axis=0).argmax(axis=1) == labels).mean())
    dcount = np.exp(logp)
    dcount[np.arange(B), labels] -= 1.0
    ext = np.broadcast_to((dcount / B).astype(np.float32), mems[-1].shape)  # every step's mem reaches the count
    gW, gb = [None] * len(net.W), [None] * len(net.W)
    for l in range(len(net.W) - 1, -1, -1):
        g = _through_time(np.ascontiguousarray(ext, np.float32)).reshape(T * B, -1)
        gW[l] = ins[l].reshape(T * B, -1).T @ g
        gb[l] = g.sum(axis=0)
        if l:
            dspk = (g @ net.W[l].T).reshape(T, B, -1)
            ext = dspk / (np.abs(mems[l - 1] - THRESHOLD) + 1.0) ** 2  # FastSigmoidGrad
    return DenseStep(loss, accuracy, tuple(rates)), gW + gb
