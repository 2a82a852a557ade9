"""The tour: the architecture explained with the simulator's own pictures (``docs/tour.md``).

Sections: a tile and its SRAM; the six workers and the supervisor; vertices, codelets and
compute sets; one BSP superstep; one superstep tile by tile (fast tiles idle at the barrier);
the exchange schedule and supertiles (distance on the IPU vs a mesh); sparse spike lists; BPTT
memory vs T × B; 2 vs 16 neurons per tile; a multi-chip run turning communication-bound; the
IPU-Link ladder and multi-chip sync; the host link. Then three exercises whose answers the
simulator computes, a glossary and what is not modelled. Each section writes its PNGs to
``OUT/tour/`` and its text to ``OUT/tour.md`` with numbers from this run (so they follow the
cost model).

    python -m experiments.tour [--out docs] [--quick]
"""

from __future__ import annotations

import argparse
import time
from importlib import resources
from pathlib import Path

import numpy as np

from experiments.b_common import SEED, pyplot
from tilesim.engine.events import simulate
from tilesim.io import atomic_write_text
from tilesim.machine.costs import barrel_tile_cycles
from tilesim.machine.description import load_machine
from tilesim.machine.fabric import LadderLinks
from tilesim.models.linear.cli import exchange_bench
from tilesim.models.snn.placement.fit import place
from tilesim.models.snn.step.retime import retime
from tilesim.models.snn.step.structure import StepStructure
from tilesim.models.snn.step.table import HOST_LABELS, STEP_ROWS, step_shape
from tilesim.models.snn.step.timing import default_costs
from tilesim.models.snn.training import data as D
from tilesim.outputs import plots
from tilesim.outputs.plots import PHASE_COLOURS, SERIES_COLOURS
from tilesim.outputs.records import PHASES
from tilesim.program.toml_form import load_program

DPI = 100
SHD = "700-1462-1460-20"
CAT_COLOURS = {
    "variables:weights": "#4c72b0",
    "variables:gradients": "#c44e52",
    "variables:optimizer": "#dd8452",
    "variables:state": "#8172b3",
    "variables:sequences": "#937860",
    "variables:inputs": "#da8bc3",
    "variables:activations": "#8c8c8c",
    "variables:other": "#ccb974",
    "exchange_buffers": "#55a868",
    "vertex_state": "#64b5cd",
    "vertex_code": "#4c4c4c",
    "control_code": "#999999",
    "exchange_code": "#bbbbbb",
    "stack": "#dddddd",
}


def _cfg(layers=SHD, batch=48, timesteps=100, **kw):
    from tilesim.models.snn.training.network import (
        NetworkConfig,  # Numba kernels load only when they run (start-up time)
    )

    return NetworkConfig(
        layers=layers, batch=batch, timesteps=timesteps, max_activity=0.05, input_cap=48, seed=SEED, **kw
    )


def _place(cfg, machine, npt=None):

    return place(cfg, machine, npt, "contiguous", "report")


def _save(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    pyplot().close(fig)
    return path


def _kib(b) -> str:
    return f"{b / 1024:,.0f} KiB"


# ---- 1. a tile and its SRAM -----------------------------------------------------------------
def tile_sram(img: Path, quick: bool) -> dict:

    B, T = (16, 20) if quick else (48, 100)
    m = load_machine("gc200")
    _, ledger, npt = _place(_cfg(batch=B, timesteps=T), m)
    t = ledger.max_tile()
    entries = ledger.explain_tile(t, 10)
    used, budget = int(ledger.per_tile()[t]), ledger.budget
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 0.6 + 0.32 * len(entries)))
    ax.barh(range(len(entries)), [e[2] / 1024 for e in entries], color=[CAT_COLOURS[e[1]] for e in entries])
    ax.set_yticks(
        range(len(entries)), [f"{lab}  [{cat.replace('variables:', 'var:')}]" for lab, cat, _ in entries], fontsize=7
    )
    ax.invert_yaxis()
    ax.set_xlabel("KiB on this tile")
    ax.set_title(f"tile {t} of a GC200: {_kib(used)} of {_kib(budget)} used ({100 * used / budget:.0f} %)", fontsize=9)
    path = _save(fig, img / "tile-sram.png")
    top = entries[0]
    text = (
        f"An IPU chip is {m.chip.tiles} tiles, each a small processor with its own {_kib(budget)} of SRAM and no "
        f"shared memory: everything a tile computes with — weights, gradients, optimizer state, buffers for "
        f"incoming data, and the code itself — must fit in that SRAM. The simulator keeps a *ledger* of every "
        f"tensor on every tile, with the categories of Graphcore's profiler. Here the paper's SHD network "
        f"({SHD}, batch {B}, {T} steps) sits {npt} neurons per tile; the fullest tile, {t}, uses "
        f"{_kib(used)} ({100 * used / budget:.0f} %). Its largest item is '{top[0]}' ({_kib(top[2])}): the "
        f"weight gradient is kept once per hardware worker thread (six copies) so the workers never race. "
        f"Code and exchange buffers are a visible share too — on a tile, nothing is free."
    )
    return {
        "title": "A tile and its SRAM",
        "text": text,
        "images": [path],
        "command": f"tilesim run --layers {SHD} --batch {B} --timesteps {T} --steps 1 --out out/tour-run   "
        f"# out/tour-run/memory.txt: the ledger of the fullest tiles",
    }


# ---- 2. one BSP superstep -------------------------------------------------------------------
def bsp_superstep(img: Path, quick: bool) -> dict:

    m = load_machine("m2000")
    with resources.as_file(resources.files("tilesim") / "examples" / "demo.toml") as p:
        program, _ = load_program(p, m)
    res = simulate(program, m)
    path = plots.timeline(
        res,
        img / "bsp-timeline.png",
        max_supersteps=12,
        title="BSP timeline of `tilesim example` on an M2000 (4 chips), first 12 supersteps",
    )
    s = res.superstep(1)
    bd = {k: v * 1e6 for k, v in s["breakdown_s"].items()}
    text = (
        f"Tiles do not share memory, so they take turns: every *superstep* is compute (each tile works on "
        f"its own SRAM), then a *sync* (every tile waits for the slowest), then *exchange* (tiles copy data "
        f"into each other's SRAM, all at once, on a schedule the compiler fixed). The time of a superstep "
        f"is therefore set by its slowest tile, not the average one. In `tilesim example` the first half of "
        f"each chip's tiles has twice the work; superstep 1 ('{s['label']}') takes {bd['compute']:.2f} µs of "
        f"compute (critical tile {s['critical_tile']}), {bd['sync']:.3f} µs of sync and {bd['exchange']:.2f} µs "
        f"of exchange. Supersteps that need data from other chips sync all four chips and then move it "
        f"over the IPU-Links (orange)."
    )
    return {
        "title": "One BSP superstep: compute → sync → exchange",
        "text": text,
        "images": [path],
        "command": "tilesim example --out out/example  # out/example/timeline.png, trace.json (Perfetto)",
    }


# ---- 3. exchange distance -------------------------------------------------------------------
def exchange_distance(img: Path, quick: bool) -> dict:

    ipu = load_machine("gc200")
    sizes = [4, 256, 16384, 1048576] if quick else [4 * 4**i for i in range(10)]
    pairs = {"gc200": (0, [1, 644]), "mesh-demo": (0, [1, 255])}
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    ratio = {}
    for machine, (src, dsts) in pairs.items():
        rows = exchange_bench(machine, src, dsts, sizes)
        for d, style in zip(dsts, ("o-", "x--")):
            sel = [r for r in rows if r["dst"] == d]
            ax.loglog(
                [r["bytes"] for r in sel],
                [r["cycles"] for r in sel],
                style,
                label=f"{machine}: tile {src} → {d} ({sel[0]['hops']} hops)",
            )
        small = [r for r in rows if r["bytes"] == sizes[0]]
        ratio[machine] = max(r["cycles"] for r in small) / min(r["cycles"] for r in small)
    ax.set_xlabel("message size [B]")
    ax.set_ylabel("cycles")
    ax.set_title("point-to-point exchange: near vs far tile", fontsize=10)
    ax.legend(fontsize=8)
    path = _save(fig, img / "exchange-distance.png")
    text = (
        f"On the IPU every tile reaches every other tile through one all-to-all exchange fabric, so the cost "
        f"of a message depends on its size, not on where the two tiles are: tile 0 → 1 and tile 0 → 644 "
        f"overlap exactly (far/near = {ratio['gc200']:.2f} for a {sizes[0]} B message). Most other tile machines "
        f"use a 2-D mesh where a message hops from router to router; the `mesh-demo` preset (16 × 16 tiles, XY "
        f"routing) pays per hop, so the far corner costs {ratio['mesh-demo']:.2f}× the neighbour for small "
        f"messages, while for large ones bandwidth hides the hops. This is why a mapping on the IPU "
        f"only has to balance bytes per tile, while on a mesh it must also keep talkers close.\n\n"
        f"The exchange itself is a *schedule* the compiler fixed: after the sync every tile sends and "
        f"receives at {ipu.chip.exchange_bytes_per_cycle:g} B/cycle on its own port, in an order known at compile "
        f"time, so nothing is arbitrated at run time and the exchange lasts as long as its busiest port "
        f"(plus a fixed set-up of {ipu.chip.exchange_fixed_cycles} cycles). Two neighbouring tiles form a "
        f"*supertile* ({ipu.chip.tiles_per_supertile} tiles) sharing an exchange bus: when both receive the same "
        f"data (a broadcast, like a spike list every tile of a layer needs) they take it at once, "
        f"{ipu.chip.tiles_per_supertile * ipu.chip.exchange_bytes_per_cycle:g} B/cycle for the pair — the "
        f"simulator counts broadcast receives at 1/{ipu.chip.tiles_per_supertile} of their bytes."
    )
    return {
        "title": "The exchange schedule, supertiles, and why distance does not matter on the IPU (but does on a mesh)",
        "text": text,
        "images": [path],
        "command": "tilesim exchange-bench --machine gc200 --src 0 --dst 1,644 --bytes 4,256,16384,1048576 --json\n"
        "tilesim exchange-bench --machine mesh-demo --src 0 --dst 1,255 --bytes 4,256,16384,1048576 --json",
    }


# ---- 4. sparse spike lists ------------------------------------------------------------------
def spike_lists(img: Path, quick: bool) -> dict:
    from tilesim.models.snn.training.network import (  # Numba kernels load only when they run (start-up time)
        NetworkConfig,
        init_network,
        train_step,
    )

    layers, T, B = "100-64-10", 30, 2
    cfg = NetworkConfig(
        layers=layers,
        batch=B,
        timesteps=T,
        caps=(8, 2),
        input_cap=16,
        seed=SEED,
        weight_mul=4.0,
        output_second_threshold=None,
        second_threshold_schedule=None,
    )
    pl, _, _ = _place(cfg, load_machine("gc200"))
    state = init_network(cfg, pl)
    ds = D.synthetic(cfg.layers, 4, T, seed=SEED)
    spikes, labels = next(ds.batches(B, T, cfg.input_cap, np.random.default_rng(SEED)))
    res = train_step(state, spikes, labels)
    lst = res.activity.layers[0]
    ids, counts = lst.ids[:, 0, :], lst.counts[:, 0, :]
    n_max = lst.n_max
    kind = np.zeros((T, n_max))  # 0 empty, 1 real, 2 gradient-only
    for t in range(T):
        kind[t, : counts[t, 0]] = 1
        kind[t, counts[t, 0] : counts[t, 1]] = 2
    plt = pyplot()
    from matplotlib.colors import ListedColormap  # matplotlib is imported only when drawing (start-up time)

    fig, ax = plt.subplots(figsize=(8, 3.4))
    ax.imshow(
        kind.T,
        cmap=ListedColormap(["#f4f4f4", "#4c72b0", "#dd8452"]),
        vmin=0,
        vmax=2,
        aspect="auto",
        interpolation="nearest",
    )
    for t in range(T):
        for i in range(counts[t, 1]):
            ax.text(
                t,
                i,
                str(int(ids[t, i])),
                ha="center",
                va="center",
                fontsize=5.5,
                color="white" if kind[t, i] == 1 else "black",
            )
    ax.set_xlabel("time step t")
    ax.set_ylabel(f"slot (N_max = {n_max})")
    ax.set_title(
        "spike list of hidden layer 1, sample 0: neuron ids per slot — blue real spikes, orange gradient-only",
        fontsize=8,
    )
    path = _save(fig, img / "spike-list.png")
    real, grad = int(counts[:, 0].sum()), int((counts[:, 1] - counts[:, 0]).sum())
    text = (
        f"A spiking network is mostly silent, so the simulator (like the paper's IPU code) never moves dense "
        f"vectors: each layer sends, per time step and sample, a *list* of at most N_max neuron ids and two "
        f"counts. The first count covers the real spikes (v > ϑ1, in ascending id), which are transmitted to "
        f"the next layer; the second adds *gradient-only* entries (ϑ2 < v ≤ ϑ1), neurons close to firing that "
        f"get a surrogate gradient in the backward pass but are not sent forward. Anything beyond N_max is "
        f"cut. In this small run ({layers}, N_max = {n_max}) sample 0's hidden layer produced {real} real and "
        f"{grad} gradient-only entries in {T} steps; the list is canonical, so the math is the same under any "
        f"mapping. The fixed N_max is what makes buffers — and exchange — plannable at compile time."
    )
    return {
        "title": "Sparse spike lists: ids + counts, real vs gradient-only",
        "text": text,
        "images": [path],
        "command": "python -m experiments.tour --quick --out out/tour   # (this picture; no CLI equivalent)",
    }


# ---- 5. BPTT memory vs T x B ----------------------------------------------------------------
def bptt_memory(img: Path, quick: bool) -> dict:

    m = load_machine("gc200")
    Ts = [25, 50, 100] if quick else [25, 50, 100, 150, 200]
    Bs = [16, 48] if quick else [16, 32, 48, 96]
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    table = {}
    for B in Bs:
        ys = []
        for T in Ts:
            _, ledger, _ = _place(_cfg(batch=B, timesteps=T), m, 2)
            t = ledger.max_tile()
            ys.append(int(ledger.per_tile()[t]))
            table[(B, T)] = (ys[-1], ledger.by_category(t).get("variables:state", 0))
        ax.plot(Ts, np.array(ys) / 1024, "o-", label=f"batch {B}")
    ax.axhline(m.chip.sram_bytes / 1024, color="red", ls="--", lw=1, label="SRAM per tile")
    ax.set_xlabel("time steps T")
    ax.set_ylabel("fullest tile [KiB]")
    ax.set_title(f"{SHD}, 2 neurons per tile on a GC200", fontsize=10)
    ax.legend(fontsize=8)
    path = _save(fig, img / "bptt-memory.png")
    B0, B1, T0, T1 = Bs[0], Bs[-1], Ts[0], Ts[-1]
    per = (table[(B1, T1)][1] - table[(B0, T0)][1]) / (B1 * T1 - B0 * T0)
    fits = [f"T = {T}, B = {B}" for (B, T), (u, _) in table.items() if u > m.chip.sram_bytes]
    text = (
        f"Backpropagation through time needs the forward pass's membrane potentials again, step by step "
        f"backwards, so every tile keeps a history of T × B values for each of its neurons (plus the spike "
        f"lists it received). Unlike the weights, this grows with the *workload*, not the network: at 2 "
        f"neurons per tile the state history costs {per:.1f} B per (time step × sample) on the fullest tile, "
        f"from {_kib(table[(B0, T0)][1])} at T = {T0}, B = {B0} to {_kib(table[(B1, T1)][1])} at T = {T1}, "
        f"B = {B1}. The lines are straight in T with a slope proportional to B. "
        + (
            f"Past the red line the tile overflows ({', '.join(fits[:3])}): shorten T, shrink the batch, or "
            f"spread the neurons thinner."
            if fits
            else f"All points here fit: the largest, T = {T1}, B = {B1}, uses {_kib(table[(B1, T1)][0])} of "
            f"{_kib(m.chip.sram_bytes)}."
        )
    )
    return {
        "title": "Why BPTT memory grows with T × B",
        "text": text,
        "images": [path],
        "command": f"tilesim run --layers {SHD} --neurons-per-tile 2 --timesteps 200 --batch 96 --steps 1 "
        f"--memory-check report --out out/tour-tb",
    }


# ---- 6. 2 vs 16 neurons per tile ------------------------------------------------------------
def neurons_per_tile(img: Path, quick: bool) -> dict:

    B, T = (16, 20) if quick else (48, 100)
    m = load_machine("gc200")
    cfg = _cfg(batch=B, timesteps=T)
    out, stats = [], {}
    for npt in (2, 16):
        pl, ledger, _ = _place(cfg, m, npt)
        used = ledger.per_tile()
        n_tiles = np.unique(np.concatenate([np.asarray(t) for t in pl.tile_of_neuron])).size
        stats[npt] = (int(used.max()), int((used > ledger.budget).sum()), int(n_tiles))
        layer = np.zeros(m.chips * m.tiles_per_chip, np.int64)
        for k, tiles in enumerate(pl.tile_of_neuron):
            layer[np.unique(np.asarray(tiles))] = k + 1
        out.append(
            plots.memory_heatmap(
                ledger,
                img / f"memory-npt{npt}.png",
                tile_layer=layer,
                title=f"{SHD}, B {B}, T {T}: {npt} neurons per tile (used / budget; "
                f"L1-L3: neuron layers; tiles in id order, 64 per row)",
            )
        )
    (u2, _, n2), (u16, o16, n16) = stats[2], stats[16]
    text = (
        f"How many neurons go on one tile is the main mapping decision. With 2 per tile the network spreads over "
        f"{n2} tiles and the fullest uses {_kib(u2)} ({100 * u2 / m.chip.sram_bytes:.0f} % of its SRAM). With 16 "
        f"per tile it needs only {n16} tiles, which would leave most of the chip idle for other work, but the "
        f"fullest tile grows {u16 / u2:.1f}× — weights and the six per-worker gradient copies scale with fan-in × "
        f"neurons per tile — and {o16} tiles overflow (outlined red; {_kib(u16)} on the worst). The heat map "
        f"shows the layers as bands: the second hidden layer has twice the fan-in of the first, so twice the "
        f"weight bytes per neuron."
    )
    return {
        "title": "2 vs 16 neurons per tile",
        "text": text,
        "images": out,
        "command": f"tilesim run --layers {SHD} --batch {B} --timesteps {T} --steps 1 --neurons-per-tile 16 "
        f"--memory-check report --out out/tour-npt16   # memory.png",
    }


# ---- 7. multi-chip ---------------------------------------------------------------------------
def multichip(img: Path, quick: bool) -> dict:
    from tilesim.outputs.plots import PHASE_COLOURS  # matplotlib is imported only when drawing (start-up time)

    chips = (1, 2, 4) if quick else (1, 2, 4, 8, 16)
    B, T = (8, 20) if quick else (48, 100)
    rows = []
    for C in chips:
        layers = "-".join(["700"] + ["1466"] * (2 * C) + ["20"])
        cfg = _cfg(layers, batch=B, timesteps=T, activity="fixed")
        m = load_machine("gc200", C)
        pl, _, npt = _place(cfg, m)
        p = retime(None, cfg, pl, m)
        rows.append((C, p.step_s, p.result.breakdown_s(), p.result.by_label()))
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    x = np.arange(len(rows))
    bottom = np.zeros(len(rows))
    for ph in PHASES:
        vals = np.array([r[2][ph] for r in rows]) * 1e3
        ax.bar(x, vals, bottom=bottom, color=PHASE_COLOURS[ph], label=ph)
        bottom += vals
    comm = [1 - r[2]["compute"] / r[1] for r in rows]
    for i, c in enumerate(comm):
        ax.text(i, bottom[i], f"{100 * c:.0f} %", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x, [f"{r[0]} chip{'s' if r[0] > 1 else ''}" for r in rows])
    ax.set_ylabel("predicted time per training step [ms]")
    ax.set_title(
        f"2 layers of 1466 neurons per chip (B {B}, T {T}, fixed activity); labels: share not compute", fontsize=9
    )
    ax.legend(fontsize=8)
    path = _save(fig, img / "multichip.png")
    rep = "bwd: replicate lists"
    r0, r1 = rows[0], rows[-1]
    rep0 = r0[3].get(rep, {"time_s": 0.0})["time_s"]
    rep1 = r1[3].get(rep, {"time_s": 0.0})["time_s"]
    ex1 = 1 - r1[3][rep]["breakdown_s"]["compute"] / rep1 if rep1 else 0.0
    text = (
        f"More chips hold bigger networks: here every chip gets two more hidden layers of 1466 neurons (weak "
        f"scaling, {r0[0]} → {r1[0]} chips, timed on a fixed-activity step without training). If the chips "
        f"worked independently the step time would stay flat; instead it grows from {r0[1] * 1e3:.2f} ms to "
        f"{r1[1] * 1e3:.2f} ms: compute {r0[2]['compute'] * 1e3:.1f} → {r1[2]['compute'] * 1e3:.1f} ms, "
        f"everything else "
        f"{(r0[1] - r0[2]['compute']) * 1e3:.1f} → {(r1[1] - r1[2]['compute']) * 1e3:.1f} ms, so the share that is "
        f"not compute rises from {100 * comm[0]:.0f} % to {100 * comm[-1]:.0f} %. The largest growth is in the "
        f"backward pass, which replicates each layer's spike lists in supersteps of its own "
        f"('{rep}': {rep0 * 1e3:.2f} ms → "
        f"{rep1 * 1e3:.2f} ms, {100 * ex1:.0f} % of it exchange, sync and links), each with a sync of its own, "
        f"and with the IPU-Links carrying the lists that cross a chip boundary. That serial, "
        f"exchange-heavy part is what turns a deep multi-chip network communication-bound. What the authors' "
        f"code fixes is modelled as such: the input-gradient reduction's stage 1 as one compute set on all chips, "
        f"then one `reduceMany` per chip, one after another, and the Keras pipeline's "
        f"2(C−1) stage switches per step. What no source says is a named assumption printed with every "
        f"prediction: which chips a superstep without cross-chip data syncs (`--sync-scope`), whether the "
        f"per-layer copies merge into one exchange (`--copies`), and whether the chips' host round trips run in "
        f"parallel (`--host-shared`); `tilesim scaling` shows each one switched the other way."
    )
    return {
        "title": "A multi-chip run turning communication-bound",
        "text": text,
        "images": [path],
        "command": "tilesim run --layers 700-1466-1466-1466-1466-20 --machine gc200 --chips 2 --activity fixed "
        "--steps 1 --json   # breakdown_s; the picture uses tilesim.models.snn.step.retime.retime(None, ...)",
    }


# ---- workers and the supervisor ---------------------------------------------------------------
def workers(img: Path, quick: bool) -> dict:

    m = load_machine("gc200")
    W, sup = m.chip.workers_per_tile, m.chip.supervisor_overhead_cycles
    work = 6000.0  # worker cycles of one tile's job, however split
    v = np.arange(1, 3 * W + 1)
    cyc = barrel_tile_cycles(work / v * v, v, W, sup)  # the same total work in v vertices
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.6))
    bars = ax.bar(v, cyc, color=[SERIES_COLOURS[0] if k % W == 0 else SERIES_COLOURS[7] for k in v])
    ax.axhline(work + sup, color="k", ls=":", lw=1, label="all six workers busy")
    ax.set_xticks(v)
    ax.set_xlabel("vertices the job is split into")
    ax.set_ylabel("tile cycles")
    ax.set_title(
        f"{work:,.0f} worker cycles of work on one tile ({W} workers, {sup} supervisor cycles per round of vertices)",
        fontsize=9,
    )
    ax.legend(fontsize=8)
    from tilesim.outputs.plots import label_bars  # matplotlib is imported only when drawing (start-up time)

    label_bars(ax, bars[:1], "{:,.0f}")
    path = _save(fig, img / "workers.png")
    text = (
        f"A tile is one processor with {W} hardware *worker* threads and a *supervisor*. The core issues "
        f"one instruction per cycle, round-robin over the {W} workers (a barrel), so one worker alone gets "
        f"every {W}th cycle: a job given to a single vertex takes {cyc[0]:,.0f} cycles, the same job in {W} "
        f"vertices {cyc[W - 1]:,.0f}. The supervisor launches the vertices, {sup} cycles per round of {W} "
        f"(the preset's `supervisor_overhead_cycles`), so splitting finer than needed costs a little "
        f"(12 vertices: {cyc[2 * W - 1]:,.0f}). The simulator times every tile this way "
        f"(`tilesim.machine.costs.barrel_tile_cycles`)."
    )
    return {
        "title": "Six workers and the supervisor",
        "text": text,
        "images": [path],
        "command": "tilesim machines gc200 --json   # workers_per_tile, supervisor_overhead_cycles",
    }


# ---- vertices, codelets, compute sets ------------------------------------------------------------
def compute_sets(img: Path, quick: bool) -> dict:

    B, T = (16, 20) if quick else (48, 100)
    cfg = _cfg(batch=B, timesteps=T)
    L = cfg.n_layers
    shape = step_shape(T, L)
    rows = [(r.label, r.kind, r.loop, r.compute_sets.count(L, True), r.copies.count(L, True)) for r in STEP_ROWS]
    per_step = sum(
        (T if loop != "once" else 1) * (cs + cp) * (L if r.per_layer else 1)
        for r, (_, _, loop, cs, cp) in zip(STEP_ROWS, rows)
    )
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.2))
    y = np.arange(len(rows))
    ax.barh(y, [r[3] for r in rows], color=PHASE_COLOURS["compute"], label="compute sets")
    ax.barh(
        y,
        [r[4] for r in rows],
        left=[r[3] for r in rows],
        color=PHASE_COLOURS["exchange"],
        label="copies (exchange only)",
    )
    ax.set_yticks(y, [f"{r[0]}  ({'×T' if r[2] != 'once' else 'once'})" for r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(f"PopLibs calls per row ({L} layers)")
    ax.set_title("the SNN training step as rows (models/snn/step/timing.py STEP_ROWS)", fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    path = _save(fig, img / "compute-sets.png")
    text = (
        f"Poplar programs are made of *vertices* — small objects, each an instance of a *codelet* (a C++ or "
        f"assembly kernel) bound to the tensors it reads and writes on one tile. A *compute set* is a group "
        f"of vertices that run together in one superstep, on as many tiles as the data spans; the compiler "
        f"puts a sync and an exchange between compute sets. The SNN training step of this tour "
        f"({'-'.join(map(str, cfg.layers))}, "
        f"T = {T}) is a table of {len(rows)} rows; a forward row runs once per time step, a backward row once "
        f"per time step backwards; together they issue {per_step:,} compute sets and copies per step — "
        f"{shape.supersteps:,} supersteps in the simulator's program, the rest folded in as their syncs "
        f"and exchange set-ups. Each compute set also costs every tile it touches a fixed "
        f"`compute_set_cycles` (calibrated), which is why steps with many small layers are slow even when "
        f"no tile has much to do."
    )
    return {
        "title": "Vertices, codelets and compute sets",
        "text": text,
        "images": [path],
        "command": f"tilesim run --layers {SHD} --batch {B} --timesteps {T} --steps 1 --json   # by_phase: "
        "supersteps and time per row",
    }


# ---- one superstep, tile by tile ---------------------------------------------------------------
def superstep_tiles(img: Path, quick: bool) -> dict:

    B, T = (16, 20) if quick else (48, 100)
    m = load_machine("gc200")
    cfg = _cfg(batch=B, timesteps=T)
    pl, _, npt = _place(cfg, m)
    p = retime(None, cfg, pl, m)
    res, prog = p.result, p.program
    lab = list(res.labels).index("bwd: weight+input grad")
    s = int(np.flatnonzero(res.label_id == lab)[0])
    us = 1e6 / m.clock_hz
    if hasattr(prog, "compute_cycles"):
        comp = prog.compute_cycles[s, : m.tiles_per_chip].astype(float) * us
    else:  # a compact program rebuilds its rows on demand
        comp = prog.tile_compute(range(m.tiles_per_chip))[s] * us
    st = res.superstep(s)
    top = comp.max()
    sync_us, ex_us = st["breakdown_s"]["sync"] * 1e6, st["breakdown_s"]["exchange"] * 1e6
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(10, 4))
    x = np.arange(comp.size)
    ax.bar(x, comp, width=1.0, color=PHASE_COLOURS["compute"], label="compute")
    ax.bar(x, top - comp, bottom=comp, width=1.0, color="#e8e8e8", label="waiting at the barrier")
    ax.bar(x, np.full(comp.size, sync_us), bottom=top, width=1.0, color=PHASE_COLOURS["sync"], label="sync")
    ax.bar(
        x, np.full(comp.size, ex_us), bottom=top + sync_us, width=1.0, color=PHASE_COLOURS["exchange"], label="exchange"
    )
    ax.set_xlim(0, comp.size)
    ax.set_xlabel("tile (chip 0)")
    ax.set_ylabel("µs")
    ax.set_title(f"superstep {s} ('{st['label']}') tile by tile", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    path = _save(fig, img / "superstep-tiles.png")
    busy = comp[comp > 0]
    idle = 1 - busy.sum() / (top * busy.size) if busy.size else 0.0
    lo = int(np.argmin(np.where(comp > 0, comp, np.inf)))
    n_idle = int((comp == 0).sum())
    text = (
        f"The same idea tile by tile: in superstep {s} of the SHD step ('{st['label']}', {npt} neurons per "
        f"tile, fixed activity) the busiest tile, {int(np.argmax(comp))}, computes {top:.2f} µs; tile {lo} only "
        f"{comp[lo]:.2f} µs — it holds neurons of a layer with a smaller fan-in — and then *waits at the "
        f"barrier*: {100 * idle:.0f} % of the working tiles' time in this superstep is waiting"
        + (f", and {n_idle} tile(s) with nothing to do wait all of it" if n_idle else "")
        + ". "
        f"Then every tile syncs ({sync_us:.3f} µs) and exchanges ({ex_us:.2f} µs). "
        f"Balancing the slowest tile, not the average, is what a mapping is for (`tilesim map-search`)."
    )
    return {
        "title": "One superstep tile by tile: fast tiles idle at the barrier",
        "text": text,
        "images": [path],
        "command": f"tilesim run --layers {SHD} --batch {B} --timesteps {T} --activity fixed --steps 1 "
        "--out out/tour-step   # trace.json: the critical tiles' own tracks",
    }


# ---- the IPU-Link ladder and multi-chip sync ------------------------------------------------------
def _draw_ladder(ax, lk, used: dict, C: int) -> None:
    """Draw the ``C`` chips of the ladder on ``ax`` (rung r = chips 2r, 2r+1), an arrow per link group of
    ``lk`` whose width is its bytes in ``used`` (grey when unused)."""
    pos = {c: (c % 2, -(c // 2)) for c in range(C)}
    top = max(used.values()) if used else 1.0
    for g in lk.bw:
        if g[0] == "pair":
            a, b = 2 * g[1] + g[2], 2 * g[1] + 1 - g[2]
        else:
            a, b = 2 * g[2] + g[1], 2 * g[3] + g[1]
        (x0, y0), (x1, y1) = pos[a], pos[b]
        off = 0.04 if a < b else -0.04
        nb = used.get(g, 0.0)
        ax.annotate(
            "",
            (x1 + (off if g[0] == "rail" else 0), y1 + (off if g[0] == "pair" else 0)),
            (x0 + (off if g[0] == "rail" else 0), y0 + (off if g[0] == "pair" else 0)),
            arrowprops={
                "arrowstyle": "-|>",
                "lw": 0.5 + 4 * nb / top,
                "color": PHASE_COLOURS["links"] if nb else "#cccccc",
                "shrinkA": 14,
                "shrinkB": 14,
            },
        )
    for c, (x, y) in pos.items():
        ax.text(
            x,
            y,
            f"chip {c}",
            ha="center",
            va="center",
            fontsize=9,
            bbox={"boxstyle": "round", "fc": "white", "ec": PHASE_COLOURS["compute"]},
        )
    ax.set_xlim(-0.6, 1.6)
    ax.set_ylim(-(C // 2) + 0.4, 0.6)
    ax.axis("off")


def ladder(img: Path, quick: bool) -> dict:

    C = 4 if quick else 8
    B, T = (8, 20) if quick else (16, 50)
    m = load_machine("gc200", C)
    layers = "-".join(["700"] + ["1466"] * (2 * C) + ["20"])
    cfg = _cfg(layers, batch=B, timesteps=T, activity="fixed")
    pl, _, _ = _place(cfg, m)
    res = retime(None, cfg, pl, m).result
    lk = LadderLinks(m)
    used = res.link_group_bytes
    plt = pyplot()
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.8), gridspec_kw={"width_ratios": [1, 1.2]})
    _draw_ladder(ax, lk, used, C)
    busiest = max(used, key=used.get) if used else None
    ax.set_title(
        f"IPU-Link ladder, {C} chips: arrow width = bytes per step\n"
        f"({m.system.pair_links} links within a rung, {m.system.vertical_links} up/down per side)",
        fontsize=9,
    )
    chips = np.arange(1, 65 if not quick else 17)
    sync = [load_machine("gc200", int(c)).group_sync_cycles(int(c)) / m.clock_hz * 1e9 for c in chips]
    ax2.plot(chips, sync, "o-", ms=3, color=PHASE_COLOURS["sync"])
    ax2.set_xlabel("chips in the sync")
    ax2.set_ylabel("one sync [ns]")
    ax2.set_title("multi-chip sync: on-chip sync + a Sync-Link round trip that grows with the ladder", fontsize=9)
    path = _save(fig, img / "ladder.png")
    total = sum(used.values())
    text = (
        f"Chips are joined by IPU-Links in Poplar's *ladder*: chips 2r and 2r+1 form rung r "
        f"({m.system.pair_links} links between them), each side climbs to the next rung with "
        f"{m.system.vertical_links} links (a wrap-around closes the ladder on bigger systems). A transfer "
        f"climbs its side's rail and crosses at its destination rung; every link is "
        f"{m.system.link_bytes_per_s / 1e9:.0f} GB/s at {100 * m.system.link_efficiency:.0f} % efficiency. In a "
        f"{C}-chip step ({layers}, B {B}, T {T}) the links carry {total / 1e6:.2f} MB per step, the busiest "
        f"group {busiest} {used.get(busiest, 0) / 1e6:.2f} MB. Every superstep of one Poplar graph syncs "
        f"*all* chips over the Sync-Links: {sync[0]:.0f} ns on one chip, {sync[min(len(sync), 16) - 1]:.0f} ns across "
        f"{min(len(sync), 16)} — the round trip grows by a hop per rung, and a step has thousands of syncs."
    )
    return {
        "title": "The IPU-Link ladder and multi-chip sync",
        "text": text,
        "images": [path],
        "command": f"tilesim run --layers {layers} --machine gc200 --chips {C} --activity fixed --batch {B} "
        f"--timesteps {T} --steps 1 --out out/tour-ladder   # exchange.png, trace.json flow arrows",
    }


# ---- the host link ---------------------------------------------------------------------------------
def host_link(img: Path, quick: bool) -> dict:

    B, T = (16, 20) if quick else (48, 100)
    m = load_machine("gc200")
    cfg = _cfg(batch=B, timesteps=T)
    pl, _, _ = _place(cfg, m)
    spe = (1, 4, 16, 52, 208)
    rows = []
    for k in spe:
        r = retime(None, cfg, pl, m, steps_per_execution=k).result
        by = r.by_label()
        copy = sum(by[h]["time_s"] for h in HOST_LABELS if h in by)
        rows.append((k, r.total_s, copy, r.breakdown_s()["host"] - copy))
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.8))
    x = np.arange(len(rows))
    ax.bar(x, [(r[1] - r[2] - r[3]) * 1e3 for r in rows], color=PHASE_COLOURS["compute"], label="the rest of the step")
    ax.bar(
        x,
        [r[2] * 1e3 for r in rows],
        bottom=[(r[1] - r[2] - r[3]) * 1e3 for r in rows],
        color=PHASE_COLOURS["host"],
        label="host: variable copy",
    )
    for i, r in enumerate(rows):
        ax.annotate(
            f"{r[1] * 1e3:.2f}", (i, r[1] * 1e3), xytext=(0, 2), textcoords="offset points", ha="center", fontsize=8
        )
    ax.set_xticks(x, [str(r[0]) for r in rows])
    ax.set_xlabel("--steps-per-execution")
    ax.set_ylabel("ms per step")
    ax.set_title(f"{SHD}, B {B}, T {T}: the host's share", fontsize=9)
    ax.legend(fontsize=8)
    path = _save(fig, img / "host-link.png")
    infeed = T * B * 4.0 * (cfg.input_cap + 1) + 4.0 * B
    ns = default_costs().coefficients["host_copy_ns_per_byte"]
    by_doc = retime(None, cfg, pl, m, structure=StepStructure(host_rate="documented")).result.by_label()
    doc = sum(by_doc[h]["time_s"] for h in HOST_LABELS if h in by_doc)
    text = (
        f"The host (the server running the framework) talks to the chips over PCIe: "
        f"{m.system.host_bytes_per_s / 1e9:.0f} GB/s and {m.system.host_latency_s * 1e6:.1f} µs per transfer "
        f"in the preset. Every step the input spike lists arrive by host infeed ({infeed / 1e3:,.0f} kB here, "
        f"booked as host at the first superstep). Once per epoch (here: every `--steps-per-execution` steps, one "
        f"execution per epoch as in the authors' runs) Keras resets its loss metric, and Graphcore's TensorFlow "
        f"executor then moves every variable the device updated to the host and every argument back before the "
        f"epoch's first step: the weights and the optimizer's slots, 12 bytes per weight each way with Adam "
        f"(a third of that with plain SGD). That much is known from the framework's code "
        f"(`models/snn/step/structure.py` quotes it), "
        f"and the authors' training log puts the round trip inside the timed "
        f"epochs. Its rate is not known: the simulator uses the rate fitted to the measured steps, "
        f"{ns:.2f} ns per byte and direction ({1 / ns:.2f} GB/s), against Graphcore's documented 3 GB/s for one large "
        f"buffer (`--host-rate documented`); on several chips, whether they move their state in parallel is "
        f"assumed too (`--host-shared`). Amortised over 1 step it costs {rows[0][2] * 1e3:.2f} ms of a "
        f"{rows[0][1] * 1e3:.2f} ms step; over 52 (the default) {rows[3][2] * 1e3:.3f} ms of {rows[3][1] * 1e3:.2f} "
        f"ms, or {doc * 1e3:.3f} ms at the documented rate."
    )
    return {
        "title": "The host link",
        "text": text,
        "images": [path],
        "command": f"tilesim run --layers {SHD} --batch {B} --timesteps {T} --steps 1 --steps-per-execution 1",
    }


# ---- exercises, glossary, what is not modelled ------------------------------------------------------
def exercises(quick: bool) -> list:
    """Three questions and the simulator's answers (computed now)."""

    B, T = (16, 20) if quick else (48, 100)
    m = load_machine("gc200")
    out = []
    cfg = _cfg(batch=B, timesteps=T, activity="fixed")
    pl, _, _ = _place(cfg, m)
    adam = retime(None, cfg, pl, m).step_s
    sgd_cfg = _cfg(batch=B, timesteps=T, activity="fixed", optimizer="sgd")
    sgd = retime(None, sgd_cfg, _place(sgd_cfg, m)[0], m).step_s
    out.append(
        (
            f"The SHD network ({SHD}, B {B}, T {T}, fixed activity) trains with Adam. How much shorter is "
            f"the step with plain SGD, and why?",
            f"{adam * 1e3:.3f} ms → {sgd * 1e3:.3f} ms ({100 * (1 - sgd / adam):.1f} % shorter): SGD has no "
            f"moment slots, so the optimizer writes less and the host variable copy moves a third of the "
            f"bytes.",
            f"tilesim run --layers {SHD} --batch {B} --timesteps {T} --activity fixed --steps 1 --optimizer sgd",
        )
    )
    fits = []
    for npt in (2, 4, 8, 12, 16, 24):
        _, ledger, _ = _place(cfg, m, npt)
        fits.append((npt, int(ledger.per_tile().max()) <= ledger.budget))
    last = max([n for n, ok in fits if ok], default=None)
    first_bad = min([n for n, ok in fits if not ok], default=None)
    out.append(
        (
            "Of 2, 4, 8, 12, 16 and 24 neurons per tile, which is the largest at which that network still "
            "fits in SRAM?",
            f"{last} neurons per tile fit; {first_bad} overflow (weights and the six per-worker gradient copies "
            f"grow with neurons per tile)."
            if first_bad
            else f"all of them fit, up to {last}.",
            f"tilesim run --layers {SHD} --batch {B} --timesteps {T} --neurons-per-tile {first_bad or last} "
            f"--steps 1 --memory-check report",
        )
    )
    cfg2 = _cfg("700-1466-1466-20", batch=B, timesteps=T, activity="fixed")
    one = retime(None, cfg2, _place(cfg2, m)[0], m).result
    m2 = load_machine("gc200", 2)
    two = retime(None, cfg2, _place(cfg2, m2)[0], m2).result
    out.append(
        (
            "Put the network 700-1466-1466-20 on two chips instead of one (same batch and T). Is the step "
            "faster? What grows?",
            f"one chip {one.total_s * 1e3:.3f} ms, two chips {two.total_s * 1e3:.3f} ms; sync "
            f"{one.breakdown_s()['sync'] * 1e3:.3f} → {two.breakdown_s()['sync'] * 1e3:.3f} ms and links "
            f"{one.breakdown_s()['links'] * 1e3:.3f} → {two.breakdown_s()['links'] * 1e3:.3f} ms: every superstep "
            f"now syncs both chips and the lists that cross the chip boundary ride the IPU-Links.",
            f"tilesim run --layers 700-1466-1466-20 --batch {B} --timesteps {T} --activity fixed --steps 1 --chips 2",
        )
    )
    return out


GLOSSARY = (
    ("tile", "one processor core with its own SRAM (624 KiB on a GC200) and no shared memory"),
    ("worker / supervisor", "the six hardware threads that run vertices, round-robin; the thread that launches them"),
    ("vertex / codelet", "a small piece of work bound to tensors on one tile / the kernel a vertex runs"),
    ("compute set", "vertices that run together in one superstep (a sync and an exchange follow)"),
    ("superstep (BSP)", "compute, then sync, then exchange: bulk-synchronous parallel execution"),
    ("sync", "every tile (on several chips: every chip) waits for the slowest before exchanging"),
    ("exchange", "tiles copy data into other tiles' SRAM on a compile-time schedule, 4 B/cycle per tile"),
    ("supertile", "two tiles sharing an exchange port; both can receive the same data at once (8 B/cycle)"),
    ("IPU-Link / ladder", "chip-to-chip links; Poplar's ladder of rungs of two chips"),
    ("host link", "PCIe to the server: input infeed, the round trip of weights and optimizer state once per epoch"),
    ("steps per execution", "training steps the device runs before returning to the host"),
    ("critical tile", "the slowest tile of a superstep (the one everybody waits for)"),
    ("N_max", "the most neuron ids a layer's spike list may carry per time step and sample"),
)

NOT_MODELLED = (
    "the chip's floorplan: tile pictures draw tiles in id order (the exchange is all-to-all, distance-independent)",
    "memory bank conflicts and the Mk2 interleaved-memory layout; instruction-level pipeline stalls",
    "exact Poplar compiler choices: the step is the paper's program as a table of rows, not a compiled graph",
    "overlap of host I/O with compute (prefetch), and host-side framework time beyond the fitted variable copy",
    "IPU-Link contention finer than per link group; GW-Links between pods; clock throttling and power",
)


SECTIONS = (
    tile_sram,
    workers,
    compute_sets,
    bsp_superstep,
    superstep_tiles,
    exchange_distance,
    spike_lists,
    bptt_memory,
    neurons_per_tile,
    multichip,
    ladder,
    host_link,
)


def render(sections, quick: bool, seconds: float, exercises_=()) -> str:
    lines = [
        "# A tour of tilesim",
        "",
        "The architecture of a tile machine, explained with the simulator's own pictures. Every number below "
        "was computed by the run that drew the pictures (`python -m experiments.tour"
        + (" --quick" if quick else "")
        + f"`, {seconds:.0f} s), so it follows the current cost model.",
        "",
    ]
    for i, s in enumerate(sections, 1):
        lines += [f"## {i}. {s['title']}", "", s["text"], ""]
        lines += [f"![{s['title']}](tour/{Path(p).name})" for p in s["images"]]
        lines += ["", "```sh", s["command"], "```", ""]
    if exercises_:
        lines += [
            "## Exercises",
            "",
            "Try each with the command shown, then open the answer (computed by the run that wrote this page).",
            "",
        ]
        for i, (q, a, cmd) in enumerate(exercises_, 1):
            lines += [f"{i}. {q}", "", f"   `{cmd}`", "", f"   <details><summary>answer</summary>{a}</details>", ""]
    lines += ["## Glossary", "", "| term | meaning |", "|---|---|"]
    lines += [f"| {t} | {d} |" for t, d in GLOSSARY]
    lines += ["", "## What is not modelled", ""]
    lines += ["> " + "\n> ".join(f"* {x}" for x in NOT_MODELLED), ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="docs", help="directory for tour.md and tour/*.png (default docs)")
    ap.add_argument("--quick", action="store_true", help="smaller configurations (the test)")
    a = ap.parse_args(argv)
    out = Path(a.out)
    img = out / "tour"
    img.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    sections = []
    for fn in SECTIONS:
        sections.append(fn(img, a.quick))
        print(f"  {fn.__name__}: {', '.join(Path(p).name for p in sections[-1]['images'])}")
    ex = exercises(a.quick)
    md = atomic_write_text(out / "tour.md", render(sections, a.quick, time.perf_counter() - t0, ex))
    print(f"wrote {md} and {len(sum((s['images'] for s in sections), []))} pictures in {img}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
