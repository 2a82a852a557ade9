"""The inputs of ``tilesim grad`` checked at the door: weights W0..W{L-1}, spikes and labels.

Everything is refused with one line (field, value, limit, fix) before any work: non-numeric,
complex, non-finite or empty weights, weights that overflow float32, spikes other than exactly
0 or 1, labels that are not whole numbers in ``0..classes-1``, shapes that do not chain.
"""

from __future__ import annotations

import numpy as np

from tilesim.errors import require

__all__ = ["grad_weights", "grad_batch"]


def _real_array(a, name: str, fix: str) -> np.ndarray:
    a = np.asarray(a)
    require(
        a.dtype.kind in "iuf",
        f"{name}.dtype",
        str(a.dtype),
        "must be a real number type (float or integer; not complex, bool, text or objects)",
        fix,
    )
    return a


def grad_weights(arrays: dict) -> list:
    """The weight matrices of ``arrays`` (keys W0..W{L-1}) as float32, checked: real, finite,
    2-D, non-empty, each layer's inputs equal to the previous layer's outputs."""
    keys = sorted((k for k in arrays if k.startswith("W") and k[1:].isdigit()), key=lambda k: int(k[1:]))
    require(
        bool(keys) and keys == [f"W{i}" for i in range(len(keys))],
        "--weights keys",
        sorted(arrays),
        "must be W0, W1, ... W{L-1}",
        "save the arrays as W0=..., W1=...",
    )
    Ws = []
    for i, k in enumerate(keys):
        fix = f"save {k} as a float32 array [inputs, outputs]"
        w = _real_array(arrays[k], k, fix)
        require(w.ndim == 2 and w.size > 0, f"{k}.shape", w.shape, "must be 2-D [N_in, N_out], non-empty", fix)
        with np.errstate(over="ignore", invalid="ignore"):
            w32 = w.astype(np.float32)
        bad = ~np.isfinite(w32)
        if bad.any():
            j = tuple(int(x) for x in np.argwhere(bad)[0])
            require(
                False,
                f"{k}{list(j)}",
                w[j].item(),
                "must be finite (and within float32, |w| < 3.4e38)",
                "replace NaN/inf weights (check the training that produced them)",
            )
        if i:
            require(
                w.shape[0] == Ws[-1].shape[1],
                f"{k}.shape",
                w.shape,
                f"must start with {Ws[-1].shape[1]} (the outputs of W{i - 1})",
                "check the layer order",
            )
        Ws.append(w32)
    return Ws


def grad_batch(arrays: dict, inputs: int, classes: int) -> tuple:
    """``(spikes uint8 [T, B, inputs], labels int64 [B])`` of ``arrays``, checked: spikes exactly
    0 or 1, labels whole numbers in ``0..classes-1``, one label per sample."""
    require(
        "spikes" in arrays and "labels" in arrays,
        "--inputs keys",
        sorted(arrays),
        "must contain 'spikes' and 'labels'",
        "save them as spikes=..., labels=...",
    )
    sfix = "save spikes as [time, batch, inputs] of 0/1 values"
    s = np.asarray(arrays["spikes"])
    require(s.dtype.kind in "biuf", "spikes.dtype", str(s.dtype), "must be bool, integer or float 0/1", sfix)
    require(
        s.ndim == 3 and s.shape[2] == inputs and s.shape[0] >= 1 and s.shape[1] >= 1,
        "spikes.shape",
        s.shape,
        f"must be [T, B, {inputs}] with T, B >= 1",
        sfix,
    )
    bad = ~((s == 0) | (s == 1))
    if bad.any():
        j = tuple(int(x) for x in np.argwhere(bad)[0])
        require(False, f"spikes{list(j)}", s[j].item(), "must be exactly 0 or 1", sfix)
    lfix = f"save labels as integers [B] in 0..{classes - 1}"
    lab = _real_array(arrays["labels"], "labels", lfix)
    B = s.shape[1]
    require(lab.shape == (B,), "labels.shape", lab.shape, f"must be ({B},), one per sample of spikes", lfix)
    if lab.dtype.kind == "f":
        whole = np.isfinite(lab) & (lab == np.round(lab))
        if not whole.all():
            require(False, f"labels[{int(np.argmin(whole))}]", lab[~whole][0].item(), "must be a whole number", lfix)
    out = (lab < 0) | (lab >= classes)
    if out.any():
        require(False, f"labels[{int(np.argmax(out))}]", lab[out][0].item(), f"must be in 0..{classes - 1}", lfix)
    return s.astype(np.uint8), lab.astype(np.int64)
