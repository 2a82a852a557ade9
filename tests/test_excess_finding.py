"""A run whose step is more than 25 % fitted host excess on a dataset outside the calibration rows says so in its
findings, with the documented bound as the fix (issue 50, part 4)."""

import re

import pytest

from tilesim.cli import main
from tilesim.models.snn.commands.extrapolation import (
    EXCESS_SHARE_LIMIT,
    HOST_EXCESS_KIND,
    calibration_datasets,
    host_excess_finding,
)
from tilesim.models.snn.commands.options import RunOptions
from tilesim.models.snn.commands.run import run_training
from tilesim.models.snn.step.table import HOST_EXCESS_LABEL

# Small fixed-activity steps on one Bow IPU, each under a second: the dataset fixes the input width.
SHAPES = {"dvsgesture": (4608, 64, 11), "nmnist": (2312, 64, 10)}


def _run(dataset: str, **kw):
    opts = RunOptions(
        dataset=dataset, layers=SHAPES[dataset], timesteps=10, batch=4, activity="fixed", machine="bow", **kw
    )
    return run_training(opts).to_dict()


def _share(summary: dict) -> float:
    return summary["by_phase"][HOST_EXCESS_LABEL]["time_s"] / summary["predicted_step_s"]


def test_the_calibration_rows_are_nmnist_shaped():
    assert calibration_datasets() == frozenset({"nmnist"})


@pytest.mark.parametrize("dataset", sorted(SHAPES))
def test_the_finding_fires_outside_the_calibration_datasets_only(dataset):
    """Both steps are mostly fitted excess (DVSGesture 57 %, N-MNIST 46 %); only the DVSGesture-shaped one is
    outside the rows the rate was fitted on."""
    s = _run(dataset)
    assert _share(s) > EXCESS_SHARE_LIMIT
    found = [f for f in s["findings"] if f["kind"] == HOST_EXCESS_KIND]
    if dataset in calibration_datasets():
        assert found == []
        return
    (f,) = found
    assert f"{100 * _share(s):.0f} % of the predicted step" in f["message"] and dataset in f["message"]
    assert f["fix"].startswith("--host-rate documented gives the documented bound")
    # the bound the fix names is the step --host-rate documented predicts, and that run has no excess row
    bound_ms = float(re.search(r"documented bound \(([\d.]+) ms", f["fix"]).group(1))
    doc = _run(dataset, host_rate="documented")
    assert doc["predicted_step_s"] * 1e3 == pytest.approx(bound_ms, abs=1e-3)
    assert HOST_EXCESS_LABEL not in doc["by_phase"] and doc["findings"] == []


def test_the_limit_is_strict_and_needs_the_row():
    row = {HOST_EXCESS_LABEL: {"time_s": 0.25}}
    assert host_excess_finding(row, 1.0, "dvsgesture") is None
    assert host_excess_finding({HOST_EXCESS_LABEL: {"time_s": 0.26}}, 1.0, "dvsgesture").kind == HOST_EXCESS_KIND
    assert host_excess_finding({HOST_EXCESS_LABEL: {"time_s": 0.9}}, 1.0, "nmnist") is None
    assert host_excess_finding({}, 1.0, "dvsgesture") is None


def test_tilesim_run_prints_it(tmp_path, capsys):
    args = ["run", "--dataset", "dvsgesture", "--layers", "4608-64-11", "--timesteps", "10", "--batch", "4"]
    args += ["--activity", "fixed", "--machine", "bow", "--out", str(tmp_path / "r"), "--quiet"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "prediction: 57 % of the predicted step" in out and "fix: --host-rate documented" in out
