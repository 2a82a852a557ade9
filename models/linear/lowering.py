"""Op-by-op lowering: the reference PyTorch layers as PopTorch runs them, one Poplar program per op.

The paper timed the *pure-PyTorch* reference implementations under PopTorch (§4.1: "PyTorch
implementation was used on both GPU and IPU"): Dao et al.'s ``butterfly_mult_torch`` (HazyResearch
``butterfly``), structured-nets' ``fastfood_multiply`` / ``hadamard_transform_torch`` and
``StructuredLinear`` layers. PopTorch lowers every tensor operation of the forward pass and of its
autograd backward to a PopART op, and PopART lowers each op to its own PopLibs program: at least one
compute set with its own sync, exchange program, vertices and control code. Nothing is fused across
ops. The schedules in :mod:`models.linear.schedules` / :mod:`models.linear.steps` (``lowering =
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
* **circulant** and **pixelfly** keep their fused schedules: the paper reports that the IPU's FFT
  was not usable from PyTorch, so how its circulant layer ran is unknown, and the pixelfly schedule
  already has one phase per tensor operation of the block-sparse product. Their vector phases get
  the same PopLibs vertex costs.

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
from dataclasses import dataclass, fields

import numpy as np

from models.linear.planner import PRECISION_BYTES, OverheadConstants, Phase, SuperstepCosts, plan_matmul, split_sizes
from models.linear.schedules import LayerSchedule
from tilesim.errors import require

__all__ = ["LOWERINGS", "POPTORCH_KINDS", "PoplibsVertexCosts", "poplibs_costs", "OpBuilder", "poptorch_layer",
           "poptorch_common_parts"]

LOWERINGS = ("fused", "poptorch")
POPTORCH_KINDS = ("dense", "low-rank", "butterfly", "fastfood")


@dataclass(frozen=True)
class PoplibsVertexCosts:
    """Cycles of a PopLibs element-wise MultiVertex (FP32 ``BinaryOp1D``), from PopLibs' estimators [S].

    * ``supervisor_cycles = 11``: ``basicOpSupervisorOverhead`` (``popops/PerformanceEstimation.cpp``);
    * ``worker_fixed_cycles = 29``: ``BinaryOp1D`` FLOAT worker prologue (``popopsCycleEstimators.cpp``);
    * ``worker_cycles_per_vector = 3``: ``cyclesPerLoop = 1`` for ADD/SUB/MUL FLOAT plus 2 cycles of
      load/store and loop decision per 64-bit vector (``binaryOpInnerLoopCycles``);
    * ``vector_bytes = 8``: the 64-bit data path (2 FP32 or 4 FP16 per vector);
    * ``workers = 6``: barrel-threaded worker contexts; a worker's cycle is one tile issue slot of six.
    """

    supervisor_cycles: int = 11
    worker_fixed_cycles: int = 29
    worker_cycles_per_vector: int = 3
    vector_bytes: int = 8
    workers: int = 6

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            require(isinstance(v, int) and v >= (1 if f.name in ("vector_bytes", "workers") else 0), f.name, v,
                    "must be a non-negative integer (vector_bytes, workers >= 1)", "PopLibs constants are cycles")

    def cycles(self, elements, element_bytes: int) -> np.ndarray:
        """Tile cycles of one MultiVertex over ``elements`` (per-tile array; 0 where there is none)."""
        e = np.asarray(elements, dtype=np.int64)
        width = max(1, self.vector_bytes // element_bytes)
        per_worker = -(-e // self.workers)
        vectors = -(-per_worker // width)
        cyc = self.supervisor_cycles + self.workers * (self.worker_fixed_cycles + self.worker_cycles_per_vector * vectors)
        return np.where(e > 0, cyc, 0).astype(np.int64)


def poplibs_costs(costs: SuperstepCosts, vertex: PoplibsVertexCosts = PoplibsVertexCosts()) -> SuperstepCosts:
    """``costs`` with the vector path of PopLibs' element-wise vertices (used for every vector phase
    of a ``"poptorch"`` step, including matmul reductions and the fused circulant/pixelfly phases):
    ``vector_fixed_cycles = supervisor + workers · worker_fixed`` (185) and ``vector_bytes_per_cycle
    = vector_bytes / worker_cycles_per_vector`` (8/3: six workers each finish one 64-bit vector per
    ``3 · 6`` tile cycles) [S]."""
    return SuperstepCosts(exchange_bytes_per_cycle=costs.exchange_bytes_per_cycle,
                          exchange_fixed_cycles=costs.exchange_fixed_cycles, sync_cycles=costs.sync_cycles,
                          vector_bytes_per_cycle=vertex.vector_bytes / vertex.worker_cycles_per_vector,
                          vector_fixed_cycles=float(vertex.supervisor_cycles + vertex.workers * vertex.worker_fixed_cycles),
                          vector_stream_bytes_per_cycle=costs.vector_stream_bytes_per_cycle)


class OpBuilder:
    """Collects the phases of op-by-op lowered code (module docstring) for one part of a step."""

    def __init__(self, tiles: int, sram_bytes: int, flops_per_cycle: float, precision: str = "fp32",
                 costs: SuperstepCosts = SuperstepCosts(), overheads: OverheadConstants = OverheadConstants(),
                 vertex: PoplibsVertexCosts = PoplibsVertexCosts(), fixed_cycles: float = 331.0):
        self.tiles, self.sram_bytes, self.flops_per_cycle = tiles, sram_bytes, flops_per_cycle
        self.precision, self.costs, self.overheads, self.vertex = precision, costs, overheads, vertex
        self.fixed_cycles = fixed_cycles
        self.eb = PRECISION_BYTES[precision]
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
        bcast = np.minimum(el, int(broadcast))          # a tile receives only the values its outputs use
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
            self.phases.append(Phase(f"{name}-partial", "vector", el, self.vertex.cycles(np.where(el > q, el, 0), eb),
                                     np.zeros(t, dtype=np.int64), np.zeros(t, dtype=np.int64), one, 2 * one,
                                     np.zeros(t, dtype=np.int64)))
        receivers = min(int(outputs), t)
        total = int(q.sum())
        recv = np.zeros(t, dtype=np.int64)
        recv[:receivers] = split_sizes(total, receivers)
        one = (recv > 0).astype(np.int64)
        self.phases.append(Phase(name, "vector", recv, self.vertex.cycles(recv, eb), recv * eb, q * eb, one, 2 * one,
                                 2 * one + (q > 0).astype(np.int64)))
        self._keep(el * eb + recv * eb)

    def matmul(self, m: int, k: int, n: int) -> None:
        plan = plan_matmul(m, k, n, tiles=self.tiles, sram_bytes=self.sram_bytes, flops_per_cycle=self.flops_per_cycle,
                           fixed_cycles=self.fixed_cycles, precision=self.precision, costs=self.costs,
                           overheads=self.overheads)
        self.plans.append(plan)
        self.phases.extend(plan.phases)
        self._keep(plan.data_bytes)

    def schedule(self, name: str) -> LayerSchedule:
        from models.linear.planner import phases_cycles
        require(len(self.phases) >= 1, "lowered part", name, "has no ops", "")
        return LayerSchedule(name, self.tiles, self.precision, tuple(self.phases), self.data,
                             phases_cycles(self.phases, self.costs), tuple(self.plans), {"lowering": "poptorch"})


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


def _dense(fw: OpBuilder, bw: OpBuilder | None, n_in: int, n_out: int, batch: int, input_grad: bool) -> None:
    fw.matmul(batch, n_in, n_out)
    fw.elementwise("bias-add", batch * n_out, inputs=2, broadcast=n_out)
    if bw is None:
        return
    bw.reduce("bias-grad", batch * n_out, n_out)
    if input_grad:
        bw.matmul(batch, n_out, n_in)
    bw.matmul(n_out, batch, n_in)


def _lowrank(fw: OpBuilder, bw: OpBuilder | None, n_in: int, n_out: int, rank: int, batch: int,
             input_grad: bool) -> None:
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


def poptorch_layer(kind: str, n: int, batch: int, builder_kw: dict, *, n_out: int | None = None, rank: int = 1,
                   backward: bool = True, input_grad: bool = True) -> tuple:
    """``(forward, backward)`` :class:`LayerSchedule` of one layer lowered op by op (``kind`` in
    :data:`POPTORCH_KINDS`; ``backward=False`` gives ``(forward, None)``). ``input_grad=False``
    drops the ops that only produce the gradient of the layer input (autograd skips them for the
    first layer, whose input does not require a gradient)."""
    require(kind in POPTORCH_KINDS, "kind", kind, f"has no op-by-op lowering (one of {', '.join(POPTORCH_KINDS)})",
            "use lowering='fused'")
    fw = OpBuilder(**builder_kw)
    bw = OpBuilder(**builder_kw) if backward else None
    n_out = n if n_out is None else n_out
    if kind == "dense":
        _dense(fw, bw, n, n_out, batch, input_grad)
    elif kind == "low-rank":
        _lowrank(fw, bw, n, n_out, rank, batch, input_grad)
    elif kind == "butterfly":
        _butterfly(fw, bw, n, batch, input_grad)
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
