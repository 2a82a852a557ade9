"""Is the network learning? Per-layer activity of every training step and the findings drawn from it.

A training step records, per neuron layer, a :class:`LayerStats` (:func:`layer_stats`, called by
:func:`tilesim.models.snn.training.network.compute_gradients`): real spikes and list entries kept per sample and
time step, how many neurons *wanted* in (above ϑ1, above ϑ2) before the cap N_max cut them, and
how often the list was full. :class:`StepRecord` adds the step's loss and accuracy.

Pure functions over a history of records say what is wrong, once per layer and kind, as typed
:class:`Finding` s (``to_dict()`` for summary.json, ``message`` one line for a terminal):

* :func:`check_depth` — before training: with one step of delay per layer (layer l ≥ 1 hears layer
  l − 1 of step t − 1), the output first hears the data at step L − 1, so a network of L ≥ T neuron
  layers cannot carry its input to the output within T steps (natural activity starts silent);
* :func:`diagnose` — after (or during) training: a *dead* layer (no spike and no gradient-eligible
  entry for ``window`` consecutive steps: nothing above it learns, the loss stays at ln C), a loss
  that has not moved, a *saturated* layer (firing at its cap in nearly every step and sample:
  the cap cuts real spikes and gradient entries; how much is said), and a *silent* hidden layer
  (:func:`check_silent`: a hidden layer beyond the first that emits no spike over a whole step; the
  layers above it do no spike work, so a step timed from that activity measures per-layer overhead).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from tilesim.errors import require

__all__ = ["Finding", "LayerStats", "StepRecord", "check_depth", "check_silent", "diagnose", "layer_stats"]

#: consecutive steps a layer must be silent (or saturated) before it is reported
WINDOW = 5
#: a layer counts as saturated when its list is full in at least this share of (t, sample) slots
SATURATED_SHARE = 0.95
#: the loss "has not moved" when its range over the window is below this (absolute, in nats)
FLAT_LOSS = 1e-6


@dataclass(frozen=True)
class LayerStats:
    """Activity of one neuron layer in one training step (means over time steps and samples).

    Attributes
    ----------
    layer : int
        Neuron layer index, 0 = first hidden layer, L − 1 = output.
    neurons, cap : int
        N and N_max of the layer.
    second_threshold : float
        ϑ2 the step used.
    spikes : float
        Kept real spikes per sample and time step (mean of count0).
    entries : float
        Kept list entries per sample and time step (count1: spikes + gradient-only entries).
    wanted_spikes, wanted_entries : float
        Neurons above ϑ1 / above ϑ2 per sample and time step before the cap cut them.
    full : float
        Share of (t, sample) slots whose cap was filled by real spikes alone (count0 = N_max):
        the layer fires at its cap (a list full of gradient-only entries, as with ϑ2 −100, is
        not counted).
    """

    layer: int
    neurons: int
    cap: int
    second_threshold: float
    spikes: float
    entries: float
    wanted_spikes: float
    wanted_entries: float
    full: float

    @property
    def gradient_only(self) -> float:
        """Gradient-only entries (ϑ2 < v ≤ ϑ1, kept) per sample and time step."""
        return self.entries - self.spikes

    @property
    def cap_used(self) -> float:
        """Mean share of the cap the list fills (entries / N_max)."""
        return self.entries / self.cap if self.cap else 0.0

    @property
    def cut_entries(self) -> float:
        """Share of gradient-eligible entries (v > ϑ2) the cap dropped."""
        return 1.0 - self.entries / self.wanted_entries if self.wanted_entries > 0 else 0.0

    @property
    def cut_spikes(self) -> float:
        """Share of real spikes (v > ϑ1) the cap dropped."""
        return 1.0 - self.spikes / self.wanted_spikes if self.wanted_spikes > 0 else 0.0

    def to_dict(self) -> dict:
        return {
            **asdict(self),
            "gradient_only": self.gradient_only,
            "cap_used": self.cap_used,
            "cut_entries": self.cut_entries,
            "cut_spikes": self.cut_spikes,
        }


@dataclass(frozen=True)
class StepRecord:
    """Loss, accuracy and per-layer activity of one training step (before its update)."""

    step: int
    loss: float
    accuracy: float
    layers: tuple

    @classmethod
    def from_result(cls, step: int, result) -> StepRecord:
        """The record of a :class:`tilesim.models.snn.training.network.StepResult`."""
        return cls(int(step), float(result.loss), float(result.accuracy), tuple(result.layer_stats))

    def to_dict(self) -> dict:
        return {
            "step": self.step,
            "loss": self.loss,
            "accuracy": self.accuracy,
            "layers": [s.to_dict() for s in self.layers],
        }


@dataclass(frozen=True)
class Finding:
    """One thing that is wrong with a training run.

    ``kind`` is ``"too_deep"``, ``"dead_layer"``, ``"silent_layer"``, ``"flat_loss"`` or ``"saturated_layer"``;
    ``layer`` the neuron layer (None for the whole network); ``steps`` the first and last step
    it covers; ``message`` one line with the numbers; ``fix`` what to change."""

    kind: str
    layer: int | None
    steps: tuple
    message: str
    fix: str

    @property
    def key(self) -> tuple:
        """Findings with equal keys are the same finding (print each key once)."""
        return (self.kind, self.layer)

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "layer": self.layer,
            "steps": list(self.steps),
            "message": self.message,
            "fix": self.fix,
        }


def layer_stats(
    layer: int, v_seq: np.ndarray, lst, threshold: float, second_threshold: float, n_max: int
) -> LayerStats:
    """:class:`LayerStats` of one layer from its membrane sequence ``v_seq [T, B, N]`` and its
    kept list (a :class:`tilesim.models.snn.kernels.spikes.SpikeList`)."""
    T, B, N = v_seq.shape
    c = lst.counts
    return LayerStats(
        layer=int(layer),
        neurons=int(N),
        cap=int(n_max),
        second_threshold=float(second_threshold),
        spikes=float(c[..., 0].mean()),
        entries=float(c[..., 1].mean()),
        wanted_spikes=float(np.count_nonzero(v_seq > np.float32(threshold)) / (T * B)),
        wanted_entries=float(np.count_nonzero(v_seq > np.float32(second_threshold)) / (T * B)),
        full=float(np.mean(c[..., 0] >= n_max)),
    )


def _name(layer: int, n_layers: int) -> str:
    return f"layer {layer + 1} (output)" if layer == n_layers - 1 else f"layer {layer + 1}"


def check_depth(config) -> Finding | None:
    """A finding when the network is deeper than its time steps can carry the input (natural
    activity only: a fixed-activity run feeds every layer its initial list at step 0)."""
    L, T = config.n_layers, config.timesteps
    reach = T - (L - 1)  # time steps in which the output can hear the input
    if config.activity != "natural" or reach > T // 4:
        return None
    n_classes = config.layers[-1]
    if reach <= 0:
        what = (
            f"never hears the data (it first can at step {L - 1}); the output spike counts stay 0 and "
            f"the loss stays at ln {n_classes} = {math.log(n_classes):.3f}"
        )
    else:
        what = (
            f"hears the data only in the last {reach} of {T} steps (it first can at step {L - 1}), "
            "so its spike counts carry little of the input"
        )
    return Finding(
        "too_deep",
        None,
        (0, 0),
        f"network of {L} neuron layers at T = {T}: with one step of delay per layer the output {what}",
        f"give at least T = {L + 9} time steps (--timesteps), or fewer layers than {T}",
    )


def _silent_fix(layer: int, timesteps: int | None) -> str:
    if timesteps is not None and layer >= timesteps:
        return (
            f"give at least T = {layer + 10} time steps (--timesteps): with one step of delay per layer, layer "
            f"{layer + 1} first hears the data at step {layer}, after the last of T = {timesteps}; or fewer layers"
        )
    return (
        "raise the drive of the layer below: weight_mul (e.g. 4.0, the Sept-2022 runs), the input rate, or "
        "T (each layer hears the data one step later than the one below); or time the step at fixed activity"
    )


def check_silent(history, config=None) -> Finding | None:
    """A finding when a hidden layer beyond the first emits no spike over a whole step (no kept real spike
    in any time step and sample): the lowest such layer is named (the layers above it are silent because
    of it, or earlier), with the steps it was silent in, its gradient-only entries and the real spikes of
    the layer below. The output layer is left to ``dead_layer`` and ``flat_loss`` (an untrained output
    that does not spike yet is normal; ϑ2 −100 still gives it a gradient).

    With ``config`` the reason is told apart: a layer l (0-based) with l ≥ T cannot hear the data at all
    (one step of delay per layer, as in the authors' code), a lower one is silent because the drive from
    the layer below does not reach ϑ1 (weights, input rate)."""
    hist = list(history)
    if not hist:
        return None
    L = len(hist[0].layers)
    for l in range(1, L - 1):
        silent = [r for r in hist if r.layers[l].spikes == 0]
        if not silent:
            continue
        s, first = silent[0].layers[l], silent[0]
        below = first.layers[l - 1]
        T = getattr(config, "timesteps", None)
        reason = (
            f"with one step of delay per layer it first hears the data at step {l}, after the last of T = {T}"
            if T is not None and l >= T
            else f"the layer below ({_name(l - 1, L)}) kept {below.spikes:.3f} spikes per sample and time step"
        )
        return Finding(
            "silent_layer",
            l,
            (silent[0].step, silent[-1].step),
            f"{_name(l, L)} ({s.neurons} neurons, cap {s.cap}) emitted no spike in {len(silent)} of {len(hist)} "
            f"step(s) (first at step {first.step}; {s.gradient_only:.3f} gradient-only entries per sample and "
            f"time step): {reason}; layers {l + 1}–{L} do no spike work, so a step timed from this activity "
            "measures per-layer overhead",
            _silent_fix(l, T),
        )
    return None


def _runs(flags):
    """``(first, last)`` index of every run of consecutive True values."""
    out, start = [], None
    for i, f in enumerate(list(flags) + [False]):
        if f and start is None:
            start = i
        elif not f and start is not None:
            out.append((start, i - 1))
            start = None
    return out


def _dead_fix(layer: int, L: int, theta2: float) -> str:
    if layer == L - 1:
        return (
            "give the output layer ϑ2 −100 (output_second_threshold = -100, --output-second-threshold -100) "
            "so every output neuron in the cap gets a gradient, or raise weight_mul"
        )
    return (
        f"raise weight_mul (e.g. 4.0) or the input drive, or start ϑ2 (now {theta2:g}) low with the "
        "second-threshold schedule"
    )


def _flat_loss(hist: list, steps: list, config, window: int):
    """The earliest run of ``window`` or more steps, to the last, over which the loss did not move (a
    :class:`Finding`), or None."""
    losses = np.array([r.loss for r in hist])
    if len(hist) < window:
        return None
    for i in range(len(hist) - window + 1):
        tail = losses[i:]
        if np.ptp(tail) < FLAT_LOSS and tail[0] > 0.01:  # 0: learned, not stuck
            n_classes = config.layers[-1] if config is not None else None
            chance = (
                f" (= ln {n_classes}, chance: the output never spiked)"
                if n_classes and abs(tail[0] - math.log(n_classes)) < 1e-6
                else ""
            )
            return Finding(
                "flat_loss",
                None,
                (steps[i], steps[-1]),
                f"loss stayed at {tail[0]:.3f}{chance} from step {steps[i]} to {steps[-1]}",
                "see the dead-layer finding; the usual fixes are output ϑ2 −100 and weight_mul 4.0",
            )
    return None


def diagnose(history, config=None, window: int = WINDOW) -> tuple:
    """Findings over a training history (a sequence of :class:`StepRecord`), one per kind and
    layer, earliest first; with ``config`` also :func:`check_depth`.

    Dead layers: only the lowest dead layer is named (the layers above it are dead because of
    it). A layer is dead in a step when it kept no real spike and no gradient-only entry. Silent hidden
    layers (:func:`check_silent`, from one step on) are named unless the same layer is already named dead.
    """
    require(window >= 1, "window", window, "must be >= 1")
    hist = list(history)
    found = []
    if config is not None:
        deep = check_depth(config)
        if deep is not None:
            found.append(deep)
    if not hist:
        return tuple(found)
    steps = [r.step for r in hist]
    L = len(hist[0].layers)
    dead_named = False
    for l in range(L):
        dead = [r.layers[l].entries == 0 for r in hist]
        for a, b in _runs(dead):
            if b - a + 1 >= window and not dead_named:
                s = hist[a].layers[l]
                found.append(
                    Finding(
                        "dead_layer",
                        l,
                        (steps[a], steps[b]),
                        f"{_name(l, L)} ({s.neurons} neurons, ϑ2 {s.second_threshold:.3g}) kept no spike and no "
                        f"gradient entry in steps {steps[a]}–{steps[b]} (activity "
                        f"{np.mean([r.layers[l].spikes for r in hist[a : b + 1]]):.3f} spikes per sample and step): "
                        "no gradient reaches it or the layers below",
                        _dead_fix(l, L, s.second_threshold),
                    )
                )
                dead_named = True
                break
        full = [r.layers[l].full >= SATURATED_SHARE and r.layers[l].cut_spikes > 0 for r in hist]
        for a, b in _runs(full):
            if b - a + 1 >= window:
                sel = [r.layers[l] for r in hist[a : b + 1]]
                s = sel[0]
                found.append(
                    Finding(
                        "saturated_layer",
                        l,
                        (steps[a], steps[b]),
                        f"{_name(l, L)} fired at its cap ({s.cap} of {s.neurons}) in "
                        f"{100 * np.mean([x.full for x in sel]):.0f} % of (step, sample) slots in steps "
                        f"{steps[a]}–{steps[b]}: the cap cut {100 * np.mean([x.cut_spikes for x in sel]):.0f} % of "
                        f"its spikes and {100 * np.mean([x.cut_entries for x in sel]):.0f} % of its gradient-eligible "
                        f"entries (wanted {np.mean([x.wanted_spikes for x in sel]):.1f} spikes per sample and step)",
                        "raise max_activity or give larger caps (the gradient is truncated), or lower weight_mul",
                    )
                )
                break
    silent = check_silent(hist, config)
    if silent is not None and not any(f.kind == "dead_layer" and f.layer == silent.layer for f in found):
        found.append(silent)
    flat = _flat_loss(hist, steps, config, window)
    if flat is not None:
        found.append(flat)
    order = {"too_deep": 0, "dead_layer": 1, "silent_layer": 2, "flat_loss": 3, "saturated_layer": 4}
    return tuple(sorted(found, key=lambda f: (order[f.kind], f.steps[0], -1 if f.layer is None else f.layer)))
