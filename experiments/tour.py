"""The tour: the architecture explained with the simulator's own pictures (``docs/tour.md``).

Seven sections — a tile and its SRAM, one BSP superstep, exchange distance on the IPU vs a mesh,
sparse spike lists, BPTT memory vs T × B, 2 vs 16 neurons per tile, a multi-chip run turning
communication-bound. Each writes one or two PNGs to ``OUT/tour/`` and a section of
``OUT/tour.md`` whose numbers come from this run (so they follow the cost model).

    python -m experiments.tour [--out docs] [--quick]
"""
from __future__ import annotations

import argparse
import time
from importlib import resources
from pathlib import Path

import numpy as np

from experiments.b_common import SEED, pyplot
from tilesim.io import atomic_write_text

DPI = 100
SHD = "700-1462-1460-20"
CAT_COLOURS = {"variables:weights": "#4c72b0", "variables:gradients": "#c44e52", "variables:optimizer": "#dd8452",
               "variables:state": "#8172b3", "variables:spikes": "#937860", "variables:inputs": "#da8bc3",
               "variables:activations": "#8c8c8c", "variables:other": "#ccb974", "exchange_buffers": "#55a868",
               "vertex_state": "#64b5cd", "vertex_code": "#4c4c4c", "control_code": "#999999",
               "exchange_code": "#bbbbbb", "stack": "#dddddd"}


def _cfg(layers=SHD, batch=48, timesteps=100, **kw):
    from models.snn.network import NetworkConfig
    return NetworkConfig(layers=layers, batch=batch, timesteps=timesteps, max_activity=0.05, input_cap=48,
                         seed=SEED, **kw)


def _place(cfg, machine, npt=None):
    from models.snn.placing import place
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
    from tilesim.machine import load_machine
    B, T = (16, 20) if quick else (48, 100)
    m = load_machine("gc200")
    _, ledger, npt = _place(_cfg(batch=B, timesteps=T), m)
    t = ledger.max_tile()
    entries = ledger.explain_tile(t, 10)
    used, budget = int(ledger.per_tile()[t]), ledger.budget
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 0.6 + 0.32 * len(entries)))
    ax.barh(range(len(entries)), [e[2] / 1024 for e in entries], color=[CAT_COLOURS[e[1]] for e in entries])
    ax.set_yticks(range(len(entries)), [f"{lab}  [{cat.replace('variables:', 'var:')}]" for lab, cat, _ in entries],
                  fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("KiB on this tile")
    ax.set_title(f"tile {t} of a GC200: {_kib(used)} of {_kib(budget)} used ({100 * used / budget:.0f} %)", fontsize=9)
    path = _save(fig, img / "tile-sram.png")
    top = entries[0]
    text = (f"An IPU chip is {m.chip.tiles} tiles, each a small processor with its own {_kib(budget)} of SRAM and no "
            f"shared memory: everything a tile computes with — weights, gradients, optimizer state, buffers for "
            f"incoming data, and the code itself — must fit in that SRAM. The simulator keeps a *ledger* of every "
            f"tensor on every tile, with the categories of Graphcore's profiler. Here the paper's SHD network "
            f"({SHD}, batch {B}, {T} steps) sits {npt} neurons per tile; the fullest tile, {t}, uses "
            f"{_kib(used)} ({100 * used / budget:.0f} %). Its largest item is '{top[0]}' ({_kib(top[2])}): the "
            f"weight gradient is kept once per hardware worker thread (six copies) so the workers never race. "
            f"Code and exchange buffers are a visible share too — on a tile, nothing is free.")
    return {"title": "A tile and its SRAM", "text": text, "images": [path],
            "command": f"tilesim run --layers {SHD} --batch {B} --timesteps {T} --steps 1 --out out/tour-run   "
                       f"# out/tour-run/memory.txt: the ledger of the fullest tiles"}


# ---- 2. one BSP superstep -------------------------------------------------------------------
def bsp_superstep(img: Path, quick: bool) -> dict:
    from tilesim import plots
    from tilesim.engine import simulate
    from tilesim.machine import load_machine
    from tilesim.program import load_program

    m = load_machine("m2000")
    with resources.as_file(resources.files("tilesim") / "examples" / "demo.toml") as p:
        program, _ = load_program(p, m)
    res = simulate(program, m)
    path = plots.timeline(res, img / "bsp-timeline.png", max_supersteps=12,
                          title="BSP timeline of `tilesim demo` on an M2000 (4 chips), first 12 supersteps")
    s = res.superstep(1)
    bd = {k: v * 1e6 for k, v in s["breakdown_s"].items()}
    text = (f"Tiles do not share memory, so they take turns: every *superstep* is compute (each tile works on "
            f"its own SRAM), then a *sync* (every tile waits for the slowest), then *exchange* (tiles copy data "
            f"into each other's SRAM, all at once, on a schedule the compiler fixed). The time of a superstep "
            f"is therefore set by its slowest tile, not the average one. In `tilesim demo` the first half of "
            f"each chip's tiles has twice the work; superstep 1 ('{s['label']}') takes {bd['compute']:.2f} µs of "
            f"compute (critical tile {s['critical_tile']}), {bd['sync']:.3f} µs of sync and {bd['exchange']:.2f} µs "
            f"of exchange. Supersteps that need data from other chips sync all four chips and then move it "
            f"over the IPU-Links (orange).")
    return {"title": "One BSP superstep: compute → sync → exchange", "text": text, "images": [path],
            "command": "tilesim demo --out out/demo      # out/demo/timeline.png, trace.json (Perfetto)"}


# ---- 3. exchange distance -------------------------------------------------------------------
def exchange_distance(img: Path, quick: bool) -> dict:
    from models.linear.cli import exchange_bench
    sizes = [4, 256, 16384, 1048576] if quick else [4 * 4 ** i for i in range(10)]
    pairs = {"gc200": (0, [1, 644]), "mesh-demo": (0, [1, 255])}
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    ratio = {}
    for machine, (src, dsts) in pairs.items():
        rows = exchange_bench(machine, src, dsts, sizes)
        for d, style in zip(dsts, ("o-", "x--")):
            sel = [r for r in rows if r["dst"] == d]
            ax.loglog([r["bytes"] for r in sel], [r["cycles"] for r in sel], style,
                      label=f"{machine}: tile {src} → {d} ({sel[0]['hops']} hops)")
        small = [r for r in rows if r["bytes"] == sizes[0]]
        ratio[machine] = max(r["cycles"] for r in small) / min(r["cycles"] for r in small)
    ax.set_xlabel("message size [B]")
    ax.set_ylabel("cycles")
    ax.set_title("point-to-point exchange: near vs far tile", fontsize=10)
    ax.legend(fontsize=8)
    path = _save(fig, img / "exchange-distance.png")
    text = (f"On the IPU every tile reaches every other tile through one all-to-all exchange fabric, so the cost "
            f"of a message depends on its size, not on where the two tiles are: tile 0 → 1 and tile 0 → 644 "
            f"overlap exactly (far/near = {ratio['gc200']:.2f} for a {sizes[0]} B message). Most other tile machines "
            f"use a 2-D mesh where a message hops from router to router; the `mesh-demo` preset (16 × 16 tiles, XY "
            f"routing) pays per hop, so the far corner costs {ratio['mesh-demo']:.2f}× the neighbour for small "
            f"messages, while for large ones bandwidth hides the hops. This is why a mapping on the IPU "
            f"only has to balance bytes per tile, while on a mesh it must also keep talkers close.")
    return {"title": "Why exchange is distance-independent on the IPU but not on a mesh", "text": text,
            "images": [path],
            "command": "tilesim exchange-bench --machine gc200 --src 0 --dst 1,644 --bytes 4,256,16384,1048576 --json\n"
                       "tilesim exchange-bench --machine mesh-demo --src 0 --dst 1,255 --bytes 4,256,16384,1048576 --json"}


# ---- 4. sparse spike lists ------------------------------------------------------------------
def spike_lists(img: Path, quick: bool) -> dict:
    from models.snn import data as D
    from models.snn.network import NetworkConfig, init_network, train_step
    from tilesim.machine import load_machine

    layers, T, B = "100-64-10", 30, 2
    cfg = NetworkConfig(layers=layers, batch=B, timesteps=T, caps=(8, 2), input_cap=16, seed=SEED, weight_mul=4.0,
                        output_second_threshold=None, second_threshold_schedule=None)
    pl, _, _ = _place(cfg, load_machine("gc200"))
    state = init_network(cfg, pl)
    ds = D.synthetic(cfg.layers, 4, T, seed=SEED)
    spikes, labels = next(ds.batches(B, T, cfg.input_cap, np.random.default_rng(SEED)))
    res = train_step(state, spikes, labels)
    lst = res.activity.layers[0]
    ids, counts = lst.ids[:, 0, :], lst.counts[:, 0, :]
    n_max = lst.n_max
    kind = np.zeros((T, n_max))                         # 0 empty, 1 real, 2 gradient-only
    for t in range(T):
        kind[t, :counts[t, 0]] = 1
        kind[t, counts[t, 0]:counts[t, 1]] = 2
    plt = pyplot()
    from matplotlib.colors import ListedColormap
    fig, ax = plt.subplots(figsize=(8, 3.4))
    ax.imshow(kind.T, cmap=ListedColormap(["#f4f4f4", "#4c72b0", "#dd8452"]), vmin=0, vmax=2, aspect="auto",
              interpolation="nearest")
    for t in range(T):
        for i in range(counts[t, 1]):
            ax.text(t, i, str(int(ids[t, i])), ha="center", va="center", fontsize=5.5,
                    color="white" if kind[t, i] == 1 else "black")
    ax.set_xlabel("time step t")
    ax.set_ylabel(f"slot (N_max = {n_max})")
    ax.set_title("spike list of hidden layer 1, sample 0: neuron ids per slot — blue real spikes, orange "
                 "gradient-only", fontsize=8)
    path = _save(fig, img / "spike-list.png")
    real, grad = int(counts[:, 0].sum()), int((counts[:, 1] - counts[:, 0]).sum())
    text = (f"A spiking network is mostly silent, so the simulator (like the paper's IPU code) never moves dense "
            f"vectors: each layer sends, per time step and sample, a *list* of at most N_max neuron ids and two "
            f"counts. The first count covers the real spikes (v > ϑ1, in ascending id), which are transmitted to "
            f"the next layer; the second adds *gradient-only* entries (ϑ2 < v ≤ ϑ1), neurons close to firing that "
            f"get a surrogate gradient in the backward pass but are not sent forward. Anything beyond N_max is "
            f"cut. In this small run ({layers}, N_max = {n_max}) sample 0's hidden layer produced {real} real and "
            f"{grad} gradient-only entries in {T} steps; the list is canonical, so the math is the same under any "
            f"mapping. The fixed N_max is what makes buffers — and exchange — plannable at compile time.")
    return {"title": "Sparse spike lists: ids + counts, real vs gradient-only", "text": text, "images": [path],
            "command": "python -m experiments.tour --quick --out out/tour   # (this picture; no CLI equivalent)"}


# ---- 5. BPTT memory vs T x B ----------------------------------------------------------------
def bptt_memory(img: Path, quick: bool) -> dict:
    from tilesim.machine import load_machine
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
    text = (f"Backpropagation through time needs the forward pass's membrane potentials again, step by step "
            f"backwards, so every tile keeps a history of T × B values for each of its neurons (plus the spike "
            f"lists it received). Unlike the weights, this grows with the *workload*, not the network: at 2 "
            f"neurons per tile the state history costs {per:.1f} B per (time step × sample) on the fullest tile, "
            f"from {_kib(table[(B0, T0)][1])} at T = {T0}, B = {B0} to {_kib(table[(B1, T1)][1])} at T = {T1}, "
            f"B = {B1}. The lines are straight in T with a slope proportional to B. "
            + (f"Past the red line the tile overflows ({', '.join(fits[:3])}): shorten T, shrink the batch, or "
               f"spread the neurons thinner." if fits else
               f"All points here fit: the largest, T = {T1}, B = {B1}, uses {_kib(table[(B1, T1)][0])} of "
               f"{_kib(m.chip.sram_bytes)}."))
    return {"title": "Why BPTT memory grows with T × B", "text": text, "images": [path],
            "command": f"tilesim run --layers {SHD} --neurons-per-tile 2 --timesteps 200 --batch 96 --steps 1 "
                       f"--memory-check report --out out/tour-tb"}


# ---- 6. 2 vs 16 neurons per tile ------------------------------------------------------------
def neurons_per_tile(img: Path, quick: bool) -> dict:
    from tilesim import plots
    from tilesim.machine import load_machine
    B, T = (16, 20) if quick else (48, 100)
    m = load_machine("gc200")
    cfg = _cfg(batch=B, timesteps=T)
    out, stats = [], {}
    for npt in (2, 16):
        pl, ledger, _ = _place(cfg, m, npt)
        used = ledger.per_tile()
        n_tiles = np.unique(np.concatenate([np.asarray(t) for t in pl.tile_of_neuron])).size
        stats[npt] = (int(used.max()), int((used > ledger.budget).sum()), int(n_tiles))
        out.append(plots.memory_heatmap(ledger, img / f"memory-npt{npt}.png",
                                        title=f"{SHD}, B {B}, T {T}: {npt} neurons per tile (used / budget)"))
    (u2, o2, n2), (u16, o16, n16) = stats[2], stats[16]
    text = (f"How many neurons go on one tile is the main mapping decision. With 2 per tile the network spreads over "
            f"{n2} tiles and the fullest uses {_kib(u2)} ({100 * u2 / m.chip.sram_bytes:.0f} % of its SRAM). With 16 "
            f"per tile it needs only {n16} tiles, which would leave most of the chip idle for other work, but the "
            f"fullest tile grows {u16 / u2:.1f}× — weights and the six per-worker gradient copies scale with fan-in × "
            f"neurons per tile — and {o16} tiles overflow (outlined red; {_kib(u16)} on the worst). The heat map "
            f"shows the layers as bands: the second hidden layer has twice the fan-in of the first, so twice the "
            f"weight bytes per neuron.")
    return {"title": "2 vs 16 neurons per tile", "text": text, "images": out,
            "command": f"tilesim run --layers {SHD} --batch {B} --timesteps {T} --steps 1 --neurons-per-tile 16 "
                       f"--memory-check report --out out/tour-npt16   # memory.png"}


# ---- 7. multi-chip ---------------------------------------------------------------------------
def multichip(img: Path, quick: bool) -> dict:
    from models.snn.retime import retime
    from tilesim.machine import load_machine
    from tilesim.plots import PHASE_COLOURS
    from tilesim.records import PHASES

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
    ax.set_title(f"2 layers of 1466 neurons per chip (B {B}, T {T}, fixed activity); "
                 f"labels: share not compute", fontsize=9)
    ax.legend(fontsize=8)
    path = _save(fig, img / "multichip.png")
    rep = "bwd: replicate lists"
    r0, r1 = rows[0], rows[-1]
    rep0 = r0[3].get(rep, {"time_s": 0.0})["time_s"]
    rep1 = r1[3].get(rep, {"time_s": 0.0})["time_s"]
    ex1 = 1 - r1[3][rep]["breakdown_s"]["compute"] / rep1 if rep1 else 0.0
    text = (f"More chips hold bigger networks: here every chip gets two more hidden layers of 1466 neurons (weak "
            f"scaling, {r0[0]} → {r1[0]} chips, timed on a fixed-activity step without training). If the chips "
            f"worked independently the step time would stay flat; instead it grows from {r0[1] * 1e3:.2f} ms to "
            f"{r1[1] * 1e3:.2f} ms: compute {r0[2]['compute'] * 1e3:.1f} → {r1[2]['compute'] * 1e3:.1f} ms, everything else "
            f"{(r0[1] - r0[2]['compute']) * 1e3:.1f} → {(r1[1] - r1[2]['compute']) * 1e3:.1f} ms, so the share that is "
            f"not compute rises from {100 * comm[0]:.0f} % to {100 * comm[-1]:.0f} %. The largest growth is in the "
            f"backward pass, which replicates each layer's spike lists in supersteps of its own ('{rep}': {rep0 * 1e3:.2f} ms → "
            f"{rep1 * 1e3:.2f} ms, {100 * ex1:.0f} % of it exchange, sync and links), each with a sync of its own, "
            f"and with the IPU-Links carrying the lists that cross a chip boundary. That serial, "
            f"exchange-heavy part is what turns a deep multi-chip network communication-bound.")
    return {"title": "A multi-chip run turning communication-bound", "text": text, "images": [path],
            "command": "tilesim run --layers 700-1466-1466-1466-1466-20 --machine gc200 --chips 2 --activity fixed "
                       "--steps 1 --json   # breakdown_s; the picture uses models.snn.retime.retime(None, ...)"}


SECTIONS = (tile_sram, bsp_superstep, exchange_distance, spike_lists, bptt_memory, neurons_per_tile, multichip)


def render(sections, quick: bool, seconds: float) -> str:
    lines = ["# A tour of tilesim", "",
             "The architecture of a tile machine, explained with the simulator's own pictures. Every number below "
             "was computed by the run that drew the pictures (`python -m experiments.tour"
             + (" --quick" if quick else "") + f"`, {seconds:.0f} s), so it follows the current cost model.", ""]
    for i, s in enumerate(sections, 1):
        lines += [f"## {i}. {s['title']}", "", s["text"], ""]
        lines += [f"![{s['title']}](tour/{Path(p).name})" for p in s["images"]]
        lines += ["", "```sh", s["command"], "```", ""]
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
    md = atomic_write_text(out / "tour.md", render(sections, a.quick, time.perf_counter() - t0))
    print(f"wrote {md} and {len(sum((s['images'] for s in sections), []))} pictures in {img}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
