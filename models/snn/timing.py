"""One sparse-BPTT training step as a BSP program, and its per-tile SRAM, on a tile machine.

The supersteps follow the authors' IPU implementation (snn-on-ipu.md §3.3, §3.4, §7; the
``sparse_layer`` custom op of ``jrfinkbeiner/graphcore_snn`` as benchmarked in Sept 2022): one
Poplar op runs the whole network and time loop; the vertex compute sets hold *all* layers at
once (the one-step delay between layers), but the PopLibs calls around them
(``dynamicSlice``/``dynamicUpdate`` of the sequences, ``Copy`` programs, ``poprand``,
``mulInPlace``) are issued *per layer*, each its own compute set or exchange with its own sync.
Each compute set's time comes from the per-tile work counters of the functional run
(``models.snn.counters``) through a :class:`tilesim.costs.CostModel`; a superstep's exchange
carries what the *next* superstep needs. Rows per time step, with ``L`` weight layers:

Forward, for t = 0 … T−1
  ``fwd: slice inputs``  loop counter, ``dynamicSlice`` of the data input, 2(L−1) ``Copy`` of each
                         layer's list into the next layer's input buffer; exchange: every owner
                         tile receives its sample lists, B·(N_max_in+1)·4 bytes (broadcast).
  ``fwd: state update``  owner tiles: gather weight rows of the input list, LIF update (B vertices),
                         then the dense two-threshold flags (one vertex per neuron and sample);
                         exchange: the flags (8·n·B bytes per owner tile) go to the compaction tiles.
  ``fwd: compaction``    L ``poprand`` calls, then B·2·f compaction tiles per layer (f from the
                         neuron count, §3.3 step 5) scan their chunk of flags on 6 workers and merge
                         the 6 chunk lists; exchange: tile lists to the per-sample combiners.
  ``fwd: combine``       one combiner per (layer, sample) merges 2·f lists, spikes first, up to
                         N_max; exchange: the list to the sequence slice and the next layer's input
                         buffer (a link flow if that layer sits on another chip).
  ``fwd: update sequences``  3L ``dynamicUpdate`` (v, ids, counts).
``loss``                 output tiles turn the last layer's list dense (sparse2dense) and send the
                         slot gradients g back.
Backward, for t = T−1 … 0
  ``bwd: slice sequences``  2 index updates and 5L+1 ``dynamicSlice``.
  ``bwd: replicate lists``  one row per layer: 5 ``Copy`` programs replicate the layer's own list
                         and g (state grad) and its input list (weight grad) onto every owner tile
                         (separate programs per layer, so these exchanges add up over layers).
                         Broadcast receives count 1/tiles_per_supertile of their bytes: both
                         tiles of a supertile take the same data at 8 B/cycle (§3.2).
  ``bwd: state grad``    B vertices per tile scan their sample's whole slot list, apply the
                         surrogate to their own slots; then per layer a ``Copy`` and a
                         ``mulInPlace`` (δI = 10(1−α)δv).
  ``bwd: weight+input grad``  dW += input rows × δI (6 worker vertices, private dW copies), then
                         the input-gradient partials (one vertex per sample); exchange: partials
                         to the stage-1 reduction, spread over the chip's tiles.
  ``bwd: reduce input grad``  stage-1 sums and the stage-2 ``reduceMany``.
``dW reduce`` (zeroing, 6 copies → 1), ``optimizer`` (Adam or SGD), once per step, and
``host: variable sync``: after every device execution of ``steps_per_execution`` steps the
framework copies the trainable state (weights and optimizer slots) to the host; amortised per
step: ``host_sync_cycles_per_byte`` · 4·(1 + slots)·weights on the chip / steps_per_execution.
The input sequence (T·B·(input_cap+1)·4 bytes) arrives once per step by host infeed.

Superstep overhead. A compute set costs ``compute_set_cycles`` on every tile (control code,
vertex launch) on top of its vertices; every superstep costs the machine's sync and exchange
fixed cycles. The PopLibs calls listed above are *folded* into the row they precede: a row
standing for ``k`` compute sets and ``c`` exchange-only copies adds ``k·compute_set_cycles`` of
compute to every tile (tile 0 of chip 0 is left free, as in the authors' op) and
``(k + c − 1)·sync`` / ``(k + c − 1)·exchange_fixed`` cycles that the breakdown books as sync /
exchange (``Program.sync_extra_cycles`` / ``exchange_extra_cycles``).

Multi-chip: one Poplar graph spans all chips, so every superstep syncs all chips (§3.6).

Changes against the first version (which had 6 rows per time step): the per-layer PopLibs
supersteps, the per-compute-set cost, the per-layer replicate exchanges, the dense-flag and
tile-combine compute sets, the host infeed and the amortised variable sync were added after
comparing with the 12 measured Bow steps (``models/snn/calibration``); the coefficients are
fitted by ``tilesim calibrate``.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import numpy as np

from mapping.core import group_tiles
from models.snn.counters import CACHE_BYTES, WORKERS_PER_TILE, WorkCounters, layer_memory
from models.snn.network import NetworkConfig
from models.snn.placement import Placement
from tilesim.costs import CostModel, barrel_tile_cycles, load_costs
from tilesim.errors import MappingError, require
from tilesim.memo import lru_in
from tilesim.memory import EntryGroup, MemoryLedger
from tilesim.program import Program

__all__ = ["default_costs", "uncalibrated_costs", "compaction_spread", "build_step_program", "predict_step_s", "snn_memory",
           "PHASE_LABELS", "STEPS_PER_EXECUTION"]

PHASE_LABELS = ("fwd: slice inputs", "fwd: state update", "fwd: compaction", "fwd: combine",
                "fwd: update sequences", "loss", "bwd: slice sequences", "bwd: replicate lists",
                "bwd: state grad", "bwd: weight+input grad", "bwd: reduce input grad",
                "dW reduce", "optimizer", "host: variable sync")
STEPS_PER_EXECUTION = 52     # the calibration runs: one device execution per epoch of 52 steps


@lru_cache(maxsize=1)
def default_costs() -> CostModel:
    """The shipped calibrated cost model (``tilesim/presets/costs/snn.toml``; read once)."""
    with resources.as_file(resources.files("tilesim") / "presets" / "costs" / "snn.toml") as p:
        return load_costs(p)


def uncalibrated_costs() -> CostModel:
    """Version 0: first-principles instruction counts, before any fit (``models/snn/costs.toml``)."""
    with resources.as_file(resources.files("models.snn") / "costs.toml") as p:
        return load_costs(p)


def compaction_spread(n: int) -> int:
    """f: tiles per (sample, threshold) the dense→sparse step spreads a layer of n neurons over
    (§3.3 step 5: w = ⌊n/64⌋ + [n mod 64 > 32] workers; f = max(⌊w/6⌋ + [w mod 6 ≥ 2], 1))."""
    w = n // 64 + int(n % 64 > 32)
    return max(w // 6 + int(w % 6 >= 2), 1)


@dataclass(frozen=True)
class _Layer:
    chip: int
    tiles: np.ndarray          # owner tiles (global)
    comp_tiles: np.ndarray     # compaction tiles (global), B·2·f of them
    comb_tiles: np.ndarray     # combiner tiles (global), B of them
    f: int


def _layout(config: NetworkConfig, placement: Placement, tiles_per_chip: int) -> list[_Layer]:
    """Owner, compaction and combiner tiles of every layer (kept with the placement)."""
    key = ("layout", config.layers, config.batch, tiles_per_chip)
    if key not in placement.memo:
        placement.memo[key] = _make_layout(config, placement, tiles_per_chip)
    return placement.memo[key]


def _make_layout(config: NetworkConfig, placement: Placement, tiles_per_chip: int) -> list[_Layer]:
    B = config.batch
    out = []
    chip_layers: dict[int, list[int]] = {}
    for l, (tiles, _) in enumerate(placement.groupings):
        first, last = int(tiles[0]) // tiles_per_chip, int(tiles[-1]) // tiles_per_chip
        if first != last:
            chips = np.unique(tiles // tiles_per_chip)
            raise MappingError(f"layer {l + 1} spans chips {chips.tolist()}: the sparse op needs each "
                               "layer on one chip; use a placement that keeps layers whole")
        chip_layers.setdefault(first, []).append(l)
    for l, (tiles, _) in enumerate(placement.groupings):
        chip = int(tiles[0]) // tiles_per_chip
        mine = chip_layers[chip]
        spreads = tuple(compaction_spread(config.layers[k + 1]) for k in mine)
        comp, comb = _compaction_tiles(chip, spreads, B, tiles_per_chip)[mine.index(l)]
        out.append(_Layer(chip, tiles, comp, comb, spreads[mine.index(l)]))
    return out


@lru_cache(maxsize=4096)
def _compaction_tiles(chip: int, spreads: tuple, B: int, tiles_per_chip: int) -> list:
    """Per layer of a chip (compaction spreads ``f`` in order): its compaction tiles (B·2·f) and
    combiner tiles (B), spread evenly over the chip (§3.3). Read-only arrays (cached)."""
    counts = [B * 2 * f for f in spreads]
    total = sum(counts)
    out, first = [], 0
    for f, n in zip(spreads, counts):
        slots = (np.arange(first, first + n) * tiles_per_chip) // max(total, tiles_per_chip)
        comp = (chip * tiles_per_chip + (slots % tiles_per_chip)).astype(np.int64)
        comb = comp[::2 * f][:B].copy()
        comp.flags.writeable = comb.flags.writeable = False
        out.append((comp, comb))
        first += n
    return out


def _nbytes(terms: dict) -> int:
    """Bytes of a layer's terms (its arrays; the chip reductions in ``memo`` are small)."""
    return sum(v.nbytes for v in terms.values() if isinstance(v, np.ndarray))


def _row_views(arr: np.ndarray, T: int, L: int) -> dict:
    """Views of the step's rows in ``arr`` ([S, ...]) by row kind: ``("F", k)`` forward row k of
    every time step (rows 5t + k), ``("B", k)`` backward row k indexed by time step (the backward
    pass runs t = T−1 … 0: rows s0 + RB·(T−1−t) + k), and the single rows ``"loss"``, ``"dwr"``,
    ``"opt"``, ``"host"``. Writing through a view writes ``arr``."""
    RF, RB = 5, 4 + L
    S, s0 = RF * T + 1 + RB * T + 3, RF * T + 1
    fwd = arr[:RF * T].reshape((T, RF) + arr.shape[1:])
    bwd = arr[s0:s0 + RB * T].reshape((T, RB) + arr.shape[1:])[::-1]
    views = {("F", k): fwd[:, k] for k in range(RF)}
    views.update({("B", k): bwd[:, k] for k in range(RB)})
    views.update({"loss": arr[RF * T], "dwr": arr[S - 3], "opt": arr[S - 2], "host": arr[S - 1]})
    return views


def _supersteps(T: int, L: int) -> int:
    return 5 * T + 1 + (4 + L) * T + 3


class _DenseRows:
    """The program's [S, tiles] arrays, written through per-kind row views (:func:`_row_views`)."""

    def __init__(self, T: int, L: int, C: int, TPC: int, active: np.ndarray):
        S = _supersteps(T, L)
        self.C, self.TPC, self.active = C, TPC, active
        self.arrays = {a: np.zeros((S, C * TPC), np.float32) for a in ("compute", "in", "out")}
        self.views = {(a, kind): v for a, arr in self.arrays.items() for kind, v in _row_views(arr, T, L).items()}
        self.acc: dict = {}
        self.uniq: dict = {}

    @staticmethod
    def _cols(tiles):
        """A slice for a run of consecutive tiles (cheap views), else the index array."""
        if tiles.size and tiles[-1] - tiles[0] + 1 == tiles.size:
            return slice(int(tiles[0]), int(tiles[-1]) + 1)
        return tiles

    def owner(self, tiles, d, table):
        """Add the layer terms ``d[name]`` ([T, n] or [n], on the layer's ``tiles``) to the rows
        of ``table`` ``((array, row kind, name), ...)``."""
        for a, kind, name in table:
            self.local(a, kind, tiles, d[name])

    def local(self, a, kind, tiles, values):
        """Add ``values`` ([T, n] or [n]) to the distinct ``tiles`` of one chip."""
        v = self.views[a, kind]
        c = self._cols(tiles)
        if v.ndim == 2:
            v[:, c] += values
        else:
            v[c] += values

    def chip(self, a, kind, c, values, masked=False):
        """Add ``values`` ([T] or scalar) to every tile of chip ``c`` (not tile 0 of chip 0 if
        ``masked``); collected and applied once per row kind."""
        v = self.views[a, kind]
        k = (a, kind, masked)
        if k not in self.acc:
            self.acc[k] = (v, np.zeros((v.shape[0] if v.ndim == 2 else 1, self.C)))
        self.acc[k][1][:, c] += values

    def spread(self, a, kind, tiles, values):
        """Add ``values`` ([T] or scalar) to ``tiles``, once per occurrence (tiles may repeat)."""
        key = id(tiles)
        if key not in self.uniq:
            u, cnt = np.unique(tiles, return_counts=True)
            self.uniq[key] = (tiles, self._cols(u), cnt.astype(np.float64))    # holding tiles keeps id unique
        _, u, cnt = self.uniq[key]
        v = self.views[a, kind]
        val = np.asarray(values, np.float64)
        if v.ndim == 2:
            v[:, u] += (val[:, None] if val.ndim else val) * cnt[None, :]
        else:
            v[u] += val * cnt

    def overhead(self, kind, cycles):
        """``cycles`` of compute on every tile in the op's graph (all but tile 0 of chip 0)."""
        self.views["compute", kind][...] += self.active * cycles

    def finish(self):
        TPC = self.TPC
        for (a, kind, masked), (v, acc) in self.acc.items():
            for c in np.flatnonzero(acc.any(axis=0)):
                cols = slice(c * TPC, (c + 1) * TPC)
                add = acc[:, c][:, None] if v.ndim == 2 else acc[0, c]
                v[..., cols] += add * self.active[cols] if masked else add
        return self.arrays


@lru_cache(maxsize=16)
def _row_index(T: int, L: int):
    """The row kinds in a fixed order, their positions, and the rows they cover: per-step kinds
    ``[Kp, T]`` (row of every time step) and single kinds ``[Ks]`` (:func:`_row_views` of the
    row numbers themselves)."""
    views = _row_views(np.arange(_supersteps(T, L)), T, L)
    per = [k for k in views if isinstance(k, tuple)]
    single = [k for k in views if not isinstance(k, tuple)]
    kinds = per + single
    return ({k: i for i, k in enumerate(kinds)}, len(per),
            np.stack([views[k] for k in per]), np.array([int(views[k]) for k in single]))


_ARRAYS = {"compute": 0, "in": 1, "out": 2}


class _ChipRows:
    """The same rows reduced to chips without the [S, tiles] arrays: per row kind and chip the
    maximum over the chip's tiles of (chip-wide terms + per-tile terms), which is all the engine
    takes from a row on an all-to-all fabric (slowest tile's compute; busiest port in and out).
    Per-tile terms of one row kind that may overlap on a tile (spread terms) are summed on their
    tiles first; owner-tile terms of different layers never overlap (a tile holds one layer).

    Every row kind of every array is one slot of ``[3 · kinds, T, C]`` accumulators (a single
    row uses time step 0), so the reduction is a few whole-array operations."""

    def __init__(self, T: int, L: int, C: int, TPC: int, memo: dict | None = None):
        self.T, self.L, self.C, self.TPC = T, L, C, TPC
        self.memo = {} if memo is None else memo      # tile sets of spread terms -> (tiles, counts)
        self.kind_of, self.n_per, self.per_rows, self.single_rows = _row_index(T, L)
        K = len(self.kind_of)
        self.K = K
        shape = (3 * K, T, C)
        self.uu = np.zeros(shape)      # chip-wide, every tile
        self.um = np.zeros(shape)      # chip-wide, not tile 0 of chip 0
        self.vmax = np.zeros(shape)    # owner-tile terms: max over the chip's tiles but global tile 0
        self.v0 = np.zeros((3 * K, T))  # owner-tile terms on global tile 0
        self.parts: dict = {}          # (slot, chip) -> [(tiles, values)] spread terms

    def _slot(self, a, kind):
        return _ARRAYS[a] * self.K + self.kind_of[kind]

    def owner(self, tiles, d, table):
        """As :meth:`_DenseRows.owner`: per row of ``table`` the maximum over the tiles (but
        global tile 0) and the value on tile 0, kept in ``d["memo"]`` (they do not depend on
        where the tiles are, only on whether tile 0 is one of them)."""
        t0 = int(tiles[0])
        key = (table, t0 == 0)
        hit = d["memo"].get(key)
        if hit is None:
            slots = np.array([self._slot(a, kind) for a, kind, _ in table])
            M = np.zeros((len(table), self.T))
            Z = np.zeros((len(table), self.T)) if t0 == 0 else None
            for j, (_, _, name) in enumerate(table):
                m, z = self._owner_max(tiles, d[name])
                M[j, :m.size] = m
                if z is not None:
                    Z[j, :z.size] = z
            hit = d["memo"][key] = (slots, M, Z)
        slots, M, Z = hit
        c = t0 // self.TPC
        self.vmax[slots, :, c] = np.maximum(self.vmax[slots, :, c], M)   # one layer per tile: max
        if Z is not None:
            self.v0[slots] += Z

    def local(self, a, kind, tiles, values):
        m, z = self._owner_max(tiles, values)
        i = self._slot(a, kind)
        col = self.vmax[i, :m.size, int(tiles[0]) // self.TPC]
        np.maximum(col, m, out=col)                   # owner tiles of different layers never overlap
        if z is not None:
            self.v0[i, :z.size] += z

    def chip(self, a, kind, c, values, masked=False):
        (self.um if masked else self.uu)[self._slot(a, kind), :self.T if isinstance(kind, tuple) else 1, c] += values

    def spread(self, a, kind, tiles, values):
        self.parts.setdefault((self._slot(a, kind), int(tiles[0]) // self.TPC), []).append((tiles, values))

    def overhead(self, kind, cycles):
        self.um[self._slot("compute", kind)] += cycles

    @staticmethod
    def _owner_max(tiles, values):
        """(max over the tiles but global tile 0 [T'], value on tile 0 [T'] or None)."""
        has0 = bool(tiles[0] == 0)
        v = np.asarray(values, np.float64).reshape(-1, tiles.size)
        rest = v[:, 1:] if has0 else v
        return rest.max(axis=1) if rest.shape[1] else np.zeros(v.shape[0]), v[:, 0] if has0 else None

    def _spread_max(self):
        """Fold the spread terms into ``vmax`` / ``v0``: per tile, the sum over parts of value ×
        multiplicity (tiles may repeat and overlap) = V @ M, with M kept per tile sets."""
        T = self.T
        for (i, c), ps in self.parts.items():
            key = tuple(p[0].tobytes() for p in ps)
            hit = self.memo.get(key)
            if hit is None:
                u, inv = group_tiles(np.concatenate([p[0] for p in ps]))
                M = np.zeros((len(ps), u.size))
                part = np.repeat(np.arange(len(ps)), [p[0].size for p in ps])
                np.add.at(M, (part, inv), 1.0)
                if len(self.memo) > 4096:
                    self.memo.clear()
                hit = self.memo[key] = (u, M)
            u, M = hit
            V = np.empty((T, len(ps)))
            for j, p in enumerate(ps):
                V[:, j] = p[1]
            tot = V @ M
            if u[0] == 0:
                self.v0[i] += tot[:, 0]
                tot = tot[:, 1:]
            if tot.shape[1]:
                col = self.vmax[i, :, c]
                np.maximum(col, tot.max(axis=1), out=col)

    def finish(self):
        self._spread_max()
        out = self.uu + self.um + self.vmax
        first = self.uu[:, :, 0] + self.v0
        out[:, :, 0] = np.maximum(out[:, :, 0], first) if self.TPC > 1 else first
        S, K, P = _supersteps(self.T, self.L), self.K, self.n_per
        arrays = {}
        for a, j in _ARRAYS.items():
            arr = arrays[a] = np.zeros((S, self.C))
            blk = out[j * K:(j + 1) * K]
            arr[self.per_rows] = blk[:P]
            arr[self.single_rows] = blk[P:, 0]
        return arrays


def _check_step_args(placement, machine, steps_per_execution):
    require(isinstance(steps_per_execution, (int, np.integer)) and steps_per_execution >= 1,
            "steps_per_execution", steps_per_execution, "must be an integer >= 1")
    if placement.n_tiles != machine.total_tiles:
        raise MappingError(f"placement n_tiles = {placement.n_tiles}: machine {machine.name} has "
                           f"{machine.total_tiles} tiles; build the placement for this machine")


def build_step_program(config: NetworkConfig, placement: Placement, counters: WorkCounters, machine,
                       costs: CostModel | None = None, name: str = "snn training step",
                       steps_per_execution: int = STEPS_PER_EXECUTION, cache: dict | None = None) -> Program:
    """The BSP program of one training step, from the step's per-step counters.

    ``counters`` must hold per-step arrays (``train_step(..., per_step_counters=True)`` or
    ``count_work(activity, placement, per_step=True)``). ``steps_per_execution``: training steps
    per device execution, over which the host variable sync is amortised. ``cache`` (a dict the
    caller keeps, e.g. across a mapping search) reuses each layer's position-independent terms
    while its counters are the same objects.

    Per-layer work is computed on the layer's own tiles and written straight into the rows of
    the program's arrays (row views), so a re-timing costs a few passes over ``[S, tiles]``.
    """
    _check_step_args(placement, machine, steps_per_execution)
    active = np.ones(machine.total_tiles)
    active[0] = 0.0                                   # tile 0 of chip 0 is outside the op's graph
    rows = _DenseRows(config.timesteps, config.n_layers, machine.chips, machine.tiles_per_chip, active)
    meta = _emit(config, placement, counters, machine, costs or default_costs(), steps_per_execution, cache, rows)
    arr = rows.finish()
    return Program.from_arrays(chips=machine.chips, tiles_per_chip=machine.tiles_per_chip,
                               compute_cycles=arr["compute"], labels=PHASE_LABELS, label_id=meta["label_id"],
                               sync_scope=meta["scope"], bytes_in=arr["in"], bytes_out=arr["out"],
                               flows=meta["flows"], host=meta["host"], name=name,
                               sync_extra=meta["sync_extra"], exchange_extra=meta["exchange_extra"])


def predict_step_s(config: NetworkConfig, placement: Placement, counters: WorkCounters, machine,
                   costs: CostModel | None = None, steps_per_execution: int = STEPS_PER_EXECUTION,
                   cache: dict | None = None) -> float:
    """Seconds of the step :func:`build_step_program` describes, without building it: every row
    is reduced to chips as it is emitted (:class:`_ChipRows`) and timed by
    :func:`tilesim.engine.makespan_s` — the same number as ``simulate(build_step_program(...))``
    at a fraction of the cost (the mapping search's objective). On a mesh fabric, whose exchange
    time depends on which tiles talk, the full program is built and simulated."""
    from tilesim.engine import makespan_s, simulate
    from tilesim.fabric import make_fabric

    if machine.fabric.kind == "mesh":
        return simulate(build_step_program(config, placement, counters, machine, costs,
                                           steps_per_execution=steps_per_execution, cache=cache), machine).total_s
    _check_step_args(placement, machine, steps_per_execution)
    C = machine.chips
    memo = None if cache is None else cache.setdefault(("chip rows",), {})
    rows = _ChipRows(config.timesteps, config.n_layers, C, machine.tiles_per_chip, memo)
    meta = _emit(config, placement, counters, machine, costs or default_costs(), steps_per_execution, cache, rows)
    arr = rows.finish()
    S = arr["compute"].shape[0]
    ex, _ = make_fabric(machine).exchange_cycles(arr["in"].reshape(S, C, 1), arr["out"].reshape(S, C, 1))
    return makespan_s(arr["compute"], ex, machine, meta["scope"], sync_extra=meta["sync_extra"],
                      exchange_extra=meta["exchange_extra"],
                      flows=meta["flows"], host=meta["host"])


def _emit(config, placement, counters, machine, costs, steps_per_execution, cache, rows) -> dict:
    """Write every term of the step into ``rows`` (a :class:`_DenseRows` or :class:`_ChipRows`);
    return the rest of the program: labels, sync scopes, folded supersteps, flows, host infeed."""
    C, TPC = machine.chips, machine.tiles_per_chip
    T, B = config.timesteps, config.batch
    L = config.n_layers
    nmax = config.n_max
    lay = _layout(config, placement, TPC)
    rec = config.recurrent if isinstance(config.recurrent, tuple) else (bool(config.recurrent),) * L
    workers = machine.chip.workers_per_tile
    sup = machine.chip.supervisor_overhead_cycles
    cs_cycles = costs.coef("compute_set_cycles")
    sync_c = float(machine.group_sync_cycles(C))
    exch_c = float(machine.chip.exchange_fixed_cycles)
    with_input_grad = {p.layer for p in counters.phases if p.phase == "input_grad"}
    in_graph = [l in with_input_grad for l in range(L)]
    any_in = any(in_graph)

    def folded(n_cs, n_copy=0):
        """Supersteps folded into a row beyond the row itself (their syncs and exchange set-ups
        are booked as sync / exchange; their compute sets as compute, :meth:`overhead`)."""
        return max(n_cs + n_copy - 1, 0)

    def loc(phase, layer, cname):
        """float64 [T, n_local]: a per-step counter on the layer's own tiles (= ``_Layer.tiles``)."""
        pc = counters.get(phase, layer)
        if pc.local_steps is None:
            raise ValueError("counters need per-step arrays: use per_step_counters=True")
        return pc.local_steps[pc.row(cname)].astype(np.float64)

    def cycles(work, vertices):
        return barrel_tile_cycles(work, vertices, workers, sup)

    vc = costs.coef("vertex_calls")
    # a broadcast reaches both tiles of a supertile at once: 8 B/cycle per pair (§3.2)
    pair = float(machine.chip.tiles_per_supertile)
    RF, RB = 5, 4 + L                   # rows per forward / backward time step (:func:`_row_views`)
    S, s0 = _supersteps(T, L), RF * T + 1
    F = [("F", k) for k in range(RF)]
    Bk = [("B", k) for k in range(RB)]

    def layer_terms(l, ly):
        """Everything of layer ``l`` that does not depend on where its tiles are: per-tile
        [T, n_local] arrays and per-step [T] vectors (cached across calls by the caller)."""
        d = {}
        recv = loc("state_update", l, "bytes_received")
        d["f0_in"] = recv / pair
        d["f0_out"] = (recv[:, 0] if ly.tiles.size else np.zeros(T)) / TPC
        vert = loc("state_update", l, "vertices")
        work = costs.worker_cycles({
            "synaptic_adds": loc("state_update", l, "synaptic_adds"),
            "neurons_updated": loc("state_update", l, "neurons_updated")}) + vc * vert
        flags = loc("spike_detect", l, "neurons_scanned")
        d["f1"] = cycles(work, vert) + cycles(costs.coef("neurons_scanned") * flags + vc * flags, flags)
        d["f1_out"] = loc("spike_detect", l, "bytes_sent")
        # combine: merge the entries actually kept (real + gradient-only) per sample
        kept = loc("spike_detect", l, "entries_kept").sum(axis=1)              # [T] over tiles
        d["f3"] = cycles(costs.coef("list_entries_merged") * (kept / B + 2 * ly.f) + vc, 1)
        # replicated lists: own ids + counts + g (state grad), the input list (weight grad)
        own = loc("state_grad", l, "bytes_received")
        inp = loc("weight_grad", l, "bytes_received")
        d["rep_in"] = (own + inp) / pair
        d["one_in"] = inp[:, 0] if ly.tiles.size else np.zeros(T)
        d["one_own"] = own[:, 0] if ly.tiles.size else np.zeros(T)
        vert = loc("state_grad", l, "vertices")
        work = costs.worker_cycles({
            "slots_scanned": loc("state_grad", l, "slots_scanned"),
            "slots_applied": loc("state_grad", l, "slots_applied"),
            "neurons_updated": loc("state_grad", l, "neurons_updated")}) + vc * vert
        d["b1"] = cycles(work, vert)
        wv = loc("weight_grad", l, "vertices")
        wg = cycles(costs.worker_cycles({"grad_adds": loc("weight_grad", l, "grad_adds")}) + vc * wv, wv)
        if in_graph[l]:
            iv = loc("input_grad", l, "vertices")
            wg += cycles(costs.worker_cycles({"macs": loc("input_grad", l, "macs")}) + vc * iv, iv)
            partials = loc("input_grad", l, "partial_bytes")
            d["b2_out"] = partials
            d["b2_in"] = partials.sum(axis=1) / TPC
            adds = loc("input_grad", l, "reduction_adds").sum(axis=1) / TPC
            d["b3"] = cycles(costs.coef("reduction_adds") * adds + vc * 6, 6)
        d["b2"] = wg
        # once per step: dW reduction (zeroing, 6 copies -> 1) and the optimizer on the weights per tile
        upd = counters.get("optimizer", l).local_totals[0].astype(np.float64)
        nw = np.where(upd > 0, WORKERS_PER_TILE, 0)
        d["weights"] = upd.sum()
        d["dwr"] = cycles(costs.coef("dw_reduce_adds") * (WORKERS_PER_TILE - 1) * upd / WORKERS_PER_TILE
                          + costs.coef("dw_zero_writes") * WORKERS_PER_TILE * upd / WORKERS_PER_TILE, nw)
        key = "adam_updates" if config.optimizer == "adam" else "sgd_updates"
        d["opt"] = cycles(costs.coef(key) * upd / WORKERS_PER_TILE, nw)
        # compaction: 6 chunk vertices per tile scan their flags, then one vertex merges them
        chunk = -(-config.layers[l + 1] // ly.f)           # neurons per compaction tile
        tile_list = min(nmax[l], chunk)
        comp_work = costs.coef("flags_scanned") * chunk + vc * 6
        comb1 = costs.coef("list_entries_merged") * tile_list + vc
        d["chunk"], d["tile_list"] = chunk, tile_list
        d["f2"] = float(cycles(comp_work, 6) + cycles(comb1, 1))
        d["memo"] = {}            # chip reductions of these arrays (:class:`_ChipRows`)
        return d

    def terms_of(l, ly):
        if cache is None:
            return layer_terms(l, ly)
        # keyed by the counters' identity: a search returning to a layer's earlier grouping gets
        # the same counter objects back from count_work's cache, and with them these terms
        ref = counters.get("state_update", l).local_steps
        mine = lru_in(cache, ("build", T, B, TPC, pair, workers, sup, config.optimizer, id(costs)),
                      CACHE_BYTES, lambda hit: _nbytes(hit[2]))
        hit = mine.get((l, id(ref)))
        if hit is not None and hit[0] is ref and hit[1] is costs:
            return hit[2]
        d = layer_terms(l, ly)
        mine[l, id(ref)] = (ref, costs, d)          # holding ref and costs keeps their ids unique
        return d

    b1, b2, b3 = Bk[1 + L], Bk[2 + L], Bk[3 + L]
    terms = [terms_of(l, ly) for l, ly in enumerate(lay)]
    # ---- each layer on its own tiles: (array, row, term) -----------------------------------------
    for l, ly in enumerate(lay):
        rows.owner(ly.tiles, terms[l], (
            ("in", F[0], "f0_in"),            # input lists broadcast to every owner tile
            ("compute", F[1], "f1"),          # state update + spike detection
            ("out", F[1], "f1_out"),          # threshold flags to the compaction tiles
            ("in", Bk[1 + l], "rep_in"),      # replicated lists: own ids + g, the layer's input
            ("compute", b1, "b1"),            # state gradient
            ("compute", b2, "b2"),            # weight (+ input) gradient
            ("compute", "dwr", "dwr"),        # dW reduction over the worker copies
            ("compute", "opt", "opt"),        # optimizer
        ) + ((("out", b2, "b2_out"),) if in_graph[l] else ()))   # input-gradient partials out

    # ---- forward ------------------------------------------------------------------------------
    flows_fwd: list[tuple] = []          # (src chip, dst chip, bytes)
    for l, ly in enumerate(lay):
        d = terms[l]
        # the senders of the input lists pay one copy, spread over the chip
        rows.chip("out", F[0], ly.chip, d["f0_out"])
        chunk, tile_list = d["chunk"], d["tile_list"]
        rows.spread("in", F[1], ly.comp_tiles, 4.0 * chunk)        # one uint32 per neuron and threshold
        rows.spread("compute", F[2], ly.comp_tiles, d["f2"])
        rows.spread("out", F[2], ly.comp_tiles, 4.0 * (tile_list + 1))
        rows.spread("in", F[2], ly.comb_tiles, 4.0 * (tile_list + 1) * 2 * ly.f)
        rows.spread("compute", F[3], ly.comb_tiles, d["f3"])
        list_bytes = 4.0 * (nmax[l] + 2)
        rows.spread("out", F[3], ly.comb_tiles, list_bytes)
        # the list lands in the sequence slice (spread over the chip)
        rows.chip("in", F[3], ly.chip, B * list_bytes / TPC)
        if l + 1 < L and lay[l + 1].chip != ly.chip:
            flows_fwd.append((ly.chip, lay[l + 1].chip, B * list_bytes))
    rows_f = [(3, 2 * (L - 1)), (2, 0), (2 + L, 0), (1, 0), (3 * L, 0)]
    for kind, (n_cs, _) in zip(F, rows_f):
        rows.overhead(kind, n_cs * cs_cycles)

    # ---- loss ---------------------------------------------------------------------------------
    out = lay[-1]
    rows.overhead("loss", 3 * cs_cycles)
    n_out = out.tiles.size
    rows.local("compute", "loss", out.tiles,
               np.full(n_out, float(cycles(costs.coef("loss_entries") * B * nmax[-1] / n_out + vc, 1))))
    rows.local("in", "loss", out.tiles, np.full(n_out, B * (8.0 * nmax[-1] + 8)))

    # ---- backward: rows slice, replicate × L, state grad, weight+input grad, reduce -------------
    flows_rep: list[tuple] = []          # (layer, src chip, dst chip, bytes)
    flows_b3: list[tuple] = []
    for l, ly in enumerate(lay):
        d = terms[l]
        src = lay[l - 1] if l > 0 else ly
        rows.chip("out", Bk[1 + l], ly.chip, d["one_own"] / TPC)
        rows.chip("out", Bk[1 + l], src.chip, d["one_in"] / TPC)
        if l > 0 and src.chip != ly.chip:
            flows_rep.append((l, src.chip, ly.chip, float(d["one_in"][0])))
        if in_graph[l]:
            # stage-1 reduction spread over every tile of the layer's chip
            rows.chip("in", b2, ly.chip, d["b2_in"])
            rows.chip("compute", b3, ly.chip, d["b3"])
            # the reduced slot gradients go to the layer below (and, if recurrent, to this layer)
            for k in ([l - 1] if l > 0 else []) + ([l] if rec[l] else []):
                g_bytes = B * (8.0 * nmax[k] + 8)
                rows.chip("out", b3, ly.chip, g_bytes / TPC)
                rows.chip("in", b3, lay[k].chip, g_bytes / TPC)
                if lay[k].chip != ly.chip:
                    flows_b3.append((ly.chip, lay[k].chip, g_bytes))
    rows_b = [(5 * L + 3, 0)] + [(0, 5)] * L + [(1 + L, L), (1 + int(any_in), 0), (3 if any_in else 0, 0)]
    for kind, (n_cs, _) in zip(Bk, rows_b):
        rows.overhead(kind, n_cs * cs_cycles)

    # ---- once per step --------------------------------------------------------------------------
    rows.overhead("dwr", (2 + L) * cs_cycles)
    rows.overhead("opt", 2 * L * cs_cycles)
    weights_on_chip = np.zeros(C)
    for l, ly in enumerate(lay):
        weights_on_chip[ly.chip] += terms[l]["weights"]
    slots = 2 if config.optimizer == "adam" else 0
    sync_bytes = 4.0 * (1 + slots) * weights_on_chip / steps_per_execution          # per chip
    for c in range(C):
        rows.chip("compute", "host", c, costs.coef("host_sync_cycles_per_byte") * sync_bytes[c], masked=True)

    label_id = np.concatenate([np.tile([0, 1, 2, 3, 4], T), [5], np.tile([6] + [7] * L + [8, 9, 10], T),
                               [11, 12, 13]]).astype(np.int32)
    n_folded = np.concatenate([np.tile([folded(*r) for r in rows_f], T), [folded(3)],
                               np.tile([folded(*r) for r in rows_b], T), [folded(2 + L), folded(2 * L), 0]])
    flows = []
    for t in range(T):
        flows += [(RF * t + 3, a, b, nb) for a, b, nb in flows_fwd]
        s = s0 + RB * t                         # backward iteration for time step T-1-t
        flows += [(s + 1 + l, a, b, nb) for l, a, b, nb in flows_rep]
        flows += [(s + RB - 1, a, b, nb) for a, b, nb in flows_b3]
    f_arr = tuple(np.asarray(x) for x in zip(*flows)) if flows else None
    infeed = T * B * 4.0 * (config.input_cap + 1) + 4.0 * B
    host = (np.array([0], np.int32), np.array([lay[0].chip], np.int32), np.array([infeed]))
    return {"label_id": label_id, "scope": np.full(S, 0 if C > 1 else -1, np.int32), "flows": f_arr, "host": host,
            "sync_extra": n_folded * sync_c, "exchange_extra": n_folded * exch_c}


# code and bookkeeping bytes per tile (ipu-hardware.md §3.3): a vertex's state holds ~3 SPAN
# edges (8 B each) + 4 B; each codelet's machine code; control code per compute set the tile takes
# part in; 4 B per exchange instruction; worker + supervisor stacks.
VERTEX_STATE_BYTES = 28          # [S]-based: 3 x SPAN (8 B) + 4 B scalar
CODELET_BYTES = 600              # [U] order of a compiled C++ codelet; not published
CONTROL_BYTES_PER_COMPUTE_SET = 32   # [U] no public constant (§3.3); to be calibrated
EXCHANGE_CODE_BYTES_PER_INSTR = 4    # [S] DynamicSlice planner (§3.3)
STACK_BYTES = 6 * 512 + 1024     # [U] worker stacks + supervisor stack


def _owner_memory(config: NetworkConfig, placement: Placement, l: int, n_max_in: int, recurrent: bool) -> list:
    """The entries of layer ``l`` on its own tiles, [(category, bytes [n_local], label)]: its
    variables (§3.2), receive buffers, vertex state and code. They depend on how many neurons
    each tile owns, not on where the tiles are."""
    T, B = config.timesteps, config.batch
    _, local = placement.groupings[l]
    n_local = int(local.max()) + 1 if local.size else 0
    roles = {"weights": "variables:weights", "dw_worker_copies": "variables:gradients",
             "dw_final": "variables:gradients", "optimizer_state": "variables:optimizer",
             "state_sequence": "variables:state", "state": "variables:state",
             "input_grad_partials": "variables:activations"}
    mem = layer_memory(config.layers[l], config.layers[l + 1], T, B, n_max_in, local, n_local,
                       config.optimizer, recurrent)
    out = [(roles[key], arr, f"layer {l + 1} {key.replace('_', ' ')}") for key, arr in mem.items() if arr.any()]
    n_own = np.bincount(local, minlength=n_local).astype(np.int64)
    vertices = 3 * B + WORKERS_PER_TILE + B + B * n_own       # update, grads, flags per (neuron, sample)
    const = np.ones(n_local)
    out += [("exchange_buffers", B * 4.0 * ((n_max_in + 1) + (n_max_in + 2) + 2 * config.n_max[l] + 2) * const,
             f"layer {l + 1} receive buffers (input list, replicated inputs, slot ids + g)"),
            ("vertex_state", VERTEX_STATE_BYTES * vertices, f"layer {l + 1} vertex state"),
            ("vertex_code", CODELET_BYTES * 6 * const, f"layer {l + 1} codelets"),
            ("control_code", CONTROL_BYTES_PER_COMPUTE_SET * 8 * const, f"layer {l + 1} compute-set control"),
            ("exchange_code", EXCHANGE_CODE_BYTES_PER_INSTR * (B * 6 + 16) * const, f"layer {l + 1} exchange code")]
    return EntryGroup(out)


def snn_memory(config: NetworkConfig, placement: Placement, machine, ledger: MemoryLedger | None = None,
               cache: dict | None = None) -> MemoryLedger:
    """Per-tile SRAM of the training step: every tensor of §3.2 plus buffers, vertex state and code.
    ``ledger``: a :class:`MemoryLedger` (default) or a :class:`tilesim.memory.MemoryTotals` for a
    search; ``cache`` (a dict the caller keeps) reuses the owner-tile entries of layers whose
    neuron grouping is unchanged."""
    led = ledger or MemoryLedger(machine, remedy=(
        "lower --neurons-per-tile (the 6 per-worker dW copies grow with fan-in x neurons per tile), "
        "reduce --batch or --timesteps (the state history is T x B x n), use SGD instead of Adam, "
        "or spread the network over more chips (--chips)"))
    TPC = machine.tiles_per_chip
    T, B = config.timesteps, config.batch
    nmax = config.n_max
    lay = _layout(config, placement, TPC)
    rec = config.recurrent if isinstance(config.recurrent, tuple) else (bool(config.recurrent),) * config.n_layers
    for l, ly in enumerate(lay):
        n_max_in = config.input_cap if l == 0 else nmax[l - 1]
        if cache is None:
            entries = _owner_memory(config, placement, l, n_max_in, bool(rec[l]))
        else:
            mine = cache.setdefault(("memory",), {})
            key = (l, placement.groupings[l][1].tobytes(), config)
            entries = mine.get(key)
            if entries is None:
                if len(mine) > 64 * config.n_layers:
                    mine.clear()
                entries = mine[key] = _owner_memory(config, placement, l, n_max_in, bool(rec[l]))
        led.add_group(entries, ly.tiles)
        # spike id/count sequences [T, B, N_max] + [T, B, 2], spread over the layer's chip (tile 0 of chip 0 free)
        chip_tiles = slice(ly.chip * TPC + (1 if ly.chip == 0 else 0), (ly.chip + 1) * TPC)
        led.add("variables:spikes", 4.0 * T * B * (nmax[l] + 2) / (chip_tiles.stop - chip_tiles.start), chip_tiles,
                f"layer {l + 1} spike sequence")
        led.add("exchange_buffers", 4.0 * (2 * -(-config.layers[l + 1] // ly.f) + nmax[l] + 2), ly.comp_tiles,
                f"layer {l + 1} compaction flags and chunk list")
    # the data input sequence [T, B, input_cap] ids + counts, spread over chip 0
    led.add("variables:inputs", 4.0 * T * B * (config.input_cap + 1) / (TPC - 1), slice(1, TPC), "input spike sequence")
    used = np.zeros(machine.total_tiles, bool)
    for ly in lay:
        used[ly.tiles] = True
        used[ly.comp_tiles] = True
    led.add("stack", STACK_BYTES, np.flatnonzero(used), "worker and supervisor stacks")
    return led
