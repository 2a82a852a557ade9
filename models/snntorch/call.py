"""One ``poptorch_model(data, labels)`` call, as ``tilesim run --implementation snntorch`` and ``tilesim
validate`` both describe it: the network, the batch, the time steps, how the host sends the input, and the
named assumptions the call is timed under. :func:`snntorch_step` is the one builder of its timed step.

**The input as the measured script sends it.** ``train_fcn.py`` (github.com/vinniesun/snntorch-ipu, the
held-out logs' script) sends one ``data.half()`` batch per call: float16 ``[B, 1, 28, 28]``, i.e. one
``[B, N0]`` frame, which ``forward`` feeds to ``fc1`` at every one of the ``T`` steps
(``self.fc1(x.view(batch_size, -1))`` inside the step loop). So the default is ``input_dtype = "fp16"``,
``input_shape = "frame"``: ``2 · B · N0`` bytes per call. ``input_shape = "sequence"`` sends a ``[T, B, N0]``
tensor (a time-varying input such as SHD's, sliced per step on the device), ``input_dtype = "fp32"`` four
bytes per value. A float16 input meets float32 weights under ``HalfUpcastToFloat``: PopTorch casts it to
float before each ``fc1`` (one cast per step, :func:`tilesim.models.snntorch.ops.snntorch_ops`).

**Named assumptions** (:meth:`SnnTorchCall.assumptions`, carried in the run's record and in ``tilesim
compare``'s "named assumptions" row): PopTorch's per-call host overhead, 0.3 ms [U] (band 0.1–1 ms; no public
source gives a figure, :mod:`tilesim.models.snntorch.step`), and the device-side mechanisms of
:mod:`tilesim.models.snntorch.mechanisms`, each switchable.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from tilesim.errors import require
from tilesim.models.snntorch.mechanisms import INPUT_DTYPES, Mechanisms

__all__ = [
    "INPUT_DTYPES",
    "INPUT_SHAPES",
    "POPTORCH_CALL_S",
    "POPTORCH_CALL_BAND_S",
    "SnnTorchCall",
    "call_from_options",
]

INPUT_SHAPES = ("frame", "sequence")
"""``frame``: one ``[B, N0]`` frame per call, fed at every step (``train_fcn.py``); ``sequence``: ``[T, B, N0]``."""
MEASURED_INPUT = ("fp16", "frame")
"""How ``train_fcn.py`` sends its input (``data.half()``, one MNIST image per sample): the defaults."""
POPTORCH_CALL_S = 3.0e-4
"""Host seconds of one PopTorch training call besides its copies: an assumption [U] (:mod:`.step`'s docstring)."""
POPTORCH_CALL_BAND_S = (1.0e-4, 1.0e-3)
"""The band of :data:`POPTORCH_CALL_S` the prediction is also given at."""


@dataclass(frozen=True)
class SnnTorchCall:
    """One training call of the dense network ``layers`` (``N0-N1-...-C``) at ``batch`` and ``timesteps``; the
    input as the host sends it (``input_dtype``, ``input_shape``); ``call_s`` PopTorch's per-call host
    overhead; ``mechanisms`` the switchable device-side mechanisms (module docstring)."""

    layers: tuple[int, ...]
    batch: int
    timesteps: int
    input_dtype: str = MEASURED_INPUT[0]
    input_shape: str = MEASURED_INPUT[1]
    call_s: float = POPTORCH_CALL_S
    mechanisms: Mechanisms = field(default_factory=Mechanisms)

    def __post_init__(self):
        object.__setattr__(self, "layers", tuple(int(n) for n in self.layers))
        require(len(self.layers) >= 2 and min(self.layers) >= 1, "layers", self.layers, "needs N0 and a layer")
        for name in ("batch", "timesteps"):
            v = getattr(self, name)
            require(isinstance(v, int) and v >= 1, name, v, "must be a positive integer")
        require(
            self.input_dtype in INPUT_DTYPES,
            "input_dtype",
            self.input_dtype,
            f"must be one of {', '.join(INPUT_DTYPES)}",
            "fp16 (as train_fcn.py sends it)",
        )
        require(
            self.input_shape in INPUT_SHAPES,
            "input_shape",
            self.input_shape,
            f"must be one of {', '.join(INPUT_SHAPES)}",
            "frame (as train_fcn.py sends it)",
        )
        require(self.call_s >= 0, "call_s", self.call_s, "must be >= 0 seconds")

    @property
    def input_values(self) -> int:
        """Values of the input one call sends: ``B · N0``, times ``T`` for a sequence."""
        n = self.batch * self.layers[0]
        return n * self.timesteps if self.input_shape == "sequence" else n

    @property
    def input_bytes(self) -> int:
        """Bytes of the input one call sends over the host link."""
        return INPUT_DTYPES[self.input_dtype] * self.input_values

    @property
    def input_cast(self) -> bool:
        """A float16 input is cast to float on the device before each ``fc1`` (``HalfUpcastToFloat``)."""
        return self.input_dtype == "fp16"

    def with_call_s(self, call_s: float) -> SnnTorchCall:
        """The same call at another per-call overhead (the band's ends)."""
        return replace(self, call_s=float(call_s))

    def assumptions(self) -> tuple[str, ...]:
        """The named assumptions this call is timed under, each with its band (what ``compare`` shows)."""
        lo, hi = POPTORCH_CALL_BAND_S
        return (
            f"PopTorch per-call host overhead {self.call_s * 1e3:.2f} ms [U] (band {lo * 1e3:.1f}-{hi * 1e3:.1f} ms; "
            "no public figure)",
            f"input sent as {self.input_dtype} {self.input_shape} ({self.input_bytes:,} B per call; "
            f"train_fcn.py: {MEASURED_INPUT[0]} {MEASURED_INPUT[1]})",
            *self.mechanisms.assumptions(),
        )


def call_from_options(options, config) -> SnnTorchCall:
    """The call of a run's options (``config``: its :class:`NetworkConfig`); ``input_dtype`` and ``input_shape``
    left unset mean as ``train_fcn.py`` sends them."""
    return SnnTorchCall(
        tuple(int(n) for n in config.layers),
        int(config.batch),
        int(config.timesteps),
        input_dtype=options.input_dtype or MEASURED_INPUT[0],
        input_shape=options.input_shape or MEASURED_INPUT[1],
    )
