"""The ops of one snnTorch-on-IPU training call, counted from the source lines (not fitted).

snnTorch's IPU build (``snntorch-ipu``, github.com/vinniesun/snntorch-ipu; the docs' tutorial
``tutorial_ipu_1``) trains a dense network of ``nn.Linear`` + ``snn.Leaky`` layers through PopTorch:
``forward`` loops over the time steps in Python, so PopTorch traces the loop **unrolled**, and
PopART's autodiff gives the backward of every traced op. Each op is its own PopLibs program
(:mod:`tilesim.models.linear.lowering`: compute set, sync, exchange). Per layer of ``n_in -> n_out``,
batch ``B``, ``e = B · n_out`` elements:

* **forward, per time step** (``Leaky.forward`` with ``reset_mechanism="subtract"``, spike function
  the ``FastSigmoid`` custom op, which ``LIF.__init__`` picks when ``spike_grad`` is None):
  ``fc`` matmul ``(B, n_in) x (n_in, n_out)`` and its bias add; ``mem_reset(mem)``: ``mem - threshold``,
  the spike op (``popops::mapInPlace`` of ``Select(0, 1, x < 0)``), ``.clone()``;
  ``_build_state_function``: ``reset * threshold``, ``mem - ...``, ``beta.clamp(0, 1)`` (``beta`` is a
  registered buffer, and PopTorch keeps buffers on the IPU as persistent tensors — PopTorch 2.5.1 user
  guide, "PyTorch buffers" — so the clamp is a one-element op at every step, not a folded constant),
  ``beta * ...``, ``+ input_``; ``fire(mem)``: ``mem - threshold`` and the spike op: **2 + 10 ops** (a
  float16 input adds its cast to float before the first layer's ``fc``, ``input_cast``). (The measured
  ``train_fcn.py`` passes ``spike_grad=surrogate.fast_sigmoid()``, not None, for which the IPU build's
  ``LIF.__init__`` picks the ``Heaviside`` custom op instead: the same ``Select`` map forward and a
  two-input gradient map ``grad * Select(0, 1, x < 0)``, so the same ops at the same sizes.)
* **after the loop**: ``torch.stack`` of ``spk_rec`` and ``mem_rec`` of the output layer (two copies of
  ``T · B · C`` as traced, views once PopART inplaces them: :attr:`Op.view`);
  ``ce_count_loss(mem_rec, labels)``: the sum over time (a reduction), then ``LogSoftmax`` + ``NLLLoss``
  as the project lowers every softmax cross-entropy
  (:func:`tilesim.models.linear.lowering.poptorch_common_parts`: max, sub-exp, exp-sum, log-NLL; backward
  one fused gradient map) and the broadcast of the count gradient back over the ``T`` steps.
* **backward, per time step**: the output layer takes its step's slice of the stacked gradient (a copy as
  traced, a view once inplaced; its spikes carry no gradient: the loss reads ``mem_rec``); a hidden layer
  runs ``FastSigmoidGrad`` (``popops::map`` of ``grad / (|x| + 1)^2``, two inputs); every layer then adds
  the gradient coming back through time (``beta * grad``, and the add of the two contributions; the reset
  is detached), reduces its bias gradient, runs the weight-gradient matmul ``(n_out, B) x (B, n_in)`` and,
  but for the first layer, the input-gradient matmul ``(B, n_out) x (n_out, n_in)``.
* **after the loop**: the ``T`` partial gradients of each weight and bias are added by **one** PopART
  ``Sum`` (``decomposeGradSum`` is off by default), all ``T`` partials live until it runs; then
  ``poptorch.optim.Adam``, as PopART's ``AdamDecompose`` pattern lowers its combo op
  (``willow/src/patterns/adamdecompose.cpp``): per parameter tensor the gradient unscale (a ``Scale`` op,
  inserted by ``OptimizerDecompose::gradUnscale`` even for a constant scale), the two moment accumulations,
  the Adam updater and the variable update (five ops).

The first step's ops on the zero initial state are counted as at any other step (PopART's constant
folding of them is not modelled). Scalars (``threshold``, ``beta``) are constants broadcast to the
tiles: one value per output element at most.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilesim.errors import require

__all__ = ["Op", "KINDS", "PARTS", "snntorch_ops", "op_counts", "parameter_tensors"]

KINDS = ("matmul", "map", "reduce", "sum")
PARTS = ("forward", "loss", "backward", "update")


@dataclass(frozen=True)
class Op:
    """One PopART op of the training call.

    ``kind``: ``matmul`` (``args = (m, k, n)``), ``map`` (``args = (elements, inputs, broadcast)``: an
    element-wise ``popops::map`` over ``elements`` outputs reading ``inputs`` operands, ``broadcast``
    values of a small operand sent to the tiles), ``reduce`` (``args = (elements, outputs)``) or ``sum``
    (``args = (inputs, rows, cols)``: PopART's n-ary ``Sum`` of co-located partial gradients).
    ``per_step``: inside the unrolled time loop (runs once per time step). ``view``: an op PopART's
    ``Inplace`` pattern turns into its inplace variant, whose Opx only relabels its input (``IdentityInplace``,
    ``ConcatInplace``, ``SliceInplace``: no program; :mod:`tilesim.models.snntorch.mechanisms`)."""

    part: str
    name: str
    kind: str
    args: tuple[int, ...]
    per_step: bool = False
    view: bool = False

    def __post_init__(self):
        require(self.kind in KINDS, "op kind", self.kind, f"must be one of {', '.join(KINDS)}")
        require(self.part in PARTS, "op part", self.part, f"must be one of {', '.join(PARTS)}")


def _leaky_forward(
    l: int, n_in: int, n_out: int, batch: int, cast: bool = False, merged: bool = False, merged_reset: bool = False
) -> list[Op]:
    """``fc`` + ``snn.Leaky`` of layer ``l`` (1-based) at one time step; ``cast``: the float16 input cast to
    float first; ``merged``: the ``fc`` ops (and the cast) run once, not per step; ``merged_reset``: the
    reset's ``mem - threshold`` and spike op run once (step 0's), the later steps' being the previous step's
    ``fire`` ops on the same membrane, and the clamp of the same ``beta`` runs once (``MergeDuplicateOps``)."""
    e = batch * n_out
    m = lambda name, inputs, bcast=0: Op("forward", f"L{l} {name}", "map", (e, inputs, bcast), True)  # noqa: E731
    fc = [Op("forward", f"L{l} input cast", "map", (batch * n_in, 1, 0), not merged)] if cast else []
    return [
        *fc,
        Op("forward", f"L{l} fc matmul", "matmul", (batch, n_in, n_out), not merged),
        Op("forward", f"L{l} fc bias add", "map", (e, 2, n_out), not merged),
        Op("forward", f"L{l} reset: mem - threshold", "map", (e, 2, 1), not merged_reset),
        Op("forward", f"L{l} reset: spike op", "map", (e, 1, 0), not merged_reset),
        Op("forward", f"L{l} reset: clone", "map", (e, 1, 0), True, view=True),
        m("reset * threshold", 2, 1),
        m("mem - reset*threshold", 2),
        Op("forward", f"L{l} beta clamp", "map", (1, 1, 0), not merged_reset),
        m("beta * mem", 2, 1),
        m("+ input", 2),
        m("fire: mem - threshold", 2, 1),
        m("fire: spike op", 1),
    ]


def _loss(batch: int, classes: int, timesteps: int) -> list[Op]:
    """``torch.stack`` of the output records, ``ce_count_loss`` and its gradient up to the stack."""
    tbc, bc = timesteps * batch * classes, batch * classes
    return [
        Op("loss", "stack spk_rec", "map", (tbc, 1, 0), view=True),
        Op("loss", "stack mem_rec", "map", (tbc, 1, 0), view=True),
        Op("loss", "count: sum over time", "reduce", (tbc, bc)),
        Op("loss", "logits-max", "reduce", (bc, batch)),
        Op("loss", "sub-exp", "map", (bc, 2, batch)),
        Op("loss", "exp-sum", "reduce", (bc, batch)),
        Op("loss", "log-nll", "map", (batch, 2, 0)),
        Op("loss", "softmax-xent-grad", "map", (bc, 2, batch)),
        Op("loss", "count grad: expand over time", "map", (tbc, 1, bc)),
    ]


def _leaky_backward(l: int, n_in: int, n_out: int, batch: int, output: bool) -> list[Op]:
    """The backward of layer ``l`` at one time step (module docstring)."""
    e = batch * n_out
    ops = [
        Op("backward", f"L{l} stack grad slice", "map", (e, 1, 0), True, view=True)
        if output
        else Op("backward", f"L{l} spike op grad", "map", (e, 2, 0), True),
        Op("backward", f"L{l} beta * grad", "map", (e, 2, 1), True),
        Op("backward", f"L{l} grad add", "map", (e, 2, 0), True),
        Op("backward", f"L{l} bias grad", "reduce", (e, n_out), True),
        Op("backward", f"L{l} weight grad matmul", "matmul", (n_out, batch, n_in), True),
    ]
    if l > 1:
        ops.append(Op("backward", f"L{l} input grad matmul", "matmul", (batch, n_out, n_in), True))
    return ops


def parameter_tensors(layers) -> tuple[tuple[str, int, int], ...]:
    """``(name, rows, cols)`` of every parameter tensor: per layer its weight ``(n_in, n_out)`` and bias."""
    out = []
    for l, (a, b) in enumerate(zip(layers, layers[1:]), start=1):
        out += [(f"L{l} weight", int(a), int(b)), (f"L{l} bias", 1, int(b))]
    return tuple(out)


def snntorch_ops(
    layers,
    batch: int,
    timesteps: int,
    *,
    input_cast: bool = False,
    merged_first_fc: bool = False,
    merged_reset: bool = False,
) -> tuple[Op, ...]:
    """Every op of one snnTorch training call of the dense network ``layers`` (``N0-N1-...-C``), in
    program order (module docstring); a ``per_step`` op runs ``timesteps`` times. ``input_cast``: a float16
    input is cast to float before the first layer's ``fc`` at every step (``HalfUpcastToFloat`` meets a
    float weight; :mod:`tilesim.models.snntorch.call`); ``merged_first_fc``: the first layer's cast, ``fc``
    matmul and bias add, the same op on the same tensors at every step of a frame input, run once
    (:mod:`tilesim.models.snntorch.mechanisms`, ``MergeDuplicateOps``); ``merged_reset``: every layer's reset
    ``mem - threshold`` and spike op run once, merged from step 1 on with the previous step's ``fire`` ops on
    the same membrane (the same mechanism)."""
    layers = tuple(int(n) for n in layers)
    require(len(layers) >= 2, "layers", layers, "needs the input size and at least one layer")
    for name, v in (("batch", batch), ("timesteps", timesteps)):
        require(isinstance(v, int) and v >= 1, name, v, "must be a positive integer")
    L = len(layers) - 1
    ops: list[Op] = []
    for l in range(1, L + 1):
        first = l == 1
        ops += _leaky_forward(
            l, layers[l - 1], layers[l], batch, input_cast and first, merged_first_fc and first, merged_reset
        )
    ops += _loss(batch, layers[-1], timesteps)
    for l in range(L, 0, -1):
        ops += _leaky_backward(l, layers[l - 1], layers[l], batch, output=l == L)
    for name, rows, cols in parameter_tensors(layers):
        ops.append(Op("backward", f"{name} grad sum over time", "sum", (timesteps, rows, cols)))
    for name, rows, cols in parameter_tensors(layers):
        size = rows * cols
        ops += [
            Op("update", f"{name} adam gradient unscale", "map", (size, 1, 0)),
            Op("update", f"{name} adam first moment", "map", (size, 2, 0)),
            Op("update", f"{name} adam second moment", "map", (size, 2, 0)),
            Op("update", f"{name} adam updater", "map", (size, 3, 0)),
            Op("update", f"{name} adam variable update", "map", (size, 2, 0)),
        ]
    return tuple(ops)


def op_counts(ops, timesteps: int) -> dict[str, int]:
    """Ops executed per training call, by kind and in total (a ``per_step`` op counts ``timesteps`` times)."""
    out = dict.fromkeys(KINDS, 0)
    for op in ops:
        out[op.kind] += timesteps if op.per_step else 1
    out["total"] = sum(out[k] for k in KINDS)
    return out
