"""Measured snnTorch training calls on an IPU, held out: read a cases CSV, predict every row.

Columns::

    workload=snntorch, case, machine, layers (N0-...-C), batch, timesteps, input_dtype (fp16|fp32),
    input_shape (frame|sequence), measured_samples_per_s, use, source

``measured_samples_per_s`` is ``batch`` over the wall time of one ``poptorch_model(data, labels)`` call;
the prediction is ``batch`` over the call of :func:`tilesim.models.snntorch.call.snntorch_step`, the step
``tilesim run --implementation snntorch`` times for the same network and input.

The shipped rows (``models/snntorch/cases/snntorch_ipu_mnist.csv``) are every public measured log
found: the throughput CSVs that ``train_fcn.py`` of github.com/vinniesun/snntorch-ipu (the IPU build's
repository) wrote in May 2022 — 784-1000-10 MNIST, batch 128, 25 steps, ``poptorch.optim.Adam``, the
input sent as float16 (``data.half()``, ``HalfUpcastToFloat``), one ``time.time()`` pair around each
call, logged every 250 calls. Each file's first row (call 0: ~1 sample/s, the compile) is left out, as
is one empty file; the logs do not name the machine (a GC200 is assumed; the script's Graphcore header
and date fit an IPU-M2000). The snnTorch docs' IPU tutorial logs no time; nothing else with a time
was found (searched: the snnTorch docs and repository, Graphcore's examples and tutorials, the docs,
pages and code corpora). **Nothing is fitted to these rows** (``use = check``).
"""

from __future__ import annotations

from pathlib import Path

from tilesim.errors import ConfigError, config_message
from tilesim.machine.description import Machine
from tilesim.models.cases import Case, number, predict, read_rows, validate_rows
from tilesim.models.snntorch.call import SnnTorchCall
from tilesim.models.snntorch.step import snntorch_step
from tilesim.workload import time_workload

__all__ = ["COLUMNS", "SnnTorchCase", "read_snntorch_cases", "predict_samples_per_s", "validate_snntorch",
           "shipped_snntorch_cases"]  # fmt: skip

COLUMNS = (
    "workload",
    "case",
    "machine",
    "layers",
    "batch",
    "timesteps",
    "input_dtype",
    "input_shape",
    "measured_samples_per_s",
)

SnnTorchCase = SnnTorchCall
"""One row's training call (:class:`tilesim.models.snntorch.call.SnnTorchCall`)."""


def shipped_snntorch_cases() -> list[Path]:
    """The shipped measured snnTorch files (``models/snntorch/cases/*.csv``)."""
    return sorted((Path(__file__).parent / "cases").glob("*.csv"))


def _spec(r: dict, case: str) -> SnnTorchCase:
    text = (r.get("layers") or "").strip()
    try:
        layers = tuple(int(x) for x in text.split("-"))
    except ValueError:
        layers = ()
    if len(layers) < 2 or min(layers) < 1:
        raise ConfigError(config_message(f"{case}: layers", text, "must be sizes joined by '-'", "e.g. 784-1000-10"))
    dims = {c: int(number(r, c, case, integer=True)) for c in ("batch", "timesteps")}
    try:
        return SnnTorchCall(
            layers,
            dims["batch"],
            dims["timesteps"],
            input_dtype=(r.get("input_dtype") or "").strip(),
            input_shape=(r.get("input_shape") or "").strip(),
        )
    except ConfigError as exc:
        raise ConfigError(f"{case}: {exc}") from None


def read_snntorch_cases(path) -> list[Case]:
    """Every row of a snnTorch cases CSV (a missing column raises :class:`ConfigError`)."""
    return read_rows(path, COLUMNS, "measured_samples_per_s", _spec)


def predict_samples_per_s(spec: SnnTorchCall, machine: Machine) -> float:
    """Samples per second of one predicted training call of ``spec`` on ``machine``."""
    return spec.batch / time_workload(snntorch_step(spec, machine), machine, keep_timeline=False).step_s


def validate_snntorch(path) -> list[dict]:
    """The ``tilesim validate`` rows of a snnTorch cases file (quantity ``samples_per_s``; rows of the
    same call on the same machine are timed once)."""
    cases = read_snntorch_cases(path)
    seen: dict = {}

    def once(spec: SnnTorchCase, machine: Machine) -> float:
        key = (spec, machine.name)
        if key not in seen:
            seen[key] = predict_samples_per_s(spec, machine)
        return seen[key]

    return validate_rows("snntorch", "samples_per_s", cases, predict(cases, once))
