"""Named structural assumptions of the SNN step model (issue 17), each with its evidence.

The step program of :mod:`models.snn.timing` fixes what is known (the supersteps of the authors'
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
    How often the trainable state (weights + optimizer slots) crosses the host link: after
    every device execution, or once per epoch (TF's executor keeps variables on the device
    between runs; Keras resets metrics at every epoch start). The calibration runs and the
    paper's runs have one execution per epoch, where the two coincide.
``host_direction``  ``"round_trip"`` (default) | ``"one_way"``
    Device→host only, or device→host and host→device.
``residual_per``  ``"epoch"`` (default) | ``"execution"`` | ``"step"``
    When the labelled residual ``unexplained: per-weight epoch cost`` is paid. Every measured
    single-chip row ran one execution of 52 steps per epoch
    (:data:`CALIBRATION_STEPS_PER_EPOCH`), so the data fit all three equally: the fitted
    cycles per weight are spread over the steps of an epoch, of an execution, or over 52 steps
    every step. The §4.4 scaling runs (1000 steps per epoch, two executions of 500) tell them apart.
``residual_shared``  ``"chip"`` (default) | ``"host_link"``
    Whether each chip pays the residual for its own weights in parallel, or the chips behind one
    host link (:data:`CHIPS_PER_HOST_LINK`, an IPU-Machine's gateway) pay it one after another
    (each chip waits for the whole group's weights): the test of a host-serial cost.

The host transfer runs at :func:`host_copy_bytes_per_s`: the machine's host link bounded by
the documented host-traffic rates. What the measured single-chip steps need beyond it is the
labelled residual ``unexplained: per-weight epoch cost`` (a fitted coefficient, cycles per weight
per epoch, ``epoch_residual_cycles_per_weight``), not a host link at an impossible rate. Its
leading candidate (not modelled: no source gives its rate): Graphcore's TensorFlow executor
moves every resource variable device→host when the engine changes and back before the next run
(``poplar_executor.cc``: ``CheckMoveDeviceToHostRequired(engine_changed)``), so an epoch boundary
that runs another executable (e.g. Keras resetting its metrics) costs a round trip of weights and
Adam moments (24 B per weight) through per-tensor host reads; the residual is 30 ns per weight per
epoch, an effective 0.8 GB/s. ``residual_per`` / ``residual_shared`` say when and where it is paid.

Not options, because the authors' code leaves no choice (modelled in :mod:`models.snn.timing`):
on C > 1 chips the op's input-gradient ``reduceMany`` runs once per IPU, one after another
(``poplar_code.cpp``, ``poplarReduceInpSpikesGrad``: one virtual graph per IPU), and the Keras
model is a Sequential pipeline of C stages (the op on all IPUs, C−2 identity stages and the
sparse→dense + loss stage on the last IPU; ``multi_ipu.py``), crossed forward and backward:
2(C−1) stage switches per step (:func:`models.snn.timing.pipeline_switches`).
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
    "RESIDUAL_PER",
    "RESIDUAL_SHARED",
    "CALIBRATION_STEPS_PER_EPOCH",
    "CHIPS_PER_HOST_LINK",
    "D2H_BYTES_PER_S",
    "H2D_BYTES_PER_S",
    "host_copy_bytes_per_s",
    "flipped",
]

SYNC_SCOPES = ("chip", "all")
COPIES = ("separate", "merged")
HOST_TRANSFERS = ("per_epoch", "per_execution")
HOST_DIRECTIONS = ("round_trip", "one_way")
RESIDUAL_PER = ("epoch", "execution", "step")
RESIDUAL_SHARED = ("chip", "host_link")

CALIBRATION_STEPS_PER_EPOCH = 52
"""Steps per execution and per epoch of every measured single-chip row (9984 samples / 48 / 4;
``benchmark_multi_layer_nmnist.py`` at afd6c70): the steps the fitted residual was spread over."""
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
    residual_per: str = "epoch"
    residual_shared: str = "chip"

    def __post_init__(self):
        for name, allowed in (
            ("sync_scope", SYNC_SCOPES),
            ("copies", COPIES),
            ("host_transfer", HOST_TRANSFERS),
            ("host_direction", HOST_DIRECTIONS),
            ("residual_per", RESIDUAL_PER),
            ("residual_shared", RESIDUAL_SHARED),
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

    def residual_steps(self, steps_per_execution: int) -> int:
        """Training steps the per-weight residual of one epoch of the calibration runs is spread
        over (``residual_per``): an epoch's, an execution's, or the calibration epoch's 52 steps."""
        if self.residual_per == "epoch":
            return steps_per_execution * self.executions_per_epoch
        if self.residual_per == "execution":
            return steps_per_execution
        return CALIBRATION_STEPS_PER_EPOCH

    def to_dict(self) -> dict:
        """The JSON form (every summary carries it)."""
        return asdict(self)

    def describe(self) -> str:
        """One line: ``sync chip, copies separate, host per_epoch round_trip``."""
        return (
            f"sync {self.sync_scope}, copies {self.copies}, host {self.host_transfer} {self.host_direction}"
            + (f" ({self.executions_per_epoch} executions/epoch)" if self.executions_per_epoch > 1 else "")
            + f", residual per {self.residual_per} per {self.residual_shared.replace('_', ' ')}"
        )


DEFAULT_STRUCTURE = StepStructure()

_OTHER = {
    "sync_scope": dict(zip(SYNC_SCOPES, reversed(SYNC_SCOPES))),
    "copies": dict(zip(COPIES, reversed(COPIES))),
    "host_transfer": dict(zip(HOST_TRANSFERS, reversed(HOST_TRANSFERS))),
    "host_direction": dict(zip(HOST_DIRECTIONS, reversed(HOST_DIRECTIONS))),
    "residual_shared": dict(zip(RESIDUAL_SHARED, reversed(RESIDUAL_SHARED))),
}


def flipped(structure: StepStructure, name: str) -> StepStructure:
    """``structure`` with the assumption ``name`` (a field) switched the other way."""
    require(name in _OTHER, "assumption", name, f"must be one of {', '.join(_OTHER)}")
    return replace(structure, **{name: _OTHER[name][getattr(structure, name)]})


def host_copy_bytes_per_s(machine, to_host: bool) -> float:
    """Bytes/s of a variable copy over the host link: the machine's link rate bounded by the
    documented host-traffic rate of that direction."""
    return min(float(machine.system.host_bytes_per_s), D2H_BYTES_PER_S if to_host else H2D_BYTES_PER_S)
