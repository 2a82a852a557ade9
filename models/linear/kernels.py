"""Numba kernels for the structured linear layers (the only module here that imports numba).

Kernels take arrays and scalars only; validation happens in :mod:`tilesim.models.linear.layers`.
Layout convention everywhere: activations are ``(batch, features)`` row-major float arrays.
"""

from __future__ import annotations

import numba as nb

from tilesim.models.jit import PARALLEL_EXACT


@nb.njit(**PARALLEL_EXACT)
def fwht_rows(x):
    """Unnormalised Walsh–Hadamard transform of every row, in place: ``x <- x H_n``.

    ``H_n`` is the Sylvester matrix (``H_1 = [1]``, ``H_2m = [[H_m, H_m], [H_m, -H_m]]``), symmetric,
    ``H_n H_n = n I``. Cost: ``n log2 n`` additions per row.
    """
    batch, n = x.shape
    for b in nb.prange(batch):
        h = 1
        while h < n:
            for i in range(0, n, 2 * h):
                for j in range(i, i + h):
                    u = x[b, j]
                    v = x[b, j + h]
                    x[b, j] = u + v
                    x[b, j + h] = u - v
            h *= 2
    return x


@nb.njit(**PARALLEL_EXACT)
def butterfly_forward(tw, x, out):
    """Apply ``log2 n`` butterfly factors with increasing stride; keep every intermediate.

    ``tw``: ``(L, n/2, 2, 2)`` untied twiddles; ``x``: ``(batch, n)``; ``out``: ``(L + 1, batch, n)``,
    ``out[0] = x`` and ``out[k + 1] = out[k] B_k^T``. Factor ``k`` has stride ``s = 2^k``; pair
    ``p = blk * s + j`` couples ``i = 2 s blk + j`` with ``i + s``::

        y_i     = t[0,0] u_i + t[0,1] u_{i+s}
        y_{i+s} = t[1,0] u_i + t[1,1] u_{i+s}
    """
    n_levels = tw.shape[0]
    batch, n = x.shape
    half = n // 2
    for b in nb.prange(batch):
        for i in range(n):
            out[0, b, i] = x[b, i]
        for k in range(n_levels):
            s = 1 << k
            for p in range(half):
                blk = p // s
                j = p - blk * s
                i = 2 * s * blk + j
                u = out[k, b, i]
                v = out[k, b, i + s]
                out[k + 1, b, i] = tw[k, p, 0, 0] * u + tw[k, p, 0, 1] * v
                out[k + 1, b, i + s] = tw[k, p, 1, 0] * u + tw[k, p, 1, 1] * v
    return out


@nb.njit(**PARALLEL_EXACT)
def butterfly_backward(tw, inter, grad_out, grad_tw):
    """Backward of :func:`butterfly_forward`.

    ``inter``: the ``(L + 1, batch, n)`` intermediates; ``grad_out``: ``(batch, n)`` gradient of the
    last one, overwritten with the gradient of the input; ``grad_tw``: ``(L, n/2, 2, 2)`` output.
    For a pair with inputs ``(u, v)`` and output gradients ``(g, h)``::

        dt = [[g u, g v], [h u, h v]]        (summed over the batch)
        du = t00 g + t10 h,   dv = t01 g + t11 h
    """
    n_levels = tw.shape[0]
    batch, n = grad_out.shape
    half = n // 2
    for k in range(n_levels - 1, -1, -1):
        s = 1 << k
        for p in nb.prange(half):
            blk = p // s
            j = p - blk * s
            i = 2 * s * blk + j
            a00 = 0.0
            a01 = 0.0
            a10 = 0.0
            a11 = 0.0
            for b in range(batch):
                u = inter[k, b, i]
                v = inter[k, b, i + s]
                g = grad_out[b, i]
                h = grad_out[b, i + s]
                a00 += g * u
                a01 += g * v
                a10 += h * u
                a11 += h * v
                grad_out[b, i] = tw[k, p, 0, 0] * g + tw[k, p, 1, 0] * h
                grad_out[b, i + s] = tw[k, p, 0, 1] * g + tw[k, p, 1, 1] * h
            grad_tw[k, p, 0, 0] = a00
            grad_tw[k, p, 0, 1] = a01
            grad_tw[k, p, 1, 0] = a10
            grad_tw[k, p, 1, 1] = a11
    return grad_out


@nb.njit(**PARALLEL_EXACT)
def block_sparse_matmul(row_ptr, block_cols, blocks, x, out):
    """``out = x W^T`` for a block-sparse ``W`` (``R·B x C·B``) stored by block rows (BSR).

    ``row_ptr`` (``R + 1``): blocks of block row ``r`` are ``row_ptr[r] .. row_ptr[r + 1] - 1``;
    ``block_cols[e]`` its block column, ``blocks[e]`` (``B x B``) its values; ``x``: ``(batch, C·B)``;
    ``out``: ``(batch, R·B)``::

        out[b, r B + i] = Σ_{e in row r} Σ_j blocks[e, i, j] · x[b, block_cols[e] B + j]

    Parallel over block rows (each output column range is written by one thread).
    """
    rows = row_ptr.shape[0] - 1
    bs = blocks.shape[1]
    batch = x.shape[0]
    for r in nb.prange(rows):
        for b in range(batch):
            for i in range(bs):
                out[b, r * bs + i] = 0.0
        for e in range(row_ptr[r], row_ptr[r + 1]):
            c0 = block_cols[e] * bs
            for b in range(batch):
                for i in range(bs):
                    acc = 0.0
                    for j in range(bs):
                        acc += blocks[e, i, j] * x[b, c0 + j]
                    out[b, r * bs + i] += acc
    return out


@nb.njit(**PARALLEL_EXACT)
def block_sparse_grad_blocks(block_rows, block_cols, gy, x, grad_blocks):
    """Gradient of the non-zero blocks: ``grad_blocks[e] = gy[:, rows(e)]^T x[:, cols(e)]`` (block SDDMM),
    ``gy``: ``(batch, R·B)``, ``x``: ``(batch, C·B)``; parallel over blocks."""
    nnz = block_rows.shape[0]
    bs = grad_blocks.shape[1]
    batch = x.shape[0]
    for e in nb.prange(nnz):
        r0 = block_rows[e] * bs
        c0 = block_cols[e] * bs
        for i in range(bs):
            for j in range(bs):
                acc = 0.0
                for b in range(batch):
                    acc += gy[b, r0 + i] * x[b, c0 + j]
                grad_blocks[e, i, j] = acc
    return grad_blocks
