"""Why a training step costs what it costs: exchange matrices and the critical tile.

``exchange_matrices`` spreads every exchange of the step (the same senders, receivers and bytes
as :mod:`models.snn.timing`: flags to the compaction tiles, chunk lists to the combiners, spike
lists to the next layer, replicated inputs, input-gradient partials to the reduction tiles,
slot gradients back to the layer below) over chip × chip and, for one chip, tile-group ×
tile-group; bytes are counted at the receiver (a multicast counts once per receiving tile).
Within one exchange, each sender's and each receiver's share is proportional to its part of
the data (owned neurons for flags and partials, equal otherwise).

``explain_critical`` names the slowest phase, its critical tile, what that tile is (an owner
tile of which layer, or a compaction / combiner / reduction tile) and the work counter in which
it stands out from the rest of its layer.
"""
from __future__ import annotations

import numpy as np

from models.snn.counters import WorkCounters
from models.snn.network import NetworkConfig
from models.snn.placement import Placement
from models.snn.timing import _layout

__all__ = ["exchange_flows", "exchange_matrices", "explain_critical"]

# superstep label -> (counter phase, counters that make its compute), as built in timing.py
LABEL_COUNTERS = {
    "fwd: state update": [("state_update", ("synaptic_adds", "neurons_updated")), ("spike_detect", ("neurons_scanned",))],
    "bwd: state grad": [("state_grad", ("slots_scanned", "slots_applied", "neurons_updated"))],
    "bwd: weight+input grad": [("weight_grad", ("grad_adds",)), ("input_grad", ("macs",))],
    "dW reduce": [("optimizer", ("weights_updated",))],
    "optimizer": [("optimizer", ("weights_updated",))],
}
HINTS = {
    "slots_applied": "a capped list keeps the lowest neuron ids first, so the kept entries pile up on the "
                     "layer's first tiles; --mapping round_robin deals those neurons over all tiles",
    "synaptic_adds": "the tile owns more neurons than the layer's other tiles (weight rows are as long as "
                     "its neuron count); give the layer more tiles (--mapping balanced or map-search)",
    "grad_adds": "the tile owns more neurons than the layer's other tiles; give the layer more tiles",
    "macs": "the tile owns more neurons than the layer's other tiles; give the layer more tiles",
    "weights_updated": "the tile holds the most weights (fan-in x neurons per tile)",
}


def exchange_flows(config: NetworkConfig, placement: Placement, counters: WorkCounters, machine) -> list:
    """Every exchange of one step as ``(what, src tiles, src weights, dst tiles, dst weights, bytes)``."""
    TPC = machine.tiles_per_chip
    T, B = config.timesteps, config.batch
    nmax = config.n_max
    L = config.n_layers
    lay = _layout(config, placement, TPC)
    rec = config.recurrent
    owned = [placement.neurons_owned(l)[ly.tiles].astype(float) for l, ly in enumerate(lay)]
    chip0 = np.arange(1, TPC)
    flows = []

    def add(what, src, dst, nbytes, sw=None, dw=None):
        if nbytes > 0 and len(src) and len(dst):
            flows.append((what, np.asarray(src), sw, np.asarray(dst), dw, float(nbytes)))

    for l, ly in enumerate(lay):
        n = config.layers[l + 1]
        sd = counters.get("spike_detect", l)
        add(f"layer {l + 1} threshold flags", ly.tiles, ly.comp_tiles,
            sd.local_totals[sd.row("bytes_sent")].sum(), sw=owned[l])
        chunk = 4.0 * (min(nmax[l], -(-n // ly.f)) + 1)
        add(f"layer {l + 1} chunk lists", ly.comp_tiles, ly.comb_tiles, T * ly.comp_tiles.size * chunk)
        if l + 1 < L:
            nxt = lay[l + 1]
            add(f"layer {l + 1} spike lists", ly.comb_tiles, nxt.tiles, T * nxt.tiles.size * B * 4.0 * (nmax[l] + 2))
        wg = counters.get("weight_grad", l)
        src = lay[l - 1].comb_tiles if l > 0 else chip0
        add(f"layer {l + 1} replicated inputs (backward)", src, ly.tiles, wg.local_totals[wg.row("bytes_received")].sum())
        if any(p.phase == "input_grad" and p.layer == l for p in counters.phases):
            ig = counters.get("input_grad", l)
            chip_tiles = np.arange(ly.chip * TPC, (ly.chip + 1) * TPC)
            add(f"layer {l + 1} input-gradient partials", ly.tiles, chip_tiles,
                ig.local_totals[ig.row("partial_bytes")].sum(), sw=owned[l])
            for d in ([l - 1] if l > 0 else []) + ([l] if rec[l] else []):
                add(f"layer {d + 1} slot gradients", chip_tiles, lay[d].tiles,
                    T * lay[d].tiles.size * B * (8.0 * nmax[d] + 8))
    add("data input", chip0, lay[0].tiles, T * lay[0].tiles.size * B * 4.0 * (config.input_cap + 1))
    add("loss gradients", lay[-1].comb_tiles, lay[-1].tiles, lay[-1].tiles.size * B * (8.0 * nmax[-1] + 8))
    return flows


def _share(tiles, w, key, n_keys):
    w = np.ones(len(tiles)) if w is None else np.asarray(w, float)
    return np.bincount(key(tiles), weights=w / w.sum(), minlength=n_keys)


def exchange_matrices(config: NetworkConfig, placement: Placement, counters: WorkCounters, machine,
                      chip: int = 0, groups: int = 32) -> dict:
    """``chip`` [C, C] and ``group`` [G, G] bytes per step (rows send, columns receive), the
    group ``edges`` (first chip-local tile of each group, then the end) and the flows' totals."""
    TPC, C = machine.tiles_per_chip, machine.chips
    G = max(1, min(groups, TPC))
    edges = [(g * TPC) // G for g in range(G + 1)]
    group_of = np.searchsorted(edges, np.arange(TPC), side="right") - 1
    chip_m = np.zeros((C, C))
    group_m = np.zeros((G, G))
    totals = {}
    on_chip = lambda t: t // TPC  # noqa: E731

    def grp(t):
        t = np.asarray(t)
        return np.where(t // TPC == chip, group_of[t % TPC], G)

    for what, src, sw, dst, dw, nbytes in exchange_flows(config, placement, counters, machine):
        chip_m += nbytes * np.outer(_share(src, sw, on_chip, C), _share(dst, dw, on_chip, C))
        gs, gd = _share(src, sw, grp, G + 1)[:G], _share(dst, dw, grp, G + 1)[:G]
        group_m += nbytes * np.outer(gs, gd)
        key = what.split(" ", 2)[-1] if what.startswith("layer") else what
        totals[key] = totals.get(key, 0.0) + nbytes
    return {"chip": chip_m, "group": group_m, "edges": edges, "chip_index": chip, "totals_bytes": totals}


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


def explain_critical(result, config: NetworkConfig, placement: Placement, counters: WorkCounters, machine) -> dict:
    """The slowest phase of the step, its critical tile, and why (see the module docstring)."""
    TPC = machine.tiles_per_chip
    by = result.by_label()
    label, info = max(by.items(), key=lambda kv: kv[1]["time_s"])
    tile = info["critical_chip"] * TPC + info["critical_tile"]
    lay = _layout(config, placement, TPC)
    role, layer = _role(tile, lay, placement)
    out = {"phase": label, "time_s": info["time_s"], "share": info["time_s"] / result.total_s,
           "tile": int(tile), "chip": int(info["critical_chip"]), "role": role,
           "layer": None if layer is None else layer + 1, "counter": None}
    what = {"owner": f"owns {int(placement.neurons_owned(layer)[tile]) if layer is not None else 0} neurons of layer "
                     f"{None if layer is None else layer + 1}",
            "combiner": f"merges the chunk lists of one sample of layer {None if layer is None else layer + 1}",
            "compaction": f"turns threshold flags of layer {None if layer is None else layer + 1} into a list",
            "reduction": "sums input-gradient partials (the reduction is spread over the whole chip)"}[role]
    sentence = (f"The slowest phase is '{label}' ({info['time_s'] * 1e3:.3f} ms, {100 * out['share']:.0f} % of the step). "
                f"Its critical tile {tile} (chip {out['chip']}) {what}.")
    if role == "owner" and label in LABEL_COUNTERS:
        best = None
        for phase, names in LABEL_COUNTERS[label]:
            try:
                pc = counters.get(phase, layer)
            except KeyError:
                continue
            pos = int(np.searchsorted(pc.tiles, tile))
            for name in names:
                v = pc.local_totals[pc.row(name)]
                mean = float(v.mean()) if v.size else 0.0
                ratio = float(v[pos]) / mean if mean > 0 else 1.0
                if best is None or ratio > best[3]:
                    best = (phase, name, int(v[pos]), ratio, mean)
        if best is not None:
            phase, name, val, ratio, mean = best
            out["counter"] = {"phase": phase, "name": name, "value": val, "layer_mean": mean, "ratio": ratio}
            sentence += (f" It does {val:,} {name.replace('_', ' ')} per step, {ratio:.2f}x its layer's mean "
                         f"of {mean:,.0f}")
            sentence += f": {HINTS[name]}." if ratio > 1.05 and name in HINTS else " (the layer is evenly loaded)."
    out["sentence"] = sentence
    return out
