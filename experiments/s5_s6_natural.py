"""S5/S6 at natural activity, as the poster ran them, beside the fixed-activity rows.

Claims (seed-claims.md S5, S6): weak scaling on SHD at *natural* activity (5 % max activity) from 1 to
16 IPUs, and efficiency at 16 chips rising with batch (24 → 384) and with neurons per tile (2 → 8).
``s5_s6_weak_scaling.py`` times every point at fixed activity (every list at its 5 % cap: the lower
bound of throughput). Here each network trains one real SGD step from its initial weights and that
step's recorded activity is re-timed, with two inputs: ``natural``, SHD-shaped events
(:mod:`tilesim.models.snn.training.data`, the generator of ``experiments/s_common.py``), and
``natural_cap``, the input cap (48) filled in every bin (:func:`tilesim.models.snn.training.data.input_at_cap`:
the most drive the authors' loader can deliver, so an upper bound of SHD's, whatever its rate per channel
and bin). The fixed-activity step of the same network and placement is timed beside them. All under the
§4.4 structure (:data:`tilesim.models.snn.commands.scaling.PAPER_STRUCTURE`: two executions of 500 steps per
epoch). Weak-scaling efficiency per activity mode E(C) = throughput(C) / (C · throughput(1)),
throughput = samples/s × neurons.

The network is the authors' (``weak_config``, checked against ``jrfinkbeiner/graphcore_snn``):
``runfile_multi_ipu.sh`` runs ``benchmarking_script.py --bench_mode=multi_neuron --weight_mul=2.0
--second_thresh=0.9 --sparse_size_inp=48 --batchsize=24 --lr=0.00003`` (3·npt/2 hidden layers per IPU);
the script sets ``SEQ_LEN = 10`` for ``multi_neuron``, ``DECAY_CONSTANT = 0.95``, ``THRESHOLD = 1.0``, ϑ2
0.9 in every layer including the output (``THRESHOLD_FISRT_AND_SECOND``), SGD; the weights are
``U(−a, a) + 0.001``, ``a = (6/in_feat)**0.5 * weight_mul`` (``KerasMultiLIFLayerBase.build``,
``keras_train_util.py``); the membrane gets ``(1 − α)·10·I`` (``mulFac`` 10.0 in ``Build``,
``custom_lif_layer_vectorize_transpose/poplar_code.cpp``); the ϑ2 schedule is off
(``adjust_multi_thresh`` commented out in ``KerasMultiLIFLayerSparse.call``); SHD events are binned at 1 ms
from the sample's first event, unique channels, at most 48 per bin (``events_to_sparse_tensors``,
``nmnist_util.py``).

**That configuration is silent past its first layers at T 10**, and this experiment prints it per layer
(``layer_spikes``, ``layer_gradient_only``: per sample and time step, layer 1 first; ``silent_from``: the
lowest silent hidden layer, the ``silent_layer`` finding of
:func:`tilesim.models.snn.training.diagnose.check_silent`). Two mechanisms, both in the authors' code:

* the drive: with ``a = 2·√(6/980) ≈ 0.156`` a spike of the layer below moves a membrane by
  ``0.5·U(−a, a)`` (σ ≈ 0.045) against ϑ1 = 1, so each layer passes on fewer spikes than it receives: on
  SHD-shaped input (≈ 8 channels per bin) layer 1 keeps ≈ 3 spikes per sample and step and layer 2 none;
  with the input cap full in every bin layers 1–3 spike and layer 4 barely;
* the delay: the forward loop copies layer i's output of the *previous* step into layer i+1's input
  (``loop.add(Copy(slicedOutSpikeIds[i], slicedInpSpikeIds[i+1]))`` before
  ``performLIFStepFworwardPassInPlace`` in ``Build``'s ``loopFwd``), and the lists of layers ≥ 1 start empty
  (``tf.zeros((batchsize_per_step,1))`` counts in ``model_fn_sparse_layer_multi_ipu``, ``multi_ipu.py``), so
  layer l (1-based) first hears the data at step l − 1: at T = 10 layers 11 and up cannot spike at all, and
  the output of a network of more than 10 layers (every §4.4 network from 4 chips at npt 2) never hears the
  data.

So S6's natural half measures a network whose spike work sits in its first 1–3 layers: every further layer
costs its per-layer syncs, exchange set-ups, copies and empty-list scans, not spike work; E(C) at natural
activity is the efficiency of that overhead (the authors' own natural runs, if they ran them, would measure
the same), and the fixed rows stay the only ones with spike work in every layer.

Grid: SHD, 1/2/4/8/16 ``bow`` chips × npt 2/4/8 × B 24/384 (the ends of the poster's batch range;
the signs of S6 read only those). Run time on the shared 2-core machine: about 6 min (the
16-chip B 384 points, up to 188k neurons and 184M weights, take up to 70 s each, natural, capped and fixed
together). ``--quick``: 1, 2 and 4 chips, npt 2, B 24 (about a minute). ``--data-root DIR``: real SHD
(tonic's folder) instead of the generator, binned from each sample's first event (``from_first_event``).
Not in the test suite's quick runs beyond ``--quick``."""

from __future__ import annotations

import sys
import time

import numpy as np

from experiments.s_common import (
    DATASETS,
    SEED,
    dataset_for,
    machine,
    memory_fields,
    place,
    pyplot,
    standard_main,
    timing_fields,
    weak_config,
)
from tilesim.models.snn.commands.scaling import PAPER_STEPS_PER_EXECUTION, PAPER_STRUCTURE
from tilesim.models.snn.step.retime import retime

MAX_ACTIVITY = 0.05
CHIPS = (1, 2, 4, 8, 16)
NPTS = (2, 4, 8)
BATCHES = (24, 384)
QUICK = ((1, 2, 4), (2,), (24,))
MODES = ("natural", "natural_cap", "fixed")
DATA_ROOT: str | None = None
"""``--data-root DIR``: real SHD from tonic's folder (``DIR/SHD``), its events binned from each sample's first
event as the authors' loader does; None: the SHD-shaped generator."""


def _layers(values) -> str:
    """Per-layer values, layer 1 first, ``/``-separated; a tail of zeros as ``0×n``."""
    v = [float(x) for x in values]
    last = max((i for i, x in enumerate(v) if x != 0), default=-1)
    head = "/".join(f"{x:.3g}" for x in v[: last + 1])
    tail = len(v) - last - 1
    return "/".join(x for x in (head, f"0×{tail}" if tail else "") if x)


def _activity_fields(res, cfg) -> dict:
    """Per-layer spikes and gradient-only entries (per sample and time step) of one natural step, and
    the lowest silent hidden layer with the finding's reason (``check_silent``)."""
    from tilesim.models.snn.training.diagnose import StepRecord, check_silent

    stats = res.layer_stats
    found = check_silent([StepRecord.from_result(0, res)], cfg)
    return {
        "layer_spikes": _layers(s.spikes for s in stats),
        "layer_gradient_only": _layers(s.gradient_only for s in stats),
        "layers_with_spikes": sum(s.spikes > 0 for s in stats),
        "silent_from": "" if found is None else found.layer + 1,
        "silent_by_delay": "" if found is None else found.layer >= cfg.timesteps,
    }


def _point(npt: int, batch: int, chips: int, data: dict) -> list:
    """The natural rows (SHD-shaped input; input at the loader's cap) and the fixed row of one network
    (one placement)."""
    from tilesim.models.snn.training.data import input_at_cap
    from tilesim.models.snn.training.network import init_network, train_step  # Numba kernels load only when they run

    cfg = weak_config("shd", npt, chips, batch=batch, max_activity=MAX_ACTIVITY)
    mach = machine(chips)
    placement, ledger = place(cfg, mach, npt)
    if batch not in data:
        if DATA_ROOT is not None:
            from tilesim.models.snn.training import data as D

            data[batch] = D.from_first_event(D.read_tonic("shd", DATA_ROOT, limit=batch))
        else:
            data[batch] = dataset_for("shd", batch, DATASETS["shd"].n_inputs)
    spikes, labels = next(data[batch].batches(batch, cfg.timesteps, cfg.input_cap, np.random.default_rng(SEED + 1)))
    capped = input_at_cap(cfg.timesteps, batch, cfg.layers[0], cfg.input_cap, np.random.default_rng(SEED + 2))
    out = []
    for mode, inputs in (("natural", spikes), ("natural_cap", capped), ("fixed", None)):
        row = {"activity": mode, "neurons_per_tile": npt, "batch": batch, "chips": chips}
        act = None
        if inputs is not None:
            res = train_step(init_network(cfg, placement), inputs, labels)  # the initial weights, each time
            act = res.activity
        pred = retime(act, cfg, placement, mach, None, None, PAPER_STEPS_PER_EXECUTION, PAPER_STRUCTURE)
        row |= {"layers": cfg.n_layers, "neurons": sum(cfg.layers[1:]), **timing_fields(pred, batch)}
        if act is not None:
            row["input_per_bin"] = float(inputs.counts[..., 0].mean())
            fill = [float(lst.counts[..., 0].mean()) / max(n, 1) for lst, n in zip(act.layers, cfg.n_max)]
            row["cap_fill"] = float(np.mean(fill[:-1]))
            row |= _activity_fields(res, cfg)
        else:
            row |= {"input_per_bin": "", "cap_fill": 1.0, "layer_spikes": "", "layer_gradient_only": ""}
            row |= {"layers_with_spikes": cfg.n_layers, "silent_from": "", "silent_by_delay": ""}
        row |= memory_fields(ledger)
        out.append(row)
    return out


def _efficiency(rows) -> list:
    base = {(r["activity"], r["neurons_per_tile"], r["batch"]): r for r in rows if r["chips"] == 1}
    for r in rows:
        b = base.get((r["activity"], r["neurons_per_tile"], r["batch"]))
        r["efficiency"] = (
            (r["samples_per_s"] * r["neurons"]) / (r["chips"] * b["samples_per_s"] * b["neurons"]) if b else ""
        )
    return rows


def run(quick: bool = False) -> list[dict]:
    chips, npts, batches = QUICK if quick else (CHIPS, NPTS, BATCHES)
    rows: list = []
    data: dict = {}
    for b in batches:  # the small batch first: its rows come soonest
        for npt in npts:
            for c in chips:
                t0 = time.perf_counter()
                rows += _point(npt, b, c, data)
                nat, cap, fix = rows[-3], rows[-2], rows[-1]
                print(
                    f"B {b} npt {npt} {c} chips: natural {nat['step_ms']:.3f} ms (spiking layers "
                    f"{nat['layers_with_spikes']} of {nat['layers']}; at the input cap {cap['layers_with_spikes']}), "
                    f"fixed {fix['step_ms']:.3f} ms "
                    f"({time.perf_counter() - t0:.0f} s)",
                    file=sys.stderr,
                    flush=True,
                )
    return _efficiency(rows)


def _at(rows, mode, npt, b, c):
    return next(
        (r for r in rows if (r["activity"], r["neurons_per_tile"], r["batch"], r["chips"]) == (mode, npt, b, c)), None
    )


def summary(rows) -> str:
    cmax = max(r["chips"] for r in rows)
    npts = sorted({r["neurons_per_tile"] for r in rows})
    bs = sorted({r["batch"] for r in rows})
    lines = []
    for mode in MODES:
        cells = []
        for npt in npts:
            for b in bs:
                r = _at(rows, mode, npt, b, cmax)
                if r and r["efficiency"] != "":
                    cells.append(f"npt {npt} B {b}: E {r['efficiency']:.3f} ({r['step_ms']:.2f} ms)")
        lines.append(f"S5/S6 {mode} activity at {cmax} chips: " + "; ".join(cells))

    def sign(mode, fixed_axis):
        out = []
        for k in bs if fixed_axis == "batch" else npts:
            a = _at(rows, mode, npts[0], k, cmax) if fixed_axis == "batch" else _at(rows, mode, k, bs[0], cmax)
            z = _at(rows, mode, npts[-1], k, cmax) if fixed_axis == "batch" else _at(rows, mode, k, bs[-1], cmax)
            if a and z and a is not z:
                out.append("+" if z["efficiency"] > a["efficiency"] else "−")
        return " ".join(out) or "n/a"

    for mode in MODES:
        lines.append(
            f"S6 {mode}: sign of ΔE over npt (per batch) {sign(mode, 'batch')}; "
            f"over batch (per npt) {sign(mode, 'npt')}"
        )
    fills = [r["cap_fill"] for r in rows if r["activity"] == "natural"]
    lines.append(f"natural activity used {min(fills):.0%}–{max(fills):.0%} of the 5 % caps (hidden layers, mean)")
    T = 10  # weak_config's T (the script's SEQ_LEN for multi_neuron)
    lines.append(
        f"at T = {T} layers {T + 1} and up cannot spike whatever the drive (one step of delay per layer, as in "
        "the authors' loopFwd); the drive silences the layers above the ones listed with spikes below"
    )
    lines.append("per-layer activity, layer 1 first (per sample and time step; 0×n: n silent layers):")
    for r in rows:
        if r["activity"] == "fixed":
            continue
        why = ""
        if r["silent_from"] != "":
            why = f", silent from layer {r['silent_from']} " + (
                "(the delay: past T)" if r["silent_by_delay"] else "(drive)"
            )
        lines.append(
            f"  {r['activity']:<11} npt {r['neurons_per_tile']} B {r['batch']} {r['chips']:>2} chips "
            f"({r['layers']} layers, input {r['input_per_bin']:.1f}/bin): spikes {r['layer_spikes']}; "
            f"gradient-only {r['layer_gradient_only']}; {r['layers_with_spikes']} of {r['layers']} layers spike{why}"
        )
    return "\n".join(lines)


def plot(rows, path):
    """Efficiency against chips, natural (solid) and fixed (dashed), per npt and batch."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for npt in sorted({r["neurons_per_tile"] for r in rows}):
        for b in sorted({r["batch"] for r in rows}):
            for mode, ls in (("natural", "-"), ("natural_cap", ":"), ("fixed", "--")):
                sel = sorted(
                    (r for r in rows if (r["activity"], r["neurons_per_tile"], r["batch"]) == (mode, npt, b)),
                    key=lambda r: r["chips"],
                )
                if sel:
                    ax.plot(
                        [r["chips"] for r in sel],
                        [r["efficiency"] for r in sel],
                        "o" + ls,
                        ms=3,
                        label=f"{mode} npt {npt} B {b}",
                    )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("chips")
    ax.set_ylabel("weak-scaling efficiency")
    ax.set_title("S5/S6 on SHD: natural (solid), input at its cap (dotted), fixed (dashed); 5 % caps")
    ax.legend(fontsize=6, ncol=2, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    """``--data-root DIR`` (real SHD under ``DIR/SHD``, tonic's layout) besides the common ``--out`` and
    ``--quick``."""
    global DATA_ROOT
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--data-root" in argv:
        i = argv.index("--data-root")
        if i + 1 >= len(argv):
            raise SystemExit("--data-root needs a folder (tonic's save_to, holding SHD/)")
        DATA_ROOT = argv[i + 1]
        del argv[i : i + 2]
    return standard_main(sys.modules[__name__], argv, "s5_s6_natural")


if __name__ == "__main__":
    sys.exit(main())
