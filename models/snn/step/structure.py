"""Named structural assumptions of the SNN step model (issue 17), each with its evidence.

The step program of :mod:`tilesim.models.snn.step.timing` fixes what is known (the supersteps of the authors'
op and their work); a few things about how Poplar and TensorFlow run that op are *not* measured.
They are options of :class:`StepStructure`, reported in every summary, so a prediction says what
it assumed, and a scaling study can switch each one the other way (:func:`flipped`).

``sync_scope``  ``"chip"`` (default) | ``"all"``
    Which chips a superstep without cross-chip data waits for. ``"all"``: every superstep of
    the one Poplar graph syncs every chip. ``"chip"``: only supersteps whose exchange carries
    layer-boundary traffic between chips (forward spike lists, backward input lists, slot
    gradients) sync all chips; the rest sync their own chip, and chips run apart between
    global syncs. Evidence: Poplar distinguishes internal (one IPU) from external syncs and
    only external ones cross the Sync-Links; the per-layer work of the authors' op reads only
    data of its own chip; PopLibs replicates the loop counter used for ``dynamicSlice``
    offsets ("small graph replication"), so the counter need not be exchanged across chips
    (not confirmed for the backward loop's counter). Default: "chip", the better-supported.
``copies``  ``"separate"`` (default) | ``"merged"``
    Whether the consecutive per-layer PopLibs ``Copy`` programs folded into one row are one
    exchange each (own sync and exchange set-up) or merged into one. Evidence for merging is
    for *stream* copies (``opt.maxCopyMergeSize``; the TF backend's comment that consecutive
    copies are merged), not for on-device copies; the 12 measured single-chip steps were fitted
    with separate copies. Default: "separate".
``host_transfer``  ``"per_epoch"`` (default) | ``"per_execution"``
    How often the trainable state crosses the host link: once per epoch, or after every device
    execution. Keras ``fit`` does it once per epoch, and Graphcore's TensorFlow says why [S]:
    ``_fit_delegate`` (``tensorflow/python/ipu/keras/extensions/keras_extension_base.py``, read at 05d6411)
    calls ``reset_metrics()`` at every epoch start, a host-side assign to the loss metric's variables,
    which ``train_step`` updates on the device; at the epoch's first execution
    ``PoplarExecutor::ExecuteEngine`` (``tensorflow/compiler/plugin/poplar/driver/poplar_executor.cc``)
    finds an output buffer that is no longer the argument in its place (``CheckMoveDeviceToHostRequired``),
    moves *every* on-device output to the host (``MoveDeviceToHost``) and streams *every* argument back
    (``MoveHostToDevice``). The epoch's other executions find everything in place (the per-execution
    ``_train_counter.assign_add`` is a scalar graph evaluated on the host, ``IsScalarElementwiseGraph``,
    with its argument already there). ``per_execution`` is a loop that reads or assigns a trained
    variable after every execution. The calibration runs and the paper's have one execution per epoch.
``host_direction``  ``"round_trip"`` (default, the same source) | ``"one_way"``
    Device→host and host→device, or device→host only.
``host_rate``  ``"fitted"`` (default) | ``"documented"``
    The round trip's rate: the one no source gives. ``fitted``: ``host_copy_ns_per_byte`` of the cost
    model, fitted to the 12 measured single-chip steps (the per-weight term the data identify: 1.43–1.62
    ns/B over leave-one-out refits against 1.57; ≈ 0.64 GB/s per direction). ``documented``: Graphcore's host-traffic
    figures for one large buffer (:data:`D2H_BYTES_PER_S`, :data:`H2D_BYTES_PER_S`), the fast end of
    the band. What runs slower than the documented rate is not known: every variable
    is a separate stream, the executor copies each through its own host buffer, and tensors laid out
    by the op (weights transposed, two neurons per tile) are rearranged on the way.
``host_shared``  ``"chip"`` (default) | ``"host_link"``
    Whether each chip moves its own state in parallel, or the chips behind one host link
    (:data:`CHIPS_PER_HOST_LINK`, an IPU-Machine's gateway) one after another (each chip waits for the
    whole group's bytes). One executor serves the whole multi-chip engine, so a host-side bottleneck
    would serialise them; no multi-chip measurement says which.

What crosses (``MoveDeviceToHost``: every on-device output; ``MoveHostToDevice``: every argument): the
weights and the optimizer's slots (Adam's two moments; plain SGD none), 4·(1 + slots) bytes per weight
each way; the other arguments (thresholds, decay constants, counters) are a few bytes per neuron and
are left out. The measured Keras "ms/step" contains it: the training log's wall time outside the
epochs (``Final time`` minus the epochs' own times) is 5 ± 5 ms per epoch and does not grow with the
weights (L2 − L5: +1.6 ± 8.8 ms per epoch for 2.8 M more weights), so no part of the round trip
happens between the timed epochs.

Not options, because the authors' code leaves no choice (modelled in :mod:`tilesim.models.snn.step.timing`):
on C > 1 chips the op's input-gradient reduction runs its stage 1 as one compute set on all IPUs
(``customReduceSparseInpSpikesGrad_stage1``), then ``reduceMany`` once per IPU, one after another
(``poplar_code_stateBasedReset.cpp``, ``poplarReduceInpSpikesGrad``: one virtual graph per IPU), and the Keras
model is a Sequential pipeline of C stages (the op on all IPUs, C−2 identity stages and the
sparse→dense + loss stage on the last IPU; ``multi_ipu.py``), crossed forward and backward:
2(C−1) stage switches per step (:func:`tilesim.models.snn.step.timing.pipeline_switches`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from tilesim.errors import require

__all__ = [
    "StepStructure",
    "DEFAULT_STRUCTURE",
    "SYNC_SCOPES",
    "COPIES",
    "HOST_TRANSFERS",
    "HOST_DIRECTIONS",
    "HOST_RATES",
    "HOST_SHARED",
    "CHIPS_PER_HOST_LINK",
    "D2H_BYTES_PER_S",
    "H2D_BYTES_PER_S",
    "host_copy_bytes_per_s",
    "host_copy_seconds_per_byte",
    "flipped",
]

SYNC_SCOPES = ("chip", "all")
COPIES = ("separate", "merged")
HOST_TRANSFERS = ("per_epoch", "per_execution")
HOST_DIRECTIONS = ("round_trip", "one_way")
HOST_RATES = ("fitted", "documented")
HOST_SHARED = ("chip", "host_link")

CHIPS_PER_HOST_LINK = 4
"""IPUs behind one host link: an IPU-Machine (M2000 / Bow-2000) reaches its host through one
IPU-Gateway with a 2 × 100 GbE NIC (ipu-hardware.md §1.2, "Gateway / host")."""

# Graphcore's host-traffic test on an IPU-M2000 (Poplar SDK examples, "host traffic"): ~3 GB/s
# device->host, 3-7 GB/s host->device for large buffers; the low ends are used.
D2H_BYTES_PER_S = 3.0e9
H2D_BYTES_PER_S = 3.0e9


@dataclass(frozen=True)
class StepStructure:
    """How the step's supersteps sync, copy and talk to the host (see the module docstring).
    ``executions_per_epoch``: device executions per epoch (1 in the calibration runs and the
    paper's: one execution per epoch); with ``host_transfer="per_epoch"`` the transfer is
    amortised over ``steps_per_execution · executions_per_epoch`` steps."""

    sync_scope: str = "chip"
    copies: str = "separate"
    host_transfer: str = "per_epoch"
    host_direction: str = "round_trip"
    executions_per_epoch: int = 1
    host_rate: str = "fitted"
    host_shared: str = "chip"

    def __post_init__(self):
        for name, allowed in (
            ("sync_scope", SYNC_SCOPES),
            ("copies", COPIES),
            ("host_transfer", HOST_TRANSFERS),
            ("host_direction", HOST_DIRECTIONS),
            ("host_rate", HOST_RATES),
            ("host_shared", HOST_SHARED),
        ):
            v = getattr(self, name)
            require(v in allowed, name, v, f"must be one of {', '.join(allowed)}", f"e.g. {name}={allowed[0]!r}")
        n = self.executions_per_epoch
        require(
            isinstance(n, int) and not isinstance(n, bool) and n >= 1,
            "executions_per_epoch",
            n,
            "must be an integer >= 1",
        )

    def transfer_steps(self, steps_per_execution: int) -> int:
        """Training steps one host transfer of the trainable state is amortised over."""
        k = self.executions_per_epoch if self.host_transfer == "per_epoch" else 1
        return steps_per_execution * k

    def to_dict(self) -> dict:
        """The JSON form (every summary carries it)."""
        return asdict(self)

    def describe(self) -> str:
        """One line: ``sync chip, copies separate, host per_epoch round_trip at the fitted rate per chip``."""
        return (
            f"sync {self.sync_scope}, copies {self.copies}, host {self.host_transfer} {self.host_direction}"
            + (f" ({self.executions_per_epoch} executions/epoch)" if self.executions_per_epoch > 1 else "")
            + f" at the {self.host_rate} rate per {self.host_shared.replace('_', ' ')}"
        )


DEFAULT_STRUCTURE = StepStructure()

_OTHER = {
    "sync_scope": dict(zip(SYNC_SCOPES, reversed(SYNC_SCOPES))),
    "copies": dict(zip(COPIES, reversed(COPIES))),
    "host_transfer": dict(zip(HOST_TRANSFERS, reversed(HOST_TRANSFERS))),
    "host_direction": dict(zip(HOST_DIRECTIONS, reversed(HOST_DIRECTIONS))),
    "host_rate": dict(zip(HOST_RATES, reversed(HOST_RATES))),
    "host_shared": dict(zip(HOST_SHARED, reversed(HOST_SHARED))),
}


def flipped(structure: StepStructure, name: str) -> StepStructure:
    """``structure`` with the assumption ``name`` (a field) switched the other way."""
    require(name in _OTHER, "assumption", name, f"must be one of {', '.join(_OTHER)}")
    return replace(structure, **{name: _OTHER[name][getattr(structure, name)]})


def host_copy_bytes_per_s(machine, to_host: bool) -> float:
    """Bytes/s of a variable copy over the host link at the documented rate: the machine's link rate
    bounded by the documented host-traffic rate of that direction."""
    return min(float(machine.system.host_bytes_per_s), D2H_BYTES_PER_S if to_host else H2D_BYTES_PER_S)


def host_copy_seconds_per_byte(machine, structure: StepStructure, fitted_ns_per_byte: float) -> float:
    """Seconds per byte of trainable state of the host copy under ``structure``: device→host, plus
    host→device for a round trip, each at ``fitted_ns_per_byte`` (``host_rate="fitted"``: the cost
    model's ``host_copy_ns_per_byte``, which its fit bounds below by the documented rate) or at
    :func:`host_copy_bytes_per_s` (``"documented"``)."""
    directions = (True, False) if structure.host_direction == "round_trip" else (True,)
    if structure.host_rate == "fitted":
        return len(directions) * fitted_ns_per_byte * 1e-9
    return sum(1.0 / host_copy_bytes_per_s(machine, to_host) for to_host in directions)
