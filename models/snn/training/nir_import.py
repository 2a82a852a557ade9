"""Read a NIR graph (https://neuroir.org) into the sparse-spiking LIF network, exactly or not at all.

Accepted graphs: ``Input → (Affine|Linear) → LIF → … → (Affine|Linear) → LIF → Output``, where
any LIF may also have a self-loop ``LIF → (Affine|Linear) → LIF`` (recurrent weights), and
``CubaLIF`` stands in for ``LIF`` when its synaptic current vanishes within one step, and a network
of ``IF`` neurons maps exactly too (α = 1 with an explicit input gain; below). The Input and
Output types may carry a leading batch dimension (``(B, N)``, as snnTorch's and Norse's exporters
write when given a batched sample); the graph is then read without nir's own type check (which
rejects ``(1, N) → Linear [N]``) and checked here instead. Neuron parameters may be per neuron
(``[N]``) or 0-d (one value for the layer, sized by the preceding weights).
Everything else is refused with :class:`ConfigError` naming the node, its type and why —
nothing is approximated.

The network's neuron (``tilesim.models.snn.training.network``, per step of length ``dt``)::

    v_t = α·v_{t−1} + input_scale·(1 − α)·I_t      (v_t = input_scale·(1 − α)·I_t after a spike)
    spike when v_t > threshold;  I_t = Σ_{j ∈ spikes in} W[j, :]  (+ Σ_{j ∈ own spikes at t−1} V[j, :])

NIR's LIF, ``τ·dv/dt = (v_leak − v) + R·I``, spike when ``v > v_threshold``, then ``v = v_reset``,
solved over one step with I held constant, is ``v_t = α·v_{t−1} + (1 − α)·(v_leak + R·I_t)``
with ``α = exp(−dt/τ)`` (``discretization="exact"``; ``"euler"`` gives ``α = 1 − dt/τ`` and the
same update). Hence:

=====================  ===========================  =========================================
NIR                    network                      condition (else refused)
=====================  ===========================  =========================================
Affine/Linear weight   ``W_l = weight.T`` float32   2-D ``[N_out, N_in]``; sizes chain (float64
  [N_out, N_in]        ``[N_in, N_out]``            weights are rounded to float32, the network's
                                                    precision: the loader's only rounding)
Affine bias            —                            all zero (the network has no bias)
self-loop Affine/      ``V_l = weight.T``           ``[N_l, N_l]``, zero bias; one per layer
Linear on a LIF        (``recurrent[l] = True``)
LIF.tau                ``lif.decay = α`` (above)    one value for every neuron of every layer;
                                                    ``dt/τ`` must give 0 < α < 1
LIF.r                  ``lif.input_scale = R``      one value everywhere, > 0
LIF.v_threshold        ``lif.threshold``            one value everywhere
LIF.v_leak             —                            0 (no constant drive in the network)
LIF.v_reset            reset to 0 (state-based)     0 (reset-to-zero, not subtractive)
CubaLIF.tau_mem, …     as LIF.tau, r, v_*           carry-over ``|a| ≤ 2⁻²⁴`` (below; exact:
CubaLIF.tau_syn        — (no synaptic state)        ``tau_syn`` = 0 or ≤ dt/16.6), ``w_in`` = 1
IF (``dv/dt = R·I``)   ``lif.decay = 1``,           every layer IF; ``r``, ``v_threshold`` one
                       ``lif.gain = R·dt``          value; ``v_reset`` = 0
=====================  ===========================  =========================================

A CubaLIF, stepped like the LIF (each stage with its input held over the step), is
``I_t = a·I_{t−1} + (1 − a)·w_in·x_t`` then the LIF update with ``I_t``, where ``a = exp(−dt/tau_syn)``
(exact) or ``1 − dt/tau_syn`` (Euler) is the fraction of the synaptic current carried into the next
step. The network has no synaptic state, so the graph is accepted when ``|a| ≤ 2⁻²⁴``
(:data:`SYNAPSE_TOLERANCE`): the carried current is then below float32's unit roundoff relative
to a current of the same size, so it cannot change the network's float32 membrane update.
Norse 1.1 exports its ``LIFCell`` with ``tau_syn = 5e-6`` s: ``a = exp(−200)`` at dt = 1 ms;
snnTorch 1.0 exports ``Synaptic(alpha)`` with ``tau_syn = 1e-4/(1 − alpha)`` and ``w_in = 1/(1 − alpha)``,
so ``alpha = 0`` at its dt = 1e-4 with Euler is ``a = 0``, ``w_in = 1``: a ``Leaky``. (Solved
continuously instead, a synapse this fast would still delay the current by about ``tau_syn``
within the step, ≈ tau_syn/dt of the step's charge; this loader does not model that lag.)

Time step: NIR time constants are in seconds and a NIR file stores no step length; one network
step is ``dt`` = the caller's, else ``graph.metadata["dt"]`` (a graph may carry one there; a
caller's dt that differs from it is refused), else :data:`DEFAULT_DT_S` = 1 ms. Exporters encode
their own step in the constants: snnTorch 1.0 writes ``tau = 1e-4/(1 − β)`` and ``r = tau/1e-4``,
so ``dt = 1e-4`` with ``discretization="euler"`` gives α = β and unit input gain. An α outside
:data:`ALPHA_RANGE` = (0.5, 0.9999) is kept but reported in :attr:`NirModel.warnings`: below 0.5
the membrane loses more than half its potential every step (τ < 1.44 steps: snnTorch's β = 0.9
read at dt = 1 ms gives α = exp(−1) = 0.37; Norse 1.1's ``LIFBoxCell`` exports τ = 1e-5 s, so
α = exp(−100) ≈ 0), above 0.9999 the leak is under 1 % over 100 steps (τ > 10⁴ steps) — both
usually mean a dt or time unit other than the one the graph was trained with. (Norse's own
step, α = 1 − 1e-3·tau_mem_inv, is what forward Euler at dt = 1e-6 gives from its exported
τ = 1e-3/tau_mem_inv; the warning says so for a LIF graph with Norse's r = 1 and τ < dt. Its
``LIFCell`` at that dt keeps a synaptic current, 1 − 1e-6/5e-6 = 0.8 per step (Norse's own
synaptic decay), and is refused.)

Refused, with the reason: ``LI``/``I``/``CubaLI`` (non-spiking; the output layer is a spiking LIF counted
over time), ``Delay``, ``Conv1d``/``Conv2d``, ``Flatten``, pooling, ``Scale``, ``Threshold``,
nested graphs, branches / skip connections, several inputs or outputs, inputs with more than one
dimension besides a leading batch dimension.

What the caller must still match (not in a NIR file):

* ``NetworkConfig(lif=model.lif, recurrent=model.recurrent, layers=model.layers)`` and a
  ``second_threshold`` below ``model.lif.threshold`` (the default 0.9 assumes threshold 1);
  ``lif.beta`` (surrogate steepness) is a training choice and keeps its default.
* Time: one network step is ``dt``. The network adds one step of latency per layer boundary
  (layer l ≥ 1 sees layer l−1's spikes of step t−1: the BSP exchange of step t lands in step
  t+1) and the recurrent input is the layer's own spikes of step t−1; NIR edges carry no delay,
  so a delay-free simulator sees layer l's spikes l−1 steps earlier.
* Sparsity: the network keeps at most N_max spikes per layer and step (``caps``) and
  ``input_cap`` input spikes; with caps ≥ the layer sizes nothing is dropped.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tilesim.errors import ConfigError, config_message, require
from tilesim.models.snn.training.network import LIFParams

__all__ = ["ALPHA_RANGE", "DEFAULT_DT_S", "SYNAPSE_TOLERANCE", "NirModel", "load_nir"]

#: One network step when neither the caller nor the graph gives one, in seconds: the 1 ms bins
#: the event data are cut into (``tilesim.models.snn.training.data``, ``dt_ms = 1.0``).
DEFAULT_DT_S = 1e-3
#: α = exp(−dt/τ) outside this open interval is reported (module docstring: τ < 1.44 steps or
#: τ > 10⁴ steps).
ALPHA_RANGE = (0.5, 0.9999)
#: The largest synaptic carry-over exp(−dt/tau_syn) of a CubaLIF read as a LIF: float32's unit
#: roundoff 2⁻²⁴ (IEEE 754 binary32, 24-bit significand), the network's precision.
SYNAPSE_TOLERANCE = 2.0**-24
#: snnTorch 1.0's export step (snntorch/export_nir.py: ``dt = 1e-4``; tau = dt/(1 − β), r = tau/dt).
SNNTORCH_EXPORT_DT_S = 1e-4
#: Norse 1.1's export step (norse/torch/utils/export_nir.py: ``dt = 0.001``; tau = dt/tau_mem_inv,
#: i.e. dt x Norse's tau, r = 1).
NORSE_EXPORT_DT_S = 1e-3

_WEIGHT_TYPES = ("Affine", "Linear")
_NEURON_TYPES = ("LIF", "CubaLIF", "IF")
_WHY = {
    "LI": "a non-spiking leaky integrator; the network's output layer is a spiking LIF whose spike counts "
    "are the logits",
    "I": "a non-spiking integrator; the network's layers are spiking LIFs",
    "CubaLI": "a non-spiking current-based integrator; the network's layers are spiking LIFs",
    "Delay": "the network has no per-synapse delays (only its fixed one-step latency per layer boundary)",
    "Conv1d": "the network has dense all-to-all layers only; convolutions are not expanded to dense weights",
    "Conv2d": "the network has dense all-to-all layers only; convolutions are not expanded to dense weights",
    "Flatten": "the network's inputs and layers are flat vectors already; multi-dimensional shapes are not supported",
    "SumPool2d": "the network has no pooling layers",
    "AvgPool2d": "the network has no pooling layers",
    "Scale": "the network has no element-wise scaling between layers",
    "Threshold": "the network has no stand-alone threshold nodes (the LIF thresholds itself)",
    "NIRGraph": "nested graphs are not supported; flatten the graph first",
    "Identity": "identity nodes are not supported; remove them from the graph",
}


@dataclass(frozen=True)
class NirModel:
    """A NIR graph as the network's layers, weights and LIF constants.

    Attributes
    ----------
    layers : tuple of int
        ``(N0, N1, …, NL)``: inputs, then each LIF layer.
    weights : tuple of ndarray
        ``W_l`` float32 ``[N_l, N_{l+1}]`` (the network's layout: row = input neuron).
    recurrent : tuple of bool
        One flag per LIF layer.
    recurrent_weights : tuple of (ndarray or None)
        ``V_l`` float32 ``[N_{l+1}, N_{l+1}]`` (row = source neuron) or None.
    lif : LIFParams
        ``decay`` = α, ``threshold``, ``input_scale`` = R (``beta`` keeps its default).
    dt, tau : float
        The step length used and the graph's membrane time constant (same unit).
    nodes : tuple of str
        The graph's LIF node names, one per layer.
    dt_source : str
        Where ``dt`` came from: ``"caller"``, ``"graph"`` (``metadata["dt"]``) or ``"default"``.
    warnings : tuple of str
        One-line warnings (α outside :data:`ALPHA_RANGE`), for stderr and the run summary.
    graph_batch : int or None
        The leading batch dimension of the graph's Input type, if it has one (the exporter's
        sample size; the run's batch is its own ``--batch``).
    """

    layers: tuple
    weights: tuple
    recurrent: tuple
    recurrent_weights: tuple
    lif: LIFParams
    dt: float
    tau: float
    nodes: tuple = ()
    dt_source: str = "caller"
    warnings: tuple = ()
    graph_batch: int | None = None

    def __post_init__(self):
        L = len(self.layers) - 1
        require(
            L >= 1 and all(isinstance(n, int) and n >= 1 for n in self.layers),
            "NirModel.layers",
            self.layers,
            "needs the input size and at least one layer, all >= 1",
        )
        require(
            len(self.weights) == L and len(self.recurrent) == L and len(self.recurrent_weights) == L,
            "NirModel",
            (len(self.weights), len(self.recurrent), len(self.recurrent_weights)),
            f"needs one weight matrix, flag and recurrent entry per layer ({L})",
        )
        for l, w in enumerate(self.weights):
            require(
                w.dtype == np.float32 and w.shape == (self.layers[l], self.layers[l + 1]),
                f"NirModel.weights[{l}]",
                (w.dtype, w.shape),
                f"must be float32 {(self.layers[l], self.layers[l + 1])}",
            )
        for l, (r, v) in enumerate(zip(self.recurrent, self.recurrent_weights)):
            n = self.layers[l + 1]
            require((v is None) == (not r), f"NirModel.recurrent[{l}]", r, "must match recurrent_weights")
            if v is not None:
                require(
                    v.dtype == np.float32 and v.shape == (n, n),
                    f"NirModel.recurrent_weights[{l}]",
                    (v.dtype, v.shape),
                    f"must be float32 {(n, n)}",
                )

    def network_kwargs(self) -> dict:
        """``layers``, ``recurrent`` and ``lif`` for :class:`tilesim.models.snn.training.network.NetworkConfig`."""
        return {"layers": self.layers, "recurrent": self.recurrent, "lif": self.lif}

    def summary(self) -> dict:
        """The JSON form for a run summary: step, its source, τ, α and the warnings."""
        return {
            "dt_s": self.dt,
            "dt_source": self.dt_source,
            "tau_s": self.tau,
            "alpha": self.lif.decay,
            "graph_batch": self.graph_batch,
            "nodes": list(self.nodes),
            "warnings": list(self.warnings),
        }


def _refuse(name, node, why):
    raise ConfigError(
        config_message(f"NIR node {name!r}", type(node).__name__, f"cannot be represented exactly: {why}")
    )


def _uniform(name, node, field, values, where):
    """The single value of ``field`` over every neuron (else refuse)."""
    a = np.asarray(values, dtype=np.float64).ravel()
    require(
        a.size >= 1 and np.all(np.isfinite(a)),
        f"NIR node {name!r} ({type(node).__name__}).{field}",
        where,
        "must be finite",
    )
    if not np.all(a == a[0]):
        _refuse(
            name,
            node,
            f"{field} varies across neurons ({a.min():g} .. {a.max():g}); the network has one {field} for all neurons",
        )
    return float(a[0])


def _weight(name, node, n_in, n_out):
    """``W`` float32 [n_in, n_out] of an Affine/Linear node [n_out, n_in]."""
    w = np.asarray(node.weight)
    if w.ndim != 2:
        _refuse(name, node, f"weight has shape {w.shape}; only 2-D [N_out, N_in] matrices are dense layers")
    if n_in is not None and w.shape[1] != n_in:
        _refuse(name, node, f"weight shape {w.shape} takes {w.shape[1]} inputs but its source has {n_in}")
    if n_out is not None and w.shape[0] != n_out:
        _refuse(name, node, f"weight shape {w.shape} gives {w.shape[0]} outputs but its target has {n_out}")
    bias = getattr(node, "bias", None)
    if bias is not None and np.any(np.asarray(bias) != 0):
        _refuse(name, node, "its bias is nonzero; the network has no bias")
    if not np.issubdtype(w.dtype, np.number):
        _refuse(name, node, f"weight holds {w.dtype} values, not numbers")
    w32 = np.asarray(w, dtype=np.float64)
    bad = ~np.isfinite(w32) | (np.abs(w32) > np.finfo(np.float32).max)
    if bad.any():
        i = np.unravel_index(int(np.argmax(bad)), w.shape)
        raise ConfigError(
            config_message(
                f"NIR node {name!r} weight{list(map(int, i))}",
                float(w32[i]),
                f"must be finite in float32 ({int(bad.sum())} of {w.size} entries are not)",
                "export the graph from a trained network without NaN or Inf weights",
            )
        )
    return np.ascontiguousarray(w.T, dtype=np.float32)


_PARAMS = ("tau", "tau_mem", "tau_syn", "r", "v_threshold", "v_leak", "v_reset", "w_in")


def _layer_size(name, node):
    """The neuron count the node's parameters give, or None when all are 0-d (one value for the
    layer; the preceding weights give its size)."""
    shapes = {f: np.shape(getattr(node, f)) for f in _PARAMS if getattr(node, f, None) is not None}
    sizes = {int(np.prod(s)) for s in shapes.values() if s != ()}
    if len(sizes) > 1:
        _refuse(name, node, f"its parameters have different sizes {shapes}")
    return sizes.pop() if sizes else None


def _neuron_params(name, node, dt, discretization):
    """(τ, R, threshold, layer size or None) of a LIF/CubaLIF/IF node, checking what the network lacks."""
    kind = type(node).__name__
    if kind == "CubaLIF":
        tau_syn = np.asarray(node.tau_syn)
        ft = np.result_type(tau_syn.dtype, np.float32)  # dt/tau_syn in the graph's precision: a float32
        with np.errstate(divide="ignore"):  # tau_syn = 1e-4 is dt = 1e-4 (1 - x = 0, not 5e-8)
            x = (np.asarray(dt, ft) / tau_syn.astype(ft)).astype(np.float64)  # inf for tau_syn = 0: no carry-over
        a_syn = np.exp(-x) if discretization == "exact" else np.where(np.isinf(x), 0.0, 1.0 - x)
        if np.any(np.abs(a_syn) > SYNAPSE_TOLERANCE):
            i = int(np.argmax(np.abs(a_syn)))
            formula, fix = (
                ("exp(-dt/tau_syn)", "tau_syn <= dt/16.6")
                if discretization == "exact"
                else ("1 - dt/tau_syn", "tau_syn = dt")
            )
            _refuse(
                name,
                node,
                f"tau_syn = {tau_syn.ravel()[i]:g} keeps a synaptic current across steps ({formula} = "
                f"{a_syn.ravel()[i]:.3g}, |.| > 2^-24 = {SYNAPSE_TOLERANCE:.3g}, the float32 resolution); "
                f"the network has no synaptic state; export a LIF or use {fix}",
            )
        if np.any(np.asarray(node.w_in) != 1):
            _refuse(name, node, "w_in != 1; fold it into the preceding weights and export w_in = 1")
        tau = node.tau_mem
    elif kind == "IF":
        tau = None  # no leak: tau = inf below
    else:
        tau = node.tau
    n = _layer_size(name, node)
    v_leak = np.asarray(getattr(node, "v_leak", 0.0))
    if np.any(v_leak != 0):
        _refuse(
            name,
            node,
            f"v_leak = {v_leak.ravel()[np.flatnonzero(v_leak)[0]]:g} != 0; the network has no constant drive",
        )
    v_reset = np.asarray(getattr(node, "v_reset", 0.0))
    if np.any(v_reset != 0):
        _refuse(name, node, f"v_reset = {v_reset.ravel()[np.flatnonzero(v_reset)[0]]:g} != 0; the network resets to 0")
    tau = math.inf if kind == "IF" else _uniform(name, node, "tau" if kind == "LIF" else "tau_mem", tau, "tau")
    r = _uniform(name, node, "r", node.r, "r")
    th = _uniform(name, node, "v_threshold", node.v_threshold, "v_threshold")
    if not tau > 0:
        _refuse(name, node, f"tau = {tau:g} must be > 0")
    if not r > 0:
        _refuse(name, node, f"r = {r:g} must be > 0 (it is the network's input_scale)")
    return tau, r, th, n


def _graph_dt(graph):
    """``graph.metadata["dt"]`` as a float in seconds, or None when the graph carries none."""
    meta = getattr(graph, "metadata", None)
    if not isinstance(meta, dict) or "dt" not in meta:
        return None
    try:
        dt = float(np.asarray(meta["dt"], dtype=np.float64))
    except (TypeError, ValueError):
        dt = math.nan
    require(
        math.isfinite(dt) and dt > 0,
        "NIR graph metadata dt",
        meta["dt"],
        "must be a number > 0 (seconds)",
        "write graph.metadata['dt'] = <step in seconds> before nir.write",
    )
    return dt


def _step(dt, graph):
    """(dt, source) of one network step: the caller's, else the graph's, else the default."""
    g_dt = _graph_dt(graph)
    if dt is None:
        return (g_dt, "graph") if g_dt is not None else (DEFAULT_DT_S, "default")
    require(
        isinstance(dt, (int, float)) and not isinstance(dt, bool) and math.isfinite(dt) and dt > 0,
        "dt",
        dt,
        "must be a number > 0",
    )
    require(
        g_dt is None or math.isclose(dt, g_dt, rel_tol=1e-6),
        "dt",
        dt,
        f"differs from the NIR graph's metadata dt = {g_dt!r} s",
        "drop --dt to use the graph's step (or change graph.metadata['dt'])",
    )
    return float(dt), "caller"


def _flat_size(name, node, shape, kind):
    """N of an Input/Output type ``(N,)`` or ``(B, N)`` (a leading batch dimension), and B or None."""
    shape = tuple(int(x) for x in np.asarray(shape).ravel())
    if len(shape) not in (1, 2) or min(shape) < 1:
        _refuse(name, node, f"{kind} shape {shape} is not (N,) or (batch, N); the network's {kind} is a vector")
    return shape[-1], (shape[0] if len(shape) == 2 else None)


def _alpha_warning(name, kind, dt, tau, alpha, r, discretization):
    """The one-line warning for α outside :data:`ALPHA_RANGE` ('' inside)."""
    lo, hi = ALPHA_RANGE
    if lo < alpha < hi:
        return ""
    what = (
        f"tau = {tau:g} s is {tau / dt:.3g} steps of dt = {dt:g} s, so the membrane keeps "
        f"{'almost nothing' if alpha < 1e-3 else 'less than half'} of its potential each step"
        if alpha <= lo
        else f"tau = {tau:g} s is {tau / dt:.3g} steps of dt = {dt:g} s, so the leak is under 1 % per 100 steps"
    )
    fix = "check that --dt is the step the graph was trained with (NIR time constants are in seconds)"
    if kind == "LIF" and r == 1.0 and tau < dt:  # Norse 1.1's LIFBoxCell: r = 1, tau = 1e-3 s x its tau
        fix += (
            f"; a Norse 1.1 graph writes tau = 1e-3 s x its tau: --dt {NORSE_EXPORT_DT_S**2:g} "
            f"--discretization euler reproduces Norse's step (alpha = {1 - NORSE_EXPORT_DT_S**2 / tau:.4g})"
        )
    if math.isclose(tau / r, SNNTORCH_EXPORT_DT_S, rel_tol=1e-3) and (dt, discretization) != (
        SNNTORCH_EXPORT_DT_S,
        "euler",
    ):
        fix = (
            f"tau/r = {tau / r:g} s is snnTorch 1.0's export step: --dt {SNNTORCH_EXPORT_DT_S:g} "
            f"--discretization euler gives alpha = snnTorch's beta = {1 - SNNTORCH_EXPORT_DT_S / tau:.4g}"
        )
    formula = "exp(-dt/tau)" if discretization == "exact" else "1 - dt/tau"
    return (
        f"NIR layer {name!r} (and every layer): alpha = {formula} = {alpha:.3g} is outside ({lo:g}, {hi:g}): "
        f"{what}; {fix}"
    )


def _read(p):
    """The graph in file ``p``, read without nir's type check (it rejects a leading batch
    dimension; the shapes are checked by :func:`load_nir`)."""
    import nir  # nir (and h5py) load only where used (start-up time)

    require(p.is_file(), "NIR file", str(p), "no such file")
    unchecked = "type_check" in inspect.signature(nir.read).parameters  # nir >= 1.0.7
    try:
        return nir.read(p, type_check=False) if unchecked else nir.read(p)
    except Exception as exc:  # noqa: BLE001 -- h5py/nir raise many kinds for broken files
        fix = "write it with nir.write" + (
            ""
            if unchecked
            else "; nir < 1.0.7 type-checks on reading, which refuses a batch dimension: pip install 'nir>=1.0.7'"
        )
        raise ConfigError(
            config_message("NIR file", str(p), f"cannot be read ({type(exc).__name__}: {exc})", fix)
        ) from None


@dataclass(frozen=True)
class _Chain:
    """The Input -> (weight -> neuron)* chain of a NIR graph: layer sizes (input first), feed-forward
    weights, recurrent flags and matrices (None without), neuron node names, per layer
    ``(name, node, tau, r, v_threshold)`` and every node visited on the way."""

    layers: list
    weights: list
    rec: list
    rec_w: list
    names: list
    params: list
    visited: set


def _graph_ends(graph) -> tuple:
    """``(nodes, succ, pred, input, output)`` of ``graph`` after refusing unsupported node types, edges
    to unknown nodes and anything but exactly one Input and one Output node (:class:`ConfigError`)."""
    nodes, edges = dict(graph.nodes), [tuple(e) for e in graph.edges]
    for name, node in nodes.items():
        kind = type(node).__name__
        if kind not in ("Input", "Output", *_WEIGHT_TYPES, *_NEURON_TYPES):
            _refuse(name, node, _WHY.get(kind, f"the network has no {kind} nodes"))
    for a, b in edges:
        require(a in nodes and b in nodes, "NIR edge", (a, b), "names a node that is not in the graph")
    succ = {n: [b for a, b in edges if a == n] for n in nodes}
    pred = {n: [a for a, b in edges if b == n] for n in nodes}
    inputs = [n for n, v in nodes.items() if type(v).__name__ == "Input"]
    outputs = [n for n, v in nodes.items() if type(v).__name__ == "Output"]
    require(
        len(inputs) == 1 and len(outputs) == 1,
        "NIR graph inputs/outputs",
        (inputs, outputs),
        "needs exactly one Input and one Output node",
    )
    return nodes, succ, pred, inputs[0], outputs[0]


def _next_weight(cur: str, nodes: dict, succ: dict, pred: dict, names: list):
    """The weight node ``cur`` feeds (ignoring its self-loops), or None when it feeds the Output node;
    refuses branches, a missing weight node and an Output before any LIF layer."""
    nxt = [s for s in succ[cur] if not (type(nodes[s]).__name__ in _WEIGHT_TYPES and succ[s] == [cur])]
    if len(nxt) != 1:
        _refuse(cur, nodes[cur], f"it feeds {len(nxt)} nodes {nxt}; only a chain (plus self-loops) is supported")
    (w_name,) = nxt
    w_node = nodes[w_name]
    if type(w_node).__name__ == "Output":
        if not names:
            _refuse(w_name, w_node, "the graph has no LIF layer")
        return None
    if type(w_node).__name__ not in _WEIGHT_TYPES:
        _refuse(w_name, w_node, f"expected an Affine or Linear node after {cur!r}")
    if len(pred[w_name]) != 1 or len(succ[w_name]) != 1:
        _refuse(w_name, w_node, "a weight node must have exactly one source and one target")
    return w_name


def _self_loop(n_name: str, w_name: str, nodes: dict, succ: dict, pred: dict):
    """The recurrent weight node of neuron node ``n_name`` (None without); refuses several self-loops,
    extra inputs besides the feed-forward ``w_name``, and a loop with more than one source."""
    n_node = nodes[n_name]
    loops = [s for s in succ[n_name] if type(nodes[s]).__name__ in _WEIGHT_TYPES and succ[s] == [n_name]]
    if len(loops) > 1:
        _refuse(n_name, n_node, f"it has {len(loops)} self-loops {loops}; the network has one recurrent matrix")
    others = [p for p in pred[n_name] if p != w_name and p not in loops]
    if others:
        _refuse(n_name, n_node, f"it has extra inputs {others}; only one feed-forward input and one self-loop")
    if not loops:
        return None
    (loop,) = loops
    if len(pred[loop]) != 1:
        _refuse(loop, nodes[loop], "a recurrent weight node must have exactly one source")
    return loop


def _walk_chain(nodes: dict, succ: dict, pred: dict, inp: str, n0: int, dt: float, discretization: str) -> _Chain:
    """Follow the graph from Input ``inp`` (``n0`` neurons) through weight -> neuron pairs to the Output."""
    layers, weights, rec, rec_w, names, params = [n0], [], [], [], [], []
    visited = {inp}
    cur = inp
    while True:
        w_name = _next_weight(cur, nodes, succ, pred, names)
        if w_name is None:
            break
        w_node = nodes[w_name]
        n_name = succ[w_name][0]
        n_node = nodes[n_name]
        if type(n_node).__name__ not in _NEURON_TYPES:
            _refuse(n_name, n_node, f"expected a LIF or CubaLIF node after {w_name!r}")
        tau, r, th, n = _neuron_params(n_name, n_node, dt, discretization)
        weights.append(_weight(w_name, w_node, layers[-1], n))
        n = weights[-1].shape[1]  # the layer size (0-d parameters: from the weights)
        loop = _self_loop(n_name, w_name, nodes, succ, pred)
        if loop is not None:
            rec_w.append(_weight(loop, nodes[loop], n, n))
            visited.add(loop)
        else:
            rec_w.append(None)
        rec.append(loop is not None)
        layers.append(n)
        names.append(n_name)
        params.append((n_name, n_node, tau, r, th))
        visited |= {w_name, n_name}
        cur = n_name
    return _Chain(layers, weights, rec, rec_w, names, params, visited)


def _check_output(nodes: dict, out: str, last: int, visited: set) -> None:
    """Refuse an Output node whose size is not the last layer's ``last`` and any node off the chain."""
    out_node = nodes[out]
    n_out, _ = _flat_size(out, out_node, out_node.output_type["output"], "output")
    if n_out != last:
        _refuse(out, out_node, f"output size {n_out} != the last layer's {last} neurons")
    stray = [n for n in nodes if n not in visited | {out}]
    if stray:
        _refuse(stray[0], nodes[stray[0]], "it is not on the Input -> Output chain (branches are not supported)")


def _shared_lif(params: list, dt: float, discretization: str) -> tuple:
    """``(lif, tau, warnings)``: the one :class:`LIFParams` of all layers (refusing layers whose tau, r or
    v_threshold differ, and an alpha outside (0, 1)), with a warning when alpha is outside the range."""
    first = params[0]
    for field, i in (("tau", 2), ("r", 3), ("v_threshold", 4)):
        for name, node, *vals in params[1:]:
            if vals[i - 2] != first[i]:
                _refuse(
                    name,
                    node,
                    f"{field} = {vals[i - 2]:g} differs from {first[i]:g} in {first[0]!r}; the network "
                    f"has one {field} for all layers",
                )
    tau, r, th = first[2], first[3], first[4]
    warnings = []
    if math.isinf(tau):  # IF: v_t = v_{t-1} + dt·R·I_t (exact and Euler agree)
        lif = LIFParams(decay=1.0, threshold=th, input_scale=r, gain=dt * r)
    else:
        alpha = math.exp(-dt / tau) if discretization == "exact" else 1.0 - dt / tau
        if not 0.0 < alpha < 1.0:
            _refuse(
                first[0], first[1], f"dt/tau = {dt / tau:g} gives alpha = {alpha:g} outside (0, 1); choose a smaller dt"
            )
        lif = LIFParams(decay=alpha, threshold=th, input_scale=r)
        warnings = [
            w for w in [_alpha_warning(first[0], type(first[1]).__name__, dt, tau, alpha, r, discretization)] if w
        ]
    return lif, tau, warnings


def load_nir(path_or_graph, dt: float | None = None, discretization: str = "exact") -> NirModel:
    """A NIR graph (file path or ``nir.NIRGraph``) as a :class:`NirModel`; see the module table.

    Parameters
    ----------
    path_or_graph : str, Path or nir.NIRGraph
    dt : float or None
        Length of one network step in seconds (the unit of NIR time constants). None: the
        graph's ``metadata["dt"]`` if it has one, else :data:`DEFAULT_DT_S`. A dt that differs
        from the graph's is refused.
    discretization : {"exact", "euler"}
        α = exp(−dt/τ) (the exact solution over a step) or α = 1 − dt/τ (forward Euler).

    Returns
    -------
    NirModel
        With ``warnings`` (one line each) when α is outside :data:`ALPHA_RANGE`.

    Raises
    ------
    ConfigError
        Unreadable file, bad ``dt``, or any node or structure that the network cannot
        represent exactly (the message names the node, its type and why).
    """
    import nir  # nir (and h5py) load only where used (start-up time)

    require(discretization in ("exact", "euler"), "discretization", discretization, "must be 'exact' or 'euler'")
    if isinstance(path_or_graph, (str, Path)):
        graph = _read(Path(path_or_graph))
    else:
        graph = path_or_graph
    require(isinstance(graph, nir.NIRGraph), "NIR graph", type(graph).__name__, "must be a nir.NIRGraph")
    dt, dt_source = _step(dt, graph)

    nodes, succ, pred, inp, out = _graph_ends(graph)
    n0, graph_batch = _flat_size(inp, nodes[inp], nodes[inp].input_type["input"], "input")
    chain = _walk_chain(nodes, succ, pred, inp, n0, float(dt), discretization)
    _check_output(nodes, out, chain.layers[-1], chain.visited)
    lif, tau, warnings = _shared_lif(chain.params, dt, discretization)
    return NirModel(
        layers=tuple(chain.layers),
        weights=tuple(chain.weights),
        recurrent=tuple(chain.rec),
        recurrent_weights=tuple(chain.rec_w),
        lif=lif,
        dt=float(dt),
        tau=tau,
        nodes=tuple(chain.names),
        dt_source=dt_source,
        warnings=tuple(warnings),
        graph_batch=graph_batch,
    )
