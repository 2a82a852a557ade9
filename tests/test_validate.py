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


def test_snn_held_out_rows_are_checked_never_fitted(tmp_path):
    """The shipped held-out SNN file's rows are `use = check`: `validate` reports them as held out,
    `calibrate` never fits them, and a bad `use` is refused naming the row."""
    import dataclasses

    from tilesim.models.snn.calibration.calibrate import read_cases, shipped_cases_path, shipped_held_out_path

    held = read_cases(shipped_held_out_path())
    fitted = read_cases(shipped_cases_path())
    assert len(held) == 24 and {c.use for c in held} == {"check"}
    assert {c.use for c in fitted} == {"calibrate"}
    assert not {c.case for c in held} & {c.case for c in fitted}
    # the use column never changes how a case is timed
    assert dataclasses.replace(fitted[0], use="check").key() == fitted[0].key()
    text = shipped_held_out_path().read_text().replace(",check\n", ",maybe\n", 1)
    bad = tmp_path / "bad.csv"
    bad.write_text(text)
    with pytest.raises(ConfigError, match="row 2 column use"):
        read_cases(bad)


def test_calibrate_refuses_a_file_of_held_out_rows(tmp_path):
    """Fitting only held-out rows is refused (they are for checking), not silently fitted."""
    import argparse

    from tilesim.models.snn.calibration.calibrate import cmd_calibrate, shipped_held_out_path

    args = argparse.Namespace(cases=shipped_held_out_path(), out=tmp_path / "o.toml", no_loo=True, json=False)
    with pytest.raises(ConfigError, match="no row with use = calibrate"):
        cmd_calibrate(args)


def test_sparse_validate_prints_each_groups_error(tmp_path, capsys):
    # issue 40: the error per group (method x precision x best/per batch) as validate prints it, one definition
    import argparse
    import csv
    import json

    from tilesim.models.cases import group_errors
    from tilesim.models.linear.measured import shipped_sparse_cases
    from tilesim.models.validate import cmd_validate

    with open(shipped_sparse_cases()[0]) as fh:
        rows = [r for r in csv.DictReader(fh) if r["case"] in ("dense_fp16_1024_n4", "dense_fp16_1024_n16")]
    small = tmp_path / "two.csv"
    with open(small, "w", newline="") as fh:
        w = csv.DictWriter(fh, list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    cmd_validate(argparse.Namespace(cases=[str(small)], json=True, costs=None, machine="gc2x16"))
    got = json.loads(capsys.readouterr().out)
    assert {r["group"] for r in got} == {"dense fp16 per-batch"}
    (g,) = group_errors(got)
    errs = [r["error_pct"] for r in got]
    assert g.rows == 2 and g.bias_pct == pytest.approx(sum(errs) / 2)
    assert g.mean_abs_pct == pytest.approx(sum(map(abs, errs)) / 2) and g.max_abs_pct == max(map(abs, errs))
    cmd_validate(argparse.Namespace(cases=[str(small)], json=False, costs=None, machine="gc2x16"))
    assert "    " + g.line() in capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("kind", ["sparse-matmul", "snntorch"])
def test_calibrate_refuses_workloads_it_does_not_fit(tmp_path, kind):
    """A sparse-matmul or snntorch file is refused by name, not fitted as if it were stencil rows."""
    import argparse

    from tilesim.models.validate import cmd_calibrate

    f = tmp_path / "c.csv"
    f.write_text(f"workload,case\n{kind},a\n")
    args = argparse.Namespace(cases=[str(f)], out=str(tmp_path / "o.toml"), machine=None, json=False)
    with pytest.raises(ConfigError, match=f"are {kind} cases"):
        cmd_calibrate(args)
