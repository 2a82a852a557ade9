"""Per core and time step: the reader, compute and writer kernels of the tt-metal SNN step, and which unit
does the synaptic and gradient work.

Every core of a layer runs three kernels over circular buffers in L1 (TT-Metalium's data-movement
reader on NCRISC, the compute kernel on the three TRISCs driving the unpacker, the matrix engine (FPU) or
the vector unit (SFPU) and the packer, the data-movement writer on BRISC). They overlap: with the phase's
data cut into ``n`` circular-buffer pages, a phase takes (:func:`overlapped`)::

    t = max(r, c, w) + (r + c + w − max(r, c, w)) / n          (the slowest stream, plus fill and drain)

With ``n_c`` neurons on the core, ``N_in`` its fan-in, ``B`` the batch, ``rows`` = Σ_b c0 of the input list
(the weight rows a sparse kernel gathers), ``e`` its own list entries, ``s_in`` = Σ_b c1 of its input list,
``P`` the cores of the layers its list feeds back from (partials per own entry), ``wb``/``gb`` the weight and
gradient bytes, ``g`` the NoC model's fixed cycles of a gathered read (:func:`tt_noc.gather_fixed`),
``msg`` those of the core's messages, ``fpu(m, k, n)`` the ``tilesim matmul`` model's math + unpack of an
``m × k · k × n`` product on one core (:mod:`tilesim.models.tensix.matmul`), ``sfpu(n, c)`` = ⌈n/32⌉·c::

  forward (state update, threshold, local compaction, list out)
    sparse  r = rows·(g + n_c·wb/L1)      c = rows·sfpu(n_c, add) + sfpu(B·n_c, lif)
    dense   r = B·N_in·2/densify + rows   c = fpu(B, N_in, n_c) + sfpu(B·n_c, lif)
            w = B·n_c·compact + msg (the list's multicasts)
  backward (partials reduced at the owner, state grad, dW, input-gradient partials out)
    c = sfpu(P·e, add) + sfpu(B·n_c, surrogate) + dW + dIn
    dW sparse: rows·sfpu(n_c, add), its rows read and written back by the reader and the writer (rows·g each)
    dW dense:  fpu(N_in, B, n_c) + N_in·n_c·gb/unpack (the packer accumulating into dW)
    dIn sparse: s_in·(sfpu(n_c, add) + reduce), the W rows gathered (s_in·g)
    dIn dense:  fpu(B, n_c, N_in)
    w = msg (one partial message per owner core)
  optimizer (once per step): sfpu(N_in·n_c, sgd)

Layer 1's reader also fetches the time step's input list from DRAM (4·B·(input_cap + 1) bytes and one read's
issue). What L1 cannot hold streams from DRAM (:func:`tilesim.models.snn.stacks.tt_memory.residency`): the
recorded history (the writer stores each time step's state and lists forward, the reader loads them back
backward), the weights (the reader moves the rows it gathers, sparse, or the whole block, dense), dW (read and
written back), the optimizer state; each at the core's share of the chip's DRAM rate (``dram_efficiency`` of
the preset's ``dram_bytes_per_s``, shared by the chip's cores that stream).

**Which unit.** Per layer and kernel (forward, dW, dIn) the stack takes the cheaper over the step of the
layer's slowest core: the matrix engine on 32 × 32 tiles costs the same at any density (it multiplies the
zeros too), a sparse list costs in proportion to its entries; with ``B ≤ 32`` one tile row holds every
sample, so dense wins once about one input in ``B`` spikes (:func:`choose`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from tilesim.models.snn.stacks.tt_costs import TensixCosts
from tilesim.models.snn.stacks.tt_noc import gather_fixed
from tilesim.models.tensix.matmul import MatmulSpec, load_matmul_costs, plan_matmul

__all__ = ["FPU", "SPARSE", "KERNELS", "Streams", "overlapped", "fpu_cycles", "choose", "Choice"]

FPU, SPARSE = "FPU", "SFPU"
KERNELS = ("forward", "dW", "dIn")


@dataclass(frozen=True)
class Streams:
    """One phase's reader, compute and writer cycles per core (arrays of one shape) and its pages."""

    reader: np.ndarray
    compute: np.ndarray
    writer: np.ndarray
    pages: np.ndarray

    def time(self) -> np.ndarray:
        return overlapped(self.reader, self.compute, self.writer, self.pages)


def overlapped(r, c, w, pages) -> np.ndarray:
    """Cycles of three overlapped streams over ``pages`` circular-buffer pages (module docstring)."""
    r, c, w = (np.asarray(x, np.float64) for x in (r, c, w))
    top = np.maximum(np.maximum(r, c), w)
    return top + (r + c + w - top) / np.maximum(np.asarray(pages, np.float64), 1.0)


@lru_cache(maxsize=4096)
def _fpu(m: int, k: int, n: int, machine, fmt: str, fidelity: str) -> float:
    spec = MatmulSpec(m, k, n, fmt, fidelity, 1, 1, "L1", "L1", "L1")
    plan = plan_matmul(spec, machine, load_matmul_costs())
    return float(plan.math_cycles + plan.unpack_cycles)


def fpu_cycles(m: int, k: int, n: int, machine, costs: TensixCosts) -> float:
    """Math + unpack cycles of an ``m × k · k × n`` product on one core, by the ``tilesim matmul`` model
    (infinite on a machine without a matrix engine: the sparse kernels run there)."""
    if machine.chip.matrix_tile_cycles <= 0:
        return float("inf")
    return _fpu(max(int(m), 1), max(int(k), 1), max(int(n), 1), machine, costs.fpu_format, costs.fpu_fidelity)


@dataclass(frozen=True)
class Choice:
    """The unit of one kernel of one layer, with the layer's step cycles (its slowest core) each way."""

    layer: int
    kernel: str
    unit: str
    dense_cycles: float
    sparse_cycles: float
    density: float  # mean share of the fan-in in the list the kernel reads (Σ_b entries / (B·N_in))

    def line(self) -> str:
        """One line: the unit and why (the other unit's cycles against the chosen one's, the density)."""
        where = f"layer {self.layer + 1} {self.kernel}: {self.unit}"
        if not np.isfinite(self.dense_cycles):
            return f"{where} (no matrix engine on this machine; density {self.density:.3f})"
        ratio = self.dense_cycles / max(self.sparse_cycles, 1e-9)
        if self.unit == FPU:
            return f"{where} (32x32 tiles take {ratio:.2f}x the sparse list's cycles at density {self.density:.3f})"
        return f"{where} (the sparse list; 32x32 tiles would take {ratio:.2f}x at density {self.density:.3f})"


def choose(layer: int, kernel: str, dense: np.ndarray, sparse: np.ndarray, density: float, force: str = "") -> Choice:
    """The unit for ``kernel`` of ``layer``: the matrix engine where its tiles take fewer cycles over the step
    (Σ over time steps of the slowest core) than the sparse list (``force``: ``FPU`` or ``SFPU`` to pin it)."""
    d = float(np.max(dense, axis=-1).sum()) if dense.size else 0.0  # inf: no matrix engine
    s = float(np.max(sparse, axis=-1).sum()) if sparse.size else 0.0
    unit = force or (FPU if d < s else SPARSE)
    return Choice(layer, kernel, unit, d, s, density)


def tiles(n) -> int:
    return max(1, math.ceil(n / 32))


__all__ += ["tiles", "gather_fixed"]
