"""What PopART does around the op list of one PopTorch training call, each a named, switchable assumption.

Read from PopART's and PopTorch's public source (github.com/graphcore/popart at d2f20d7, poptorch at c2a8b17)
and the IPU build's custom op (vinniesun/snntorch-ipu ``snntorch/custom_ops/heaviside_custom_op.cpp``):

* **Outlining** [S]: ``SessionOptions::enableOutlining`` is ``true`` and ``outlineThreshold`` ``1.0`` by default
  (``willow/include/popart/sessionoptions.hpp``); PopTorch sets neither unless the user does
  (``popart_compiler/source/SessionOptions.cpp`` only forwards them; ``train_fcn.py`` does not). The outliner
  (``SubgraphOutline``) replaces repeated op sequences whose summed ``getSubgraphValue`` passes the threshold
  by calls of one subgraph; a matmul and the custom spike ops are worth ``getHighSubgraphValue()`` (1000), an
  element-wise op ``getLowSubgraphValue()`` (0.1). The ``T`` unrolled steps repeat the same sequence, so the
  step's body is the obvious candidate. The cost model the outliner prunes with
  (``willow/src/subgraph/iosubgraphcostmodel.cpp``, ``enableOutliningCopyCostPruning`` on by default) values a
  sequence at ``Σ getSubgraphValue · sqrt(input bytes)`` of its ops minus ``Σ sqrt(bytes)`` of its boundary
  tensors: a matmul reading the 3.1 MB first-layer weight is worth ``1000 · 1,880`` against copy costs of a
  few thousand, so the high-value ops **are** outlined (``outline = "none"`` stays in the band as the
  extreme, not as a likely case). **Which sequence it takes is not derivable here** (it depends on the
  schedule PopART picks and on how ``algo1`` resolves overlapping and nested matches): ``outline = "step"``
  (the default) assumes each step's forward body and each step's backward body become one subgraph called
  ``T`` times [U]; ``"op"`` that every matmul and spike op is its own subgraph (:func:`op_boundaries`);
  nested outlining (a body of several steps calling one-step bodies) would add copies and is not modelled.
* **The copies around each call** [S]: ``CallOpx`` (``willow/src/popx/op/callx.cpp``) adds a Poplar ``Copy``
  of every input into the subgraph's input tensor (``copyInput``, unless the tensor is aliased or write-only)
  and of every output out of it (``copyOutput``), unless ``aliasZeroCopy`` proves them unneeded; that
  option is ``false`` by default (``sessionoptions.hpp``) and PopTorch leaves it. So each step body's
  boundary tensors — the weights it reads, the state it carries, the activations the backward keeps and,
  backward, every step's weight-gradient partial — are copied at every call. Each copy is costed as the
  project costs a PopLibs Copy program (one exchange superstep with its sync, the bytes spread over the
  tiles as the callee's input is a clone of the caller's tensor, ``CanDelegate``): ``copy_programs =
  "separate"`` one per tensor (``CallOpx::grow`` adds one ``Copy`` per input and output); ``"merged"`` one
  for all inputs and one for all outputs of a call (the band's low end) [U].
* **MergeDuplicateOps** [S]: ``Ir::prepareImpl`` applies it to the main graph after outlining
  (``willow/src/ir.cpp``); it merges ops of equal type and attributes reading the same tensors.
  ``train_fcn.py`` feeds the same frame to ``fc1`` at every step, so the cast, matmul and bias add of the
  first layer are the same op ``T`` times. And ``Leaky.forward`` computes ``mem_reset(mem)`` (``mem -
  threshold``, then the spike op) on the membrane the previous step's ``fire(mem)`` already took through the
  same two ops: from step 1 on these are duplicates too, as is every step's ``beta.clamp(0, 1)``. They
  merge only if they are still in the main graph: with ``outline = "none"``; inside an outlined step body
  each call reads that step's membrane too, and nothing merges. The merge leaves the backward unchanged
  (autodiff ran before it; the reset is detached).
* **Inplacing** [S]: PopTorch builds its session with ``PatternsLevel::Default`` (2.5.1
  ``popart_compiler/source/Compiler.cpp``), whose ``Inplace`` pattern replaces an op by its inplace variant
  when no alias conflict forbids it (``Ir::prepareImpl``, after ``MergeDuplicateOps``). Three ops of the call
  then run no program at all: ``.clone()`` (PopTorch 2.5.1 ``cloneHandler`` makes it an ``Identity``, whose
  ``IdentityInplaceOpx::grow`` only sets its output to its input; ``op/identity.cpp`` priority 10),
  ``torch.stack`` (``ConcatInplaceOpx``: a ``poplar::concat`` view) and the per-step slice of the stacked
  gradient (``SliceInplaceOpx``: a view). Their readers only read, so nothing blocks it. ``inplace = False``
  keeps them as copies.
* **The Heaviside custom op** [S]: ``HeavisideOpx`` is one ``popops::mapInPlace`` of ``Select(0, 1, x < 0)``
  on its input, ``HeavisideGradOpx`` one two-input ``popops::map``: the op list's maps already
  (:mod:`tilesim.models.snntorch.ops`). Both are worth ``getHighSubgraphValue()``, which is what makes the
  step bodies worth outlining. No extra cost. (The forward writes its input in place without declaring it;
  a correctness question, not a timing one.)
* **``Final`` output mode** [S]: PopTorch's training default (``python/options.py``: "Default: `All` for
  inference, `Final` for training"); at one device iteration it returns the loss and ``spk_rec`` each call,
  which :func:`tilesim.models.snntorch.step.host_bytes` books already. No extra cost.
* **Per-op dispatch**: every op is its own PopLibs program (compute set, sync, exchange), as the op list is
  lowered already; a Poplar ``Call`` of a subgraph adds only a control-code jump. No extra cost beyond the
  copies above.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tilesim.errors import require
from tilesim.models.linear.phases import Phase, phases_cycles, split_sizes
from tilesim.models.linear.schedules import LayerSchedule

INPUT_DTYPES = {"fp16": 2, "fp32": 4}
"""Bytes per input value by ``input_dtype``."""

__all__ = [
    "INPUT_DTYPES",
    "OUTLINES",
    "COPY_PROGRAMS",
    "Mechanisms",
    "BoundaryTensor",
    "step_boundaries",
    "op_boundaries",
    "outlined_calls",
    "mechanism_parts",
]

OUTLINES = ("step", "op", "none")
COPY_PROGRAMS = ("separate", "merged")
FLOAT = 4  # HalfUpcastToFloat: the network's tensors are float32


@dataclass(frozen=True)
class BoundaryTensor:
    """One tensor crossing an outlined step body's boundary: its name, direction (``in``/``out``) and bytes."""

    name: str
    direction: str
    nbytes: int


@dataclass(frozen=True)
class Mechanisms:
    """The switches (module docstring): ``outline`` (``step`` | ``op`` | ``none``), ``alias_zero_copy`` (PopART's
    option, ``False`` by default), ``copy_programs`` (``separate`` | ``merged``), ``inplace`` (PopART's
    ``Inplace`` pattern makes the clone, the stacks and the gradient slices views)."""

    outline: str = "step"
    alias_zero_copy: bool = False
    copy_programs: str = "separate"
    inplace: bool = True

    def __post_init__(self):
        require(self.outline in OUTLINES, "outline", self.outline, f"must be one of {', '.join(OUTLINES)}", "step")
        require(
            self.copy_programs in COPY_PROGRAMS,
            "copy_programs",
            self.copy_programs,
            f"must be one of {', '.join(COPY_PROGRAMS)}",
            "separate",
        )
        for name in ("alias_zero_copy", "inplace"):
            require(isinstance(getattr(self, name), bool), name, getattr(self, name), "must be a bool")

    @property
    def copies(self) -> bool:
        """Whether the outlined calls copy their inputs and outputs."""
        return self.outline != "none" and not self.alias_zero_copy

    def merges_first_fc(self, call) -> bool:
        """Whether ``MergeDuplicateOps`` runs the first layer's ``fc`` once (module docstring)."""
        return self.outline == "none" and call.input_shape == "frame"

    @property
    def merges_reset(self) -> bool:
        """Whether ``MergeDuplicateOps`` merges each step's reset ``mem - threshold`` and spike op with the
        previous step's ``fire`` ops on the same membrane (module docstring)."""
        return self.outline == "none"

    def assumptions(self) -> tuple[str, ...]:
        """One line per mechanism: its setting, its evidence and its band."""
        if self.outline == "none":
            outline = (
                "PopART outlining: none [U] (MergeDuplicateOps [S] then merges the first layer's fc of a frame input "
                "and every reset's mem - threshold and spike op and beta clamp)"
            )
        elif self.outline == "op":
            outline = "PopART outlining: every matmul and spike op its own subgraph called T times [U]"
        else:
            outline = "PopART outlining: each step's forward and backward body one subgraph called T times [U]"
        if self.copies:
            copies = (
                f"CallOpx copies of every call's inputs and outputs (aliasZeroCopy off [S]), {self.copy_programs} "
                "Copy programs [U] (band: merged-separate)"
            )
        else:
            copies = "no CallOpx copies" + (" (aliasZeroCopy on)" if self.alias_zero_copy else "")
        inplace = (
            "PopART inplacing [S]: clone, stacks and gradient slices are views"
            if self.inplace
            else "no inplacing: clone, stacks and gradient slices copied"
        )
        return (outline, copies, inplace)

    def to_dict(self) -> dict:
        return {
            "outline": self.outline,
            "alias_zero_copy": self.alias_zero_copy,
            "copy_programs": self.copy_programs,
            "inplace": self.inplace,
        }


def step_boundaries(call) -> dict[str, tuple[BoundaryTensor, ...]]:
    """The tensors crossing the boundary of one step's forward body and of one step's backward body (all
    layers), as PopART's autodiff leaves them (``B`` batch, float32 unless said):

    * forward, in: the input (a frame in its dtype; a sequence's step slice), and per layer its weight, bias
      and the membrane of the step before; out, per layer: the membrane, the spikes and ``mem - threshold``
      (the Heaviside grad's input, kept for the backward), and the float input of the first layer when it was
      cast inside the body (the weight gradient reads it);
    * backward, in, per layer: the gradient carried from the next step, the gradient arriving at this step
      (the loss's slice for the output layer, ``mem - threshold`` for the Heaviside grad of a hidden layer),
      the layer's input and, but for the first layer, its weight; out, per layer: the weight- and
      bias-gradient partials (summed after the loop) and the carried gradient."""
    B, sizes = call.batch, call.layers
    L = len(sizes) - 1
    fwd = [BoundaryTensor("input", "in", INPUT_DTYPES[call.input_dtype] * B * sizes[0])]
    bwd = []
    for l in range(1, L + 1):
        n_in, n_out = sizes[l - 1], sizes[l]
        e = FLOAT * B * n_out
        fwd += [
            BoundaryTensor(f"L{l} weight", "in", FLOAT * n_in * n_out),
            BoundaryTensor(f"L{l} bias", "in", FLOAT * n_out),
            BoundaryTensor(f"L{l} membrane (t-1)", "in", e),
            BoundaryTensor(f"L{l} membrane", "out", e),
            BoundaryTensor(f"L{l} spikes", "out", e),
            BoundaryTensor(f"L{l} mem - threshold", "out", e),
        ]
        bwd += [
            BoundaryTensor(f"L{l} carried grad (t+1)", "in", e),
            BoundaryTensor(f"L{l} loss grad slice" if l == L else f"L{l} mem - threshold", "in", e),
            BoundaryTensor(f"L{l} layer input", "in", FLOAT * B * n_in),
            *([BoundaryTensor(f"L{l} weight", "in", FLOAT * n_in * n_out)] if l > 1 else []),
            BoundaryTensor(f"L{l} weight grad partial", "out", FLOAT * n_in * n_out),
            BoundaryTensor(f"L{l} bias grad partial", "out", FLOAT * n_out),
            BoundaryTensor(f"L{l} carried grad", "out", e),
        ]
    if call.input_cast:
        fwd.append(BoundaryTensor("L1 input as float", "out", FLOAT * B * sizes[0]))
    return {"forward": tuple(fwd), "backward": tuple(bwd)}


def op_boundaries(call) -> dict[str, tuple[BoundaryTensor, ...]]:
    """The tensors crossing the boundary of each high-value per-step op outlined on its own (``outline =
    "op"``), per layer ``l`` (float32): forward, the ``fc`` matmul (in: the layer's input and weight; out: the
    current) and the two spike ops (in and out: ``B · n_out``); backward, the Heaviside grad of a hidden
    layer (in: the gradient and ``mem - threshold``; out: the gradient), the weight-gradient matmul (in: the
    layer's input and the gradient; out: the partial) and, but for the first layer, the input-gradient matmul
    (in: the gradient and the weight; out: the layer input's gradient)."""
    B, sizes = call.batch, call.layers
    L = len(sizes) - 1
    out: dict[str, tuple[BoundaryTensor, ...]] = {}
    T = BoundaryTensor
    for l in range(1, L + 1):
        n_in, n_out = sizes[l - 1], sizes[l]
        x, w, e = FLOAT * B * n_in, FLOAT * n_in * n_out, FLOAT * B * n_out
        out[f"L{l} fc matmul"] = (T("input", "in", x), T("weight", "in", w), T("current", "out", e))
        for spike in ("reset spike op", "fire spike op"):
            out[f"L{l} {spike}"] = (T("mem - threshold", "in", e), T("spikes", "out", e))
    for l in range(L, 0, -1):
        n_in, n_out = sizes[l - 1], sizes[l]
        x, w, e = FLOAT * B * n_in, FLOAT * n_in * n_out, FLOAT * B * n_out
        if l < L:
            out[f"L{l} spike op grad"] = (T("grad", "in", e), T("mem - threshold", "in", e), T("grad", "out", e))
        out[f"L{l} weight grad matmul"] = (T("input", "in", x), T("grad", "in", e), T("partial", "out", w))
        if l > 1:
            out[f"L{l} input grad matmul"] = (T("grad", "in", e), T("weight", "in", w), T("input grad", "out", x))
    return out


def outlined_calls(call) -> dict[str, tuple[BoundaryTensor, ...]]:
    """Every outlined subgraph of ``call`` (each called ``T`` times) and its boundary tensors: the step bodies
    (:func:`step_boundaries`), the single ops (:func:`op_boundaries`) or none."""
    o = call.mechanisms.outline
    return step_boundaries(call) if o == "step" else op_boundaries(call) if o == "op" else {}


def _copy_phase(name: str, nbytes: int, tiles: int, repeat: int) -> Phase:
    """One Poplar Copy program of ``nbytes`` spread over ``tiles`` (each tile copies its own part: the
    callee's tensor is a clone of the caller's), run ``repeat`` times: an exchange superstep, no compute."""
    per = split_sizes(int(nbytes), tiles)
    one = (per > 0).astype(np.int64)
    z = np.zeros(tiles, np.int64)
    return Phase(name, "vector", z, z, per, per, z, z, 2 * one, repeat)


def mechanism_parts(call, machine, costs) -> list[tuple[str, LayerSchedule]]:
    """The supersteps the mechanisms add to the call: the CallOpx copies of every outlined step body's
    boundary tensors (:func:`step_boundaries`), ``T`` calls of each body (empty when nothing is copied)."""
    m = call.mechanisms
    if not m.copies:
        return []
    tiles, T = machine.tiles_per_chip, call.timesteps
    out = []
    for body, tensors in outlined_calls(call).items():
        if m.copy_programs == "separate":
            phases = [_copy_phase(f"{body} call: copy {t.direction} {t.name}", t.nbytes, tiles, T) for t in tensors]
        else:
            phases = [
                _copy_phase(f"{body} call: copy {d}", sum(t.nbytes for t in tensors if t.direction == d), tiles, T)
                for d in ("in", "out")
            ]
        data = split_sizes(sum(t.nbytes for t in tensors), tiles)  # the subgraph's own boundary tensors
        cycles = phases_cycles(phases, costs)
        out.append(("call copies", LayerSchedule(f"{body} call copies", tiles, "fp32", tuple(phases), data, cycles)))
    return out
