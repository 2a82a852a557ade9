"""Training API of the sparse-spiking LIF network (the paper's sparse BPTT, snn-on-ipu.md §1–§2).

Layers ``l = 0 … L−1`` are the neuron layers of a size string such as ``"2312-1466-1466-10"``
(the first number is the input channels ``N0``). ``W_l`` is float32 ``[N_in, N_out]`` (the
IPU's transposed layout: one input id selects one contiguous row).

Forward, per layer l and step t (``s = 10(1−α)``, ``v_{−1} = 0``)::

    x_l(t) = data list of step t                      (l = 0)
           = transmitted list of layer l−1 at t−1     (l ≥ 1; at t = 0 the initial list)
    I_t    = Σ_{j ∈ x_l(t)} W_l[j, :]   (+ Σ_{j ∈ own list at t−1} V_l[j, :] if recurrent)
    v_t    = s·I_t                if v_{t−1} > ϑ1      (state-based reset)
           = α·v_{t−1} + s·I_t    otherwise
    list_t = ids with v_t > ϑ1 ascending, then ϑ2 < v_t ≤ ϑ1 ascending, cut at N_max;
             count0 = kept real spikes (transmitted), count1 = kept entries (gradient slots)

ϑ2 of a layer may follow a :class:`SecondThresholdSchedule` (the authors' accuracy runs,
snn-on-ipu.md §1.2): after k updates ϑ2 = target + (start − target)·(1 − rate)^k, so a step with
``state.step = k`` uses :meth:`NetworkConfig.second_thresholds_at` ``(k)``.

Loss: ``C[b, k]`` = kept real spikes of output neuron k summed over t; ``L = mean_b CE(softmax(C_b),
y_b)``; accuracy = mean(argmax_k C[b, k] = y_b).

Backward (exact, §1.4), for t = T−1 … 0 and each layer::

    δv ← α·δv;  δv[id_i] += g_i·σ'(v_t[id_i]) for slots i < count1(t);  δI_t = s·δv
    dW_l[j, :] += δI_t[b, :]                     for each transmitted input j of sample b
    g_{l−1}(t−1)[b, i] = W_l[id_i, :]·δI_t[b, :]  for input slots i < count1 (l ≥ 1, t ≥ 1)
    recurrent: dV_l[j, :] += δI_t[b, :] for own transmitted j at t−1;
               g_l(t−1)[b, i] += V_l[id_i, :]·δI_t[b, :] for own slots i < count1(t−1)

with ``σ'(v) = 1/(β|v − ϑ1| + 1)²`` and, for the output layer, ``g_i = ∂L/∂C[b, id_i]`` for every
slot i < count1 (gradient-only slots included). The initial lists (step −1) are transmitted
inputs of step 0 (they enter dW and dV) but receive no gradient.

``activity = "fixed"`` (§4.3): the init bound gets +100 so every layer saturates its cap, and
the initial list of every layer holds ids ``0 … N_max−1`` with both counts ``N_max``; so
layers ≥ 1 (and recurrent layers) receive N_max spikes already at t = 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from tilesim.errors import MappingError, require
from tilesim.mapping.core import Mapping
from tilesim.models.snn.kernels import lif as K
from tilesim.models.snn.kernels.spikes import SpikeList, dense_to_input_list, initial_list
from tilesim.models.snn.placement.contiguous import contiguous_placement
from tilesim.models.snn.step.counters import Activity, LayerWork, LocalTiles, WorkCounters, layer_counters
from tilesim.models.snn.training.diagnose import layer_stats


def parse_layers(layers) -> tuple:
    """``"2312-1466-10"`` or a sequence of ints → tuple of ints (at least input + one layer)."""
    if isinstance(layers, str):
        try:
            sizes = tuple(int(x) for x in layers.strip().split("-"))
        except ValueError:
            require(False, "layers", layers, "must be sizes joined by '-'", 'e.g. "700-256-20"')
    else:
        sizes = tuple(int(x) for x in layers)
    require(len(sizes) >= 2, "layers", layers, "needs the input size and at least one layer", 'e.g. "700-256-20"')
    require(all(n >= 1 for n in sizes), "layers", layers, "every size must be >= 1")
    return sizes


@dataclass(frozen=True)
class LIFParams:
    """LIF neuron constants (per network; not trainable).

    ``decay`` α, ``threshold`` ϑ1, surrogate steepness ``beta`` β and ``input_scale`` (the
    paper's hard-coded 10) so that ``v ← α v + input_scale·(1−α)·I``. ``gain``, when given,
    replaces the input factor ``input_scale·(1−α)`` (``v ← α v + gain·I``); it is how a
    non-leaky integrate-and-fire neuron (α = 1, gain = R·dt) is written.
    """

    decay: float = 0.95
    threshold: float = 1.0
    beta: float = 10.0
    input_scale: float = 10.0
    gain: float | None = None

    def __post_init__(self):
        if self.gain is None:
            require(
                0.0 <= self.decay < 1.0,
                "LIFParams.decay",
                self.decay,
                "must be in [0, 1)",
                "or give an explicit gain (integrate-and-fire: decay 1)",
            )
        else:
            require(0.0 <= self.decay <= 1.0, "LIFParams.decay", self.decay, "must be in [0, 1]")
            require(self.gain > 0 and math.isfinite(self.gain), "LIFParams.gain", self.gain, "must be > 0")
        require(math.isfinite(self.threshold), "LIFParams.threshold", self.threshold, "must be finite")
        require(self.beta > 0, "LIFParams.beta", self.beta, "must be > 0")
        require(self.input_scale > 0, "LIFParams.input_scale", self.input_scale, "must be > 0")

    @property
    def scale(self) -> float:
        """s = input_scale·(1 − α), or ``gain`` when given."""
        return self.input_scale * (1.0 - self.decay) if self.gain is None else float(self.gain)


FLOAT32_MAX = float(np.finfo(np.float32).max)


def _check_float32(config, sizes) -> None:
    """The values the kernels hold in float32 stay finite there: the learning rate, the thresholds,
    and a membrane sum of ``fan_in`` inputs at the largest initial weight (√(6/fan_in)·weight_mul,
    +100 at fixed activity)."""
    for name in ("lr", "second_threshold", "output_second_threshold"):
        v = getattr(config, name)
        require(
            v is None or abs(v) <= FLOAT32_MAX,
            name,
            v,
            f"must be representable in float32 (|x| <= {FLOAT32_MAX:.3g})",
            "the kernels compute in float32",
        )
    fan_in = max(sizes[:-1])
    bound = math.sqrt(6.0 / min(sizes[:-1])) * config.weight_mul + (100.0 if config.activity == "fixed" else 0.0)
    require(
        bound * fan_in <= FLOAT32_MAX,
        "weight_mul",
        config.weight_mul,
        f"makes initial weights up to {bound:.3g}, whose sum over a fan-in of {fan_in} overflows float32 "
        f"({FLOAT32_MAX:.3g})",
        "e.g. weight_mul = 4 (the authors' runs)",
    )


@dataclass(frozen=True)
class SecondThresholdSchedule:
    """ϑ2 of every layer moves from ``start`` towards the layer's own target ϑ2 after every batch:
    ϑ2 ← ϑ2 + rate·(target − ϑ2), i.e. ϑ2(k) = target + (start − target)·(1 − rate)^k after k
    updates. The authors' JAX accuracy sweeps start at −100 with rate 0.5 and target 0.9
    (snn-on-ipu.md §1.2): every neuron is gradient-eligible (up to its cap) while the network
    still learns to spike, and after ~10 batches ϑ2 is within 0.1 of the target. A layer whose
    target equals ``start`` (e.g. an output layer at −100) stays constant."""

    start: float = -100.0
    rate: float = 0.5

    def __post_init__(self):
        require(math.isfinite(self.start), "SecondThresholdSchedule.start", self.start, "must be finite")
        require(
            0.0 < self.rate <= 1.0,
            "SecondThresholdSchedule.rate",
            self.rate,
            "must be in (0, 1]",
            "0.5 is the authors' value; 1 jumps to the target after one batch",
        )

    def value(self, target: float, step: int) -> float:
        """ϑ2 after ``step`` updates for a layer whose final value is ``target``."""
        return float(target + (self.start - target) * (1.0 - self.rate) ** max(step, 0))

    def to_dict(self) -> dict:
        """The summary.json form: ``{"start", "rate"}``."""
        return {"start": self.start, "rate": self.rate}


@dataclass(frozen=True)
class NetworkConfig:
    """A sparse-spiking LIF network and its training set-up; validates on construction.

    Attributes
    ----------
    layers : str or sequence of int
        ``"N0-N1-…-NL"``; normalised to a tuple of ints.
    batch, timesteps : int
    max_activity : float
        a in N_max = 2⌊a·N/2⌋ (hidden layers), max(2⌊a·N/2⌋, 2) (output layer).
    caps : tuple of int or None
        Explicit N_max per neuron layer (overrides ``max_activity``); values above N act as N.
    input_cap : int
        Maximum input spikes per (t, sample); extra ones are dropped at random.
    second_threshold : float
        ϑ2 of every hidden layer (gradient-only entries need ϑ2 < v ≤ ϑ1); with a schedule, the
        value it moves to.
    output_second_threshold : float or None
        ϑ2 of the output layer (None: ``second_threshold``). Default −100, as in the Sept-2022
        benchmark log (snn-on-ipu.md §5.2): every output neuron in the cap gets a gradient, so a
        network whose output does not spike yet still learns. With 0.9 an untrained output layer
        that never reaches 0.9 gets no gradient at all and the loss stays at ln C.
    second_threshold_schedule : SecondThresholdSchedule or None
        Moves every layer's ϑ2 from ``start`` to its target (default: the authors' −100, rate
        0.5); None keeps ϑ2 constant (the calibrated step-time cases).
    activity : {"natural", "fixed"}
    optimizer : {"adam", "sgd"}
    lr : float
    seed : int
        Seeds the weights and the input-dropping generator.
    recurrent : bool or tuple of bool
        Recurrent weights V_l [N_l, N_l] for all layers or per layer.
    weight_mul : float
        Init bound a = √(6/fan_in)·weight_mul (+100 if fixed); W ~ U(−a, a) + 0.001. Default 4.0
        (the Sept-2022 log and the calibrated cases, snn-on-ipu.md §5.2): with the final runs'
        2.0 a layer driven by ~1 % of its inputs per step barely fires and the next layer is
        silent, so sparse input never reaches the output.
    lif : LIFParams
    adam_beta1, adam_beta2, adam_eps : float
        Adam constants (PyTorch defaults 0.9, 0.999, 1e-8).
    """

    layers: object
    batch: int = 48
    timesteps: int = 100
    max_activity: float = 0.05
    caps: tuple | None = None
    input_cap: int = 32
    second_threshold: float = 0.9
    output_second_threshold: float | None = -100.0
    second_threshold_schedule: SecondThresholdSchedule | None = field(default_factory=SecondThresholdSchedule)
    activity: str = "natural"
    optimizer: str = "adam"
    lr: float = 1e-3
    seed: int = 0
    recurrent: object = False
    weight_mul: float = 4.0
    lif: LIFParams = field(default_factory=LIFParams)
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_eps: float = 1e-8

    def __post_init__(self):
        sizes = parse_layers(self.layers)
        object.__setattr__(self, "layers", sizes)
        L = len(sizes) - 1
        require(self.batch >= 1, "batch", self.batch, "must be >= 1")
        require(self.timesteps >= 1, "timesteps", self.timesteps, "must be >= 1")
        require(0.0 < self.max_activity <= 1.0, "max_activity", self.max_activity, "must be in (0, 1]")
        require(self.input_cap >= 1, "input_cap", self.input_cap, "must be >= 1")
        require(self.activity in ("natural", "fixed"), "activity", self.activity, "must be 'natural' or 'fixed'")
        require(self.optimizer in ("adam", "sgd"), "optimizer", self.optimizer, "must be 'adam' or 'sgd'")
        require(self.lr > 0 and math.isfinite(self.lr), "lr", self.lr, "must be > 0")
        require(self.weight_mul > 0, "weight_mul", self.weight_mul, "must be > 0")
        require(math.isfinite(self.second_threshold), "second_threshold", self.second_threshold, "must be finite")
        _check_float32(self, sizes)
        require(
            self.second_threshold < self.lif.threshold,
            "second_threshold",
            self.second_threshold,
            f"must be below the threshold {self.lif.threshold}",
        )
        if self.output_second_threshold is not None:
            require(
                self.output_second_threshold < self.lif.threshold,
                "output_second_threshold",
                self.output_second_threshold,
                f"must be below the threshold {self.lif.threshold}",
            )
        sched = self.second_threshold_schedule
        if sched is not None:
            require(
                isinstance(sched, SecondThresholdSchedule),
                "second_threshold_schedule",
                sched,
                "must be a SecondThresholdSchedule or None",
            )
            require(
                sched.start < self.lif.threshold,
                "second_threshold_schedule.start",
                sched.start,
                f"must be below the threshold {self.lif.threshold}",
            )
        require(
            0 < self.adam_beta1 < 1 and 0 < self.adam_beta2 < 1,
            "adam betas",
            (self.adam_beta1, self.adam_beta2),
            "must be in (0, 1)",
        )
        require(self.adam_eps > 0, "adam_eps", self.adam_eps, "must be > 0")
        if self.caps is not None:
            caps = tuple(int(c) for c in self.caps)
            require(len(caps) == L, "caps", self.caps, f"needs one cap per neuron layer ({L})")
            require(all(c >= 1 for c in caps), "caps", self.caps, "every cap must be >= 1")
            object.__setattr__(self, "caps", caps)
        if isinstance(self.recurrent, (bool, np.bool_)):
            rec = (bool(self.recurrent),) * L
        else:
            rec = tuple(bool(r) for r in self.recurrent)
            require(len(rec) == L, "recurrent", self.recurrent, f"needs one flag per neuron layer ({L})")
        object.__setattr__(self, "recurrent", rec)
        for l, n_max in enumerate(self.n_max):
            require(
                n_max >= 1,
                f"N_max of layer {l + 1}",
                n_max,
                f"2*floor(max_activity*N/2) with N = {sizes[l + 1]} must be >= 1",
                "raise max_activity or give explicit caps",
            )

    @property
    def layer_sizes(self) -> tuple:
        return self.layers

    @property
    def n_layers(self) -> int:
        """Number of neuron layers L (the input is not a layer)."""
        return len(self.layers) - 1

    @cached_property
    def n_max(self) -> tuple:
        """Capacity N_max of every neuron layer's list (≤ N); computed once (the step reads it per
        layer, which was quadratic in the layers for a 770-layer network)."""
        sizes = self.layers[1:]
        if self.caps is not None:
            return tuple(min(c, n) for c, n in zip(self.caps, sizes))
        out = [2 * int(math.floor(self.max_activity * n / 2)) for n in sizes]
        out[-1] = min(max(out[-1], 2), sizes[-1])
        return tuple(out)

    @property
    def second_thresholds(self) -> tuple:
        """Target ϑ2 of every neuron layer (the values a schedule moves to)."""
        th = [self.second_threshold] * self.n_layers
        if self.output_second_threshold is not None:
            th[-1] = self.output_second_threshold
        return tuple(th)

    def second_thresholds_at(self, step: int) -> tuple:
        """ϑ2 of every neuron layer in the training step after ``step`` updates."""
        sched = self.second_threshold_schedule
        if sched is None:
            return self.second_thresholds
        return tuple(sched.value(th, step) for th in self.second_thresholds)

    def at_step(self, step: int) -> NetworkConfig:
        """This configuration with ϑ2 fixed at the values of step ``step`` and no schedule (what
        that step computes with and is timed with)."""
        if self.second_threshold_schedule is None:
            return self
        th = self.second_thresholds_at(step)
        return replace(self, second_threshold=th[0], output_second_threshold=th[-1], second_threshold_schedule=None)


def init_weights(config: NetworkConfig, rng: np.random.Generator | None = None):
    """``(W, V)``: W_l ~ U(−a, a) + 0.001 with a = √(6/N_in)·weight_mul (+100 if fixed
    activity), float32 ``[N_in, N_l]``; V_l the same rule with fan-in N_l for recurrent layers,
    else None."""
    rng = np.random.default_rng(config.seed) if rng is None else rng
    offset = 100.0 if config.activity == "fixed" else 0.0
    sizes = config.layers
    scratch = np.empty(
        max(sizes[l] * sizes[l + 1] + (sizes[l + 1] ** 2 if config.recurrent[l] else 0) for l in range(config.n_layers))
    )
    W, V = [], []
    for l in range(config.n_layers):
        a = math.sqrt(6.0 / sizes[l]) * config.weight_mul + offset
        W.append(_uniform_f32(rng, a, (sizes[l], sizes[l + 1]), scratch))
        if config.recurrent[l]:
            a = math.sqrt(6.0 / sizes[l + 1]) * config.weight_mul + offset
            V.append(_uniform_f32(rng, a, (sizes[l + 1], sizes[l + 1]), scratch))
        else:
            V.append(None)
    return W, V


def _uniform_f32(rng: np.random.Generator, a: float, shape: tuple, scratch: np.ndarray) -> np.ndarray:
    """float32 ``rng.uniform(-a, a, shape) + 0.001``, bit for bit (NumPy's uniform is
    ``low + (high - low)·random()``), computed in a reused float64 ``scratch`` buffer: a
    740M-weight network otherwise maps and zero-fills two fresh float64 arrays per layer."""
    low, high = -a, a
    buf = scratch[: shape[0] * shape[1]].reshape(shape)
    rng.random(out=buf)
    buf *= high - low
    buf += low
    buf += 0.001
    return buf.astype(np.float32)


@dataclass
class NetworkState:
    """Mutable training state: weights, optimizer moments, step count and the input RNG.

    ``train_step`` updates it in place (the weight arrays are large)."""

    config: NetworkConfig
    W: list
    V: list
    opt: dict
    step: int
    rng: np.random.Generator
    placement: Mapping


PAPER_TILES_PER_CHIP = 1472
"""Tiles of the paper's chip (GC200 / Bow, ipu-hardware.md §1): where a network is placed when no
placement or machine is given (:func:`default_placement`)."""


def default_placement(config: NetworkConfig) -> Mapping:
    """The paper's placement: constant neurons per tile (2, 4, … until every layer fits on one
    chip of :data:`PAPER_TILES_PER_CHIP` tiles), contiguous tiles, tile 0 of chip 0 left free."""
    npt = 2
    while True:
        try:
            return contiguous_placement(config.layers[1:], npt, first_tile=1, tiles_per_chip=PAPER_TILES_PER_CHIP)
        except MappingError:
            npt += 2


def init_network(config: NetworkConfig, placement: Mapping | None = None) -> NetworkState:
    """Fresh :class:`NetworkState` (weights from ``config.seed``, zero optimizer state)."""
    rng = np.random.default_rng(config.seed)
    W, V = init_weights(config, rng)
    placement = default_placement(config) if placement is None else placement
    placement.check(config.layers[1:])
    opt = {}
    if config.optimizer == "adam":
        opt = {
            "mW": [np.zeros_like(w) for w in W],
            "vW": [np.zeros_like(w) for w in W],
            "mV": [None if v is None else np.zeros_like(v) for v in V],
            "vV": [None if v is None else np.zeros_like(v) for v in V],
        }
    return NetworkState(config, W, V, opt, 0, rng, placement)


@dataclass(frozen=True)
class StepResult:
    """Result of one training step.

    ``loss`` and ``accuracy`` of the batch *before* the update; ``logits`` = output spike
    counts ``[B, C]``; ``grads`` = ``(dW list, dV list)`` when requested; ``activity`` the
    recorded lists; ``counters`` the per-tile work (:mod:`tilesim.models.snn.step.counters`);
    ``layer_stats`` one :class:`tilesim.models.snn.training.diagnose.LayerStats` per neuron layer (spikes, entries,
    what the cap cut, the ϑ2 used)."""

    loss: float
    accuracy: float
    logits: np.ndarray
    activity: Activity
    counters: WorkCounters
    grads: tuple | None = None
    layer_stats: tuple = ()


def prepare_inputs(config: NetworkConfig, batch_spikes, rng: np.random.Generator) -> SpikeList:
    """Dense ``[T, B, N0]`` data spikes (capped at ``input_cap`` by random dropping) or an
    already sparse :class:`SpikeList` → the input list of layer 0."""
    T, B, N0 = config.timesteps, config.batch, config.layers[0]
    if isinstance(batch_spikes, SpikeList):
        lst = batch_spikes
        require(
            lst.ids.shape[:2] == (T, B), "batch_spikes.shape", lst.ids.shape, f"must start with (T, B) = ({T}, {B})"
        )
        require(
            lst.n_max <= config.input_cap,
            "batch_spikes.n_max",
            lst.n_max,
            f"must be <= input_cap = {config.input_cap}",
            "cap the input lists",
        )
        slot = np.arange(lst.n_max)[None, None, :]
        used = slot < lst.counts[..., 0][..., None]
        require(
            not used.any() or int(lst.ids[used].max()) < N0,
            "batch_spikes ids",
            int(lst.ids[used].max()) if used.any() else 0,
            f"must be < N0 = {N0}",
        )
        return lst
    x = np.asarray(batch_spikes)
    require(x.shape == (T, B, N0), "batch_spikes.shape", x.shape, f"must be (T, B, N0) = {(T, B, N0)}")
    return dense_to_input_list(x, config.input_cap, rng)


def spike_count_loss(out: SpikeList, n_classes: int, labels: np.ndarray):
    """``(loss, accuracy, logits [B, C] float64, dL/dlogits [B, C] float64)`` of the
    spike-count softmax cross-entropy (mean over the batch)."""
    T, B, n_max = out.ids.shape
    slot = np.arange(n_max)[None, None, :]
    keep = slot < out.counts[..., 0][..., None]
    t_idx, b_idx, s_idx = np.nonzero(keep)
    logits = np.zeros((B, n_classes), np.float64)
    np.add.at(logits, (b_idx, out.ids[t_idx, b_idx, s_idx].astype(np.int64)), 1.0)
    z = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    loss = float(np.mean(np.log(np.exp(z).sum(axis=1)) - z[np.arange(B), labels]))
    acc = float(np.mean(np.argmax(logits, axis=1) == labels))
    grad = p.copy()
    grad[np.arange(B), labels] -= 1.0
    grad /= B
    return loss, acc, logits, grad


def compute_gradients(
    state: NetworkState,
    batch_spikes,
    labels,
    *,
    per_step_counters: bool = False,
    placement: Mapping | None = None,
    update: bool = False,
):
    """Forward and backward of one batch (see :func:`_compute_gradients`); kernels of small layers
    run on one thread (:func:`tilesim.models.snn.kernels.lif.threads_for`)."""
    cfg = state.config
    with K.threads_for(cfg.timesteps * cfg.batch * max(cfg.layers[1:])):
        return _compute_gradients(
            state, batch_spikes, labels, per_step_counters=per_step_counters, placement=placement, update=update
        )


def _checked_labels(cfg: NetworkConfig, labels) -> np.ndarray:
    """``labels`` as an array, after checking it holds ``cfg.batch`` integers in ``[0, output size)``."""
    labels = np.asarray(labels)
    sizes = cfg.layers
    require(labels.shape == (cfg.batch,), "labels.shape", labels.shape, f"must be ({cfg.batch},)")
    require(
        np.issubdtype(labels.dtype, np.integer) and labels.min() >= 0 and labels.max() < sizes[-1],
        "labels",
        (labels.min(), labels.max()),
        f"must be integers in [0, {sizes[-1]})",
    )
    return labels


def _forward(state: NetworkState, inputs, initial: list, tiles: list) -> tuple:
    """The forward pass at the thresholds of update ``state.step``: per layer lists of the membrane
    sequences, the kept spike lists, the layer inputs, the forward row counts, the per-tile entry tallies
    and the :func:`layer_stats`."""
    cfg = state.config
    lif = cfg.lif
    theta2 = cfg.second_thresholds_at(state.step)
    v_seqs, lists, layer_in, rows_fwd, tallies, stats = [], [], [], [], [], []
    for l in range(cfg.n_layers):
        inp = inputs if l == 0 else lists[l - 1].shifted(initial[l - 1])
        if cfg.recurrent[l]:
            v, own, rows = K.lif_forward_recurrent(
                state.W[l], state.V[l], inp, initial[l], lif.decay, lif.scale, lif.threshold, theta2[l], cfg.n_max[l]
            )
        else:
            v, rows = K.lif_forward(state.W[l], inp, lif.decay, lif.scale, lif.threshold)
            own = K.compact_spikes(v, lif.threshold, theta2[l], cfg.n_max[l])
        stats.append(layer_stats(l, v, own, lif.threshold, theta2[l], cfg.n_max[l]))
        v_seqs.append(v)
        lists.append(own)
        layer_in.append(inp)
        rows_fwd.append(rows)
        tallies.append(K.tally_entries(own, tiles[l].local, tiles[l].tiles.size))
    return v_seqs, lists, layer_in, rows_fwd, tallies, stats


def _output_entry_grads(out, dlogits: np.ndarray, batch: int) -> np.ndarray:
    """``g [T, B, n_max]`` float32: the loss gradient of every kept entry of the output spike list
    ``out`` (``dlogits`` of its neuron; 0 in unused slots)."""
    slot = np.arange(out.n_max)[None, None, :]
    in_slot = slot < out.counts[..., 1][..., None]
    b_of = np.broadcast_to(np.arange(batch)[None, :, None], out.ids.shape)
    return np.where(in_slot, dlogits[b_of, out.ids.astype(np.int64)], 0.0).astype(np.float32)


def _compute_gradients(
    state: NetworkState,
    batch_spikes,
    labels,
    *,
    per_step_counters: bool = False,
    placement: Mapping | None = None,
    update: bool = False,
):
    """Forward and backward of one batch without updating: a :class:`StepResult` with grads.

    ``update``: apply the optimizer step instead, each layer as soon as its gradients are known
    (the backward pass never reads a layer's weights again after its own input gradient), so
    only one layer's gradients exist at a time; the result then has no grads. Same weights as
    :func:`apply_gradients` after the whole backward pass."""
    cfg = state.config
    lif = cfg.lif
    L = cfg.n_layers
    sizes = cfg.layers
    labels = _checked_labels(cfg, labels)
    placement = state.placement if placement is None else placement
    placement.check(sizes[1:])
    inputs = prepare_inputs(cfg, batch_spikes, state.rng)
    fixed = cfg.activity == "fixed"
    initial = [initial_list(cfg.batch, n, fixed) for n in cfg.n_max]
    tiles = [LocalTiles(placement.tile_of_neuron[l]) for l in range(L)]

    v_seqs, lists, layer_in, rows_fwd, tallies, stats = _forward(state, inputs, initial, tiles)
    loss, acc, logits, dlogits = spike_count_loss(lists[-1], sizes[-1], labels)
    g = _output_entry_grads(lists[-1], dlogits, cfg.batch)

    dW, dV = [None] * L, [None] * L
    phases = []
    if update:
        state.step += 1
    for l in reversed(range(L)):
        V = state.V[l] if cfg.recurrent[l] else None
        dI, slots_scanned = K.state_grad(v_seqs[l], lists[l], g, lif.decay, lif.scale, lif.threshold, lif.beta, V)
        v_seqs[l] = None
        dW[l], rows_bwd = K.weight_grad(dI, layer_in[l], sizes[l])
        input_slots = np.zeros(cfg.timesteps, np.int64)
        if V is not None:
            od = lists[l].shifted(initial[l])
            dV[l], rows_rec = K.weight_grad(dI, od, sizes[l + 1])
            rows_bwd = rows_bwd + rows_rec
            rec_slots = od.counts[..., 1].sum(axis=1, dtype=np.int64)
            rec_slots[0] = 0
            input_slots += rec_slots
        if l >= 1:
            g, slots_in = K.input_grad(state.W[l], dI, layer_in[l])
            input_slots += slots_in
        work = LayerWork(rows_fwd[l], tallies[l], slots_scanned, rows_bwd, input_slots)
        phases.append(
            layer_counters(
                l,
                sizes[l],
                sizes[l + 1],
                layer_in[l].n_max,
                cfg.n_max[l],
                cfg.batch,
                cfg.recurrent[l],
                l >= 1,
                work,
                tiles[l],
                placement.n_tiles,
                per_step_counters,
            )
        )
        del dI
        if update:
            _update_layer(state, l, dW[l], dV[l])
            dW[l] = dV[l] = None
    counters = WorkCounters(placement.n_tiles, cfg.timesteps, tuple(p for layer in reversed(phases) for p in layer))
    activity = Activity(sizes, inputs, tuple(lists), tuple(initial), cfg.recurrent)
    return StepResult(loss, acc, logits, activity, counters, None if update else (dW, dV), tuple(stats))


def _update_layer(state: NetworkState, l: int, dW, dV) -> None:
    """The optimizer step of layer ``l`` in place, at update number ``state.step``."""
    cfg = state.config
    pairs = [(state.W[l], dW, "W")]
    if state.V[l] is not None:
        pairs.append((state.V[l], dV, "V"))
    for P, G, name in pairs:
        if cfg.optimizer == "adam":
            K.adam_update(
                P,
                G,
                state.opt["m" + name][l],
                state.opt["v" + name][l],
                cfg.lr,
                state.step,
                cfg.adam_beta1,
                cfg.adam_beta2,
                cfg.adam_eps,
            )
        else:
            K.sgd_update(P, G, cfg.lr)


def apply_gradients(state: NetworkState, dW, dV) -> None:
    """One optimizer step in place (Adam or SGD per ``config.optimizer``)."""
    state.step += 1
    for l in range(state.config.n_layers):
        _update_layer(state, l, dW[l], dV[l])


def train_step(
    state: NetworkState,
    batch_spikes,
    labels,
    *,
    return_grads: bool = False,
    per_step_counters: bool = False,
    placement: Mapping | None = None,
) -> StepResult:
    """Forward, sparse BPTT and one optimizer update, in place on ``state``.

    Parameters
    ----------
    batch_spikes : np.ndarray or SpikeList
        Dense ``[T, B, N0]`` (uint8/bool) data spikes — capped at ``input_cap`` by random
        dropping with ``state.rng`` — or an already sparse input list.
    labels : np.ndarray
        int ``[B]`` class indices.
    placement : tilesim.mapping.Mapping, optional
        Where the neurons live, for the counters (default ``state.placement``); never changes the math.

    Raises
    ------
    ConfigError
        On shapes, labels or ids out of range.
    """
    if not return_grads:  # each layer updated as soon as its gradients are known
        return compute_gradients(
            state, batch_spikes, labels, per_step_counters=per_step_counters, placement=placement, update=True
        )
    res = compute_gradients(state, batch_spikes, labels, per_step_counters=per_step_counters, placement=placement)
    dW, dV = res.grads
    apply_gradients(state, dW, dV)
    return res


@dataclass(frozen=True)
class TrainingRun:
    """What :func:`train` returns: the trained ``state``, one
    :class:`tilesim.models.snn.training.diagnose.StepRecord` per step (loss, accuracy, per-layer activity) and the
    :func:`tilesim.models.snn.training.diagnose.diagnose` findings of the whole run."""

    state: NetworkState
    history: tuple
    findings: tuple

    @property
    def losses(self) -> np.ndarray:
        return np.array([r.loss for r in self.history])

    @property
    def accuracies(self) -> np.ndarray:
        return np.array([r.accuracy for r in self.history])


def train(
    config: NetworkConfig,
    dataset,
    steps: int,
    placement: Mapping | None = None,
    on_step=None,
    state: NetworkState | None = None,
) -> TrainingRun:
    """Train ``config`` for ``steps`` steps on an event ``dataset``
    (:class:`tilesim.models.snn.training.data.EventDataset`), cycling over shuffled epochs of full batches
    (shuffle and input dropping seeded with ``config.seed + 1``), ϑ2 following the config's
    schedule.

    ``on_step(step, result)`` is called after every step with the :class:`StepResult` (e.g. to
    time its counters: ``result.counters`` hold the lists of that step's caps and ϑ2). A given
    ``state`` continues training (its ``step`` goes on counting)."""
    from tilesim.models.snn.training.diagnose import (  # import cycle: diagnose imports this module when it loads
        StepRecord,
        diagnose,
    )

    require(isinstance(steps, (int, np.integer)) and steps >= 1, "steps", steps, "must be an integer >= 1")
    require(
        len(dataset) >= config.batch,
        "dataset size",
        len(dataset),
        f"must hold at least one batch of {config.batch} samples",
    )
    state = init_network(config, placement) if state is None else state
    rng = np.random.default_rng(config.seed + 1)
    batches, history = dataset.endless_batches(config.batch, config.timesteps, config.input_cap, rng), []
    for _ in range(int(steps)):
        spikes, labels = next(batches)
        step = state.step
        res = train_step(state, spikes, labels, placement=placement)
        history.append(StepRecord.from_result(step, res))
        if on_step is not None:
            on_step(step, res)
    return TrainingRun(state, tuple(history), diagnose(history, config))
