"""The options of one SNN training run (``tilesim run``), typed and validated once.

:class:`RunOptions` is a frozen pydantic dataclass in strict mode: a value of the wrong type
(``true`` for an integer, ``4.5`` for an integer, ``"4"`` for a number, ``"no"`` for a flag), a
value out of range, a non-finite number or an inconsistent pair of values is refused on
construction with a :class:`tilesim.errors.ConfigError` of one line — field, value, limit and fix.

The three ways in build the same object:

* Python: ``RunOptions(batch=16, layers=(32, 16, 4))``
* TOML: ``options_from_mapping(read_toml(path), where=path)`` (keys are the field names)
* the command line: the flags are derived from the fields (:func:`add_option_flags`,
  ``--name-with-dashes``, help text and default from the field), then :func:`options_from_args`.

Adding an option is one declaration below: its type, default, limits and ``help``. Fields with
``network=True`` in their ``json_schema_extra`` are passed by name to
:class:`tilesim.models.snn.training.network.NetworkConfig` (see :func:`tilesim.models.snn.commands.run.network_config`).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import os
import re
from functools import cached_property
from pathlib import Path
from typing import Annotated, Literal, Optional, Union, get_args, get_origin

from pydantic import BeforeValidator, ConfigDict, Field, ValidationError, model_validator
from pydantic.dataclasses import dataclass
from pydantic_core import PydanticCustomError

from tilesim.errors import ConfigError, config_message
from tilesim.io import read_toml
from tilesim.models.snn.step.structure import StepStructure

__all__ = [
    "RunOptions",
    "RUN_OPTIONS",
    "resolved_settings",
    "options_toml",
    "config_out_path",
    "config_file_path",
    "config_paths",
    "CONFIG_PATHS",
    "PlacementOptions",
    "TrainingOptions",
    "OutputOptions",
    "DATASETS",
    "DATASET_CHANNELS",
    "option_names",
    "options_from_mapping",
    "check_sweep_paths",
    "options_from_args",
    "add_option_flags",
    "options_dict",
    "translate_error",
]

DATASETS = ("synthetic", "shd", "nmnist", "dvsgesture")
# Input channels N0 of the dataset-shaped generators (models/snn/training/data.py: SHD 700 cochlea channels,
# N-MNIST 2x34x34 polarity pixels, DVS Gesture 2x48x48 after 128->48 pooling).
DATASET_CHANNELS = {"shd": 700, "nmnist": 2312, "dvsgesture": 4608}
DEFAULT_LAYERS = (700, 1462, 1460, 20)


def _sizes(value, what: str):
    """``"72-72-2"`` → ``(72, 72, 2)``; a list → a tuple (elements still checked strictly);
    a single integer → a 1-tuple. Anything else is left for the strict tuple check to refuse."""
    if isinstance(value, str):
        parts = value.strip().replace(",", "-").split("-")
        if not all(re.fullmatch(r"\d+", p.strip()) for p in parts):
            raise PydanticCustomError("sizes", "must be positive integers joined by '-'", {"what": what})
        return tuple(int(p) for p in parts)
    if isinstance(value, list):
        return tuple(value)
    if isinstance(value, int) and not isinstance(value, bool) and what == "caps":
        return (value,)
    return value


Sizes = Annotated[tuple[Annotated[int, Field(ge=1)], ...], BeforeValidator(lambda v: _sizes(v, "layers"))]
Caps = Annotated[Optional[tuple[Annotated[int, Field(ge=1)], ...]], BeforeValidator(lambda v: _sizes(v, "caps"))]
Tiles = Annotated[tuple[Annotated[int, Field(ge=0)], ...], BeforeValidator(lambda v: _sizes(v, "caps"))]


def _opt(default, help: str, example=None, network: bool = False, **limits):
    """A field: ``default``, ``help`` (flag help and docs), ``example`` (shown in the fix of an
    error; default: the default value), ``network`` (passed to NetworkConfig), pydantic limits."""
    extra = {"example": default if example is None else example, "network": network}
    return Field(default, description=help, json_schema_extra=extra, **limits)


_CONFIG = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False, arbitrary_types_allowed=False)


@dataclass(frozen=True, config=_CONFIG)
class _OptionFields:
    """The one declaration of every ``tilesim run`` option (type, default, limits, help); what
    :class:`RunOptions` validates. TOML keys, flags and sweep axes are these names."""

    machine: str = _opt("gc200", "machine preset or TOML file", min_length=1)
    chips: Optional[int] = _opt(None, "number of chips (default: the machine's)", example=4, ge=1)
    layers: Sizes = _opt(DEFAULT_LAYERS, "layer sizes N0-N1-...-C (SHD 2-layer)", example="700-256-20", network=True)
    dataset: Literal[DATASETS] = _opt("synthetic", "data shape / generator: " + ", ".join(DATASETS))
    data: Optional[str] = _opt(
        None,
        "a real data file/folder: SHD/SSC .h5, an N-MNIST folder or a tonic-style "
        "events .npz (events, offsets, labels, sensor_size)",
        example="shd_train.h5",
        min_length=1,
    )
    data_root: Optional[str] = _opt(
        None,
        "tonic's dataset folder (its save_to): --dataset shd|nmnist|dvsgesture is read there with tonic "
        "(pip install 'tilesim[data]'), downloaded when missing and the network allows",
        example="~/data",
        min_length=1,
    )
    batch: int = _opt(48, "samples per training step", ge=1, network=True)
    timesteps: int = _opt(100, "time steps per sample", ge=1, network=True)
    max_activity: float = _opt(0.05, "cap fraction a: N_max = 2*floor(a*N/2) per layer", gt=0, le=1, network=True)
    caps: Caps = _opt(None, "explicit N_max per neuron layer, e.g. 72-72-2", example="72-72-2", network=True)
    input_cap: int = _opt(48, "max input spikes per step and sample", ge=1, network=True)
    second_threshold: float = _opt(0.9, "theta2: gradient-only entries need theta2 < v <= theta1", network=True)
    output_second_threshold: Optional[float] = _opt(
        -100.0,
        "theta2 of the output layer: -100 makes every output neuron gradient-eligible (the authors' runs)",
        example=-100.0,
        network=True,
    )
    second_threshold_schedule: Literal["authors", "off"] = _opt(
        "authors",
        "theta2 schedule: authors (every layer starts at --second-threshold-start and moves "
        "towards its own theta2 by --second-threshold-rate after each batch) or off (constant)",
    )
    second_threshold_start: float = _opt(-100.0, "first value of the theta2 schedule")
    second_threshold_rate: float = _opt(0.5, "theta2 <- theta2 + rate * (target - theta2) after each batch", gt=0, le=1)
    activity: Literal["natural", "fixed"] = _opt(
        "natural", "natural (trained) or fixed (every list at its cap)", network=True
    )
    neurons_per_tile: Optional[int] = _opt(
        None, "neurons per tile (default: smallest even value that fits)", example=8, ge=1
    )
    mapping: str = _opt(
        "auto",
        "placement: auto (the stack's: contiguous under poplar, else spread), contiguous (the paper's), "
        "round_robin, balanced, graph, spread (the whole machine), or a mapping JSON file",
        min_length=1,
    )
    optimizer: Literal["adam", "sgd"] = _opt("adam", "adam or sgd", network=True)
    lr: float = _opt(1e-3, "learning rate", gt=0, network=True)
    steps: int = _opt(5, "training steps", ge=1)
    seed: int = _opt(0, "seeds the weights, the data and the input dropping", ge=0, network=True)
    out: Optional[str] = _opt(
        None,
        "directory for summary.json, summary.md, trace.json, mapping.json and pictures",
        example="out/run",
        min_length=1,
    )
    json: bool = _opt(False, "print the summary as JSON", example=True)
    recurrent: bool = _opt(False, "recurrent weights in every layer", example=True, network=True)
    weight_mul: float = _opt(
        4.0, "init bound a = sqrt(6/fan_in)*weight_mul (4.0 as in the authors' runs)", gt=0, network=True
    )
    memory_check: Literal["raise", "report"] = _opt("raise", "stop on SRAM overflow (raise) or report it")
    model: Optional[str] = _opt(
        None,
        "a NIR graph (.nir): Input -> (Affine|Linear) -> LIF ... -> Output; sets "
        "the layers, recurrence, LIF constants and initial weights",
        example="net.nir",
        min_length=1,
    )
    dt: Optional[float] = _opt(
        None,
        "one network step of a NIR graph, in seconds: alpha = exp(-dt/tau) (default: "
        "the graph's metadata dt, else 1e-3; snnTorch 1.0 graphs: 1e-4 with "
        "--discretization euler)",
        example=1e-4,
        gt=0,
    )
    discretization: Literal["exact", "euler"] = _opt(
        "exact",
        "NIR LIF step: exact, alpha = exp(-dt/tau), or euler, alpha = 1 - dt/tau (snnTorch's export convention)",
    )
    steps_per_execution: int = _opt(
        52,
        "training steps per device execution (the host copy of weights and optimizer state is amortised over them)",
        ge=1,
    )
    stack: Literal["auto", "poplar", "tt-metal", "csl"] = _opt(
        "auto",
        "the execution stack the step is built with: auto (the machine vendor's: IPU presets poplar, "
        "Tenstorrent tt-metal, Cerebras csl), or one of them on any machine (models/snn/stacks/)",
    )
    sync_scope: Literal["chip", "all"] = _opt(
        "chip",
        "which chips a superstep without cross-chip data syncs: its own chip (chips run apart between "
        "the layer-boundary exchanges) or all chips (models/snn/step/structure.py gives the evidence)",
    )
    copies: Literal["separate", "merged"] = _opt(
        "separate",
        "the per-layer PopLibs Copy programs folded into a row: one exchange each, or merged into one",
    )
    host_transfer: Literal["per_epoch", "per_execution"] = _opt(
        "per_epoch",
        "how often weights and optimizer state cross the host link: once per epoch (Keras fit: its metric "
        "reset makes TensorFlow's executor move every variable) or after every execution",
    )
    host_direction: Literal["round_trip", "one_way"] = _opt(
        "round_trip", "the host variable copy: device to host and back, or device to host only"
    )
    host_rate: Literal["fitted", "documented"] = _opt(
        "fitted",
        "the host variable copy's rate: fitted to the measured steps (the cost model's host_copy_ns_per_byte) "
        "or Graphcore's documented host traffic for one large buffer (3 GB/s)",
    )
    host_shared: Literal["chip", "host_link"] = _opt(
        "chip", "the host copy made by each chip in parallel, or one after another by the 4 chips of a host link"
    )
    costs: Optional[str] = _opt(
        None,
        "cost-model TOML (default: the shipped calibration; make one with tilesim calibrate)",
        example="costs.toml",
        min_length=1,
    )
    trace_tiles: Tiles = _opt(
        (),
        "global tile ids given their own track in trace.json, e.g. 0-1471 (default: the step's critical tiles)",
        example="0-1471",
    )
    implementation: Literal["sparse", "snntorch"] = _opt(
        "sparse",
        "sparse (the paper's sparse BPTT, default) or snntorch (snnTorch's dense IPU build through PopTorch, op by op; "
        "gc200 or bow; models/snntorch/)",
    )

    @model_validator(mode="after")
    def _cross_field(self):
        L = len(self.layers) - 1
        if L < 1:
            _fail("layers", self.layers, "needs the input size and at least one layer")
        if self.model is None:
            if self.caps is not None and len(self.caps) != L:
                fit = (tuple(self.caps) + (self.caps[-1:] or (8,)) * L)[:L]
                _fail(
                    "caps",
                    self.caps,
                    f"needs one cap per neuron layer ({L} for layers {_dash(self.layers)})",
                    fix_example=_dash(fit),
                )
            if self.data_root is not None and self.data is not None:
                _fail("data_root", self.data_root, "cannot be given with data (one source of data)")
            if self.data_root is not None and self.dataset not in DATASET_CHANNELS:
                _fail(
                    "dataset",
                    self.dataset,
                    f"must be one of {', '.join(DATASET_CHANNELS)} with data_root (tonic's datasets)",
                    fix_example="shd",
                )
            n0 = DATASET_CHANNELS.get(self.dataset)
            if self.data is None and n0 is not None and self.layers[0] != n0:
                _fail(
                    "layers",
                    self.layers[0],
                    f"must be {n0} for dataset {self.dataset}",
                    fix_example=f"{n0}-{_dash(self.layers[1:])}",
                    part=" N0",
                )
        need, have = _host_bytes(self), _host_memory()
        if have and need > have:
            per_sample = self.timesteps * (4 * self.input_cap + 8)  # bytes of one sample's input lists
            fits = have // per_sample
            field, value, fix = ("batch", self.batch, int(fits)) if fits >= 1 else ("timesteps", self.timesteps, None)
            if fix is None:  # not even one sample fits: the time steps are what is too large
                fix = max(1, int(have // (self.batch * (4 * self.input_cap + 8))))
            _fail(
                field,
                value,
                f"one batch of input lists needs {need / 2**30:,.1f} GiB "
                f"(timesteps {self.timesteps} x batch {self.batch} x (4 x input_cap {self.input_cap} + 8) B), more "
                f"than the host's {have / 2**30:,.1f} GiB",
                fix_example=fix,
            )
        return self


@dataclasses.dataclass(frozen=True)
class PlacementOptions:
    """Where a run's network goes: the machine (preset or file) and its chips, the neurons per tile,
    the mapping (strategy or file) and what an SRAM overflow does."""

    machine: str
    chips: int | None
    neurons_per_tile: int | None
    mapping: str
    memory_check: str


@dataclasses.dataclass(frozen=True)
class TrainingOptions:
    """How a run trains and is timed: the data, the steps, the theta2 schedule, a NIR model, the
    cost model and the steps per device execution."""

    dataset: str
    data: str | None
    data_root: str | None
    steps: int
    second_threshold_schedule: str
    second_threshold_start: float
    second_threshold_rate: float
    model: str | None
    dt: float | None
    discretization: str
    costs: str | None
    steps_per_execution: int


@dataclasses.dataclass(frozen=True)
class OutputOptions:
    """What a run writes: its folder, JSON on standard output, the tiles given a trace track."""

    out: str | None
    json: bool
    trace_tiles: tuple


class RunOptions(_OptionFields):
    """Everything ``tilesim run`` takes; see each field's ``help`` (``tilesim run --help``). Flat,
    as users write it (TOML keys, flags, sweep axes); read in typed parts — :attr:`network` (the
    :class:`tilesim.models.snn.training.network.NetworkConfig` fields), :attr:`placement`, :attr:`structure`
    (:class:`tilesim.models.snn.step.structure.StepStructure`), :attr:`training`, :attr:`output` — each built
    once. ``RunOptions(...)`` validates like the CLI: a bad value raises one ConfigError naming it."""

    def __init__(self, *args, **kwargs):
        """Validated construction (errors as one-line ConfigErrors, Python style)."""
        try:
            super().__init__(*args, **kwargs)
        except ValidationError as exc:
            raise _with_whole_value(translate_error(exc, style="python"), exc, kwargs, {}) from None

    @cached_property
    def network(self) -> dict:
        """The options passed unchanged to :class:`tilesim.models.snn.training.network.NetworkConfig` (by name)."""
        return {name: getattr(self, name) for name in network_fields()}

    @cached_property
    def placement(self) -> PlacementOptions:
        """Machine, chips and placement."""
        return PlacementOptions(self.machine, self.chips, self.neurons_per_tile, self.mapping, self.memory_check)

    @cached_property
    def structure(self) -> StepStructure:
        """The structural assumptions the steps are timed under."""
        return StepStructure(
            sync_scope=self.sync_scope,
            copies=self.copies,
            host_transfer=self.host_transfer,
            host_direction=self.host_direction,
            host_rate=self.host_rate,
            host_shared=self.host_shared,
        )

    @cached_property
    def training(self) -> TrainingOptions:
        """Data, steps, theta2 schedule, model, costs."""
        return TrainingOptions(
            self.dataset,
            self.data,
            self.data_root,
            self.steps,
            self.second_threshold_schedule,
            self.second_threshold_start,
            self.second_threshold_rate,
            self.model,
            self.dt,
            self.discretization,
            self.costs,
            self.steps_per_execution,
        )

    @cached_property
    def output(self) -> OutputOptions:
        """Folder, JSON, trace tiles."""
        return OutputOptions(self.out, self.json, self.trace_tiles)


def _dash(sizes) -> str:
    return "-".join(map(str, sizes))


def _fail(field: str, value, limit: str, fix_example=None, part: str = ""):
    """Refuse a combination of values: ``field`` (``part`` of it, e.g. " N0") is ``value``."""
    raise PydanticCustomError(
        "cross_field",
        "{limit}",
        {"field": field, "value": value, "limit": limit, "fix_example": fix_example, "part": part},
    )


def _host_bytes(o: RunOptions) -> int:
    """Lower bound of the host memory of one batch: the input spike lists of
    :meth:`tilesim.models.snn.training.data.EventDataset.batches` (uint32 ids [T, B, input_cap] + int32 counts
    [T, B, 2])."""
    return o.timesteps * o.batch * (4 * o.input_cap + 8)


def _host_memory() -> int:
    """Physical memory of this host in bytes (0 when the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not a POSIX host: no check
        return 0


# ---- field metadata ----------------------------------------------------------------------------
def _info(name: str):
    return RunOptions.__pydantic_fields__[name]


def option_names() -> tuple:
    """The option names in declaration order (the TOML keys; flags are ``--`` + dashes)."""
    return tuple(RunOptions.__pydantic_fields__)


def network_fields() -> tuple:
    """The names passed unchanged to :class:`tilesim.models.snn.training.network.NetworkConfig`."""
    return tuple(n for n in option_names() if _info(n).json_schema_extra["network"])


def _kind(name: str):
    """The scalar type a flag's text converts to: int, float, bool, str (str also for sizes)."""
    ann = _info(name).annotation
    args = [a for a in get_args(ann) if a is not type(None)] if get_origin(ann) in (Union,) else [ann]
    base = args[0] if args else ann
    if get_origin(base) is Literal:
        return str
    return base if base in (int, float, bool) else str


def _choices(name: str):
    ann = _info(name).annotation
    return get_args(ann) if get_origin(ann) is Literal else None


def _show(v) -> str:
    if isinstance(v, tuple):
        return _dash(v)
    if isinstance(v, bool):
        return str(v).lower()
    return str(v)


# ---- errors ------------------------------------------------------------------------------------
_LIMITS = {
    "int_type": "must be an integer",
    "int_from_float": "must be an integer",
    "float_type": "must be a number",
    "string_type": "must be a string",
    "bool_type": "must be true or false",
    "finite_number": "must be finite",
    "tuple_type": "must be sizes joined by '-' or a list of integers",
    "none_required": "must be empty",
    "dataclass_type": "must be a table",
    "missing": "is required",
}


def _example_text(name: str, label: str, example, style: str) -> str:
    if style in ("toml", "python"):
        ex = f'"{_show(example)}"' if isinstance(example, (str, tuple)) else _show(example)
        if style == "python":
            return f"e.g. RunOptions({name}={ex if not isinstance(example, bool) else example})"
        return f"write e.g. {name} = {ex}"
    if _kind(name) is bool:
        return f"pass {label} (no value) or leave it out"
    return f"e.g. {label} {_show(example)}"


def translate_error(exc: ValidationError, labels: dict | None = None, style: str = "flag") -> ConfigError:
    """The first error of a pydantic ``ValidationError`` as our one-line :class:`ConfigError`:
    ``<label> = <value>: <limit>; <fix>``. ``labels`` maps option names to how the user wrote them
    (``--batch``, ``run.toml: batch``); ``style`` (flag, toml, python) picks the fix's syntax."""
    labels = labels or {}
    err = exc.errors(include_url=False)[0]
    ctx = err.get("ctx") or {}
    loc = [p for p in err["loc"] if isinstance(p, str)]
    name = ctx.get("field") or (loc[0] if loc else "options")
    value = ctx.get("value", err.get("input"))
    flag = labels.get(name, "--" + name.replace("_", "-") if style == "flag" else name)
    label = flag + ctx.get("part", "")  # what is wrong (e.g. "--layers N0"); the fix names the flag alone
    if isinstance(value, tuple) and name in ("layers", "caps"):
        value = _dash(value)
    kind = err["type"]
    if kind in ("unexpected_keyword_argument", "extra_forbidden"):
        return _unknown(label, name, value)
    if kind in ("cross_field", "sizes"):
        limit = ctx.get("limit") or err["msg"]
    elif kind == "literal_error":
        limit = f"must be one of {', '.join(map(str, _choices(name) or ()))}"
    elif kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        op = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}[kind]
        bound = next(v for k, v in ctx.items() if k in ("ge", "gt", "le", "lt"))
        limit = f"must be {op} {bound}"
        if len(err["loc"]) > 1:  # an element of layers / caps
            limit = f"every size {limit}"
    elif kind == "too_short":
        limit = "must not be empty"
    else:
        limit = _LIMITS.get(kind, err["msg"].lower())
    if name in RunOptions.__pydantic_fields__:
        example = ctx.get("fix_example")
        fix = _example_text(name, flag, _info(name).json_schema_extra["example"] if example is None else example, style)
    else:
        fix = ""
    return ConfigError(config_message(label, value, limit, fix))


def _unknown(label: str, key, value) -> ConfigError:
    close = difflib.get_close_matches(str(key), option_names(), n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    return ConfigError(config_message(label, value, "unknown key", f"{hint}allowed: {', '.join(option_names())}"))


# ---- building ----------------------------------------------------------------------------------
def _build(values: dict, labels: dict, style: str) -> RunOptions:
    unknown = [k for k in values if k not in RunOptions.__pydantic_fields__]
    if unknown:
        raise _unknown(labels.get(unknown[0], unknown[0]), unknown[0], values[unknown[0]])
    options = RunOptions.__new__(RunOptions)
    try:
        _OptionFields.__init__(options, **values)
    except ValidationError as exc:
        raise _with_whole_value(translate_error(exc, labels, style), exc, values, labels) from None
    return options


def _with_whole_value(err: ConfigError, exc: ValidationError, values: dict, labels: dict) -> ConfigError:
    """For an element of a list (``layers = ["20", "x"]``) name the whole value the user wrote."""
    first = exc.errors(include_url=False)[0]
    loc = first["loc"]
    if len(loc) > 1 and isinstance(loc[0], str) and loc[0] in values:
        name = loc[0]
        msg = str(err)
        label = labels.get(name, name)
        head = f"{label} = {first.get('input')!r}:"
        if msg.startswith(head):
            limit = msg[len(head) :].strip()
            if not limit.startswith("every"):
                limit = "every size " + limit
            return ConfigError(f"{label} = {values[name]!r}: {limit}")
    return err


def options_from_mapping(
    data: dict, where: str = "", base: RunOptions | None = None, labels: dict | None = None
) -> RunOptions:
    """RunOptions from a parsed TOML table (or any dict) whose keys are option names; values not
    given come from ``base`` (default: the defaults). Errors name the key as ``<where>: key`` (a file
    name) or as ``labels[key]`` when given."""
    if not isinstance(data, dict):
        raise ConfigError(
            config_message(where or "options", data, "must be a table of options", "write key = value lines")
        )
    # every option, not only the keys given: a combination refused because of a default (e.g. data_root
    # with the default dataset) still names the file it came from
    keys = [*option_names(), *data] if where else list(data)
    labels = {**{k: f"{where}: {k}" if where else str(k) for k in keys}, **(labels or {})}
    start = options_dict(base, json_safe=False) if base is not None else {}
    return _build({**start, **data}, labels, style="toml")


RUN_OPTIONS = "options.toml"
"""The file of a run folder that holds the run's resolved options (``tilesim run --from DIR``)."""

SETTINGS_LEFT_OUT = ("out", "json")
"""Options that do not shape a run (where it is written, how it is printed): not among its settings."""

PATH_SETTINGS = ("data", "data_root", "model", "costs")
"""Options naming files: stored as absolute paths, so that a folder re-runs from anywhere."""


def resolved_settings(options: RunOptions) -> dict:
    """Every option that shaped the run, by name (JSON-ready; :data:`SETTINGS_LEFT_OUT` left out,
    the files of :data:`PATH_SETTINGS` absolute). A mapping read from a file is ``mapping.json``: the
    copy of the placement every run folder holds."""
    out = {k: v for k, v in options_dict(options).items() if k not in SETTINGS_LEFT_OUT}
    if out.get("implementation") == "sparse":  # the default run's settings read as before the option existed
        del out["implementation"]
    for k in PATH_SETTINGS:
        if out.get(k):
            out[k] = str(Path(str(out[k])).expanduser().resolve())
    if str(out.get("mapping", "")).endswith(".json"):
        out["mapping"] = "mapping.json"
    return out


def options_toml(options: RunOptions) -> str:
    """The run's :func:`resolved_settings` as a TOML file (:data:`RUN_OPTIONS`; unset options left out),
    which ``tilesim run --from DIR`` (or ``tilesim run DIR/options.toml``) reads back."""
    import tomli_w  # loaded only when a run folder is written (start-up time)

    values = {k: v for k, v in resolved_settings(options).items() if v is not None}
    return "# the resolved options of this run: `tilesim run --from DIR` re-runs it\n" + tomli_w.dumps(values)


def options_dict(options: RunOptions | None = None, json_safe: bool = True) -> dict:
    """The options as a dict of field values (defaults if ``options`` is None); with ``json_safe``
    tuples become lists (for JSON, TOML and sweep point ids)."""
    options = RunOptions() if options is None else options
    out = {f.name: getattr(options, f.name) for f in dataclasses.fields(options)}
    if json_safe:
        out = {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}
    return out


# ---- command line ------------------------------------------------------------------------------
def add_option_flags(parser: argparse.ArgumentParser, names=None) -> None:
    """Add ``--name`` for each option in ``names`` (default: all), help and default taken from the
    field. The flags keep the text (default None = not given); :func:`options_from_args` converts
    and validates it, so every bad value is the same one-line ConfigError as in a TOML file."""
    for name in names or option_names():
        info = _info(name)
        flag = "--" + name.replace("_", "-")
        default = "" if info.default in (None, ()) else f" (default {_show(info.default)})"
        if _kind(name) is bool:
            parser.add_argument(flag, action="store_const", const=True, default=None, help=info.description + default)
            continue
        choices = _choices(name)
        metavar = "{" + ",".join(choices) + "}" if choices else name.upper()
        parser.add_argument(flag, default=None, metavar=metavar, help=info.description + default)


def _convert(name: str, text, label: str):
    """A flag's text → the field's scalar type (the range checks are RunOptions')."""
    kind = _kind(name)
    if not isinstance(text, str) or kind in (str, bool):
        return text
    ok = re.fullmatch(r"[+-]?\d+", text.strip()) if kind is int else _is_float(text)
    if not ok:
        what = "an integer" if kind is int else "a number"
        example = _info(name).json_schema_extra["example"]
        raise ConfigError(config_message(label, text, f"must be {what}", f"e.g. {label} {_show(example)}"))
    return int(text) if kind is int else float(text)


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def config_out_path(out: str, config_path) -> str:
    """``out`` as a config file gives it: resolved against the file's own folder and confined to it.
    A shared or downloaded config decides what a run computes, not where it writes: a path that
    leaves the config's folder (absolute, ``..``, a link out) belongs on the command line.

    Raises
    ------
    ConfigError
        The path leaves the config file's folder.
    """
    return config_file_path("out", out, config_path)


CONFIG_PATHS = ("out", *PATH_SETTINGS, "mapping", "machine")
"""Options a config file may give as a path: each resolved against the file's own folder and confined
to it (:func:`config_file_path`); ``mapping`` and ``machine`` when they name a file, not a strategy or
a preset."""


def config_file_path(key: str, value: str, config_path) -> str:
    """``value`` of option ``key`` as a config file gives it: a path resolved against the file's own
    folder (not the working directory) and confined to it. A shared or downloaded config decides what a
    run computes, not which of your files it reads or where it writes: a path that leaves the config's
    folder (absolute, ``~``, ``..``, a link out) belongs on the command line (``--data-root``, ...).

    Raises
    ------
    ConfigError
        The path leaves the config file's folder.
    """
    home = Path(config_path).expanduser().resolve().parent
    given = Path(value).expanduser()
    target = (home / given).resolve()
    if given.is_absolute() or not (target == home or home in target.parents):
        does = "writes only beside itself" if key == "out" else "reads only the files beside it"
        raise ConfigError(
            config_message(
                f"{key} (in {config_path})",
                value,
                f"leaves the config file's folder {str(home)!r}: a config file {does}",
                f"give a path inside that folder, or put --{key.replace('_', '-')} on the command line",
            )
        )
    return str(target)


def _names_file(key: str, value: str, home: Path) -> bool:
    """True when option ``key``'s ``value`` names a file rather than a preset machine or a strategy."""
    if key not in ("mapping", "machine"):
        return True
    from tilesim.machine.description import preset_names  # loaded only for a config file (start-up time)
    from tilesim.mapping.core import STRATEGIES

    if value in ((*STRATEGIES, "auto") if key == "mapping" else preset_names()):
        return False
    suffix = ".json" if key == "mapping" else ".toml"
    return value.endswith(suffix) or "/" in value or (home / value).exists()


def config_paths(options: RunOptions, config_path) -> RunOptions:
    """``options`` read from config file ``config_path`` with every path among them
    (:data:`CONFIG_PATHS`) resolved against the file's folder and confined to it (:func:`config_file_path`)."""
    home = Path(config_path).expanduser().resolve().parent
    changes = {}
    for key in CONFIG_PATHS:
        value = getattr(options, key)
        if isinstance(value, str) and _names_file(key, value, home):
            changes[key] = config_file_path(key, value, config_path)
    return dataclasses.replace(options, **changes) if changes else options


def check_sweep_paths(spec, sweep_path) -> None:
    """Refuse a sweep file whose fixed, grid or choice values give a path (:data:`CONFIG_PATHS`) that
    leaves the sweep file's folder (absolute, ``~``, ``..``, a link out), as a run config's are
    (:func:`config_file_path`). The values themselves are kept as written, so the points' ids do not
    change (a relative path is still read from the working directory, as sweeps always have)."""
    home = Path(sweep_path).expanduser().resolve().parent
    values = [(k, v) for k, v in spec.base.items()]
    values += [(k, v) for k, vals in spec.grid for v in vals]
    values += [(k, v) for k, r in spec.random if isinstance(r, tuple) for v in r]
    for key, value in values:
        if key in CONFIG_PATHS and isinstance(value, str) and _names_file(key, value, home):
            config_file_path(key, value, sweep_path)


def options_from_args(
    args: argparse.Namespace,
    names=None,
    given: dict | None = None,
    config_key: str = "config",
    confine: bool = True,
) -> RunOptions:
    """RunOptions from parsed flags: the defaults, then the TOML file ``args.<config_key>`` (if
    any; its paths confined to its folder unless ``confine`` is False: :func:`config_paths`), then
    ``given`` (values the command derives itself, e.g. layers from a weights file), then the flags
    given on the command line (they win). ``names`` restricts the flags read."""
    path = getattr(args, config_key, None)
    base = options_from_mapping(read_toml(path, "run config file"), str(path)) if path else None
    if base is not None and confine:
        base = config_paths(base, path)
    values = {**(options_dict(base, json_safe=False) if base is not None else {}), **(given or {})}
    labels = {}
    for name in names or option_names():
        text = getattr(args, name, None)
        if text is not None:
            labels[name] = "--" + name.replace("_", "-")
            values[name] = _convert(name, text, labels[name])
    return _build(values, labels, style="flag")
