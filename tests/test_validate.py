"""`tilesim validate` dispatches on the cases file's workload column."""

import pytest

from tilesim.errors import ConfigError
from tilesim.models.validate import workload_of


def test_workload_column(tmp_path):
    from tilesim.models.snn.calibration.calibrate import shipped_cases_path
    from tilesim.models.stencil.measured import shipped_stencil_cases

    assert workload_of(shipped_cases_path()) == "snn"
    assert {workload_of(p) for p in shipped_stencil_cases()} == {"stencil"}
    legacy = tmp_path / "old.csv"
    legacy.write_text("case,measured_ms_per_step\na,1\n")
    assert workload_of(legacy) == "snn"
    bad = tmp_path / "bad.csv"
    bad.write_text("case,workload\na,lbm\n")
    with pytest.raises(ConfigError, match="column workload = 'lbm'"):
        workload_of(bad)


def test_calibrate_refuses_mixed_workloads(tmp_path):
    import subprocess
    import sys

    from tilesim.models.snn.calibration.calibrate import shipped_cases_path
    from tilesim.models.stencil.measured import shipped_stencil_cases

    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "tilesim",
            "calibrate",
            str(shipped_cases_path()),
            str(shipped_stencil_cases()[0]),
            "--out",
            str(tmp_path / "o.toml"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "mix workloads" in r.stderr and len(r.stderr.strip().splitlines()) == 1
