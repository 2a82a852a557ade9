"""Linear layers: dense baseline and the structured replacements of Shekofteh, Alles & Fröning.

Every layer maps ``x`` of shape ``(batch, n_in)`` to ``y = x W^T + b`` of shape ``(batch, n_out)``,
where ``W`` (``n_out x n_in``) is the matrix the structure represents; :meth:`dense_matrix` assembles
it from the parameters independently of :meth:`forward`, so the two can be checked against each
other. The interface, shared by all layers:

* ``params`` — tuple of the learnable arrays (``sum(p.size for p in params)`` is the parameter count
  reported in the paper's Table 4), ``param_names`` — their names;
* ``forward(x) -> (y, cache)`` and ``backward(grad_y, cache) -> (grad_x, grads)``, ``grads`` aligned
  with ``params``; the arrays are updated in place by an optimiser (see :mod:`tilesim.models.linear.shl`).

Layers are frozen dataclasses: the configuration is validated on construction and the parameter
arrays are created from the explicit ``seed``. Bad shapes raise :class:`tilesim.errors.ConfigError`.

References: Dao et al. 2019 (butterfly, ICML), Chen, Dao et al. 2021/2022 (pixelated butterfly,
ICLR 2022), Le, Sarlós & Smola 2013 (fastfood), Thomas et al. 2018 / HazyResearch structured-nets
(circulant, low-rank, SHL benchmark).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import numpy as np

from tilesim.errors import ConfigError, require
from tilesim.models.linear import kernels

__all__ = [
    "DenseLinear",
    "LowRankLinear",
    "CirculantLinear",
    "FastfoodLinear",
    "ButterflyLinear",
    "PixelflyLinear",
    "CsrLinear",
    "BlockSparseLinear",
    "DynamicSparseLinear",
    "random_block_layout",
    "block_count",
    "hadamard_matrix",
    "pixelfly_layout",
    "butterfly_factor_matrices",
    "random_csr",
    "matmul",
    "matmul_backward",
    "skewed_shape",
    "is_power_of_two",
]


def is_power_of_two(n: int) -> bool:
    """True when ``n`` is an integer (Python or NumPy) of the form 2**k with k >= 0; never raises."""
    return isinstance(n, (int, np.integer)) and n >= 1 and (n & (n - 1)) == 0


def _require_pos_int(field_name: str, value, fix: str = "") -> None:
    require(
        isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 1,
        field_name,
        value,
        "must be a positive integer",
        fix,
    )


def _require_pow2(field_name: str, value, fix: str) -> None:
    _require_pos_int(field_name, value, fix)
    require(is_power_of_two(value), field_name, value, "must be a power of two", fix)


def _check_input(x: np.ndarray, n_in: int, who: str) -> np.ndarray:
    x = np.asarray(x)
    require(
        x.ndim == 2, f"{who} input ndim", x.ndim, "must be 2 (batch, features)", "reshape the input to (batch, n_in)"
    )
    require(
        x.shape[1] == n_in,
        f"{who} input features",
        x.shape[1],
        f"must equal n_in = {n_in}",
        "pass activations with the layer's input width",
    )
    return x


def _bias_array(bias: bool, n_out: int, dtype) -> tuple:
    return (np.zeros(n_out, dtype=dtype),) if bias else ()


class _LayerBase:
    """Shared helpers; subclasses define ``params``/``param_names``, ``forward``, ``backward``."""

    n_in: int
    n_out: int

    @property
    def n_params(self) -> int:
        """Number of learnable scalars, ``sum(p.size for p in self.params)``."""
        return int(sum(p.size for p in self.params))

    def _add_bias(self, y: np.ndarray) -> np.ndarray:
        if self.bias:
            y += self.b
        return y

    def _bias_grad(self, grad_y: np.ndarray) -> tuple:
        return (grad_y.sum(axis=0),) if self.bias else ()


# --------------------------------------------------------------------------------------------
# Dense baseline
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DenseLinear(_LayerBase):
    """Dense layer ``y = x W^T + b`` (``torch.nn.Linear``); ``n_in n_out + n_out`` parameters.

    Forward ``n_in n_out`` MACs per sample; backward ``grad_x = g W``, ``grad_W = g^T x``,
    ``grad_b = sum_batch g``.
    """

    n_in: int
    n_out: int
    bias: bool = True
    seed: int = 0
    dtype: type = np.float64
    W: np.ndarray = field(init=False, repr=False)
    b: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        _require_pos_int("n_in", self.n_in)
        _require_pos_int("n_out", self.n_out)
        rng = np.random.default_rng(self.seed)
        bound = 1.0 / math.sqrt(self.n_in)
        object.__setattr__(self, "W", rng.uniform(-bound, bound, (self.n_out, self.n_in)).astype(self.dtype))
        object.__setattr__(self, "b", np.zeros(self.n_out, dtype=self.dtype) if self.bias else None)

    @property
    def params(self) -> tuple:
        return (self.W,) + ((self.b,) if self.bias else ())

    @property
    def param_names(self) -> tuple:
        return ("W",) + (("b",) if self.bias else ())

    def dense_matrix(self) -> np.ndarray:
        return self.W.copy()

    def forward(self, x):
        x = _check_input(x, self.n_in, "DenseLinear")
        return self._add_bias(x @ self.W.T), x

    def backward(self, grad_y, cache):
        x = cache
        return grad_y @ self.W, (grad_y.T @ x,) + self._bias_grad(grad_y)


# --------------------------------------------------------------------------------------------
# Low rank
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LowRankLinear(_LayerBase):
    """Low-rank layer ``W = U V^T`` with ``U: (n_out, r)``, ``V: (n_in, r)``.

    ``y = (x V) U^T + b``; ``r (n_in + n_out) + n_out`` parameters (structured-nets ``LowRank``:
    ``G, H: (r, n)``). Backward: ``h = x V``, ``grad_U = g^T h``, ``grad_h = g U``,
    ``grad_V = x^T grad_h``, ``grad_x = grad_h V^T``. The paper's SHL uses ``r = 1``.
    """

    n_in: int
    n_out: int
    rank: int = 1
    bias: bool = True
    seed: int = 0
    dtype: type = np.float64
    U: np.ndarray = field(init=False, repr=False)
    V: np.ndarray = field(init=False, repr=False)
    b: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        _require_pos_int("n_in", self.n_in)
        _require_pos_int("n_out", self.n_out)
        _require_pos_int("rank", self.rank, "use rank >= 1")
        require(
            self.rank <= min(self.n_in, self.n_out),
            "rank",
            self.rank,
            f"must be <= min(n_in, n_out) = {min(self.n_in, self.n_out)}",
            "lower the rank",
        )
        rng = np.random.default_rng(self.seed)
        std = (1.0 / (self.rank * self.n_in)) ** 0.5
        object.__setattr__(self, "U", rng.normal(0, std, (self.n_out, self.rank)).astype(self.dtype))
        object.__setattr__(self, "V", rng.normal(0, std, (self.n_in, self.rank)).astype(self.dtype))
        object.__setattr__(self, "b", np.zeros(self.n_out, dtype=self.dtype) if self.bias else None)

    @property
    def params(self):
        return (self.U, self.V) + ((self.b,) if self.bias else ())

    @property
    def param_names(self):
        return ("U", "V") + (("b",) if self.bias else ())

    def dense_matrix(self):
        return self.U @ self.V.T

    def forward(self, x):
        x = _check_input(x, self.n_in, "LowRankLinear")
        h = x @ self.V
        return self._add_bias(h @ self.U.T), (x, h)

    def backward(self, grad_y, cache):
        x, h = cache
        grad_h = grad_y @ self.U
        return grad_h @ self.V.T, (grad_y.T @ h, x.T @ grad_h) + self._bias_grad(grad_y)


# --------------------------------------------------------------------------------------------
# Circulant
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CirculantLinear(_LayerBase):
    """Circulant layer ``W[i, j] = c[(i - j) mod n]``; ``n + n`` parameters (``c`` and bias).

    ``y = c ⊛ x`` (cyclic convolution) computed with real FFTs:
    ``y = irfft(rfft(c) · rfft(x))``. Backward (correlations):
    ``grad_x = irfft(conj(rfft(c)) · rfft(g))``, ``grad_c = irfft(sum_batch rfft(g) · conj(rfft(x)))``.
    Square only (structured-nets ``Circulant``).
    """

    n: int
    bias: bool = True
    seed: int = 0
    dtype: type = np.float64
    c: np.ndarray = field(init=False, repr=False)
    b: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        _require_pos_int("n", self.n)
        rng = np.random.default_rng(self.seed)
        object.__setattr__(self, "c", rng.normal(0, (1.0 / self.n) ** 0.5, self.n).astype(self.dtype))
        object.__setattr__(self, "b", np.zeros(self.n, dtype=self.dtype) if self.bias else None)

    n_in = property(lambda self: self.n)
    n_out = property(lambda self: self.n)

    @property
    def params(self):
        return (self.c,) + ((self.b,) if self.bias else ())

    @property
    def param_names(self):
        return ("c",) + (("b",) if self.bias else ())

    def dense_matrix(self):
        i = np.arange(self.n)
        return self.c[(i[:, None] - i[None, :]) % self.n].copy()

    def forward(self, x):
        x = _check_input(x, self.n, "CirculantLinear")
        fx = np.fft.rfft(x, axis=1)
        y = np.fft.irfft(np.fft.rfft(self.c) * fx, n=self.n, axis=1).astype(self.dtype)
        return self._add_bias(y), fx

    def backward(self, grad_y, cache):
        fx = cache
        fg = np.fft.rfft(grad_y, axis=1)
        grad_x = np.fft.irfft(np.conj(np.fft.rfft(self.c)) * fg, n=self.n, axis=1)
        grad_c = np.fft.irfft((fg * np.conj(fx)).sum(axis=0), n=self.n)
        return grad_x.astype(self.dtype), (grad_c.astype(self.dtype),) + self._bias_grad(grad_y)


# --------------------------------------------------------------------------------------------
# Fastfood
# --------------------------------------------------------------------------------------------
def hadamard_matrix(n: int) -> np.ndarray:
    """Sylvester Walsh–Hadamard matrix ``H_n`` (entries ±1, ``H_n H_n = n I``)."""
    _require_pow2("n", n, "Walsh–Hadamard needs a power-of-two size; pad the input")
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h


@dataclass(frozen=True)
class FastfoodLinear(_LayerBase):
    """Adaptive fastfood layer (Le, Sarlós & Smola 2013), as in structured-nets ``FastFood``.

    ``W = S Ĥ G Π Ĥ B`` with ``S, G, B`` learnable diagonals, ``Π`` a fixed random permutation
    (``(Π u)_i = u_{perm[i]}``, not learnable) and ``Ĥ = H_n / sqrt(n)`` the orthonormal
    Walsh–Hadamard matrix (the 1/sqrt(n) scale replaces Le et al.'s ``1/(σ sqrt(n))``; the
    diagonals absorb any other scale). Parameters: ``3 n`` (+ ``n`` bias). Forward cost
    ``2 n log2 n`` adds + ``3 n`` multiplies per sample (fast Walsh–Hadamard, Numba).
    """

    n: int
    bias: bool = True
    seed: int = 0
    dtype: type = np.float64
    S: np.ndarray = field(init=False, repr=False)
    G: np.ndarray = field(init=False, repr=False)
    B: np.ndarray = field(init=False, repr=False)
    perm: np.ndarray = field(init=False, repr=False)
    b: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        _require_pow2("n", self.n, "fastfood uses the Walsh–Hadamard transform; pad n to a power of two")
        rng = np.random.default_rng(self.seed)
        g = rng.standard_normal(self.n)
        s = np.sqrt(rng.chisquare(self.n, self.n)) / np.linalg.norm(g)
        object.__setattr__(self, "S", s.astype(self.dtype))
        object.__setattr__(self, "G", g.astype(self.dtype))
        object.__setattr__(self, "B", rng.choice([-1.0, 1.0], self.n).astype(self.dtype))
        object.__setattr__(self, "perm", rng.permutation(self.n))
        object.__setattr__(self, "b", np.zeros(self.n, dtype=self.dtype) if self.bias else None)

    n_in = property(lambda self: self.n)
    n_out = property(lambda self: self.n)

    @property
    def params(self):
        return (self.S, self.G, self.B) + ((self.b,) if self.bias else ())

    @property
    def param_names(self):
        return ("S", "G", "B") + (("b",) if self.bias else ())

    def dense_matrix(self):
        h = hadamard_matrix(self.n) / math.sqrt(self.n)
        p = np.eye(self.n)[self.perm]
        return np.diag(self.S) @ h @ np.diag(self.G) @ p @ h @ np.diag(self.B)

    def _h(self, u):
        return kernels.fwht_rows(np.ascontiguousarray(u, dtype=np.float64)) / math.sqrt(self.n)

    def forward(self, x):
        x = _check_input(x, self.n, "FastfoodLinear")
        u2 = self._h(x * self.B)
        u3 = u2[:, self.perm]
        u5 = self._h(u3 * self.G)
        return self._add_bias((u5 * self.S).astype(self.dtype)), (x, u3, u5)

    def backward(self, grad_y, cache):
        x, u3, u5 = cache
        grad_s = (grad_y * u5).sum(axis=0)
        g4 = self._h(grad_y * self.S)
        grad_g = (g4 * u3).sum(axis=0)
        g2 = np.empty_like(g4)
        g2[:, self.perm] = g4 * self.G
        g1 = self._h(g2)
        grad_b_diag = (g1 * x).sum(axis=0)
        return (g1 * self.B).astype(self.dtype), (grad_s, grad_g, grad_b_diag) + self._bias_grad(grad_y)


# --------------------------------------------------------------------------------------------
# Butterfly
# --------------------------------------------------------------------------------------------
def _tied_index(n: int) -> np.ndarray:
    """``idx[k, p]`` = row of the tied twiddle ``(n - 1, 2, 2)`` used by pair ``p`` of factor ``k``."""
    levels = int(math.log2(n))
    p = np.arange(n // 2)
    return np.stack([(1 << k) - 1 + (p % (1 << k)) for k in range(levels)])


def butterfly_factor_matrices(twiddle: np.ndarray) -> list:
    """Dense ``n x n`` factor matrices ``B_0 … B_{L-1}`` of an untied twiddle ``(L, n/2, 2, 2)``.

    ``B_k`` (stride ``s = 2^k``) is block-diagonal with ``n / 2s`` blocks
    ``[[D1, D2], [D3, D4]]`` of ``s x s`` diagonals (Dao et al. 2019, eq. 2). The layer's matrix is
    ``W = B_{L-1} ⋯ B_1 B_0``.
    """
    levels, half = twiddle.shape[:2]
    n = 2 * half
    mats = []
    for k in range(levels):
        s = 1 << k
        m = np.zeros((n, n))
        for p in range(half):
            blk, j = divmod(p, s)
            i = 2 * s * blk + j
            m[i, i], m[i, i + s] = twiddle[k, p, 0, 0], twiddle[k, p, 0, 1]
            m[i + s, i], m[i + s, i + s] = twiddle[k, p, 1, 0], twiddle[k, p, 1, 1]
        mats.append(m)
    return mats


@dataclass(frozen=True)
class ButterflyLinear(_LayerBase):
    """Butterfly layer (Dao et al. 2019): product of ``log2 n`` factors of 2x2 blocks.

    ``W = B_{L-1} ⋯ B_0``, ``L = log2 n``, factor ``k`` has stride ``2^k`` (increasing stride, as
    Dao's ``Butterfly(increasing_stride=True)``); no permutation is applied (the ``P`` of
    ``T = B P``, paper eq. 3, is left to the caller).

    * ``tied=True`` (Dao's ``Butterfly(tied_weight=True)`` default, used in the SHL benchmark): factor
      ``k`` reuses the same ``2^k`` 2x2 matrices in each of its ``n / 2^{k+1}`` diagonal blocks, so the
      twiddle is ``(n - 1, 2, 2)``: ``4 (n - 1)`` parameters.
    * ``tied=False``: every pair has its own 2x2 matrix, twiddle ``(L, n/2, 2, 2)``: ``2 n log2 n``.

    Forward ``2 n log2 n`` MACs per sample (Numba kernel, intermediates kept for backward).
    """

    n: int
    tied: bool = True
    bias: bool = True
    seed: int = 0
    dtype: type = np.float64
    twiddle: np.ndarray = field(init=False, repr=False)
    b: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        _require_pow2("n", self.n, "butterfly needs n = 2^L; pad the input to the next power of two")
        require(self.n >= 2, "n", self.n, "must be >= 2", "use a dense layer for n = 1")
        rng = np.random.default_rng(self.seed)
        levels = int(math.log2(self.n))
        shape = (self.n - 1, 2, 2) if self.tied else (levels, self.n // 2, 2, 2)
        object.__setattr__(self, "twiddle", (rng.standard_normal(shape) / math.sqrt(2)).astype(self.dtype))
        object.__setattr__(self, "b", np.zeros(self.n, dtype=self.dtype) if self.bias else None)

    n_in = property(lambda self: self.n)
    n_out = property(lambda self: self.n)

    @property
    def levels(self) -> int:
        return int(math.log2(self.n))

    @property
    def params(self):
        return (self.twiddle,) + ((self.b,) if self.bias else ())

    @property
    def param_names(self):
        return ("twiddle",) + (("b",) if self.bias else ())

    def untied_twiddle(self) -> np.ndarray:
        """The ``(L, n/2, 2, 2)`` per-pair twiddle (a gather of the tied one if ``tied``)."""
        if not self.tied:
            return self.twiddle
        return self.twiddle[_tied_index(self.n)]

    def dense_matrix(self):
        w = np.eye(self.n)
        for m in butterfly_factor_matrices(self.untied_twiddle()):
            w = m @ w
        return w

    def forward(self, x):
        x = _check_input(x, self.n, "ButterflyLinear")
        tw = np.ascontiguousarray(self.untied_twiddle(), dtype=np.float64)
        inter = np.empty((self.levels + 1,) + x.shape, dtype=np.float64)
        kernels.butterfly_forward(tw, np.ascontiguousarray(x, dtype=np.float64), inter)
        return self._add_bias(inter[-1].astype(self.dtype)), (tw, inter)

    def backward(self, grad_y, cache):
        tw, inter = cache
        grad = np.array(grad_y, dtype=np.float64, order="C")
        grad_tw = np.empty_like(tw)
        kernels.butterfly_backward(tw, inter, grad, grad_tw)
        if self.tied:
            tied = np.zeros_like(self.twiddle, dtype=np.float64)
            np.add.at(tied, _tied_index(self.n), grad_tw)
            grad_tw = tied
        return grad.astype(self.dtype), (grad_tw.astype(self.dtype),) + self._bias_grad(grad_y)


# --------------------------------------------------------------------------------------------
# Pixelfly
# --------------------------------------------------------------------------------------------
def pixelfly_layout(
    n_out: int, n_in: int, block_size: int, butterfly_size: int, n_factors: int | None = None
) -> np.ndarray:
    """Block mask of the flat block butterfly (Chen, Dao et al. 2022; justheuristic's pure-torch port).

    1. ``M`` (``s x s``, ``s = butterfly_size``) = flat butterfly = ``I + Σ_{k < n_factors} P_k``
       where ``P_k`` is the pattern of the stride-``2^k`` butterfly factor: ``M[i, j] = 1`` iff
       ``j = i`` or ``j = i XOR 2^k``. Default ``n_factors = log2 s``: ``1 + log2 s`` ones per row.
    2. Stretch to the matrix: every entry of ``M`` becomes an ``(n_out/s) x (n_in/s)`` tile of ones.
    3. Coarsen to ``block_size`` blocks: a block is active if any element in it is.

    Returns a bool array ``(n_out / block_size, n_in / block_size)``. The stored parameters are the
    active blocks, ``count * block_size^2`` scalars.
    """
    for name, v in (("n_out", n_out), ("n_in", n_in)):
        _require_pos_int(name, v)
    _require_pow2("block_size", block_size, "pick block_size = 2^j")
    _require_pow2("butterfly_size", butterfly_size, "pick butterfly_size = 2^j >= 2")
    require(butterfly_size >= 2, "butterfly_size", butterfly_size, "must be >= 2", "use butterfly_size >= 2")
    for name, v in (("n_out", n_out), ("n_in", n_in)):
        require(
            v % block_size == 0,
            name,
            v,
            f"must be a multiple of block_size = {block_size}",
            "choose a block size that divides the layer width",
        )
        require(
            v % butterfly_size == 0,
            name,
            v,
            f"must be a multiple of butterfly_size = {butterfly_size}",
            "choose a butterfly size that divides the layer width",
        )
    log_s = int(math.log2(butterfly_size))
    n_factors = log_s if n_factors is None else n_factors
    require(
        isinstance(n_factors, int) and 1 <= n_factors <= log_s,
        "n_factors",
        n_factors,
        f"must be in [1, log2(butterfly_size) = {log_s}]",
        "leave it unset for the full flat butterfly",
    )
    i = np.arange(butterfly_size)
    m = np.zeros((butterfly_size, butterfly_size), dtype=bool)
    m[i, i] = True
    for k in range(n_factors):
        m[i, i ^ (1 << k)] = True
    fo, fi = n_out // butterfly_size, n_in // butterfly_size
    elem = np.repeat(np.repeat(m, fo, axis=0), fi, axis=1)
    nbo, nbi = n_out // block_size, n_in // block_size
    return elem.reshape(nbo, block_size, nbi, block_size).any(axis=(1, 3))


@dataclass(frozen=True)
class PixelflyLinear(_LayerBase):
    """Pixelated butterfly (Chen, Dao et al. 2022): flat block butterfly + low rank.

    ``W = Σ_{(r, c) ∈ layout} E_r W_rc E_c^T + U V^T`` with ``W_rc`` dense ``block x block`` blocks on
    the :func:`pixelfly_layout` mask, ``U: (n_out, r)``, ``V: (n_in, r)``;
    ``y = blocksparse(x) + (x V) U^T + b``. Parameters: ``nnz_blocks · block² + r (n_in + n_out)``
    (+ ``n_out`` bias), the arrays of justheuristic's ``PixelflyLinear`` that the paper uses ([1]).
    The paper's three knobs are ``block_size``, ``butterfly_size`` and ``lowrank_size``.
    """

    n_in: int
    n_out: int
    block_size: int
    butterfly_size: int
    lowrank_size: int
    n_factors: int | None = None
    bias: bool = True
    seed: int = 0
    dtype: type = np.float64
    layout: np.ndarray = field(init=False, repr=False)
    block_rows: np.ndarray = field(init=False, repr=False)
    block_cols: np.ndarray = field(init=False, repr=False)
    blocks: np.ndarray = field(init=False, repr=False)
    U: np.ndarray = field(init=False, repr=False)
    V: np.ndarray = field(init=False, repr=False)
    b: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        layout = pixelfly_layout(self.n_out, self.n_in, self.block_size, self.butterfly_size, self.n_factors)
        require(
            isinstance(self.lowrank_size, (int, np.integer)) and 0 <= self.lowrank_size <= min(self.n_in, self.n_out),
            "lowrank_size",
            self.lowrank_size,
            f"must be an integer in [0, {min(self.n_in, self.n_out)}]",
            "use 0 to drop the low-rank term",
        )
        rows, cols = np.nonzero(layout)  # row-major: sorted by row, then column
        per_row = np.bincount(rows, minlength=layout.shape[0])
        per_col = np.bincount(cols, minlength=layout.shape[1])
        if per_row.min() != per_row.max() or per_col.min() != per_col.max():  # pragma: no cover
            raise ConfigError(
                f"pixelfly layout = irregular: rows {per_row.min()}..{per_row.max()} blocks; "
                "use a power-of-two butterfly size dividing both widths"
            )
        rng = np.random.default_rng(self.seed)
        bs = self.block_size
        fan_in = per_row[0] * bs + self.lowrank_size
        std = 1.0 / math.sqrt(max(fan_in, 1))
        set_ = object.__setattr__
        set_(self, "layout", layout)
        set_(self, "block_rows", rows)
        set_(self, "block_cols", cols)
        set_(self, "blocks", rng.normal(0, std, (rows.size, bs, bs)).astype(self.dtype))
        set_(self, "U", rng.normal(0, std, (self.n_out, self.lowrank_size)).astype(self.dtype))
        set_(self, "V", rng.normal(0, std, (self.n_in, self.lowrank_size)).astype(self.dtype))
        set_(self, "b", np.zeros(self.n_out, dtype=self.dtype) if self.bias else None)

    @property
    def nnz_blocks(self) -> int:
        return int(self.block_rows.size)

    @property
    def params(self):
        lr = (self.U, self.V) if self.lowrank_size else ()
        return (self.blocks,) + lr + ((self.b,) if self.bias else ())

    @property
    def param_names(self):
        lr = ("U", "V") if self.lowrank_size else ()
        return ("blocks",) + lr + (("b",) if self.bias else ())

    def dense_matrix(self):
        bs = self.block_size
        w = np.zeros((self.n_out, self.n_in))
        for blk, r, c in zip(self.blocks, self.block_rows, self.block_cols):
            w[r * bs : (r + 1) * bs, c * bs : (c + 1) * bs] += blk
        return w + self.U @ self.V.T

    def forward(self, x):
        x = _check_input(x, self.n_in, "PixelflyLinear")
        bs, batch = self.block_size, x.shape[0]
        xg = x.reshape(batch, -1, bs)[:, self.block_cols, :]  # (batch, nnz, bs)
        prod = np.einsum("bkj,kij->bki", xg, self.blocks)  # (batch, nnz, bs)
        y = prod.reshape(batch, self.layout.shape[0], -1, bs).sum(axis=2).reshape(batch, self.n_out)
        h = x @ self.V
        y = y + h @ self.U.T
        return self._add_bias(y), (x, xg, h)

    def backward(self, grad_y, cache):
        x, xg, h = cache
        bs, batch = self.block_size, x.shape[0]
        gy = grad_y.reshape(batch, -1, bs)[:, self.block_rows, :]  # (batch, nnz, bs)
        grad_blocks = np.einsum("bki,bkj->kij", gy, xg)
        contrib = np.einsum("bki,kij->bkj", gy, self.blocks)  # (batch, nnz, bs)
        order = np.argsort(self.block_cols, kind="stable")
        grad_x = contrib[:, order, :].reshape(batch, self.layout.shape[1], -1, bs).sum(axis=2)
        grad_x = grad_x.reshape(batch, self.n_in)
        grads = (grad_blocks,)
        if self.lowrank_size:
            grad_h = grad_y @ self.U
            grad_x = grad_x + grad_h @ self.V.T
            grads += (grad_y.T @ h, x.T @ grad_h)
        return grad_x, grads + self._bias_grad(grad_y)


# --------------------------------------------------------------------------------------------
# Static block-sparse (PopSparse static sparse matmul)
# --------------------------------------------------------------------------------------------
def block_count(blocks: int, density: float) -> int:
    """Non-zero blocks of a :func:`random_block_layout` of ``blocks`` blocks at ``density``:
    ``max(1, round(density · blocks))``."""
    return max(1, int(round(density * blocks)))


def random_block_layout(n_out: int, n_in: int, block: int, density: float, seed: int = 0) -> np.ndarray:
    """Bool block mask ``(n_out / block, n_in / block)`` with exactly ``max(1, round(density · blocks))``
    non-zero blocks at uniformly random positions (sampled without replacement from ``seed``)."""
    _require_pos_int("n_out", n_out)
    _require_pos_int("n_in", n_in)
    _require_pos_int("block", block, "PopSparse's static sparse matmul uses block 1 (element-wise), 4, 8 or 16")
    require(
        isinstance(density, (int, float)) and not isinstance(density, bool) and 0.0 < density <= 1.0,
        "density",
        density,
        "must be in (0, 1]",
        "density 1/16 keeps one block in sixteen",
    )
    for name, v in (("n_out", n_out), ("n_in", n_in)):
        require(
            v % block == 0, name, v, f"must be a multiple of block = {block}", "pick a block that divides the width"
        )
    nbr, nbc = n_out // block, n_in // block
    nnz = block_count(nbr * nbc, density)
    rng = np.random.default_rng(seed)
    mask = np.zeros(nbr * nbc, dtype=bool)
    mask[rng.choice(nbr * nbc, size=nnz, replace=False)] = True
    return mask.reshape(nbr, nbc)


@dataclass(frozen=True)
class BlockSparseLinear(_LayerBase):
    """Static block-sparse layer ``y = x W^T + b``: ``W`` keeps only the ``block x block`` blocks of a
    fixed ``layout`` (pattern known at compile time, as PopSparse's static sparse matmul; Li et al. 2023,
    arXiv:2303.16999). ``layout=None`` draws :func:`random_block_layout` at ``density``.

    Forward ``nnz_blocks · block²`` MACs per sample (Numba, blocks stored by block row);
    backward ``grad_x = g W`` (the same kernel on the transposed pattern) and
    ``grad_blocks[e] = g[:, rows(e)]^T x[:, cols(e)]`` (block SDDMM). Parameters ``nnz_blocks · block²``
    (+ ``n_out`` bias). :meth:`dense_matrix` assembles ``W`` for the NumPy twin ``x @ W.T``.
    """

    n_in: int
    n_out: int
    block: int
    density: float = 1.0
    layout: np.ndarray | None = field(default=None, repr=False)
    bias: bool = True
    seed: int = 0
    dtype: type = np.float64
    block_rows: np.ndarray = field(init=False, repr=False)
    block_cols: np.ndarray = field(init=False, repr=False)
    blocks: np.ndarray = field(init=False, repr=False)
    b: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        if self.layout is None:
            layout = random_block_layout(self.n_out, self.n_in, self.block, self.density, self.seed)
        else:
            _require_pos_int("block", self.block)
            layout = np.asarray(self.layout, dtype=bool)
            want = (self.n_out // self.block, self.n_in // self.block)
            require(
                layout.shape == want and self.n_out % self.block == 0 and self.n_in % self.block == 0,
                "layout shape",
                layout.shape,
                f"must be {want} (n_out/block, n_in/block)",
                "pass a block mask",
            )
            require(bool(layout.any()), "layout", "all zero", "must hold at least one block", "")
        rows, cols = np.nonzero(layout)  # row-major: sorted by row, then column
        rng = np.random.default_rng(self.seed + 1)
        per_row = np.bincount(rows, minlength=layout.shape[0])
        fan_in = max(1.0, float(per_row.max()) * self.block)
        set_ = object.__setattr__
        set_(self, "layout", layout)
        set_(self, "block_rows", rows.astype(np.int64))
        set_(self, "block_cols", cols.astype(np.int64))
        set_(
            self,
            "blocks",
            rng.normal(0, 1.0 / math.sqrt(fan_in), (rows.size, self.block, self.block)).astype(self.dtype),
        )
        set_(self, "b", np.zeros(self.n_out, dtype=self.dtype) if self.bias else None)

    @property
    def nnz_blocks(self) -> int:
        return int(self.block_rows.size)

    @property
    def params(self):
        return (self.blocks,) + ((self.b,) if self.bias else ())

    @property
    def param_names(self):
        return ("blocks",) + (("b",) if self.bias else ())

    def dense_matrix(self):
        bs = self.block
        w = np.zeros((self.n_out, self.n_in))
        for blk, r, c in zip(self.blocks, self.block_rows, self.block_cols):
            w[r * bs : (r + 1) * bs, c * bs : (c + 1) * bs] = blk
        return w

    @staticmethod
    def _row_ptr(rows, n_rows):
        ptr = np.zeros(n_rows + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=n_rows), out=ptr[1:])
        return ptr

    def forward(self, x):
        x = _check_input(x, self.n_in, "BlockSparseLinear")
        xf = np.ascontiguousarray(x, dtype=np.float64)
        out = np.empty((x.shape[0], self.n_out))
        kernels.block_sparse_matmul(
            self._row_ptr(self.block_rows, self.layout.shape[0]),
            self.block_cols,
            np.ascontiguousarray(self.blocks, dtype=np.float64),
            xf,
            out,
        )
        return self._add_bias(out.astype(self.dtype)), xf

    def backward(self, grad_y, cache):
        xf = cache
        g = np.ascontiguousarray(grad_y, dtype=np.float64)
        order = np.lexsort((self.block_rows, self.block_cols))  # transpose: by column, then row
        t_blocks = np.ascontiguousarray(np.transpose(self.blocks[order], (0, 2, 1)), dtype=np.float64)
        grad_x = np.empty((g.shape[0], self.n_in))
        kernels.block_sparse_matmul(
            self._row_ptr(self.block_cols[order], self.layout.shape[1]), self.block_rows[order], t_blocks, g, grad_x
        )
        grad_blocks = np.empty(self.blocks.shape)
        kernels.block_sparse_grad_blocks(self.block_rows, self.block_cols, g, xf, grad_blocks)
        return grad_x.astype(self.dtype), (grad_blocks.astype(self.dtype),) + self._bias_grad(grad_y)


@dataclass(frozen=True)
class DynamicSparseLinear(BlockSparseLinear):
    """Dynamic sparse layer (PopSparse's ``popsparse::dynamic``): the same kernels as
    :class:`BlockSparseLinear`, but the pattern is data, not program — :meth:`repattern` moves the
    non-zero blocks between steps (as sparse training's prune-and-regrow does) without rebuilding
    anything, within a capacity fixed when the layer is made: ``capacity`` blocks
    (``max_density`` of the blocks; PopSparse sizes its buckets from it and refuses a pattern that
    does not fit). Blocks kept by a new pattern keep their values; new ones start at zero."""

    max_density: float = 1.0
    capacity: int = field(init=False)

    def __post_init__(self):
        super().__post_init__()
        nb = (self.n_out // self.block) * (self.n_in // self.block)
        first = self.nnz_blocks / nb
        require(
            isinstance(self.max_density, float | int) and first <= self.max_density <= 1.0,
            "max_density",
            self.max_density,
            f"must be in [{first:g} (the first pattern's density), 1]",
            "the capacity must hold the first pattern",
        )
        object.__setattr__(self, "capacity", max(self.nnz_blocks, int(math.ceil(self.max_density * nb))))

    def repattern(self, layout) -> DynamicSparseLinear:
        """The layer with non-zero blocks where ``layout`` (bool block mask) is set."""
        layout = np.asarray(layout, dtype=bool)
        require(
            layout.shape == self.layout.shape,
            "layout shape",
            layout.shape,
            f"must be {self.layout.shape}",
            "keep the layer's block grid",
        )
        count = int(layout.sum())
        require(
            1 <= count <= self.capacity,
            "layout blocks",
            count,
            f"must be 1 .. capacity = {self.capacity}",
            "make the layer with a larger max_density",
        )
        rows, cols = np.nonzero(layout)
        old = {(int(r), int(c)): i for i, (r, c) in enumerate(zip(self.block_rows, self.block_cols))}
        blocks = np.zeros((count, self.block, self.block), dtype=self.dtype)
        for i, key in enumerate(zip(rows.tolist(), cols.tolist())):
            if key in old:
                blocks[i] = self.blocks[old[key]]
        new = copy.copy(self)
        for name, value in (("layout", layout), ("block_rows", rows.astype(np.int64)),
                            ("block_cols", cols.astype(np.int64)), ("blocks", blocks)):  # fmt: skip
            object.__setattr__(new, name, value)
        return new


def random_csr(n_rows: int, n_cols: int, density: float, seed: int = 0):
    """Random element-wise pattern with exactly ``round(density · n_rows · n_cols)`` nonzeros (>= 1),
    as CSR: ``(indptr, indices)`` (int64, column indices sorted within each row); the positions are a
    uniform sample without replacement (:func:`random_block_layout` with 1 × 1 blocks). Sparsity
    90 % is ``density = 0.1``, 99 % is ``0.01``."""
    mask = random_block_layout(n_rows, n_cols, 1, density, seed)
    rows, cols = np.nonzero(mask)
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n_rows), out=indptr[1:])
    return indptr, cols.astype(np.int64)


def CsrLinear(n_in: int, n_out: int, density: float, bias: bool = True, seed: int = 0, dtype=np.float64):  # noqa: N802
    """Element-wise sparse layer (PopSparse's unstructured sparsity): a :class:`BlockSparseLinear`
    with 1 × 1 blocks, ``round(density · n_in · n_out)`` weights at random positions from ``seed``."""
    return BlockSparseLinear(n_in, n_out, block=1, density=density, bias=bias, seed=seed, dtype=dtype)


# --------------------------------------------------------------------------------------------
# Skewed dense matmul (paper Observation 2)
# --------------------------------------------------------------------------------------------
def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``C = A B`` for ``A: (m, k)``, ``B: (k, n)``, any aspect ratio ``m / n`` (``m k n`` MACs)."""
    a, b = np.asarray(a), np.asarray(b)
    require(a.ndim == 2 and b.ndim == 2, "matmul operand ndim", (a.ndim, b.ndim), "must both be 2", "pass 2-D arrays")
    require(
        a.shape[1] == b.shape[0],
        "matmul inner dimensions",
        (a.shape[1], b.shape[0]),
        "must match (A is m x k, B is k x n)",
        "transpose or reshape an operand",
    )
    return a @ b


def matmul_backward(a: np.ndarray, b: np.ndarray, grad_c: np.ndarray):
    """Gradients of ``C = A B``: ``grad_A = grad_C B^T`` and ``grad_B = A^T grad_C``."""
    return grad_c @ b.T, a.T @ grad_c


def skewed_shape(mn: int, k: int, aspect_ratio: float) -> tuple:
    """``(m, k, n)`` with ``m n = mn`` (powers of two) and ``m / n`` the power of two nearest ``aspect_ratio``.

    Used for the skewed-shape sweep of Observation 2 (constant work ``m k n``, varying ``m / n``).
    """
    _require_pow2("mn", mn, "use a power-of-two element count for the output")
    _require_pos_int("k", k)
    require(aspect_ratio > 0, "aspect_ratio", aspect_ratio, "must be > 0", "aspect ratio is m / n")
    log_mn = int(math.log2(mn))
    log_ratio = int(round(math.log2(aspect_ratio)))
    require(
        abs(log_ratio) <= log_mn,
        "aspect_ratio",
        aspect_ratio,
        f"must be within [1/{mn}, {mn}] for m n = {mn}",
        "lower the skew or raise mn",
    )
    if (log_mn + log_ratio) % 2:
        log_ratio += 1 if log_ratio < log_mn else -1
    log_m = (log_mn + log_ratio) // 2
    return 1 << log_m, k, 1 << (log_mn - log_m)
