"""``tilesim run --implementation snntorch``: the network of a run's options trained as snnTorch's IPU
build trains it (dense, through PopTorch), and one training call timed on the chip.

>>> run = run_snntorch(RunOptions(layers="700-128-20", dataset="shd", batch=16, timesteps=20,
...                               steps=2, implementation="snntorch"))
>>> run.predicted_step_s, run.loss, run.record.to_dict()["breakdown_s"]

The data, its batches and the network's sizes come from the same options and the same generators as the
sparse run (:func:`tilesim.models.snn.commands.run.make_dataset`, the layer-0 input lists made dense), so
the two implementations train on the same spikes. Every step is trained for real in NumPy
(:mod:`tilesim.models.snntorch.train`); the call's time does not depend on the data (a dense program),
so one call is timed (:class:`tilesim.models.snntorch.step.SnnTorchStep`). ``predicted_step_s`` is one
``poptorch_model(data, labels)`` call: the device program, the host copies and PopTorch's per-call
overhead (an unsourced assumption, given with its band).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from tilesim.errors import require
from tilesim.machine.description import load_machine
from tilesim.models.snn.commands.options import RunOptions, resolved_settings
from tilesim.models.snn.commands.run import DATASET_BATCHES, make_dataset, network_config
from tilesim.models.snn.outputs.record import run_provenance
from tilesim.models.snntorch.call import POPTORCH_CALL_BAND_S, SnnTorchCall, call_from_options
from tilesim.models.snntorch.step import snntorch_step
from tilesim.models.snntorch.train import DenseStep, dense_train_step, init_dense
from tilesim.outputs.runrecord import Explain, Provenance, RunRecord, Section, Throughput, tilesim_version
from tilesim.workload import TimedStep, record_run, time_workload

__all__ = ["MACHINES", "SnnTorchRun", "check_snntorch_options", "run_snntorch"]

MACHINES = ("gc200", "bow")
"""The chips snnTorch's IPU build is modelled on (one IPU: PopTorch without pipelining or replication)."""


def check_snntorch_options(options: RunOptions) -> None:
    """Refuse what snnTorch's IPU build does not run: another machine (or more than one chip), a NIR
    model, recurrent layers, SGD, fixed activity (ConfigError naming the field, value and fix)."""
    require(
        options.machine in MACHINES,
        "--machine",
        options.machine,
        f"snnTorch's IPU build is modelled on one IPU; allowed machines: {', '.join(MACHINES)}",
        "use --machine gc200 or --machine bow (or --implementation sparse)",
    )
    require(
        options.chips in (None, 1), "--chips", options.chips, "snnTorch's IPU build runs on one IPU", "drop --chips"
    )
    require(options.model is None, "--model", options.model, "is not read by --implementation snntorch", "drop --model")
    require(not options.recurrent, "--recurrent", True, "snn.Leaky layers have no recurrent weights", "drop it")
    require(
        options.optimizer == "adam",
        "--optimizer",
        options.optimizer,
        "snnTorch's IPU tutorial trains with poptorch.optim.Adam",
        "use --optimizer adam",
    )
    require(
        options.activity == "natural",
        "--activity",
        options.activity,
        "the dense program's time does not depend on activity",
        "drop --activity fixed",
    )


@dataclass(frozen=True, eq=False)
class SnnTorchRun:
    """What :func:`run_snntorch` measured: the call's time (and its band over the per-call overhead
    assumption), the loss and accuracy per step, the record (``summary.json``) and the objects the
    pictures are drawn from."""

    predicted_step_s: float
    band_s: tuple[float, float]
    loss: list[float]
    accuracy: list[float]
    steps: tuple[DenseStep, ...]
    record: RunRecord
    timed: TimedStep
    ledger: object
    wall_s: float

    def to_dict(self) -> dict:
        """The ``--json`` form: the record's totals and the training."""
        r = self.record.to_dict()
        return {
            "implementation": "snntorch",
            "predicted_step_s": self.predicted_step_s,
            "predicted_step_s_band": list(self.band_s),
            "samples_per_s": r["throughput"]["value"],
            "breakdown_s": r["breakdown_s"],
            "memory": r["memory"],
            "loss": self.loss,
            "accuracy": self.accuracy,
            "sections": r["sections"],
            "wall_s_total": self.wall_s,
        }


def _train(options: RunOptions, config, call: SnnTorchCall) -> tuple[DenseStep, ...]:
    """``options.steps`` real training calls on the run's data (the batches of the sparse run). A ``frame``
    input is what ``train_fcn.py`` feeds: one static frame per sample, given at every step; the frame of a
    sample is its input's rate per channel (spikes per step, in [0, 1], as MNIST's pixels are)."""
    ds = make_dataset(config, config.batch * DATASET_BATCHES, options.dataset, options.data, options.data_root)
    net = init_dense(config.layers, config.lr, config.seed)
    rng = np.random.default_rng(config.seed + 1)  # as the sparse run draws its batches
    out, batches = [], ds.endless_batches(config.batch, config.timesteps, config.input_cap, rng)
    for _ in range(options.steps):
        spikes, labels = next(batches)
        x = spikes.to_dense(config.layers[0])
        if call.input_shape == "frame":
            x = np.broadcast_to(np.clip(x.mean(axis=0), 0.0, 1.0), x.shape)
        out.append(dense_train_step(net, x, labels))
    return tuple(out)


def _sections(steps, config, predicted: float, band) -> tuple[Section, ...]:
    """The network and the training, keyed as the sparse run keys them (so ``compare`` sets them side by side)."""
    sizes = tuple(config.layers)
    weights = int(sum(a * b for a, b in zip(sizes, sizes[1:])))
    net = {"layers": list(sizes), "neurons": int(sum(sizes[1:])), "weights": weights}
    loss = [s.loss for s in steps]
    lines = (
        f"Network {'-'.join(map(str, sizes))} (dense nn.Linear + snn.Leaky): {net['neurons']:,} neurons, "
        f"{weights:,} weights; every weight multiplies at every step, spiking or not.",
    )
    training = (
        f"Loss {loss[0]:.4f} → {loss[-1]:.4f} over {len(loss)} step(s) (ce_count_loss on the output membrane, Adam, "
        f"trained in NumPy); batch accuracy {steps[-1].accuracy:.2f}.",
        "Spikes per sample and step by layer (last step): " + ", ".join(f"{r:.3g}" for r in steps[-1].spikes_per_step),
        f"One call {predicted * 1e3:.3f} ms at the assumed PopTorch per-call overhead; "
        f"{band[0] * 1e3:.3f}-{band[1] * 1e3:.3f} ms over its band.",
    )
    return (
        Section("Network", lines, (("network", net),)),
        Section(
            "Training",
            training,
            (
                ("loss", loss),
                ("accuracy", [s.accuracy for s in steps]),
                ("predicted_step_s_band", list(band)),
                ("spikes_per_step", list(steps[-1].spikes_per_step)),
            ),
        ),
    )


def _explain(timed: TimedStep) -> Explain:
    """The slowest superstep label in a sentence."""
    by = timed.result.by_label()
    label, d = max(by.items(), key=lambda kv: kv[1]["time_s"])
    share = d["time_s"] / timed.result.total_s
    return Explain(
        sentence=f"The slowest op is '{label}' ({d['time_s'] * 1e3:.3f} ms, {share:.0%} of the call).",
        phase=label,
        chip=int(d["critical_chip"]),
        tile=int(d["critical_tile"]),
        time_s=float(d["time_s"]),
        share=float(share),
    )


def run_snntorch(options: RunOptions) -> SnnTorchRun:
    """Train ``options.steps`` steps of the dense network of ``options`` and time one snnTorch training
    call on its machine (module docstring). Raises ConfigError for options snnTorch's IPU build does not
    run, SramOverflowError when the call overflows SRAM (``memory_check = "raise"``)."""
    t0 = time.perf_counter()
    check_snntorch_options(options)
    config = network_config(options)
    machine = load_machine(options.machine)
    call = call_from_options(options, config)
    B = call.batch
    step = snntorch_step(call, machine)  # the step `tilesim validate` times for the same call
    ledger = step.memory(machine)
    over = ledger.check(options.memory_check)
    steps = _train(options, config, call)
    timed = time_workload(step, machine)
    s = timed.result.total_s
    band = (s + POPTORCH_CALL_BAND_S[0] - call.call_s, s + POPTORCH_CALL_BAND_S[1] - call.call_s)
    notes = [
        "snnTorch's IPU build, dense, op by op through PopTorch (models/snntorch); the time does not depend on the "
        "data, so one call is timed",
        f"PopTorch per-call host overhead {call.call_s * 1e3:.1f} ms: a named assumption no public source gives "
        f"(band {POPTORCH_CALL_BAND_S[0] * 1e3:.1f}-{POPTORCH_CALL_BAND_S[1] * 1e3:.1f} ms: "
        f"{band[0] * 1e3:.3f}-{band[1] * 1e3:.3f} ms per call)",
        f"input sent as {call.input_dtype} {call.input_shape} ({call.input_bytes:,} B per call; the measured "
        "train_fcn.py sends fp16 frame: --input-dtype, --input-shape)",
    ]
    if call.input_shape == "frame":
        notes.append(
            f"the {options.dataset} input varies over time, a frame does not: each sample is fed its per-channel "
            "spike rate at every step, as train_fcn.py feeds one static MNIST image (--input-shape sequence sends "
            f"and trains on the [T, B, N0] spikes: {call.input_values * call.timesteps:,} values per call)"
        )
    if over.size:
        notes.append(f"SRAM overflow on {over.size} tile(s) (memory_check = report)")
    record = record_run(
        step,
        timed,
        ledger=ledger,
        throughput=Throughput(B / s, "samples/s"),
        explain=_explain(timed),
        notes=tuple(notes),
        settings={**resolved_settings(options), "input_dtype": call.input_dtype, "input_shape": call.input_shape},
        provenance=Provenance(
            tilesim_version(),
            "models/linear (PopLibs matmul planner and vertex estimates) and the machine file; no fitted constant",
            run_provenance(options).data,
        ),
        sections=_sections(steps, config, s, band),
        tile_groups="tile groups",
    )
    return SnnTorchRun(
        s,
        band,
        [x.loss for x in steps],
        [x.accuracy for x in steps],
        steps,
        record,
        timed,
        ledger,
        time.perf_counter() - t0,
    )
