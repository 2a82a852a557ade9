"""A static PopSparse matmul (or a dense one) run the way PopTorch users run it: a custom op in a
``poptorch.for_loop`` whose dense input was laid out by PopART, not by the PopSparse planner (issue 40 part 2).

The direct path (:func:`~tilesim.models.linear.timing.time_layer`, what the PopSparse paper's
``ipu/matmul_bench.cpp`` in graphcore-research/sparsity-benchmarks times) creates the dense operand with
``popsparse::static_::createSparseDenseMatMulRHS``, in the planner's layout. Graphcore's public SpMM notebook
(graphcore-research/notebooks ``sparsity_benchmarks/SpMM.ipynb``, the ``StaticSparseMatmul`` custom op of
``poptorch_static_sparse/libpoptorch_static_sparse_op.cpp``; the same op is ``static_spmm.cpp`` of
graphcore-research/poptorch-experimental-addons) runs ``y = W x`` as ``poptorch.for_loop(L, op, [x])``: the
op's output is the next iteration's input, and the time is the wall time of one call over ``L = 2000``
iterations. What that path adds per iteration, each from the source named (``tiles = T``, element bytes
``e``, dense operand ``k x n``, output ``m x n``, block ``b``):

1. **PopART's loop** (popart ``willow/src/popx/op/loopx.cpp``, ``LoopOpx::grow``): per iteration an
   ``exit_update`` ``popops::mapInPlace`` on scalars, the copy of the body output's clone to the body input
   (``copyBodyOutputsToExplicitBodyInputs``), the body, the copy of the body output to its clone
   (``copyBodyOutputsToBodyOutputClones``) and an ``iterator_update`` ``mapInPlace``. The scalar maps cost
   one PopLibs element-wise vertex on one tile plus a sync each (:class:`~tilesim.models.linear.lowering.
   PoplibsVertexCosts`); the clone copy is on-tile (``graph.clone`` keeps the mapping): ``vector_cycles``
   of the tile's ``m n / T`` elements.
2. **Loop-carried re-layout of the output** (the same ``Copy``): the body output has PopSparse's output
   layout, ``out`` of ``constructGraph`` (poplibs ``lib/popsparse/StaticMatMul.cpp``): a variable
   ``[m/b][n][b]`` mapped linearly with grain ``nGrain · mGrain`` (``getNGrainSize`` = vector width,
   ``getMGrainSize`` = 1 for ``b = 1`` else the vector width; ``StaticMatMulPartitioner.cpp``), seen as
   ``(m, n)``; the body input is a PopART tensor without a creator (the custom op's ``Opx`` has no
   ``createInput``): row-major ``(k, n)`` mapped linearly with poputil's default grain (vector width) and
   128 B minimum per tile (``calcLinearTileMapping``, ``lib/poputil/TileMapping.cpp``; ``splitRegions``,
   ``lib/poputil/Util.cpp``). Element ``(i, j)`` lives on tile ``⌊f_out(i, j) / E_out⌋`` and goes to
   ``⌊(i n + j) / E_in⌋`` with ``f_out = ⌊i/b⌋ n b + j b + i mod b``; every element whose tile changes is
   exchanged: ``bytes_out[t] = e · #{moved from t}``, ``bytes_in[t] = e · #{moved to t}``. With ``b > 1``
   consecutive elements of an input row are ``b`` apart in the output: every element is its own 2-byte
   (FP16) atom, which the exchange cannot write in place (it moves 4-byte words), so the tile re-arranges
   them: poplin's estimate of a rearranging copy, ``587 + 5.1484 a2 + 3.125 a4`` cycles for ``aX`` bytes in
   ``X``-byte atoms (``lib/poplin/ConvModel.cpp``, its transform estimates "based on regression analysis of
   10k random test"; :data:`REARRANGE_CYCLES_PER_BYTE`), charged to every copy here on the bytes each tile
   holds in runs (contiguous in source and destination) of fewer than 8 bytes.
3. **Re-layout of the dense input for the planner** (``sparseDenseMatMulInternal``: ``regroupIfBeneficial(rhs,
   referenceRhs)``, ``lib/popops/Rearrange.cpp``): the planner's reference is ``[k/b][n][b]`` (grouped by
   ``b`` along k), the incoming tensor is grouped along n by ``g = gcd(E_in, n)`` (its per-tile chunks are
   whole vector-width grains); if the innermost grouping dimensions differ and both are multiples of the
   regroup grain (4 halves, 2 floats; ``getMinimumRegroupGrainSize``), PopLibs copies the input into
   ``preRegroup`` (``[k/b][n/g][b][g]``: ``k n / (b g)`` transpositions spread evenly,
   ``ceil(count / T)`` consecutive ones per tile; ``updateGrouping`` may split them only while
   ``count · x ≤ T``) and runs one compute set of transposes. ``b = 1`` needs none (the reference is
   grouped along n too). Transpose cycles: PopSparse's ``getTransposeCycleEstimate`` (supervisor half/float
   transpose, ``lib/popsparse/PerformanceEstimation.hpp``; :func:`~tilesim.models.linear.dynamicsparse.
   _transpose_cycles`) of the tile's ``b x g`` transpositions.
4. The sparse matmul itself: the direct path's phases, unchanged (the per-tile dense slices are gathered
   by ``constructGraph``'s ``tileRhsCopies`` on both paths).

Every exchange is timed by the machine's fabric as the direct path's are (fixed + peak bytes per cycle);
the dense notebook rows (``torch.matmul`` in the same loop, ``setPartialsType(torch.half)``) get items 1-2
around the direct dense matmul, its output taken as row-major (poplin's matmul output grouped along n
[assumed]). Two layout details no source fixes: PopART's linear mapper may rotate the start tile of the
body input and ``regroupTensor`` hashes the start tile of the transpositions; both are taken as tile 0.

Not modelled (no public cost): a per-region cost of the exchange itself (the fabric model charges bytes;
:func:`relayouts` reports the regions each tile receives).

Against the notebook (``tilesim validate models/linear/cases/popsparse_poptorch_notebook.csv``, no constant
fitted): 4096², FP16, block 16, batch 2048, density 1/16 is 115.1 µs per iteration against 238.2 µs measured
(direct path 76.4 µs). Of the 38.7 µs added, the loop-carried copy is 33.7 µs (its 11.4 KB a tile re-arranged
in 2-byte atoms: 32 µs), the regroup's transposes 2.2 µs, its copy 1.7 µs, the clone copy 0.8 µs and the
two scalar maps 0.3 µs: about a quarter of the 158-171 µs the notebook adds to the direct path at every density
(1/64: 77.5 against 210.1 µs; 1/8: 143.3 against 262.8 µs); ~120-133 µs stay unexplained. Block 1 (no
regroup, an output already row-major) and dense stay within 0.3-9 % in rate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from tilesim.errors import require
from tilesim.machine.description import Machine
from tilesim.models.linear.dynamicsparse import _transpose_cycles
from tilesim.models.linear.lowering import PoplibsVertexCosts
from tilesim.models.linear.phases import Phase, ceil_div, require_precision
from tilesim.models.linear.schedules import LayerSchedule
from tilesim.models.linear.timing import (
    BlockSparseConfig,
    MatmulOptions,
    StepTiming,
    _machine,
    layer_params,
    layer_parts,
    step_costs,
    time_parts,
)

__all__ = [
    "MIN_BYTES_PER_TILE",
    "Relayout",
    "linear_tiles",
    "loop_carry_relayout",
    "regroup_relayout",
    "relayouts",
    "rearrange_cycles",
    "REARRANGE_FIXED_CYCLES",
    "REARRANGE_CYCLES_PER_BYTE",
    "poptorch_parts",
    "time_via_poptorch",
    "explain_via",
]

MIN_BYTES_PER_TILE = 128
"""poputil's default linear mapping puts at least 128 B on a tile (``calcLinearTileMapping``) [S]."""

_CHUNK_ROWS = 256  # rows of the (m, n) element grid handled at once (bounds the index arrays' memory)


@dataclass(frozen=True)
class Relayout:
    """One re-laying copy: per-tile ``bytes_in``/``bytes_out`` (elements whose tile changes, times their
    bytes), ``regions_in`` (contiguous runs received per tile, the exchange's pieces), ``moved`` elements,
    ``atom_bytes = (a2, a4)``: the bytes each tile receives (moved or not) in runs whose size is a multiple
    of 2 but not 4, and of 4 but not 8 bytes (sub-vector atoms), and, for a regroup, the transpositions per
    tile (``transposes``) of ``shape = (rows, cols)`` each."""

    name: str
    bytes_in: np.ndarray
    bytes_out: np.ndarray
    regions_in: np.ndarray
    moved: int
    atom_bytes: tuple = ()
    transposes: np.ndarray | None = None
    shape: tuple = (0, 0)

    def rearrange_cycles(self) -> np.ndarray:
        """:func:`rearrange_cycles` of the bytes each tile receives in 2- and 4-byte atoms."""
        return rearrange_cycles(*self.atom_bytes)


REARRANGE_FIXED_CYCLES = 587
REARRANGE_CYCLES_PER_BYTE = {2: 5271 / 1024, 4: 3200 / 1024, 8: 451 / 1024}
"""poplin's estimate of an on-tile rearranging copy (``lib/poplin/ConvModel.cpp``, the transform estimates
"based on regression analysis of 10k random test": ``cycles = 587 + 5.1484 a2 + 3.125 a4 + 0.4404 a8``,
``aX`` the bytes per tile copied in atoms of ``X`` bytes) [S]. Runs of 8 bytes and more are taken as written
in place by the exchange, as the direct path's exchanges are (no ``a8`` term charged)."""


def rearrange_cycles(a2, a4) -> np.ndarray:
    """Per-tile cycles of re-arranging ``a2`` bytes in 2-byte atoms and ``a4`` in 4-byte atoms
    (:data:`REARRANGE_CYCLES_PER_BYTE`; 0 on a tile with neither)."""
    a2, a4 = np.asarray(a2, dtype=np.int64), np.asarray(a4, dtype=np.int64)
    per = REARRANGE_CYCLES_PER_BYTE
    cyc = REARRANGE_FIXED_CYCLES + np.ceil(per[2] * a2 + per[4] * a4)
    return np.where((a2 + a4) > 0, cyc, 0).astype(np.int64)


def linear_tiles(flat, numel: int, tiles: int, grain: int, min_elements: int = 0) -> np.ndarray:
    """Tile of each flat element index under poputil's linear mapping of ``numel`` elements (``splitRegions``:
    ``G = ceil(numel / grain)`` grains, ``ceil(G / tiles)`` per tile, raised so a tile holds at least
    ``min_elements``; tile ``t`` holds one contiguous chunk)."""
    grains = ceil_div(numel, grain)
    per = ceil_div(grains, tiles)
    if min_elements:
        most = max(1, grains // ceil_div(min_elements, grain))
        per = max(per, ceil_div(grains, most))
    return np.asarray(flat, dtype=np.int64) // (per * grain)


def _vector_width(eb: int) -> int:
    return 8 // eb  # 64-bit vectors: 4 halves, 2 floats (Target::getVectorWidth)


def _input_tiles(flat, numel: int, tiles: int, eb: int) -> np.ndarray:
    """Tiles of a PopART tensor without a creator (poputil's default linear mapping, row-major)."""
    return linear_tiles(flat, numel, tiles, _vector_width(eb), ceil_div(MIN_BYTES_PER_TILE, eb))


def _count(name: str, rows: int, cols: int, eb: int, tiles: int, where) -> Relayout:
    """Walk the ``rows x cols`` grid in row chunks, row-major; ``where(i, j)`` gives ``(src_flat, src_tile,
    dst_flat, dst_tile)``, one of the two flat orders being row-major (then a run contiguous in both is met in
    order); moved elements and those runs (one exchange region each) are counted per tile."""
    b_in = np.zeros(tiles, dtype=np.int64)
    b_out = np.zeros(tiles, dtype=np.int64)
    regions = np.zeros(tiles, dtype=np.int64)
    atoms = np.zeros((2, tiles), dtype=np.int64)
    moved = 0
    for lo in range(0, rows, _CHUNK_ROWS):
        i = np.arange(lo, min(rows, lo + _CHUNK_ROWS), dtype=np.int64)[:, None]
        j = np.arange(cols, dtype=np.int64)[None, :]
        sf, st, df, dt = (np.broadcast_to(a, (i.shape[0], cols)).ravel() for a in where(i, j))
        move = st != dt
        new = np.ones(sf.shape[0], dtype=bool)
        new[1:] = (np.diff(sf) != 1) | (np.diff(df) != 1) | (st[1:] != st[:-1]) | (dt[1:] != dt[:-1])
        b_out += np.bincount(st[move], minlength=tiles)[:tiles] * eb
        b_in += np.bincount(dt[move], minlength=tiles)[:tiles] * eb
        regions += np.bincount(dt[move & new], minlength=tiles)[:tiles]
        moved += int(move.sum())
        starts = np.flatnonzero(new)
        run = np.diff(np.append(starts, sf.shape[0])) * eb
        for row, (mod, size) in enumerate(((4, 2), (8, 4))):  # atoms of 2 (not 4) and of 4 (not 8) bytes
            sel = (run % mod != 0) & (run % size == 0)
            atoms[row] += np.bincount(dt[starts[sel]], weights=run[sel], minlength=tiles)[:tiles].astype(np.int64)
    return Relayout(name, b_in, b_out, regions, moved, (atoms[0], atoms[1]))


def loop_carry_relayout(m: int, n: int, block: int, eb: int, tiles: int) -> Relayout:
    """Item 2 of the module docstring: PopSparse's output ``[m/b][n][b]`` (grain ``vw · (b > 1 ? vw : 1)``)
    copied to the loop's row-major body input (poputil default mapping). ``block = 0``: a dense (poplin)
    output, taken as row-major with grain ``vw`` [assumed]."""
    vw = _vector_width(eb)
    b = max(block, 1)
    grain = vw * (vw if block > 1 else 1)
    numel = m * n

    def where(i, j):
        src = (i // b) * (n * b) + j * b + i % b
        dst = i * n + j
        return src, linear_tiles(src, numel, tiles, grain), dst, _input_tiles(dst, numel, tiles, eb)

    return _count("loop-carried copy", m, n, eb, tiles, where)


def _transpose_factor(count: int, bl: int, g: int, grain: int, tiles: int, workers: int) -> tuple:
    """``updateGroupingInternal``: split each ``bl x g`` transposition by a factor ``x`` of
    ``bl g / grain²`` while ``count · x ≤ tiles`` (one transposition per worker stride limit taken as met),
    picking the least ``(bl g / grain² / x) · ceil(ceil(count x / tiles) / workers)``; the factor comes off
    the from-grouping ``g`` first, then ``bl``."""
    extra = (bl * g) // (grain * grain)
    best, factor = None, 1
    for x in sorted(d for d in range(1, extra + 1) if extra % d == 0):
        if count * x > tiles:
            break
        cost = (extra // x) * ceil_div(ceil_div(count * x, tiles), workers)
        if best is None or cost < best:
            best, factor = cost, x
    f_from = math.gcd(factor, g // grain)
    f_to = math.gcd(factor // f_from, bl // grain)
    return bl // f_to, g // f_from


def regroup_relayout(k: int, n: int, block: int, eb: int, tiles: int, workers: int) -> Relayout | None:
    """Item 3 of the module docstring: ``regroupIfBeneficial`` of the row-major ``(k, n)`` input to the
    planner's k-grouping ``block``; None when PopLibs regroups nothing (``block = 1``, or a grouping that is
    not a multiple of the regroup grain)."""
    grain = _vector_width(eb)  # getMinimumRegroupGrainSize: 4 halves, 2 floats
    numel = k * n
    per_tile = int(np.bincount(_input_tiles(np.arange(0, numel, grain), numel, tiles, eb)).max()) * grain
    g = math.gcd(per_tile, n)
    if block <= 1 or g % grain or block % grain:
        return None
    est = ceil_div(numel, block * g)  # transpositions on the IPU holding the most elements (one IPU: all)
    bl, g = _transpose_factor(est, block, g, grain, tiles, workers)
    count = (k // bl) * (n // g)
    per = ceil_div(count, tiles)

    def where(i, j):
        src = i * n + j
        t = (i // bl) * (n // g) + j // g
        dst = t * (bl * g) + (i % bl) * g + j % g
        return src, _input_tiles(src, numel, tiles, eb), dst, t // per

    r = _count("regroup copy", k, n, eb, tiles, where)
    trans = np.minimum(np.maximum(count - np.arange(tiles) * per, 0), per)
    return replace(r, transposes=trans, shape=(bl, g))


def relayouts(kind: str, n: int, batch: int, eb: int, tiles: int, workers: int, block: int = 0) -> tuple:
    """The re-laying copies of one iteration (items 2 and 3) of an ``n x n`` layer over ``batch`` columns:
    ``(loop-carried copy, regroup or None)``; ``kind`` ``"dense"`` has no regroup (poplin's own operand
    arrangement is in the direct dense model)."""
    b = block if kind == "block-sparse" else 0
    loop = loop_carry_relayout(n, batch, b, eb, tiles)
    return loop, (regroup_relayout(n, batch, b, eb, tiles, workers) if b else None)


def _phase(name: str, tiles: int, *, compute=None, macs=None, b_in=None, b_out=None, instr=None) -> Phase:
    z = np.zeros(tiles, dtype=np.int64)
    cyc = z if compute is None else np.asarray(compute, dtype=np.int64)
    one = (cyc > 0).astype(np.int64)
    return Phase(
        name,
        "vector",
        z if macs is None else macs,
        cyc,
        z if b_in is None else b_in,
        z if b_out is None else b_out,
        one,
        2 * one,
        z if instr is None else instr,
    )


def _scalar_map(name: str, tiles: int, vertex: PoplibsVertexCosts) -> Phase:
    """A ``popops::mapInPlace`` on scalars (PopART's loop ``exit_update`` / ``iterator_update``): one vertex
    on tile 0 (scalars are mapped linearly: tile 0)."""
    el = np.zeros(tiles, dtype=np.int64)
    el[0] = 1
    return _phase(name, tiles, compute=vertex.map_cycles(el, 4, 2), macs=el)


def _copy_phase(r: Relayout, tiles: int) -> Phase:
    """The copy's exchange, then its on-tile rearrangement of sub-vector atoms (:func:`rearrange_cycles`)."""
    cyc = r.rearrange_cycles()
    return _phase(r.name, tiles, compute=cyc, b_in=r.bytes_in, b_out=r.bytes_out, instr=r.regions_in)


def poptorch_parts(fwd: LayerSchedule, kind: str, n: int, batch: int, machine: Machine, block: int = 0) -> list:
    """``[(part, LayerSchedule)]`` of one iteration: ``loop`` (item 1 and the loop-carried copy),
    ``relayout`` (the regroup copy and its transposes, block > 1) and the direct ``forward`` ``fwd``."""
    tiles, workers = machine.tiles_per_chip, machine.chip.workers_per_tile
    eb = require_precision("precision", fwd.precision)
    costs = step_costs(machine)
    vertex = PoplibsVertexCosts.for_machine(machine)
    loop, regroup = relayouts(kind, n, batch, eb, tiles, workers, block)
    vw = _vector_width(eb)
    out_tiles = linear_tiles(np.arange(n * batch), n * batch, tiles, vw * (vw if block > 1 else 1))
    out_el = np.bincount(out_tiles, minlength=tiles)  # the body output's elements per tile (item 2's mapping)
    clone = _phase("body-output clone copy", tiles, compute=costs.vector_cycles(out_el, eb), macs=out_el)
    extra = out_el * eb  # the loop's clone of the body output lives across iterations
    loop_phases = (
        _scalar_map("loop exit-update", tiles, vertex),
        _copy_phase(loop, tiles),
        clone,
        _scalar_map("loop iterator-update", tiles, vertex),
    )
    phases: tuple = ()
    if regroup is not None:
        bl, g = regroup.shape
        trans = regroup.transposes
        cyc = np.array([_transpose_cycles(int(c), bl, g, eb == 4, workers) if c else 0 for c in trans])
        phases = (_copy_phase(regroup, tiles), _phase("regroup transpose", tiles, compute=cyc, macs=trans * bl * g))
        extra = extra + trans * bl * g * eb  # preRegroup and the transposed copy of the input
    data = fwd.data_bytes + extra
    parts = [("loop", LayerSchedule("poptorch loop", tiles, fwd.precision, loop_phases, data, 0))]
    if phases:
        parts.append(("relayout", LayerSchedule("poptorch relayout", tiles, fwd.precision, phases, data, 0)))
    return parts + [("forward", fwd)]


def time_via_poptorch(
    kind: str,
    n: int,
    batch: int,
    machine="bow",
    *,
    precision: str = "fp16",
    block_sparse: BlockSparseConfig | None = None,
    partials: str | None = None,
) -> StepTiming:
    """One iteration of the notebook's ``poptorch.for_loop`` around an ``n x n`` ``kind`` (``"block-sparse"``
    or ``"dense"``) matmul of ``batch`` columns, forward only (the custom op has no gradient); ``partials``:
    the dense matmul's partials (default the data precision: the notebook's ``setPartialsType(torch.half)`` for fp16
    data; fp32 data are taken to keep fp32 partials [assumed])."""
    require(kind in ("block-sparse", "dense"), "kind", kind, "must be block-sparse or dense for --via poptorch",
            "the notebook's custom op is the static PopSparse matmul; dense is torch.matmul")  # fmt: skip
    m = _machine(machine)
    kw: dict = {}
    if kind == "block-sparse":
        kw["block_sparse"] = block_sparse or BlockSparseConfig()
    else:
        kw["matmul"] = MatmulOptions(partials_precision=partials or precision)
    fwd, _ = layer_parts(kind, n, batch, m, precision=precision, backward=False, **kw)
    block = kw["block_sparse"].block if kind == "block-sparse" else 0
    parts = poptorch_parts(fwd, kind, n, batch, m, block)
    params = layer_params(kind, n, block_sparse=kw.get("block_sparse"))
    return time_parts(parts, m, f"{kind} n={n} batch={batch} (via poptorch)", params, precision, training=False)


def explain_via(t: StepTiming) -> list[str]:
    """Lines naming what the PopTorch path adds: each added part's time and share of the step, and the
    re-laying copies' bytes and regions on their busiest tile."""
    total = t.step_s
    lines = [f"via poptorch: {total * 1e6:.2f} us per loop iteration"]
    for part, secs in t.part_s.items():
        lines.append(f"  {part:<9} {secs * 1e6:9.2f} us  ({100 * secs / total:5.1f} %)")
    for part, sched in t.schedules:
        if part == "forward":
            continue
        for p in sched.phases:
            if p.has_exchange:
                busy = int(np.argmax(np.maximum(p.bytes_in, p.bytes_out)))
                lines.append(
                    f"  [{part}] {p.name}: {int(p.bytes_in.sum()):,} B moved; busiest tile {busy}: "
                    f"{int(p.bytes_in[busy]):,} B in, {int(p.bytes_out[busy]):,} B out, "
                    f"{int(p.exchange_instructions[busy]):,} regions in, {int(p.compute_cycles.max()):,} cycles "
                    "re-arranging sub-vector atoms on the busiest tile"
                )
    return lines
