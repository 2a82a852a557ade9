"""Per-tile work counters of sparse BPTT, and recounting them from recorded activity.

Every kernel call of a training step does work on the tiles that own the layer's neurons.
The counters say how much, per tile, per phase and per time step, in the units a cost model
turns into cycles (see ``tilesim.machine.costs``). Phases per neuron layer ``l`` (snn-on-ipu.md §3.3,
§3.4, §7), with ``n`` = neurons the tile owns, ``B`` = batch, ``c0``/``c1`` = kept real /
kept total counts of a list, ``n_max`` / ``n_max_in`` = capacity of the layer's own / input
list; "(+rec)" terms exist only for a layer with recurrent weights (its own list of t−1 is a
second input):

``state_update`` (forward, every t)
    ``synaptic_adds`` = Σ_b c0_in(t,b)·n (+rec Σ_b c0_own(t−1,b)·n) — one vertex per
    (tile, sample) sums ``c0`` weight rows of ``n`` floats;
    ``neurons_updated`` = B·n;  ``vertices`` = B;
    ``bytes_received`` = B·(n_max_in+1)·4 (+rec B·(n_max+1)·4) — the broadcast input list.
``spike_detect`` (forward, every t)
    ``neurons_scanned`` = B·n;  ``spikes_kept`` / ``entries_kept`` = list entries (i < c0 /
    i < c1) owned by the tile;  ``bytes_sent`` = 8·n·B — the dense two-flag words that leave the
    owner tile for the cross-tile compaction (the compaction tiles are the timing layer's).
``state_grad`` (backward, every t)
    ``slots_scanned`` = Σ_b c1_own(t,b) — each tile's vertex scans its sample's whole list;
    ``slots_applied`` = slots owned by the tile; ``neurons_updated`` = B·n (δv·α and the
    scaling into δI); ``vertices`` = B;  ``bytes_received`` = B·(8·n_max + 8) (ids, g, counts).
``weight_grad`` (backward, every t)
    ``grad_adds`` = Σ_b c0_in(t,b)·n (+rec Σ_b c0_own(t−1,b)·n);  ``vertices`` = 6 (one per
    hardware worker, each with a private dW copy — memory only, see :func:`layer_memory`);
    ``bytes_received`` = B·(n_max_in+2)·4 (+rec B·(n_max+2)·4).
``input_grad`` (backward, t ≥ 1; layers ≥ 1 and recurrent layers only)
    ``macs`` = Σ_b c1_in(t,b)·n (+rec Σ_b c1_own(t−1,b)·n) — partial dot products;
    ``partial_bytes`` = 4·B·n_max_in (+rec 4·B·n_max) — the partials sent to the reduction;
    ``reduction_adds`` = Σ_b c1_in(t,b) (+rec) — one add per partial the tile contributes;
    ``vertices`` = B.
``optimizer`` (once per training step; its time axis has length 1)
    ``weights_updated`` = (N_in (+rec N))·n.

Storage (memory-efficient): per phase, on the layer's own tiles only, ``local_totals`` int64
``[K, n_local]`` (summed over steps) and ``step_totals`` int64 ``[K, T]`` (summed over tiles);
the per-step ``local_steps`` int64 ``[K, T, n_local]`` only when asked — :func:`count_work` can always rebuild
it from the
recorded :class:`Activity` without float math.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from tilesim.errors import MissingDataError, require
from tilesim.io import atomic_write_bytes
from tilesim.mapping.core import Mapping, group_tiles
from tilesim.models.snn.kernels.spikes import SpikeList
from tilesim.running.memo import lru_in

PHASES = ("state_update", "spike_detect", "state_grad", "weight_grad", "input_grad", "optimizer")

COUNTER_NAMES = {
    "state_update": ("synaptic_adds", "neurons_updated", "vertices", "bytes_received"),
    "spike_detect": ("neurons_scanned", "spikes_kept", "entries_kept", "bytes_sent"),
    "state_grad": ("slots_scanned", "slots_applied", "neurons_updated", "vertices", "bytes_received"),
    "weight_grad": ("grad_adds", "vertices", "bytes_received"),
    "input_grad": ("macs", "partial_bytes", "reduction_adds", "vertices"),
    "optimizer": ("weights_updated",),
}

WORKERS_PER_TILE = 6
"""The authors' op's weight-gradient vertices per tile: one per IPU worker, each with a private dW copy
(the counters' ``weight_grad`` ``vertices``). The step's timing and SRAM take the copies from the
execution stack and the machine instead (:attr:`tilesim.models.snn.step.traits.TableTraits.dw_copies`)."""


@dataclass(frozen=True)
class PhaseCounters:
    """Counters of one phase of one layer, stored on the tiles the layer occupies only (a
    193-layer network on 16 chips would otherwise hold 23,552-tile vectors per layer).

    Attributes
    ----------
    phase, layer : str, int
    names : tuple of str
        Counter names, the ``K`` rows of the arrays.
    tiles : np.ndarray
        int64 ``[n_local]`` global ids of the layer's tiles (ascending).
    n_tiles : int
        Tiles of the whole system (length of :attr:`tile_totals` rows).
    local_totals : np.ndarray
        int64 ``[K, n_local]``, summed over time steps.
    step_totals : np.ndarray
        int64 ``[K, T]`` (``[K, 1]`` for ``optimizer``), summed over tiles.
    local_steps : np.ndarray or None
        int64 ``[K, T, n_local]`` when per-step vectors were requested.
    source : tuple or None
        What the counts were recounted from, as a content key (:func:`count_work`: the
        activity's digest, per-step or not, the layer, its neuron grouping); equal sources mean
        equal counts, so caches of derived terms key on it. None: not known (a functional run).
    """

    phase: str
    layer: int
    names: tuple
    tiles: np.ndarray
    n_tiles: int
    local_totals: np.ndarray
    step_totals: np.ndarray
    local_steps: np.ndarray | None = None
    source: tuple | None = None

    def row(self, name: str) -> int:
        require(name in self.names, "counter", name, f"phase {self.phase} has {self.names}")
        return self.names.index(name)

    @property
    def tile_totals(self) -> np.ndarray:
        """int64 ``[K, n_tiles]`` summed over time steps (zero off the layer's tiles)."""
        out = np.zeros((len(self.names), self.n_tiles), np.int64)
        out[:, self.tiles] = self.local_totals
        return out

    @property
    def per_step(self) -> np.ndarray | None:
        """int64 ``[K, T, n_tiles]`` (or None when not recorded); prefer :attr:`local_steps`."""
        if self.local_steps is None:
            return None
        K, T, _ = self.local_steps.shape
        out = np.zeros((K, T, self.n_tiles), np.int64)
        out[:, :, self.tiles] = self.local_steps
        return out

    def _need_steps(self) -> None:
        """ConfigError unless this record kept its per-step vectors."""
        require(
            self.local_steps is not None,
            "per_step",
            None,
            "this record kept no per-step vectors",
            "pass per_step=True or use count_work",
        )

    def step_matrix(self, name: str) -> np.ndarray:
        """float64 ``[T, n_tiles]``: per-step values of ``name`` on every tile (needs per-step vectors)."""
        self._need_steps()
        out = np.zeros((self.local_steps.shape[1], self.n_tiles))
        out[:, self.tiles] = self.local_steps[self.row(name)]
        return out

    def tile_vector(self, name: str, t: int | None = None) -> np.ndarray:
        """Per-tile values of ``name`` over all tiles: summed over steps, or of step ``t``
        (needs per-step vectors)."""
        r = self.row(name)
        out = np.zeros(self.n_tiles, np.int64)
        if t is None:
            out[self.tiles] = self.local_totals[r]
            return out
        self._need_steps()
        out[self.tiles] = self.local_steps[r, t]
        return out

    def to_dict(self) -> dict:
        totals = self.tile_totals
        return {
            "phase": self.phase,
            "layer": self.layer,
            "tile_totals": {n: totals[i].tolist() for i, n in enumerate(self.names)},
            "step_totals": {n: self.step_totals[i].tolist() for i, n in enumerate(self.names)},
        }


@dataclass(frozen=True)
class WorkCounters:
    """All phases of one training step: ``phases`` ordered by layer then :data:`PHASES`."""

    n_tiles: int
    timesteps: int
    phases: tuple = field(default_factory=tuple)

    def get(self, phase: str, layer: int) -> PhaseCounters:
        try:
            return self._index[phase, layer]
        except KeyError:
            raise MissingDataError(
                f"counters of phase {phase!r}, layer {layer}: not recorded; the step did not run that phase "
                "on that layer (check the layer index against the network)"
            ) from None

    @cached_property
    def _index(self) -> dict:
        return {(p.phase, p.layer): p for p in reversed(self.phases)}  # the first of duplicates

    def tile_vector(self, phase: str, layer: int, name: str, t: int | None = None) -> np.ndarray:
        """Per-tile ``name`` of ``phase`` of ``layer``: summed over steps, or of step ``t``."""
        return self.get(phase, layer).tile_vector(name, t)

    def tile_total(self, phase: str, name: str) -> np.ndarray:
        """int64 ``[n_tiles]``: ``name`` of ``phase`` summed over layers and steps."""
        out = np.zeros(self.n_tiles, np.int64)
        for p in self.phases:
            if p.phase == phase:
                out[p.tiles] += p.local_totals[p.row(name)]
        return out

    def totals_only(self) -> WorkCounters:
        """The same counters without the per-step vectors (small enough to keep per step)."""
        return WorkCounters(
            self.n_tiles, self.timesteps, tuple(replace(p, local_steps=None, source=None) for p in self.phases)
        )

    def equals(self, other: WorkCounters) -> bool:
        if (self.n_tiles, self.timesteps, len(self.phases)) != (other.n_tiles, other.timesteps, len(other.phases)):
            return False
        for a, b in zip(self.phases, other.phases):
            if (a.phase, a.layer, a.names) != (b.phase, b.layer, b.names):
                return False
            if not (np.array_equal(a.tile_totals, b.tile_totals) and np.array_equal(a.step_totals, b.step_totals)):
                return False
            if a.per_step is not None and b.per_step is not None and not np.array_equal(a.per_step, b.per_step):
                return False
        return True

    def to_dict(self) -> dict:
        return {"n_tiles": self.n_tiles, "timesteps": self.timesteps, "phases": [p.to_dict() for p in self.phases]}


@dataclass(frozen=True)
class Activity:
    """Recorded activity of one training step — enough to recount work under any placement.

    Attributes
    ----------
    layer_sizes : tuple of int
        ``(N0, N1, …, NL)``; ``N0`` = input channels.
    inputs : SpikeList
        The (capped) data input list of layer 0.
    layers : tuple of SpikeList
        Own list of every neuron layer (ids ``[T, B, n_max]`` uint32, counts ``[T, B, 2]``).
    initial : tuple of SpikeList
        Step −1 list of every neuron layer (one step; empty unless fixed activity).
    recurrent : tuple of bool
    """

    layer_sizes: tuple
    inputs: SpikeList
    layers: tuple
    initial: tuple
    recurrent: tuple

    def layer_input(self, l: int) -> SpikeList:
        """Input list of neuron layer ``l`` (delayed by one step for l ≥ 1)."""
        return self.inputs if l == 0 else self.layers[l - 1].shifted(self.initial[l - 1])

    def own_delayed(self, l: int) -> SpikeList:
        """Own list of layer ``l`` delayed by one step (the recurrent input)."""
        return self.layers[l].shifted(self.initial[l])

    @cached_property
    def digest(self) -> str:
        """A content key of the activity: BLAKE2b of its layer sizes, recurrence and every
        list's arrays (computed once per object)."""
        h = hashlib.blake2b(repr((self.layer_sizes, self.recurrent)).encode(), digest_size=16)
        for lst in (self.inputs, *self.layers, *self.initial):
            for a in (lst.ids, lst.counts):
                h.update(repr((a.dtype.str, a.shape)).encode())
                h.update(np.ascontiguousarray(a).data)
        return h.hexdigest()


@dataclass(frozen=True)
class LayerWork:
    """The per-step scalars and tallies one layer's kernels report (or :func:`count_work`
    recomputes): everything per tile follows from these and the placement."""

    rows_forward: np.ndarray  # [T] Σ_b transmitted rows gathered (input + recurrent)
    own_tally: np.ndarray  # [2, T, n_local] own list entries per owner tile (c0, c1)
    slots_scanned: np.ndarray  # [T] Σ_b c1_own(t, b)
    rows_backward: np.ndarray  # [T] Σ_b rows scattered into dW (input + recurrent)
    input_slots: np.ndarray  # [T] Σ_b gradient slots dotted (input + recurrent), 0 at t=0


class LocalTiles:
    """The tiles one layer occupies: ``tiles`` (global ids, ascending), ``local`` (neuron →
    index into ``tiles``) and ``owned`` (neurons per tile)."""

    def __init__(self, tile_of_neuron: np.ndarray):
        self.tiles, self.local = group_tiles(tile_of_neuron)
        self.owned = np.bincount(self.local, minlength=self.tiles.size).astype(np.int64)


def _phase(phase, layer, local, tiles, n_tiles, per_step):
    return PhaseCounters(
        phase,
        layer,
        COUNTER_NAMES[phase],
        tiles.tiles,
        n_tiles,
        local.sum(axis=1),
        local.sum(axis=2),
        local if per_step else None,
    )


def layer_counters(
    layer: int,
    n_in: int,
    n: int,
    n_max_in: int,
    n_max: int,
    batch: int,
    recurrent: bool,
    has_input_grad: bool,
    work: LayerWork,
    tiles: LocalTiles,
    n_tiles: int,
    per_step: bool = False,
) -> list:
    """Assemble the :class:`PhaseCounters` of one layer from its :class:`LayerWork`."""
    T = work.rows_forward.shape[0]
    own = tiles.owned[None, :]
    nt = own.shape[1]
    B = batch

    def block(*rows):
        """int64 [K, T, nt]: each row broadcast from a scalar, a [T, 1] or [1, nt] factor or a
        [T, nt] array (filled in place: no per-row temporaries)."""
        out = np.empty((len(rows), T, nt), np.int64)
        for k, r in enumerate(rows):
            out[k] = r
        return out

    col = lambda v: v[:, None]  # noqa: E731  [T] -> [T, 1]
    fwd_bytes = B * (n_max_in + 1) * 4 + (B * (n_max + 1) * 4 if recurrent else 0)
    su = block(col(work.rows_forward) * own, B * own, B, fwd_bytes)
    sd = block(B * own, work.own_tally[0], work.own_tally[1], 8 * B * own)
    sg = block(col(work.slots_scanned), work.own_tally[1], B * own, B, B * (8 * n_max + 8))
    wg_bytes = B * (n_max_in + 2) * 4 + (B * (n_max + 2) * 4 if recurrent else 0)
    wg = block(col(work.rows_backward) * own, WORKERS_PER_TILE, wg_bytes)
    out = [
        _phase("state_update", layer, su, tiles, n_tiles, per_step),
        _phase("spike_detect", layer, sd, tiles, n_tiles, per_step),
        _phase("state_grad", layer, sg, tiles, n_tiles, per_step),
        _phase("weight_grad", layer, wg, tiles, n_tiles, per_step),
    ]
    if has_input_grad or recurrent:
        active = col((np.arange(T) >= 1).astype(np.int64))
        pb = (4 * B * n_max_in if has_input_grad else 0) + (4 * B * n_max if recurrent else 0)
        ig = block(col(work.input_slots) * own, pb * active, col(work.input_slots), B * active)
        out.append(_phase("input_grad", layer, ig, tiles, n_tiles, per_step))
    opt = ((n_in + (n if recurrent else 0)) * own)[None, :, :]
    out.append(_phase("optimizer", layer, opt, tiles, n_tiles, per_step))
    return out


def count_layer(
    activity: Activity, layer: int, tile_of_neuron: np.ndarray, n_tiles: int, per_step: bool = False
) -> list:
    """The :class:`PhaseCounters` of one layer recounted from ``activity`` for the layer's
    placement ``tile_of_neuron`` (counts and ids only: no float math)."""
    from tilesim.models.snn.kernels.lif import tally_entries  # the functional run's own counting kernel

    sizes = activity.layer_sizes
    l = layer
    T = activity.inputs.timesteps
    B = activity.inputs.batch
    tiles = LocalTiles(tile_of_neuron)
    inp = activity.layer_input(l)
    own = activity.layers[l]
    rec = bool(activity.recurrent[l])
    rows = inp.counts[..., 0].sum(axis=1, dtype=np.int64)
    slots_in = inp.counts[..., 1].sum(axis=1, dtype=np.int64) if l >= 1 else np.zeros(T, np.int64)
    if rec:
        od = activity.own_delayed(l)
        rows = rows + od.counts[..., 0].sum(axis=1, dtype=np.int64)
        slots_in = slots_in + od.counts[..., 1].sum(axis=1, dtype=np.int64)
    slots_in = slots_in.copy()
    slots_in[0] = 0
    tally = tally_entries(own, tiles.local, tiles.tiles.size)
    work = LayerWork(rows, tally, own.counts[..., 1].sum(axis=1, dtype=np.int64), rows, slots_in)
    return layer_counters(
        l, sizes[l], sizes[l + 1], inp.n_max, own.n_max, B, rec, l >= 1, work, tiles, n_tiles, per_step
    )


CACHE_BYTES = 128 << 20
"""Bytes of counters :func:`count_work` keeps in a caller's cache, and of each cache the step
timing keeps there (layer terms, chip-row tile sets, owner-tile memory entries; least recently
used dropped first). Unbounded, a search over a T = 100 network
held gigabytes of per-step arrays, and touching fresh memory for every candidate made it
several times slower than recounting in reused memory."""


def _nbytes(phases) -> int:
    return sum(
        p.local_totals.nbytes + p.step_totals.nbytes + (p.local_steps.nbytes if p.local_steps is not None else 0)
        for p in phases
    )


def count_work(
    activity: Activity, placement: Mapping, per_step: bool = False, cache: dict | None = None
) -> WorkCounters:
    """Recount every per-tile counter of a training step from recorded activity only.

    No float math: the counts come from the lists' counts and ids, so re-timing the same step
    under another placement costs milliseconds. Equal to the counters of the functional run
    that recorded ``activity`` under the same placement. ``cache`` (a dict kept by the caller,
    e.g. a mapping search) reuses the counters of layers whose placement did not change; those
    counters carry their ``source`` (a content key that caches of derived terms use).
    """
    sizes = activity.layer_sizes
    placement.check(sizes[1:])
    phases = []
    mine = None if cache is None else lru_in(cache, ("counts", per_step), CACHE_BYTES, _nbytes)
    for l in range(len(sizes) - 1):
        ton = placement.tile_of_neuron[l]
        # the counters depend on which neurons share a tile, not on where the tiles are: a layer
        # moved to other tiles (or another chip) reuses them with its new tile ids
        if cache is None:
            phases += count_layer(activity, l, ton, placement.n_tiles, per_step)
            continue
        tiles, local = placement.groupings[l]
        source = (activity.digest, per_step, l, local.tobytes())
        got = mine.get(source)
        if got is None:
            got = mine[source] = [
                replace(p, source=source) for p in count_layer(activity, l, ton, placement.n_tiles, per_step)
            ]
        elif not (
            got[0].n_tiles == placement.n_tiles and (got[0].tiles is tiles or np.array_equal(got[0].tiles, tiles))
        ):
            got = mine[source] = [replace(p, tiles=tiles, n_tiles=placement.n_tiles) for p in got]
        phases += got
    return WorkCounters(placement.n_tiles, activity.inputs.timesteps, tuple(phases))


def layer_memory(
    n_in: int,
    n: int,
    timesteps: int,
    batch: int,
    n_max_in: int,
    tile_of_neuron: np.ndarray,
    n_tiles: int,
    optimizer: str = "adam",
    recurrent: bool = False,
    dw_copies: int = WORKERS_PER_TILE,
) -> dict:
    """Per-tile bytes of one layer's variables (snn-on-ipu.md §3.2), int64 ``[n_tiles]`` each:
    ``weights``, ``dw_worker_copies`` (``dw_copies`` per-worker dW copies — the IPU's race-free weight
    gradient keeps 6; a stack with one dW per core keeps none beside ``dw_final``:
    :attr:`tilesim.models.snn.step.traits.TableTraits.dw_copies`; the functional kernels keep one dW),
    ``dw_final``, ``optimizer_state`` (Adam: 2
    copies, SGD: 0), ``state_sequence`` (v for BPTT, T·B·n), ``state`` (v, δv, δI: 3·B·n),
    ``input_grad_partials`` (B·n_max_in)."""
    owned = np.bincount(tile_of_neuron, minlength=n_tiles).astype(np.int64)
    fan_in = n_in + (n if recurrent else 0)
    has = (owned > 0).astype(np.int64)
    return {
        "weights": 4 * fan_in * owned,
        "dw_worker_copies": 4 * (dw_copies if dw_copies > 1 else 0) * fan_in * owned,
        "dw_final": 4 * fan_in * owned,
        "optimizer_state": (8 if optimizer == "adam" else 0) * fan_in * owned,
        "state_sequence": 4 * timesteps * batch * owned,
        "state": 12 * batch * owned,
        "input_grad_partials": 4 * batch * n_max_in * has,
    }


def save_activity(path, activity: Activity) -> None:
    """Write recorded activity to one ``.npz`` file (re-time it later with :func:`count_work`)."""
    arrays = {
        "layer_sizes": np.asarray(activity.layer_sizes, np.int64),
        "recurrent": np.asarray(activity.recurrent, bool),
        "inputs_ids": activity.inputs.ids,
        "inputs_counts": activity.inputs.counts,
    }
    for l, (lst, init) in enumerate(zip(activity.layers, activity.initial)):
        arrays[f"layer{l}_ids"], arrays[f"layer{l}_counts"] = lst.ids, lst.counts
        arrays[f"initial{l}_ids"], arrays[f"initial{l}_counts"] = init.ids, init.counts
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    path = str(path) if str(path).endswith(".npz") else f"{path}.npz"  # as np.savez names it
    atomic_write_bytes(path, buf.getvalue())  # never half-written


def load_activity(path) -> Activity:
    """Inverse of :func:`save_activity`."""
    with np.load(path) as f:
        sizes = tuple(int(n) for n in f["layer_sizes"])
        L = len(sizes) - 1
        layers = tuple(SpikeList(f[f"layer{l}_ids"], f[f"layer{l}_counts"]) for l in range(L))
        initial = tuple(SpikeList(f[f"initial{l}_ids"], f[f"initial{l}_counts"]) for l in range(L))
        return Activity(
            sizes,
            SpikeList(f["inputs_ids"], f["inputs_counts"]),
            layers,
            initial,
            tuple(bool(r) for r in f["recurrent"]),
        )
