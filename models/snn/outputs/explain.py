"""Why a training step costs what it costs: exchange matrices and the critical tile.

``exchange_matrices`` spreads every exchange of the step over chip × chip and, for one chip,
tile-group × tile-group. Who sends to whom is read from the step's table
(:data:`tilesim.models.snn.step.table.STEP_ROWS`: each exchanging row's ``out`` and ``in`` places — input
lists, flags to the compaction tiles, chunk lists to the combiners, lists to the sequence
slices, loss gradients, replicated lists, input-gradient partials to the reduction tiles, slot
gradients back to the layer below); bytes are counted at the receiver (a multicast counts once
per receiving tile). Within one exchange, each sender's and each receiver's share is
proportional to its part of the data (owned neurons for owner-tile senders, equal otherwise).

``explain_critical`` names the slowest phase, its critical tile, what that tile is (an owner
tile of which layer, or a compaction / combiner / reduction tile) and the work counter in which
it stands out from the rest of its layer.
"""

from __future__ import annotations

import numpy as np

from tilesim.mapping.core import Mapping
from tilesim.models.snn.placement.roles import grad_targets, layer_layout, place_tiles
from tilesim.models.snn.stacks import Stack, stack_for
from tilesim.models.snn.step.counters import WorkCounters
from tilesim.models.snn.step.table import GRAD_TARGET, HOST_EXCESS_LABEL, IN, OUT, OWNER, STEP_ROWS
from tilesim.models.snn.step.timing import applies
from tilesim.models.snn.training.network import NetworkConfig
from tilesim.outputs.records import whole_bytes

__all__ = ["exchange_flows", "exchange_matrices", "explain_critical"]

# the counters that make each compute row's work (the table program's; a stack's own rows: Stack.rows)
LABEL_COUNTERS = {row.label: list(row.counters) for row in STEP_ROWS if row.counters}
HINTS = {
    "slots_applied": "a capped list keeps the lowest neuron ids first, so the kept entries pile up on the "
    "layer's first tiles; --mapping round_robin deals those neurons over all tiles",
    "synaptic_adds": "the tile owns more neurons than the layer's other tiles (weight rows are as long as "
    "its neuron count); give the layer more tiles (--mapping balanced or map-search)",
    "grad_adds": "the tile owns more neurons than the layer's other tiles; give the layer more tiles",
    "macs": "the tile owns more neurons than the layer's other tiles; give the layer more tiles",
    "weights_updated": "the tile holds the most weights (fan-in x neurons per tile)",
}


def _exchange_bytes(config: NetworkConfig, counters: WorkCounters, lay, pair: float) -> dict:
    """Per exchanging row of the table, bytes of one step for (layer l, target layer t), from
    the counters' totals (no per-step vectors needed): the same bytes the row's terms add up
    to over the step, counted at the receivers (flags and partials: at the senders)."""
    T, B, nmax = config.timesteps, config.batch, config.n_max

    def total(phase, l, name):
        pc = counters.get(phase, l)
        return float(pc.local_totals[pc.row(name)].sum())

    def tile_list(l):
        return min(nmax[l], -(-config.layers[l + 1] // lay[l].f))

    return {
        "fwd: slice inputs": lambda l, t: total("state_update", l, "bytes_received") / pair,
        "fwd: state update": lambda l, t: total("spike_detect", l, "bytes_sent"),
        "fwd: compaction": lambda l, t: T * lay[l].comp_tiles.size * 4.0 * (tile_list(l) + 1),
        "fwd: combine": lambda l, t: T * B * 4.0 * (nmax[l] + 2),
        "loss": lambda l, t: lay[l].tiles.size * B * (8.0 * nmax[l] + 8),
        "bwd: replicate lists": lambda l, t: (
            (total("state_grad", l, "bytes_received") + total("weight_grad", l, "bytes_received")) / pair
        ),
        "bwd: weight+input grad": lambda l, t: total("input_grad", l, "partial_bytes"),
        "bwd: reduce input grad": lambda l, t: T * B * (8.0 * nmax[t] + 8),
    }


def _union(parts: list) -> np.ndarray:
    """One place's tiles as they are (repeats count); several places: their distinct tiles (a run of
    consecutive tiles, e.g. a whole chip, that holds every other place is that union as it is: no
    sort of a wafer's tiles per layer)."""
    if len(parts) == 1:
        return parts[0]
    big = max(parts, key=len)
    lo, hi = (int(big[0]), int(big[-1])) if big.size else (0, -1)
    if hi - lo + 1 == big.size and all(p.size == 0 or (p.min() >= lo and p.max() <= hi) for p in parts):
        if big.size < 2 or bool(np.all(np.diff(big) == 1)):
            return big
    return np.unique(np.concatenate(parts))


def exchange_flows(config: NetworkConfig, placement: Mapping, counters: WorkCounters, machine) -> list:
    """Every exchange of one step as ``(what, src tiles, src weights, dst tiles, dst weights, bytes)``,
    layer by layer in the order of the step's table (:data:`tilesim.models.snn.step.table.STEP_ROWS`): a
    row's senders are the places of its ``out`` writes (or its ``sent_from``), its receivers
    those of its ``in`` writes (a gradient row: one flow per receiving layer). Senders that are
    owner tiles weigh by owned neurons, all others equally; bytes from the counters' totals
    (broadcast receives at half their bytes: both tiles of a supertile take them at once)."""
    TPC = machine.tiles_per_chip
    L = config.n_layers
    lay = layer_layout(config, placement, TPC)
    rec = config.recurrent if isinstance(config.recurrent, tuple) else (bool(config.recurrent),) * L
    in_graph = [any(p.phase == "input_grad" and p.layer == l for p in counters.phases) for l in range(L)]
    nbytes = _exchange_bytes(config, counters, lay, float(machine.chip.tiles_per_supertile))
    owned = [placement.neurons_owned(l)[ly.tiles].astype(float) for l, ly in enumerate(lay)]
    flows = []
    for l in range(L):
        for row in STEP_ROWS:
            if not row.exchange:
                continue
            writes = [w for w in row.writes if applies(w.only, l, L, in_graph[l])]
            sends = [w.where for w in writes if w.array == OUT] or ([row.sent_from] if row.sent_from else [])
            gets = [w.where for w in writes if w.array == IN]
            if not sends or not gets:
                continue
            targets = grad_targets(rec, l) if GRAD_TARGET in gets else [l]
            for t in targets:
                src = _union([place_tiles(w, lay, l, TPC, t) for w in sends])
                dst = _union([place_tiles(w, lay, l, TPC, t) for w in gets])
                b = nbytes[row.label](l, t)
                if b > 0 and len(src) and len(dst):
                    weights = owned[l] if sends == [OWNER] else None
                    flows.append((f"layer {t + 1} {row.exchange}", src, weights, dst, None, float(b)))
    return flows


def _share(tiles, w, key, n_keys):
    w = np.ones(len(tiles)) if w is None else np.asarray(w, float)
    return np.bincount(key(tiles), weights=w / w.sum(), minlength=n_keys)


def exchange_matrices(
    config: NetworkConfig,
    placement: Mapping,
    counters: WorkCounters,
    machine,
    chip: int = 0,
    groups: int = 32,
    digest=None,
    stack: Stack | str = "poplar",
) -> dict:
    """``chip`` [C, C] and ``group`` [G, G] bytes per step (rows send, columns receive), the
    group ``edges`` (first chip-local tile of each group, then the end), ``totals_bytes`` per kind
    of exchange and ``received_bytes`` (the same counted at every receiving tile).

    With the step program's ``digest`` (:class:`tilesim.outputs.records.ProgramDigest`) every number
    follows the engine's definitions: the chip matrix's diagonal is the bytes sent on each chip
    (a multicast once; their sum is the result's ``bytes.onchip``), off the diagonal the bytes
    the IPU-Links carry (sum = ``bytes.links``); ``totals_bytes`` are the sent bytes per kind;
    the group matrix keeps who-sends-to-whom from the step's table, scaled per kind to the
    bytes the program sends on ``chip``. Without it, bytes are counted at the receivers."""
    TPC, C = machine.tiles_per_chip, machine.chips
    G = max(1, min(groups, TPC))
    edges = [(g * TPC) // G for g in range(G + 1)]
    group_of = np.searchsorted(edges, np.arange(TPC), side="right") - 1
    chip_m = np.zeros((C, C))
    per_kind = {}  # kind -> [G, G] on ``chip``
    received = {}
    on_chip = lambda t: t // TPC  # noqa: E731

    def grp(t):
        t = np.asarray(t)
        return np.where(t // TPC == chip, group_of[t % TPC], G)

    shares: dict = {}  # (id of a shared read-only tile array, per chip?) -> its share: a chip's tiles recur

    def share(tiles, w, per_chip: bool):
        if w is not None or tiles.flags.writeable:
            return _share(tiles, w, on_chip, C) if per_chip else _share(tiles, w, grp, G + 1)[:G]
        key = (id(tiles), per_chip)
        if key not in shares:
            shares[key] = (tiles, share(tiles.copy(), None, per_chip))  # the array kept: its id stays its own
        return shares[key][1]

    for what, src, sw, dst, dw, nbytes in exchange_flows(config, placement, counters, machine):
        chip_m += nbytes * np.outer(share(src, sw, True), share(dst, dw, True))
        gs, gd = share(src, sw, False), share(dst, dw, False)
        key = what.split(" ", 2)[-1] if what.startswith("layer") else what
        per_kind[key] = per_kind.get(key, np.zeros((G, G))) + nbytes * np.outer(gs, gd)
        received[key] = received.get(key, 0.0) + nbytes
    totals = dict(received)
    if digest is not None:
        rows = stack_for(machine, stack).rows()
        labels = [row.label for row in rows]  # the digest's labels: the stack's rows
        kind_of = {row.label: row.exchange for row in rows if row.exchange}
        sent = {}
        for j, lab in enumerate(labels):
            if j < digest.label_chip_bytes.shape[0] and digest.label_chip_bytes[j].sum() > 0:
                k = kind_of.get(lab, lab)
                sent[k] = sent.get(k, np.zeros(C)) + digest.label_chip_bytes[j]
        totals = {k: whole_bytes(v.sum()) for k, v in sent.items()}
        for k, m in per_kind.items():
            want = float(sent.get(k, np.zeros(C))[chip])
            per_kind[k] = m * (want / m.sum()) if m.sum() > 0 else m
        chip_m = digest.chip_matrix()
    group_m = sum(per_kind.values()) if per_kind else np.zeros((G, G))
    return {
        "chip": chip_m,
        "group": group_m,
        "edges": edges,
        "chip_index": chip,
        "totals_bytes": {k: whole_bytes(v) for k, v in totals.items()},
        "received_bytes": {k: whole_bytes(v) for k, v in received.items()},
    }


def _role(tile: int, lay, placement) -> tuple[str, int | None]:
    for l, ly in enumerate(lay):
        if tile in set(ly.tiles.tolist()):
            return "owner", l
    for l, ly in enumerate(lay):
        if tile in set(ly.comb_tiles.tolist()):
            return "combiner", l
        if tile in set(ly.comp_tiles.tolist()):
            return "compaction", l
    return "reduction", None


def explain_critical(
    result,
    config: NetworkConfig,
    placement: Mapping,
    counters: WorkCounters,
    machine,
    label_cycles=None,
    stack: Stack | str = "poplar",
) -> dict:
    """The slowest phase of the step, its critical tile, and why (see the module docstring);
    ``stack``: the execution stack the step was built with.
    ``label_cycles`` (:func:`label_tile_cycles` of the step's program) tells a phase whose cost is
    the same on every tile (fixed per-compute-set costs) from one with a loaded tile."""
    TPC = machine.tiles_per_chip
    by = result.by_label()
    label, info = max(by.items(), key=lambda kv: kv[1]["time_s"])
    tile = info["critical_chip"] * TPC + info["critical_tile"]
    lay = layer_layout(config, placement, TPC)
    role, layer = _role(tile, lay, placement)
    split = {k: v / info["time_s"] for k, v in info["breakdown_s"].items() if v > 0} if info["time_s"] > 0 else {}
    out = {
        "phase": label,
        "time_s": info["time_s"],
        "share": info["time_s"] / result.total_s,
        "tile": int(tile),
        "chip": int(info["critical_chip"]),
        "role": role,
        "layer": None if layer is None else layer + 1,
        "counter": None,
        "split": split,
    }
    name = None if layer is None else layer + 1
    what = {
        "owner": f"owns {int(placement.neurons_owned(layer)[tile]) if layer is not None else 0} "
        f"neurons of layer {name}",
        "combiner": f"merges the chunk lists of one sample of layer {name}",
        "compaction": f"turns threshold flags of layer {name} into a list",
        "reduction": "sums input-gradient partials (the reduction is spread over the whole chip)",
    }[role]
    sentence = (
        f"The slowest phase is '{label}' ({info['time_s'] * 1e3:.3f} ms, {100 * out['share']:.0f} % of the step: "
        + ", ".join(f"{k} {100 * v:.0f} %" for k, v in split.items())
        + ")."
    )
    uniform = False
    if label_cycles is not None and label in result.labels:
        per_tile = label_cycles[list(result.labels).index(label)]
        busy = per_tile[per_tile > 0]
        uniform = busy.size > 0 and (busy.max() - np.median(busy)) <= 0.01 * busy.max()
    st = stack_for(machine, stack)
    sentence += st.explain(label, uniform) or f" Its critical tile {tile} (chip {out['chip']}) {what}."
    counters_of = {row.label: list(row.counters) for row in st.rows() if row.counters}
    if role == "owner" and label in counters_of and not uniform:
        out["counter"], more = _loaded_counter(counters_of[label], counters, layer, tile)
        sentence += more
    sentence += _host_excess(by, label, result.total_s, out)
    out["sentence"] = sentence
    return out


def _loaded_counter(made_of: list, counters: WorkCounters, layer: int, tile: int) -> tuple:
    """The counter of the phase made of ``made_of`` ((phase, counter names) pairs) on which ``tile`` is most
    loaded against its layer's mean, as
    (the ``counter`` dict or None, the sentence's clause)."""
    best = None
    for phase, names in made_of:
        try:
            pc = counters.get(phase, layer)
        except KeyError:
            continue
        pos = int(np.searchsorted(pc.tiles, tile))
        for cname in names:
            v = pc.local_totals[pc.row(cname)]
            mean = float(v.mean()) if v.size else 0.0
            ratio = float(v[pos]) / mean if mean > 0 else 1.0
            if best is None or ratio > best[3]:
                best = (phase, cname, int(v[pos]), ratio, mean)
    if best is None:
        return None, ""
    phase, cname, val, ratio, mean = best
    clause = f" It does {val:,} {cname.replace('_', ' ')} per step, {ratio:.2f}x its layer's mean of {mean:,.0f}"
    clause += f": {HINTS[cname]}." if ratio > 1.05 and cname in HINTS else " (the layer is evenly loaded)."
    return {"phase": phase, "name": cname, "value": val, "layer_mean": mean, "ratio": ratio}, clause


def _host_excess(by: dict, label: str, total_s: float, out: dict) -> str:
    """Record the fitted host excess row's share of the step in ``out`` and return the sentence that
    names it when it is not itself the slowest phase ("" when the step has no such row)."""
    excess = by.get(HOST_EXCESS_LABEL)
    if excess is None or total_s <= 0:
        return ""
    out["host_excess_share"] = excess["time_s"] / total_s
    if label == HOST_EXCESS_LABEL:
        return ""
    return (
        f" '{HOST_EXCESS_LABEL}' is {excess['time_s'] * 1e3:.3f} ms, {100 * out['host_excess_share']:.0f} % of "
        "the step: the host copy's time beyond Graphcore's documented rate, a fitted number."
    )
