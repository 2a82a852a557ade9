"""Op-by-op lowering: the reference PyTorch layers as PopTorch runs them, one Poplar program per op.

The paper timed the *pure-PyTorch* reference implementations under PopTorch (§4.1: "PyTorch
implementation was used on both GPU and IPU"): Dao et al.'s ``butterfly_mult_torch`` (HazyResearch
``butterfly``), structured-nets' ``fastfood_multiply`` / ``hadamard_transform_torch`` and
``StructuredLinear`` layers. PopTorch lowers every tensor operation of the forward pass and of its
autograd backward to a PopART op, and PopART lowers each op to its own PopLibs program: at least one
compute set with its own sync, exchange program, vertices and control code. Nothing is fused across
ops. The schedules in :mod:`tilesim.models.linear.schedules` / :mod:`tilesim.models.linear.steps` (``lowering =
"fused"``) are what a hand-written Poplar program would run instead: one compute set per butterfly
factor or transform stage.

Op lists (per layer, batch ``B``, width ``n``, counted from the source lines, not fitted):

* **dense** ``x @ W + b``: ``matmul``, ``bias-add``; backward ``grad_x``/``grad_W`` matmuls and the
  bias reduction.
* **low rank** ``(x Hᵀ) G + b``: two matmuls and ``bias-add``; backward four matmuls and the bias
  reduction.
* **butterfly** (``butterfly_mult_torch``, tied twiddle): per factor of stride ``s`` the line
  ``(t.unsqueeze(1) * output_reshape).sum(dim=4)`` is a broadcast ``mul`` producing ``2 n B``
  elements (the ``4 s`` twiddle slice broadcast to every tile, the input re-laid out because
  ``output_reshape`` is read twice) and a ``reduce`` of pairs back to ``n B``. Autograd of that line
  gives per factor: ``expand`` of the gradient to ``2 n B``, ``mul`` + ``reduce`` for the input
  gradient, ``mul`` + ``reduce`` to ``4 s`` values for the twiddle gradient, and ``pad`` (the slice
  ``twiddle[:, s-1:2s-1]`` backward); one ``sum`` adds the ``log2 n`` padded gradients. The
  ``Butterfly`` module's bias and the ``StructuredLinear`` bias are two ``bias-add`` ops (and two
  bias reductions backward).
* **fastfood** (``S * H(G * (H(B * x))[:, P]) + b``): three diagonal ``mul``s, the gather ``x[:, P]``
  and two ``hadamard_transform_torch``; each of its ``log2 n`` stages is
  ``torch.cat((x[..., ::2, :] + x[..., 1::2, :], x[..., ::2, :] - x[..., 1::2, :]), dim=-1)``: ``add``,
  ``sub`` (strided operands: re-laid out) and the ``cat`` copy. Backward per stage: ``neg`` (the
  ``sub``), two ``add``s (each strided slice feeds both ``add`` and ``sub``), two ``pad``s (strided
  slice backward) and their ``sum``; the gather backward is a scatter-add; each diagonal's gradient
  is a ``mul`` and a batch ``reduce``.
* **classifier, ReLU, loss, update** are lowered the same way for every method (bias adds, a
  four-op log-softmax + NLL, SGD with momentum as two ops per parameter tensor).
* **pixelfly** (paper ref. [1], justheuristic's pure-torch gist ``9e4fb81381451a4bc8cbfee0a5100eba``:
  ``PixelflyLinear.forward`` = ``lowrank_second(lowrank_first(x))`` then ``output +=
  butterfly_matmul(x, weight, butterfly_flat_indices)``; read from a copy of the gist's functions
  ``get_butterfly_indices`` / ``butterfly_matmul`` / ``PixelflyLinear`` in the code index; the gist
  page itself was not reachable). ``butterfly_matmul`` is ``x.t().view(blocks, bs, B)``, one
  ``torch.bmm`` with the ``(blocks, per_bag · bs, bs)`` weight view, a view to ``(nnz, bs · B)`` rows
  and ``F.embedding_bag(indices (blocks, per_bag), rows, mode="sum")``, then ``.view(-1, B).t()``.
  PopTorch's ``aten::embedding_bag`` handler (graphcore/poptorch
  ``poptorch/source/popart_canonicalization/EmbeddingOps.cpp``, ``embeddingBagHandler``, unchanged
  from 2021 to 2023) emits **one ``Gather`` and one ``ReduceSum`` per bag** and a ``Concat``: with
  Table 4's block 16 that is ``n / 16 = 64`` bags of ``per_bag = 20`` rows of ``16 · B`` values.
  PopART lowers each ``Gather`` to ``popops::multiSlice`` without a plan (``GatherOpx``) and
  autodiff gives every bag a ``ConcatGrad`` copy, a ``ReduceSumGrad`` copy and a ``GatherGrad``
  (``GatherGradOpx``: a **zeroed full-size** ``(nnz, 16 · B)`` gradient, created with
  ``createGatherInput``, plus ``popops::multiUpdateAdd``); the 64 full-size partial gradients are
  added by one ``Sum`` (``SumOpx``: a single ``popops::map``; ``decomposeGradSum`` is off by default).
  Then the ``bmm`` weight gradient (grouped matmul) and the two low-rank matmuls' gradients. The
  gather and update vertices cost PopLibs' ``getMultiSliceCycleEstimate`` /
  ``getMultiUpdateOpCycleEstimate`` (:class:`PoplibsSliceCosts`); the concat is taken as inplace.
* **circulant** keeps its fused FFT schedule. The reference (structured-nets
  ``pytorch/structure/circulant.py``, ``circulant_multiply``: ``torch.irfft(complex_mult(
  torch.rfft(c, 1), torch.rfft(x, 1)), 1, ...)``, used by ``Circulant`` in ``structure/layer.py``)
  needs FFT ops that PopTorch has no handler for, and the paper says the IPU's FFT could not be used
  from PyTorch (§4.2) without saying what ran instead. The only non-FFT formulations in the
  reference repositories (Dao's ``butterfly`` repo, ``cnn/models/circulant1x1conv.py``:
  ``circulant_indexing`` builds ``C = c[indices]`` and runs ``x @ C``) contain the baseline's dense
  matmuls plus an ``n²``-element gather and its gradient, so they cannot be faster than the baseline
  (paper: 0.88×); no op list is supported by the evidence, so none is invented. Its fused vector
  phases get the same PopLibs vertex costs.

Cost of one element-wise op (``ipu-hardware.md`` §2, §3.2; PopLibs ``popopsCycleEstimators.cpp``):
the elements are spread over all tiles in near-equal contiguous chunks; a tile runs one
``BinaryOp1D`` MultiVertex, ``cycles = supervisor + workers · (worker_fixed + cycles_per_vector ·
ceil(ceil(E / workers) / vector_width))`` = ``11 + 6 · (29 + 3 · ceil(E / 12))`` for FP32 [S]
(``basicOpSupervisorOverhead`` 11, FLOAT ``BinaryOp1D`` worker prologue 29, ``cyclesPerLoop`` 1 +
2 load/store/loop cycles per 64-bit vector of 2 floats). The superstep adds sync 90 [S] and, if
the op re-lays out its operands, ``100 + bytes / 4`` [S]. A reduction is two stages like PopLibs'
``reduce``: an on-tile partial reduce (only if a tile holds more elements than there are outputs)
and an exchange of the partials to ``min(outputs, tiles)`` tiles that add them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

import numpy as np

from tilesim.errors import require
from tilesim.models.linear.layers import pixelfly_layout
from tilesim.models.linear.phases import (
    PRECISION_BYTES,
    Phase,
    SuperstepCosts,
    ceil_div,
    phases_cycles,
    split_sizes,
)
from tilesim.models.linear.planner import PlanTarget, plan_matmul
from tilesim.models.linear.schedules import LayerSchedule
from tilesim.models.linear.shl import PIXELFLY_SHL

__all__ = [
    "LOWERINGS",
    "POPTORCH_KINDS",
    "PoplibsVertexCosts",
    "PoplibsSliceCosts",
    "poplibs_costs",
    "OpBuilder",
    "poptorch_layer",
    "poptorch_common_parts",
]

LOWERINGS = ("fused", "poptorch")
POPTORCH_KINDS = ("dense", "low-rank", "butterfly", "fastfood", "pixelfly")


@dataclass(frozen=True)
class PoplibsVertexCosts:
    """Cycles of a PopLibs element-wise MultiVertex (FP32 ``BinaryOp1D``), from PopLibs' estimators [S].

    * ``supervisor_cycles``: ``basicOpSupervisorOverhead`` (``popops/PerformanceEstimation.cpp``; 11 on
      GC2/GC200/Bow), the machine's ``chip.supervisor_overhead_cycles`` (:meth:`for_machine`);
    * ``worker_fixed_cycles = 29``: ``BinaryOp1D`` FLOAT worker prologue (``popopsCycleEstimators.cpp``);
    * ``worker_cycles_per_vector = 3``: ``cyclesPerLoop = 1`` for ADD/SUB/MUL FLOAT plus 2 cycles of
      load/store and loop decision per 64-bit vector (``binaryOpInnerLoopCycles``);
    * ``vector_bytes = 8``: the 64-bit data path (2 FP32 or 4 FP16 per vector);
    * ``workers``: barrel-threaded worker contexts (6 on the IPU), the machine's ``chip.workers_per_tile``;
      a worker's cycle is one tile issue slot of ``workers``.

    ``supervisor_cycles`` and ``workers`` have no default: their one home is the machine description.
    """

    supervisor_cycles: int
    workers: int
    worker_fixed_cycles: int = 29
    worker_cycles_per_vector: int = 3
    vector_bytes: int = 8

    @classmethod
    def for_machine(cls, machine, **kw) -> PoplibsVertexCosts:
        """The PopLibs constants with the supervisor overhead and worker count of ``machine``."""
        return cls(int(machine.chip.supervisor_overhead_cycles), int(machine.chip.workers_per_tile), **kw)

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            require(
                isinstance(v, int) and v >= (1 if f.name in ("vector_bytes", "workers") else 0),
                f.name,
                v,
                "must be a non-negative integer (vector_bytes, workers >= 1)",
                "PopLibs constants are cycles",
            )

    def cycles(self, elements, element_bytes: int) -> np.ndarray:
        """Tile cycles of one MultiVertex over ``elements`` (per-tile array; 0 where there is none)."""
        e = np.asarray(elements, dtype=np.int64)
        width = max(1, self.vector_bytes // element_bytes)
        per_worker = -(-e // self.workers)
        vectors = -(-per_worker // width)
        cyc = self.supervisor_cycles + self.workers * (
            self.worker_fixed_cycles + self.worker_cycles_per_vector * vectors
        )
        return np.where(e > 0, cyc, 0).astype(np.int64)

    def map_cycles(self, elements, element_bytes: int, inputs: int) -> np.ndarray:
        """Tile cycles of a fused ``popops::map`` sum of ``inputs`` same-shape operands (PopART's
        ``SumOpx``): one vertex, per 64-bit vector ``inputs - 1`` adds at ``cyclesPerLoop`` = 1 plus
        the 2 load/store cycles of ``BinaryOp1D`` (so ``inputs = 2`` is exactly :meth:`cycles`) [S/D]."""
        e = np.asarray(elements, dtype=np.int64)
        width = max(1, self.vector_bytes // element_bytes)
        vectors = ceil_div(ceil_div(e, self.workers), width)
        per_vector = (self.worker_cycles_per_vector - 2) * max(1, int(inputs) - 1) + 2
        cyc = self.supervisor_cycles + self.workers * (self.worker_fixed_cycles + per_vector * vectors)
        return np.where(e > 0, cyc, 0).astype(np.int64)

    def fill_cycles(self, elements, element_bytes: int) -> np.ndarray:
        """Tile cycles of ``popops::zero`` (a store-only vertex: one 64-bit store per cycle and worker,
        same supervisor and worker prologue as :meth:`cycles`) [D]."""
        e = np.asarray(elements, dtype=np.int64)
        width = max(1, self.vector_bytes // element_bytes)
        vectors = ceil_div(ceil_div(e, self.workers), width)
        cyc = self.supervisor_cycles + self.workers * (self.worker_fixed_cycles + vectors)
        return np.where(e > 0, cyc, 0).astype(np.int64)


@dataclass(frozen=True)
class PoplibsSliceCosts:
    """PopLibs' estimates for ``multiSlice`` / ``multiUpdateAdd`` vertices, FP32
    (``popops/PerformanceEstimation.cpp``: ``getMultiSliceCycleEstimate``,
    ``getMultiUpdateOpCycleEstimate``) [S]. Worker cycles, multiplied by the ``workers`` worker contexts
    (the machine's ``chip.workers_per_tile``, :meth:`for_machine`) as PopLibs does (its estimate assumes
    one worker handles every offset).

    * slice: ``30`` prologue/epilogue, ``19`` per offset in range + ``2`` per 64-bit vector copied,
      ``8`` per offset out of range (without a plan every vertex scans every offset);
    * update-add (scaled, FP32): ``3 + 29 + 6`` prologue, ``11 + 3 · (elements - 1)`` per offset in
      range, ``5`` per offset out of range.
    """

    workers: int
    slice_fixed: int = 30
    slice_per_offset: int = 19
    slice_per_vector: int = 2
    slice_out_of_range: int = 8
    update_fixed: int = 38
    update_per_offset: int = 11
    update_per_element: int = 3
    update_out_of_range: int = 5

    @classmethod
    def for_machine(cls, machine, **kw) -> PoplibsSliceCosts:
        return cls(int(machine.chip.workers_per_tile), **kw)


def poplibs_costs(costs: SuperstepCosts, vertex: PoplibsVertexCosts) -> SuperstepCosts:
    """``costs`` with the vector path of PopLibs' element-wise vertices (used for every vector phase
    of a ``"poptorch"`` step, including matmul reductions and the fused circulant phases):
    ``vector_fixed_cycles = supervisor + workers · worker_fixed`` (185) and ``vector_bytes_per_cycle
    = vector_bytes / worker_cycles_per_vector`` (8/3: six workers each finish one 64-bit vector per
    ``3 · 6`` tile cycles) [S]."""
    return SuperstepCosts(
        exchange_bytes_per_cycle=costs.exchange_bytes_per_cycle,
        exchange_fixed_cycles=costs.exchange_fixed_cycles,
        sync_cycles=costs.sync_cycles,
        vector_bytes_per_cycle=vertex.vector_bytes / vertex.worker_cycles_per_vector,
        vector_fixed_cycles=float(vertex.supervisor_cycles + vertex.workers * vertex.worker_fixed_cycles),
        vector_stream_bytes_per_cycle=costs.vector_stream_bytes_per_cycle,
    )


class OpBuilder:
    """Collects the phases of op-by-op lowered code (module docstring) for one part of a step."""

    def __init__(self, target: PlanTarget, *, vertex: PoplibsVertexCosts, slice_costs: PoplibsSliceCosts):
        self.target = target
        self.tiles, self.sram_bytes, self.precision = target.tiles, target.sram_bytes, target.precision
        self.costs, self.overheads, self.vertex = target.costs, target.overheads, vertex
        self.slice_costs = slice_costs
        self.eb = PRECISION_BYTES[target.precision]
        tiles = target.tiles
        self.phases: list = []
        self.data = np.zeros(tiles, dtype=np.int64)
        self.plans: list = []

    def _keep(self, data):
        self.data = np.maximum(self.data, np.asarray(data, dtype=np.int64))

    def elementwise(self, name: str, elements: int, *, inputs: int = 1, moved: int = 0, broadcast: int = 0) -> None:
        """One op over ``elements`` outputs; ``moved`` elements re-laid out (exchanged); a small operand
        of ``broadcast`` elements (bias, twiddle slice, diagonal) is sent to the working tiles, each
        receiving at most one value per output element it holds."""
        t, eb = self.tiles, self.eb
        el = split_sizes(int(elements), t)
        one = (el > 0).astype(np.int64)
        bcast = np.minimum(el, int(broadcast))  # a tile receives only the values its outputs use
        b_in = split_sizes(int(moved), t) * eb + bcast * eb
        b_out = split_sizes(int(moved), t) * eb + split_sizes(int(bcast.sum()), t) * eb
        xch = b_in.any() or b_out.any()
        instr = (2 * one + (one if broadcast else 0)) if xch else np.zeros(t, dtype=np.int64)
        cyc = self.vertex.cycles(el, eb)
        self.phases.append(Phase(name, "vector", el * inputs, cyc, b_in, b_out, one, (inputs + 1) * one, instr))
        self._keep(el * (inputs + 1) * eb + bcast * eb)

    def reduce(self, name: str, elements: int, outputs: int) -> None:
        """Sum ``elements`` partial terms into ``outputs`` values (two stages, module docstring)."""
        t, eb = self.tiles, self.eb
        el = split_sizes(int(elements), t)
        q = np.minimum(el, int(outputs))
        if bool((el > q).any()):
            one = (el > q).astype(np.int64)
            self.phases.append(
                Phase(
                    f"{name}-partial",
                    "vector",
                    el,
                    self.vertex.cycles(np.where(el > q, el, 0), eb),
                    np.zeros(t, dtype=np.int64),
                    np.zeros(t, dtype=np.int64),
                    one,
                    2 * one,
                    np.zeros(t, dtype=np.int64),
                )
            )
        receivers = min(int(outputs), t)
        total = int(q.sum())
        recv = np.zeros(t, dtype=np.int64)
        recv[:receivers] = split_sizes(total, receivers)
        one = (recv > 0).astype(np.int64)
        self.phases.append(
            Phase(
                name,
                "vector",
                recv,
                self.vertex.cycles(recv, eb),
                recv * eb,
                q * eb,
                one,
                2 * one,
                2 * one + (q > 0).astype(np.int64),
            )
        )
        self._keep(el * eb + recv * eb)

    def matmul(self, m: int, k: int, n: int) -> None:
        plan = plan_matmul(
            m,
            k,
            n,
            self.target,
        )
        self.plans.append(plan)
        self.phases.extend(plan.phases)
        self._keep(plan.data_bytes)

    def grouped_matmul(self, groups: int, m: int, k: int, n: int) -> None:
        """``torch.bmm`` of ``groups`` independent ``(m, k) x (k, n)`` products: poplin gives every group
        its own ``tiles // groups`` tiles (several groups per tile when ``groups > tiles``), so one
        group's planned matmul is replicated over the tile groups (same phases, one compute set)."""
        t = self.tiles
        per_tile = -(-int(groups) // t)
        tg = max(1, t // int(groups))
        plan = plan_matmul(
            m * per_tile,
            k,
            n,
            replace(self.target, tiles=tg),
        )
        copies = -(-int(groups) // per_tile)

        def rep(a):
            out = np.zeros(t, dtype=np.int64)
            out[: tg * copies] = np.tile(np.asarray(a, dtype=np.int64), copies)
            return out

        self.plans.append(plan)
        for p in plan.phases:
            self.phases.append(
                Phase(
                    f"bmm-{p.name}",
                    p.unit,
                    rep(p.macs),
                    rep(p.compute_cycles),
                    rep(p.bytes_in),
                    rep(p.bytes_out),
                    rep(p.vertices),
                    rep(p.vertex_edges),
                    rep(p.exchange_instructions),
                )
            )
        self._keep(rep(plan.data_bytes))

    def multi_slice(self, name: str, offsets: int, slice_elements: int) -> None:
        """PopART ``Gather`` (``popops::multiSlice``, no plan) of ``offsets`` rows of ``slice_elements``
        values: the gathered rows are spread over the tiles in contiguous chunks (the op's output), the
        rows are re-laid out (exchanged) to them, and every vertex scans all ``offsets``
        (:class:`PoplibsSliceCosts`)."""
        t, eb, c = self.tiles, self.eb, self.slice_costs
        total = int(offsets) * int(slice_elements)
        el = split_sizes(total, t)
        start = np.concatenate(([0], np.cumsum(el)[:-1]))
        in_range = np.where(el > 0, (start + el - 1) // slice_elements - start // slice_elements + 1, 0)
        one = (el > 0).astype(np.int64)
        cyc = c.workers * (
            c.slice_fixed
            + c.slice_per_offset * in_range
            + c.slice_per_vector * (-(-el // 2))
            + c.slice_out_of_range * (int(offsets) - in_range)
        )
        cyc = np.where(el > 0, cyc, 0).astype(np.int64)
        self.phases.append(Phase(name, "vector", el, cyc, el * eb, el * eb, one, 3 * one, 2 * one * in_range))
        self._keep(2 * el * eb)

    def _columns(self, cols: int) -> np.ndarray:
        """Columns per tile of a ``(rows, cols)`` tensor laid out by ``popops::createGatherInput``
        (sliced along the rows: every tile holds all rows of its columns)."""
        c = np.zeros(self.tiles, dtype=np.int64)
        used = min(self.tiles, int(cols))
        c[:used] = split_sizes(int(cols), used)
        return c

    def zero(self, name: str, rows: int, cols: int) -> None:
        """``popops::zero`` of a ``createGatherInput``-laid-out ``(rows, cols)`` tensor."""
        el = int(rows) * self._columns(cols)
        one = (el > 0).astype(np.int64)
        z = np.zeros(self.tiles, dtype=np.int64)
        self.phases.append(Phase(name, "vector", el, self.vertex.fill_cycles(el, self.eb), z, z, one, one, z))
        self._keep(el * self.eb)

    def multi_update_add(self, name: str, offsets: int, rows: int, cols: int) -> None:
        """``popops::multiUpdateAdd`` of ``offsets`` rows of ``cols`` values into a
        ``createGatherInput``-laid-out ``(rows, cols)`` tensor (PopART ``GatherGrad``): every column
        tile receives its columns of all the update rows and adds them (all offsets in range)."""
        t, eb, c = self.tiles, self.eb, self.slice_costs
        cpt = self._columns(cols)
        one = (cpt > 0).astype(np.int64)
        cyc = np.where(
            cpt > 0,
            c.workers * (c.update_fixed + int(offsets) * (c.update_per_offset + c.update_per_element * (cpt - 1))),
            0,
        )
        b_in = int(offsets) * cpt * eb
        b_out = split_sizes(int(offsets) * int(cols), t) * eb
        self.phases.append(
            Phase(name, "vector", int(offsets) * cpt, cyc.astype(np.int64), b_in, b_out, one, 3 * one, 2 * one)
        )
        self._keep(int(rows) * cpt * eb + b_in)

    def sum_inputs(self, name: str, inputs: int, rows: int, cols: int) -> None:
        """PopART ``Sum`` of ``inputs`` partial gradients of a ``createGatherInput``-laid-out
        ``(rows, cols)`` tensor: one ``popops::map`` over the co-located inputs (no exchange)."""
        el = int(rows) * self._columns(cols)
        one = (el > 0).astype(np.int64)
        z = np.zeros(self.tiles, dtype=np.int64)
        self.phases.append(
            Phase(
                name,
                "vector",
                el * (int(inputs) - 1),
                self.vertex.map_cycles(el, self.eb, inputs),
                z,
                z,
                one,
                (int(inputs) + 1) * one,
                z,
            )
        )
        self._keep(el * self.eb * (int(inputs) + 1))  # every partial is live until the one Sum op runs

    def schedule(self, name: str) -> LayerSchedule:

        require(len(self.phases) >= 1, "lowered part", name, "has no ops", "")
        return LayerSchedule(
            name,
            self.tiles,
            self.precision,
            tuple(self.phases),
            self.data,
            phases_cycles(self.phases, self.costs),
            tuple(self.plans),
            {"lowering": "poptorch"},
        )


def _butterfly(fw: OpBuilder, bw: OpBuilder | None, n: int, batch: int, input_grad: bool) -> None:
    levels = int(math.log2(n))
    nb = n * batch
    for k in range(levels):
        s = 1 << k
        fw.elementwise(f"bfly-mul-{k}", 2 * nb, inputs=2, moved=nb, broadcast=4 * s)
        fw.reduce(f"bfly-sum-{k}", 2 * nb, nb)
    fw.elementwise("bfly-bias-add", nb, inputs=2, broadcast=n)
    fw.elementwise("bias-add", nb, inputs=2, broadcast=n)
    if bw is None:
        return
    bw.reduce("bias-grad", nb, n)
    bw.reduce("bfly-bias-grad", nb, n)
    for k in reversed(range(levels)):
        s = 1 << k
        bw.elementwise(f"bfly-grad-expand-{k}", 2 * nb, moved=nb)
        if k > 0 or input_grad:
            bw.elementwise(f"bfly-grad-x-mul-{k}", 2 * nb, inputs=2, broadcast=4 * s)
            bw.reduce(f"bfly-grad-x-sum-{k}", 2 * nb, nb)
        bw.elementwise(f"bfly-grad-t-mul-{k}", 2 * nb, inputs=2, moved=nb)
        bw.reduce(f"bfly-grad-t-sum-{k}", 2 * nb, 4 * s)
        bw.elementwise(f"bfly-grad-t-pad-{k}", 4 * (n - 1), inputs=1, moved=4 * s)
    bw.elementwise("bfly-grad-t-accumulate", 4 * (n - 1), inputs=levels)


def _hadamard(b: OpBuilder, prefix: str, n: int, batch: int, backward: bool) -> None:
    nb = n * batch
    for d in range(int(math.log2(n))):
        if not backward:
            b.elementwise(f"{prefix}-add-{d}", nb // 2, inputs=2, moved=nb)
            b.elementwise(f"{prefix}-sub-{d}", nb // 2, inputs=2, moved=nb)
            b.elementwise(f"{prefix}-cat-{d}", nb, moved=nb)
        else:
            b.elementwise(f"{prefix}-neg-{d}", nb // 2, moved=nb // 2)
            b.elementwise(f"{prefix}-add-even-{d}", nb // 2, inputs=2, moved=nb)
            b.elementwise(f"{prefix}-add-odd-{d}", nb // 2, inputs=2, moved=nb)
            b.elementwise(f"{prefix}-pad-even-{d}", nb, moved=nb // 2)
            b.elementwise(f"{prefix}-pad-odd-{d}", nb, moved=nb // 2)
            b.elementwise(f"{prefix}-sum-{d}", nb, inputs=2)


def _fastfood(fw: OpBuilder, bw: OpBuilder | None, n: int, batch: int, input_grad: bool) -> None:
    nb = n * batch
    fw.elementwise("ff-mul-B", nb, inputs=2, broadcast=n)
    _hadamard(fw, "ff-h1", n, batch, False)
    fw.elementwise("ff-gather-P", nb, moved=nb)
    fw.elementwise("ff-mul-G", nb, inputs=2, broadcast=n)
    _hadamard(fw, "ff-h2", n, batch, False)
    fw.elementwise("ff-mul-S", nb, inputs=2, broadcast=n)
    fw.elementwise("bias-add", nb, inputs=2, broadcast=n)
    if bw is None:
        return
    bw.reduce("bias-grad", nb, n)
    bw.elementwise("ff-grad-S-mul", nb, inputs=2)
    bw.reduce("ff-grad-S-sum", nb, n)
    bw.elementwise("ff-grad-h2-mul", nb, inputs=2, broadcast=n)
    _hadamard(bw, "ff-grad-h2", n, batch, True)
    bw.elementwise("ff-grad-G-mul", nb, inputs=2)
    bw.reduce("ff-grad-G-sum", nb, n)
    bw.elementwise("ff-grad-g-mul", nb, inputs=2, broadcast=n)
    bw.elementwise("ff-grad-scatter-P", nb, moved=nb)
    _hadamard(bw, "ff-grad-h1", n, batch, True)
    bw.elementwise("ff-grad-B-mul", nb, inputs=2)
    bw.reduce("ff-grad-B-sum", nb, n)
    if input_grad:
        bw.elementwise("ff-grad-x-mul", nb, inputs=2, broadcast=n)


def _pixelfly(fw: OpBuilder, bw: OpBuilder | None, n: int, batch: int, cfg: dict, input_grad: bool) -> None:

    bs, rank = int(cfg["block_size"]), int(cfg["lowrank_size"])
    nnz = int(pixelfly_layout(n, n, bs, int(cfg["butterfly_size"])).sum())
    blocks = n // bs  # input blocks = output blocks = bags (square layer)
    per_bag = nnz // blocks  # active blocks per output (= per input) block
    row = bs * batch  # one row of ``blocks_for_indexing``
    nb = n * batch
    # output = lowrank_second(lowrank_first(x))
    fw.matmul(batch, n, rank)
    fw.matmul(batch, rank, n)
    fw.elementwise("pf-lowrank-bias-add", nb, inputs=2, broadcast=n)
    # butterfly_matmul: bmm of the (blocks, per_bag * bs, bs) weight view with x^T viewed (blocks, bs, batch)
    fw.grouped_matmul(blocks, per_bag * bs, bs, batch)
    # F.embedding_bag(indices (blocks, per_bag), (nnz, bs * batch), mode="sum"): PopTorch's handler
    # emits, per bag, a Gather of ``per_bag`` rows and a ReduceSum over them, then a Concat (inplace)
    for i in range(blocks):
        fw.multi_slice(f"pf-bag-gather-{i}", per_bag, row)
        fw.reduce(f"pf-bag-sum-{i}", per_bag * row, row)
    # output += aggregated.view(-1, batch).t(): the transposed operand is re-laid out
    fw.elementwise("pf-add", nb, inputs=2, moved=nb)
    if bw is None:
        return
    bw.reduce("pf-lowrank-bias-grad", nb, n)
    bw.matmul(n, batch, rank)  # lowrank_second.weight grad
    bw.matmul(batch, n, rank)  # grad of the rank-r activations
    bw.matmul(rank, batch, n)  # lowrank_first.weight grad
    if input_grad:
        bw.matmul(batch, rank, n)
    for i in range(blocks):
        bw.elementwise(f"pf-concat-grad-{i}", row, moved=row)  # ConcatGrad: slice + cloneNcopy
        bw.elementwise(f"pf-bag-sum-grad-{i}", row)  # ReduceSumGrad: cloneNcopy + broadcast
        bw.zero(f"pf-gather-grad-zero-{i}", nnz, row)  # GatherGrad: zeroed full-size result
        bw.multi_update_add(f"pf-gather-grad-update-{i}", per_bag, nnz, row)
    bw.sum_inputs("pf-gather-grad-sum", blocks, nnz, row)  # autodiff sums the per-bag gradients
    bw.grouped_matmul(blocks, per_bag * bs, batch, bs)  # weight grad of the bmm
    if input_grad:
        bw.grouped_matmul(blocks, bs, per_bag * bs, batch)


def _dense(fw: OpBuilder, bw: OpBuilder | None, n_in: int, n_out: int, batch: int, input_grad: bool) -> None:
    fw.matmul(batch, n_in, n_out)
    fw.elementwise("bias-add", batch * n_out, inputs=2, broadcast=n_out)
    if bw is None:
        return
    bw.reduce("bias-grad", batch * n_out, n_out)
    if input_grad:
        bw.matmul(batch, n_out, n_in)
    bw.matmul(n_out, batch, n_in)


def _lowrank(
    fw: OpBuilder, bw: OpBuilder | None, n_in: int, n_out: int, rank: int, batch: int, input_grad: bool
) -> None:
    fw.matmul(batch, n_in, rank)
    fw.matmul(batch, rank, n_out)
    fw.elementwise("bias-add", batch * n_out, inputs=2, broadcast=n_out)
    if bw is None:
        return
    bw.reduce("bias-grad", batch * n_out, n_out)
    bw.matmul(rank, batch, n_out)
    bw.matmul(batch, n_out, rank)
    bw.matmul(rank, batch, n_in)
    if input_grad:
        bw.matmul(batch, rank, n_in)


def poptorch_layer(
    kind: str,
    n: int,
    batch: int,
    builder_kw: dict,
    *,
    n_out: int | None = None,
    rank: int = 1,
    backward: bool = True,
    input_grad: bool = True,
    pixelfly: dict | None = None,
) -> tuple:
    """``(forward, backward)`` :class:`LayerSchedule` of one layer lowered op by op (``kind`` in
    :data:`POPTORCH_KINDS`; ``backward=False`` gives ``(forward, None)``). ``input_grad=False``
    drops the ops that only produce the gradient of the layer input (autograd skips them for the
    first layer, whose input does not require a gradient). ``builder_kw``: the :class:`OpBuilder`
    arguments (``target``, ``vertex``, ``slice_costs``)."""
    require(
        kind in POPTORCH_KINDS,
        "kind",
        kind,
        f"has no op-by-op lowering (one of {', '.join(POPTORCH_KINDS)})",
        "use lowering='fused'",
    )
    fw = OpBuilder(**builder_kw)
    bw = OpBuilder(**builder_kw) if backward else None
    n_out = n if n_out is None else n_out
    if kind == "dense":
        _dense(fw, bw, n, n_out, batch, input_grad)
    elif kind == "low-rank":
        _lowrank(fw, bw, n, n_out, rank, batch, input_grad)
    elif kind == "butterfly":
        _butterfly(fw, bw, n, batch, input_grad)
    elif kind == "pixelfly":
        _pixelfly(fw, bw, n, batch, dict(PIXELFLY_SHL if pixelfly is None else pixelfly), input_grad)
    else:
        _fastfood(fw, bw, n, batch, input_grad)
    return fw.schedule(f"{kind}-poptorch"), (bw.schedule(f"{kind}-backward-poptorch") if bw else None)


def poptorch_common_parts(n: int, batch: int, classes: int, param_tensors: tuple, builder_kw: dict) -> dict:
    """Parts of the SHL step shared by all methods: ReLU, classifier, loss and the SGD update of
    ``param_tensors`` (sizes of every parameter tensor; two ops each: momentum and weight update)."""
    out = {}
    a = OpBuilder(**builder_kw)
    a.elementwise("relu", batch * n)
    out["act-fwd"] = a.schedule("act-fwd")
    cf, cb = poptorch_layer("dense", n, batch, builder_kw, n_out=classes)
    out["classifier-fwd"], out["classifier-bwd"] = cf, cb
    lo = OpBuilder(**builder_kw)
    bc = batch * classes
    lo.reduce("logits-max", bc, batch)
    lo.elementwise("sub-exp", bc, inputs=2, broadcast=batch)
    lo.reduce("exp-sum", bc, batch)
    lo.elementwise("log-nll", batch, inputs=2)
    lo.elementwise("softmax-xent-grad", bc, inputs=2, broadcast=batch)
    out["loss"] = lo.schedule("loss")
    ab = OpBuilder(**builder_kw)
    ab.elementwise("relu-grad", batch * n, inputs=2)
    out["act-bwd"] = ab.schedule("act-bwd")
    up = OpBuilder(**builder_kw)
    for i, size in enumerate(param_tensors):
        up.elementwise(f"momentum-{i}", int(size), inputs=2)
        up.elementwise(f"weight-update-{i}", int(size), inputs=2)
    out["update"] = up.schedule("update")
    return out
