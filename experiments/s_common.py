"""Shared helpers of the S1–S7 experiment scripts (sparse SNN training on the IPU, seeds 000/001;
Finkbeiner et al., arXiv 2311.04386; configurations from ``../shared/reference/snn-on-ipu.md``).

Every script: ``run(quick) -> list of row dicts``, ``plot(rows, path)``, ``summary(rows)``,
``main(argv)`` with ``--out DIR`` and ``--quick`` (CSV + PNG via :func:`experiments.b_common.standard_main`).

Network sizes follow the authors' benchmark script (``benchmarking_script.py``): per chip
``1471 × npt`` neurons split into ``H`` hidden layers by :func:`hidden_sizes`, the output layer
padded to whole tiles on the last chip (§4.2, §4.4). Times come from two paths:

* fixed activity (§4.3, the lower bound of throughput): :func:`tilesim.models.snn.step.retime.retime` with
  ``activity=None`` — counts only, no float math, so 190k-neuron networks take seconds;
* natural activity: a few real training steps (:func:`tilesim.models.snn.training.network.train_step`) on the
  dataset-shaped generators of :mod:`tilesim.models.snn.training.data`, each step's recorded activity re-timed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from experiments.b_common import pyplot, read_csv, standard_main, write_csv  # noqa: F401  (re-exported)
from tilesim.machine.description import load_machine
from tilesim.models.snn.placement.fit import place as _place
from tilesim.models.snn.step.retime import retime
from tilesim.models.snn.step.timing import STEPS_PER_EXECUTION, default_costs
from tilesim.models.snn.training import data as D
from tilesim.outputs.records import PHASES

SEED = 0
"""Seed of the weights, the data generators and the fixed-activity spike choice."""

MACHINE = "bow"
"""The paper's IPUs (snn-on-ipu.md §4.6: Graphcore Bow, 1472 tiles, 1.85 GHz); resized with ``chips``."""

TILES_USED_PER_CHIP = 1471
"""The code maps neurons to 1471 tiles per IPU (tile 0 of IPU 0 left free, §3.1)."""

BREAKDOWN_KEYS = PHASES  # compute, sync, exchange, links, host, residual: the one set of categories


@dataclass(frozen=True)
class DatasetSpec:
    """Shapes of one benchmark dataset (snn-on-ipu.md §4.1, §4.2).

    ``n_inputs`` is the single-chip (``multi_layer``) input size, ``n_inputs_weak`` the
    weak-scaling (``multi_neuron``) one; ``timesteps`` the single-chip T (weak scaling uses 10)."""

    name: str
    n_inputs: int
    n_inputs_weak: int
    n_classes: int
    input_cap: int
    timesteps: int
    generator: str


DATASETS = {
    "shd": DatasetSpec("shd", 700, 700, 20, 48, 100, "shd_like"),
    "nmnist": DatasetSpec("nmnist", 2312, 1152, 10, 32, 100, "nmnist_like"),
    # input cap: the benchmark script's default (64); the IPU runfiles state only NMNIST/SHD caps [assumption]
    "dvsgesture": DatasetSpec("dvsgesture", 4608, 4608, 11, 64, 50, "dvsgesture_like"),
}

SINGLE_CHIP_LAYERS = {
    # snn-on-ipu.md §4.2 table, verbatim (2942 neurons = 1471 tiles × 2; DVSGesture 2941 + padding)
    ("nmnist", 2): "2312-1466-1466-10",
    ("nmnist", 3): "2312-978-978-976-10",
    ("nmnist", 4): "2312-734-734-732-732-10",
    ("nmnist", 5): "2312-588-586-586-586-586-10",
    ("shd", 2): "700-1462-1460-20",
    ("shd", 3): "700-974-974-974-20",
    ("shd", 4): "700-732-730-730-730-20",
    ("shd", 5): "700-586-584-584-584-584-20",
    ("dvsgesture", 2): "4608-1466-1464-11",
    ("dvsgesture", 3): "4608-978-976-976-11",
    ("dvsgesture", 4): "4608-734-732-732-732-11",
    ("dvsgesture", 5): "4608-586-586-586-586-586-11",
}
SINGLE_CHIP_WEIGHTS_M = {  # §4.2 "#weights" column (millions, 2 decimals)
    ("nmnist", 2): 5.55,
    ("nmnist", 3): 4.18,
    ("nmnist", 4): 3.32,
    ("nmnist", 5): 2.74,
    ("shd", 2): 3.19,
    ("shd", 3): 2.60,
    ("shd", 4): 2.13,
    ("shd", 5): 1.79,
    ("dvsgesture", 2): 8.92,
    ("dvsgesture", 3): 6.42,
    ("dvsgesture", 4): 5.00,
    ("dvsgesture", 5): 4.08,
}
WEAK_SCALING_TABLE = {  # §4.4: (npt, chips) -> (layers, neurons NMNIST, SHD, weights NMNIST, SHD in M)
    (2, 1): (4, 2942, 2942, 3.05, 2.60),
    (2, 16): (49, 47072, 47072, 46.3, 45.9),
    (4, 16): (97, 94142, 94144, 92.5, 92.0),
    (8, 1): (13, 11762, 11764, 11.7, 11.2),
    (8, 2): (25, 23530, 23532, 23.2, 22.8),
    (8, 4): (49, 47066, 47068, 46.3, 45.9),
    (8, 8): (97, 94138, 94140, 92.5, 92.0),
    (8, 16): (193, 188282, 188284, 184.8, 184.35),
}

MEASURED_NMNIST_MS = {
    # calibration/nmnist_ipu_step_times.csv (Sept-2022 log, theta2 0.9, 1 IPU, B 48, T 100):
    # (hidden layers, max activity) -> measured ms per training step (±0.5 ms rounding)
    (2, 0.01): 6.0,
    (2, 0.05): 9.0,
    (2, 0.10): 10.0,
    (5, 0.01): 4.0,
    (5, 0.05): 6.0,
    (5, 0.10): 7.0,
}


def hidden_sizes(total: int, n_hidden: int, npt: int) -> list[int]:
    """The benchmark script's split of ``total`` neurons into ``n_hidden`` layers of whole tiles:
    ``npt·(⌊total/(H·npt)⌋ + [total mod (H·npt) > npt·i])`` for layer i."""
    block = n_hidden * npt
    return [npt * (total // block + int(total % block > npt * i)) for i in range(n_hidden)]


def paper_layers(dataset: str, npt: int, chips: int, n_hidden: int | None = None, weak: bool = True) -> tuple:
    """Layer sizes of the paper's networks: per chip ``1471·npt`` neurons in ``n_hidden`` layers
    (default ``3·npt/2``, the weak-scaling rule), the layer block repeated on every chip, and the
    last chip's block shrunk by the output layer padded to whole tiles (§4.2, §4.4)."""
    spec = DATASETS[dataset]
    H = n_hidden if n_hidden is not None else max(1, 3 * npt // 2)
    per_chip = TILES_USED_PER_CHIP * npt
    out_pad = -(-spec.n_classes // npt) * npt
    n0 = spec.n_inputs_weak if weak else spec.n_inputs
    return (
        n0,
        *hidden_sizes(per_chip, H, npt) * (chips - 1),
        *hidden_sizes(per_chip - out_pad, H, npt),
        spec.n_classes,
    )


def n_weights(layers) -> int:
    """Feed-forward weights Σ N_l·N_{l+1}."""
    return int(sum(a * b for a, b in zip(layers, layers[1:])))


def machine(chips: int = 1):

    return load_machine(MACHINE, chips)


def single_chip_config(
    dataset: str,
    hidden: int,
    max_activity: float = 0.05,
    batch: int = 48,
    timesteps: int | None = None,
    activity: str = "natural",
):
    """The §4.2 configuration: 2942 neurons on one IPU, Adam 1e-3, theta2 0.9, weight_mul 2.0."""
    from tilesim.models.snn.training.network import (
        NetworkConfig,  # Numba kernels load only when they run (start-up time)
    )

    spec = DATASETS[dataset]
    return NetworkConfig(
        layers=SINGLE_CHIP_LAYERS[(dataset, hidden)],
        batch=batch,
        timesteps=timesteps or spec.timesteps,
        max_activity=max_activity,
        input_cap=spec.input_cap,
        second_threshold=0.9,
        activity=activity,
        optimizer="adam",
        lr=1e-3,
        seed=SEED,
        weight_mul=2.0,
        output_second_threshold=None,
        second_threshold_schedule=None,
    )  # ϑ2 0.9 everywhere, constant


def weak_config(
    dataset: str,
    npt: int,
    chips: int,
    batch: int = 24,
    max_activity: float = 0.05,
    timesteps: int = 10,
    n_hidden: int | None = None,
):
    """The §4.4 ``multi_neuron`` configuration: T = 10, SGD 3e-5, theta2 0.9."""
    from tilesim.models.snn.training.network import (
        NetworkConfig,  # Numba kernels load only when they run (start-up time)
    )

    spec = DATASETS[dataset]
    return NetworkConfig(
        layers=paper_layers(dataset, npt, chips, n_hidden),
        batch=batch,
        timesteps=timesteps,
        max_activity=max_activity,
        input_cap=spec.input_cap,
        second_threshold=0.9,
        optimizer="sgd",
        lr=3e-5,
        seed=SEED,
        weight_mul=2.0,
        output_second_threshold=None,
        second_threshold_schedule=None,
    )


def weak_options(dataset: str = "shd", npt: int = 8, chips: int = 16, /, **run):
    """The §4.4 network of :func:`weak_config` (``chips`` chips' worth of ``dataset`` at ``npt`` neurons per
    tile: T 10, B 24, 5 % caps, SGD 3e-5, ϑ2 0.9 constant in every layer, weight_mul 2, the experiments' seed)
    as ``tilesim run`` options, with ``dataset``-shaped input; ``run`` sets the run's own options (machine,
    ``chips`` and ``neurons_per_tile`` of the run, mapping, activity, steps, steps_per_execution, ...; one step
    unless given), so the three network parameters are positional only.
    The one builder of that network's :class:`RunOptions` (``experiments/m4_machines.py``,
    ``benchmarks/bench_whole_machine.py``, ``benchmarks/bench_scale.py``)."""
    from tilesim.models.snn.commands.options import RunOptions  # like NetworkConfig above: loaded when used

    cfg = weak_config(dataset, npt, chips)
    assert cfg.second_threshold_schedule is None  # constant ϑ2: the options' schedule "off"
    net = ("layers", "batch", "timesteps", "max_activity", "input_cap", "second_threshold", "output_second_threshold")
    net += ("optimizer", "lr", "seed", "weight_mul")
    fields = {k: getattr(cfg, k) for k in net}
    return RunOptions(**{**fields, "dataset": dataset, "second_threshold_schedule": "off", "steps": 1, **run})


def memory_fields(ledger) -> dict:
    """Fullest tile's bytes, budget, overflow count and its bytes per ledger category."""
    d = ledger.to_dict()
    cats = d["by_category_bytes"]
    top = max(cats, key=cats.get) if cats else ""
    out = {
        "mem_max_tile_bytes": int(d["max_tile_bytes"]),
        "mem_budget_bytes": int(d["budget_bytes"]),
        "fits": not d["overflow_tiles"],
        "overflow_tiles": len(d["overflow_tiles"]),
        "mem_top_category": top,
    }
    for c in (
        "variables:weights",
        "variables:gradients",
        "variables:optimizer",
        "variables:state",
        "variables:activations",
        "exchange_buffers",
        "vertex_state",
    ):
        out["mem_" + c.split(":")[-1]] = int(cats.get(c, 0))
    out["mem_other"] = int(d["max_tile_bytes"]) - sum(
        v
        for k, v in out.items()
        if k.startswith("mem_") and k not in ("mem_max_tile_bytes", "mem_budget_bytes", "mem_top_category")
    )
    return out


def cost_model_id() -> str:
    """Name and version of the shipped SNN cost model the predictions used (it changes with calibration)."""

    c = default_costs()
    return f"{c.name} v{c.version}"


def timing_fields(pred, batch: int) -> dict:
    """Step time, samples/s and the compute/sync/exchange/links/host/residual split of a Prediction."""
    bd = pred.result.breakdown_s()
    out = {"step_ms": pred.step_s * 1e3, "samples_per_s": batch / pred.step_s}
    for k in BREAKDOWN_KEYS:
        out[f"{k}_ms"] = bd.get(k, 0.0) * 1e3
    out["cost_model"] = cost_model_id()
    return out


def prediction_band(config, placement, mach, activity=None, steps_per_execution: int = STEPS_PER_EXECUTION):
    """``(lo_s, mid_s, hi_s)`` from ``tilesim.models.snn.calibration.calibrate.prediction_band`` (leave-one-out
    refits of the cost model) when that function exists, else None."""
    try:
        from tilesim.models.snn.calibration.calibrate import (
            prediction_band as band,  # the calibration loads only for a band
        )
    except ImportError:
        return None
    return tuple(float(x) for x in band(config, placement, mach, activity, steps_per_execution=steps_per_execution))


def place(config, mach, npt):
    """The paper's contiguous placement at ``npt`` neurons/tile; the ledger in report mode (never raises
    on overflow, so the experiments can show where SRAM runs out)."""

    placement, ledger, _ = _place(config, mach, npt, "contiguous", "report")
    return placement, ledger


def time_fixed(
    config, chips: int, npt: int, band: bool = False, steps_per_execution: int = STEPS_PER_EXECUTION, structure=None
) -> dict:
    """Fixed-activity step (every list at its cap) re-timed without float math; memory from the ledger.
    ``steps_per_execution``: steps per device execution, over which the host variable sync is amortised;
    ``structure``: a :class:`tilesim.models.snn.step.structure.StepStructure` (default: its defaults; the cost-model
    band is always under the defaults)."""

    mach = machine(chips)
    placement, ledger = place(config, mach, npt)
    pred = retime(None, config, placement, mach, steps_per_execution=steps_per_execution, structure=structure)
    row = {**timing_fields(pred, config.batch), **memory_fields(ledger)}
    if band:
        b = prediction_band(config, placement, mach, None, steps_per_execution)
        row["step_lo_ms"], row["step_hi_ms"] = (b[0] * 1e3, b[2] * 1e3) if b else ("", "")
    return row


def dataset_for(dataset: str, n_samples: int, n_inputs: int, seed: int = SEED):
    """Dataset-shaped event data: the generators of :mod:`tilesim.models.snn.training.data` (no downloads)."""

    gen = getattr(D, DATASETS[dataset].generator)
    ds = gen(n_samples, seed=seed)
    if ds.n_channels != n_inputs:
        raise ValueError(f"{dataset}: generator gives {ds.n_channels} channels, network expects {n_inputs}")
    return ds


def time_natural(config, chips: int, npt: int, ds, steps: int) -> dict:
    """Train ``steps`` steps on ``ds`` (natural activity) and re-time each recorded step; the row of the
    median step, with the mean fraction of each layer's cap that real spikes used."""
    from tilesim.models.snn.training.network import (  # Numba kernels load only when they run (start-up time)
        init_network,
        train_step,
    )

    mach = machine(chips)
    placement, ledger = place(config, mach, npt)
    state = init_network(config, placement)
    rng = np.random.default_rng(SEED + 1)
    batches = ds.batches(config.batch, config.timesteps, config.input_cap, rng)
    preds, fill, losses = [], [], []
    for _ in range(steps):
        spikes, labels = next(batches)
        res = train_step(state, spikes, labels)
        preds.append(retime(res.activity, config, placement, mach))
        losses.append(res.loss)
        fill.append([float(lst.counts[..., 0].mean()) / max(n, 1) for lst, n in zip(res.activity.layers, config.n_max)])
    order = np.argsort([p.step_s for p in preds])
    med = int(order[len(order) // 2])
    row = {**timing_fields(preds[med], config.batch), **memory_fields(ledger)}
    row["cap_fill"] = float(np.mean(fill[med][:-1])) if len(fill[med]) > 1 else float(fill[med][0])
    row["loss"] = float(losses[med])
    return row


def time_both_activities(
    dataset: str, hidden: int, max_activity: float, batch: int, npt: int, steps: int, data: dict
) -> dict:
    """One single-chip configuration at fixed and at natural activity: ``{"fixed" | "natural":
    (config, row)}``, each row the timing and memory fields, ``cap_fill`` (1 at fixed activity) and
    ``measured_ms`` (the §5.2 log; fixed N-MNIST rows only). ``data``, a dict the caller keeps,
    holds one dataset-shaped data set per dataset (``batch · steps`` samples)."""
    if dataset not in data:
        data[dataset] = dataset_for(dataset, batch * steps, DATASETS[dataset].n_inputs)
    out = {}
    for activity in ("fixed", "natural"):
        cfg = single_chip_config(dataset, hidden, max_activity, batch, activity=activity)
        if activity == "fixed":
            row = {**time_fixed(cfg, 1, npt), "cap_fill": 1.0}
            measured = MEASURED_NMNIST_MS.get((hidden, max_activity)) if dataset == "nmnist" else None
        else:
            row, measured = time_natural(cfg, 1, npt, data[dataset], steps), None
        row["measured_ms"] = "" if measured is None else measured
        out[activity] = (cfg, row)
    return out
