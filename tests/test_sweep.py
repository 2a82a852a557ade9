"""Sweeps: point expansion, the results store, the dask driver, crash safety, export."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tilesim.cli import main
from tilesim.errors import ConfigError
from tilesim.running.store import ResultStore, export_table, write_parquet
from tilesim.running.sweep import expand, point_id, run_sweep, sweep_from_dict

ROOT = Path(__file__).resolve().parents[1]
TINY = """
[base]
layers = "32-16-4"
timesteps = 8
steps = 1
max_activity = 0.25
input_cap = 8
"""
GRID12 = (
    TINY
    + """
[grid]
batch = [4, 6, 8]
machine = ["gc200", "mesh-demo"]
lr = [1e-3, 2e-3]
"""
)


def write(tmp_path, text, name="s.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def db_rows(db):
    with sqlite3.connect(db) as c:
        return c.execute("SELECT id, status, error, attempts FROM points").fetchall()


# ---- expansion and hashing (no cluster) -------------------------------------------------------
def test_grid_times_random_draws():
    spec = sweep_from_dict(
        {
            "base": {"steps": 1},
            "grid": {"batch": [4, 8], "machine": ["a", "b", "c"]},
            "random": {
                "samples": 2,
                "seed": 7,
                "lr": {"low": 1e-4, "high": 1e-2, "log": True},
                "timesteps": {"low": 8, "high": 10},
                "optimizer": ["adam", "sgd"],
            },
        }
    )
    pts = spec.points()
    assert len(pts) == 12
    assert {(p["batch"], p["machine"]) for p in pts} == {(b, m) for b in (4, 8) for m in "abc"}
    assert all(1e-4 <= p["lr"] < 1e-2 and p["timesteps"] in (8, 9, 10) for p in pts)
    assert len({p["lr"] for p in pts}) == 2  # the same two draws for every grid point
    assert spec.points() == pts  # seeded: reproducible
    full = expand(spec, defaults={"steps": 5, "seed": 0}, version="v")
    assert len({p.id for p in full}) == 12 and all(p.config["steps"] == 1 for p in full)
    assert full[0].id == point_id(full[0].config, "v") != point_id(full[0].config, "w")


@pytest.mark.parametrize(
    "data,match",
    [
        ({"base": {"batchsize": 4}}, r"\[base\] batchsize = 4: unknown key; allowed: .*batch"),
        ({"grid": {"batch": 4}}, r"\[grid\] batch = 4: must be a non-empty list"),
        ({"grid": {"batch": [4]}, "random": {"samples": 2, "batch": [1, 2]}}, "appear in both"),
        ({"random": {"samples": 2, "lr": {"low": 0, "high": 1, "log": True}}}, "must be > 0 with log = true"),
        ({"random": {"samples": 2, "lr": {"lo": 0, "high": 1}}}, "a range has the keys low, high"),
        ({"sweep": {}}, "table = 'sweep': is unknown"),
        ({"base": {"out": "x"}}, r"\[base\] out = 'x': is not a sweep option"),
    ],
)
def test_bad_sweep_tables_name_the_key(data, match):
    with pytest.raises(ConfigError, match=match):
        sweep_from_dict(data, allowed={"batch", "lr", "steps", "out"}, forbidden={"out": "no outputs"})


def test_store_keeps_ok_once_and_retries_failed(tmp_path):
    with ResultStore(tmp_path / "r.db") as db:
        kw = dict(swept={"a": 1}, config={"a": 1}, version="v")
        assert db.put("p1", status="failed", error="boom", **kw)
        assert db.put("p1", status="ok", summary={"x": 1.0}, **kw)  # the retry replaces the failure
        assert not db.put("p1", status="failed", error="late", **kw)  # an ok row is final
        (row,) = db.rows()
        assert (row["status"], row["attempts"], row["summary"]) == ("ok", 2, {"x": 1.0})
        assert db.ok_ids() == {"p1"}
    with sqlite3.connect(tmp_path / "r.db") as c:
        assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_results_reader_errors(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        ResultStore(tmp_path / "missing.db", create=False)
    bad = tmp_path / "bad.db"
    bad.write_text("not a database" * 100)
    with pytest.raises(ConfigError, match="is not an SQLite database"):
        ResultStore(bad, create=False)


def test_parquet_writes_a_table_pandas_reads_back(tmp_path):
    """Issue 20: `results --parquet` failed without pandas/pyarrow; both are dependencies now."""
    import pandas as pd

    cols, recs = ["id", "x"], [{"id": "a", "x": 1.0}, {"id": "b", "x": 2.5}]
    write_parquet(tmp_path / "r.parquet", cols, recs)
    df = pd.read_parquet(tmp_path / "r.parquet")
    assert list(df.columns) == cols and df["x"].tolist() == [1.0, 2.5]


def test_bad_toml_exits_2_with_message(tmp_path):
    broken = write(tmp_path, "[base]\nbatch = = 4\n")
    r = subprocess.run(
        [sys.executable, "-m", "tilesim", "sweep", str(broken), "--db", str(tmp_path / "r.db")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "sweep file = " in r.stderr and "is not valid TOML" in r.stderr
    unknown = write(tmp_path, TINY + "[grid]\nbatchsize = [4, 8]\n", "u.toml")
    assert main(["sweep", str(unknown), "--db", str(tmp_path / "r.db")]) == 2
    assert not (tmp_path / "r.db").exists()  # refused before anything ran


@pytest.mark.parametrize(
    "grid,needle",
    [
        ("batch = [0, 4]", "[grid] batch = 0: must be >= 1; write e.g. batch = 48"),
        ('batch = ["abc"]', "[grid] batch = 'abc': must be an integer; write e.g. batch = 48"),
        ("batch = [[4, 8]]", "[grid] batch = [4, 8]: must be an integer; write e.g. batch = 48"),
        ('layers = ["32-16-4", "32-x-4"]', "[grid] layers = '32-x-4': must be positive integers joined by '-'"),
        ("caps = [[8, 2], [8, 8, 2]]", "[grid] caps = '8-8-2': needs one cap per neuron layer (2 for layers 32-16-4)"),
        ("lr = [1e-3, -1.0]", "[grid] lr = -1.0: must be > 0"),
    ],
)
def test_bad_grid_value_is_refused_before_any_point_runs(tmp_path, capsys, grid, needle):
    sweep, db = write(tmp_path, TINY + "[grid]\n" + grid + "\n"), tmp_path / "r.db"
    assert main(["sweep", str(sweep), "--db", str(db), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{sweep}: {needle}" in err, err
    assert not db.exists()  # nothing ran, nothing stored


def test_bad_base_value_names_the_base_table(tmp_path, capsys):
    sweep = write(tmp_path, TINY.replace("steps = 1", "steps = true") + "[grid]\nbatch = [4]\n")
    assert main(["sweep", str(sweep), "--db", str(tmp_path / "r.db")]) == 2
    assert f"{sweep}: [base] steps = True: must be an integer" in capsys.readouterr().err


# ---- running on a local cluster ---------------------------------------------------------------
def test_twelve_point_sweep_on_two_workers_and_export(tmp_path, capsys):
    sweep, db = write(tmp_path, GRID12), tmp_path / "r.db"
    assert main(["sweep", str(sweep), "--db", str(db), "--workers", "2", "--json"]) == 0
    out = capsys.readouterr()
    rep = json.loads(out.out)  # stdout is pure JSON with --json
    assert (rep["points"], rep["ran"], rep["ok"], rep["failed"]) == (12, 12, 12, 0)
    rows = db_rows(db)
    assert len(rows) == 12 and {r[1] for r in rows} == {"ok"}
    assert len({r[0] for r in rows}) == 12
    # a rerun runs nothing
    assert main(["sweep", str(sweep), "--db", str(db), "--workers", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["skipped"] == 12
    # export: one row per point, swept fields by name and the summary fields
    csv_path = tmp_path / "r.csv"
    assert main(["results", str(db), "--csv", str(csv_path)]) == 0
    lines = csv_path.read_text().splitlines()
    header = lines[0].split(",")
    assert len(lines) == 13
    for col in (
        "batch",
        "machine",
        "lr",
        "predicted_step_s",
        "samples_per_s",
        "compute_s",
        "exchange_s",
        "max_tile_bytes",
        "loss_first",
        "loss_last",
        "status",
        "error",
    ):
        assert col in header, col
    capsys.readouterr()
    assert main(["results", str(db), "--json"]) == 0
    recs = json.loads(capsys.readouterr().out)
    assert sorted((r["batch"], r["machine"], r["lr"]) for r in recs) == sorted(
        (b, m, lr) for b in (4, 6, 8) for m in ("gc200", "mesh-demo") for lr in (1e-3, 2e-3)
    )
    assert all(r["predicted_step_s"] > 0 and r["max_tile_bytes"] > 0 for r in recs)


def test_failing_point_is_stored_and_others_finish(tmp_path, capsys):
    sweep = write(tmp_path, TINY + '[grid]\nmachine = ["gc200", "gc9000", "mesh-demo"]\n')
    db = tmp_path / "r.db"
    assert main(["sweep", str(sweep), "--db", str(db), "--workers", "2", "--quiet"]) == 1
    captured = capsys.readouterr()
    assert "3 points" in captured.out and "2 ok, 1 failed" in captured.out
    assert "gc9000" in captured.err
    with ResultStore(db, create=False) as store:
        cols, recs = export_table(store.rows())
    by_machine = {r["machine"]: r for r in recs}
    assert by_machine["gc200"]["status"] == by_machine["mesh-demo"]["status"] == "ok"
    bad = by_machine["gc9000"]
    assert bad["status"] == "failed" and bad["error"].startswith("ConfigError: machine = 'gc9000'")


@pytest.mark.slow
def test_sigkill_of_the_driver_loses_nothing_and_stores_nothing_twice(tmp_path):
    # points slow enough (~0.2 s) that the kill lands mid-sweep
    sweep = write(
        tmp_path,
        TINY.replace("timesteps = 8", "timesteps = 100").replace("steps = 1", "steps = 4")
        + "[grid]\nseed = [0, 1, 2, 3, 4, 5]\nlr = [1e-3, 2e-3]\n",
    )
    db = tmp_path / "r.db"
    cmd = [sys.executable, "-m", "tilesim", "sweep", str(sweep), "--db", str(db), "--workers", "2", "--quiet"]
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        stored, t0 = 0, time.monotonic()
        while stored < 2 and time.monotonic() - t0 < 120 and proc.poll() is None:
            time.sleep(0.02)
            if db.exists():
                try:
                    stored = len(db_rows(db))
                except sqlite3.Error:  # schema not there yet
                    pass
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the driver's worker processes, if any are left
        except ProcessLookupError:
            pass
    before = db_rows(db)
    assert 2 <= len(before) < 12, "the kill must land mid-sweep"
    r = subprocess.run(cmd[:-1] + ["--json"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["skipped"] == len(before) and rep["ran"] == 12 - len(before)
    after = db_rows(db)
    assert len(after) == 12 and len({row[0] for row in after}) == 12
    assert all(status == "ok" and attempts == 1 for _, status, _, attempts in after)


@pytest.mark.slow
def test_sigkill_of_a_worker_loses_no_point(tmp_path):
    from distributed import Client

    from tilesim.running.sweep import start_local_cluster

    spec = sweep_from_dict(
        {
            "base": {
                "layers": "32-16-4",
                "timesteps": 100,
                "steps": 4,
                "max_activity": 0.25,
                "input_cap": 8,
                "batch": 4,
            },
            "grid": {"seed": list(range(8))},
        }
    )
    points = expand(spec, fixed={"out": None, "json": False})
    with start_local_cluster(2) as cluster:
        with Client(cluster) as c:
            pids = list(c.run(os.getpid).values())
        import threading

        def killer():  # kill one worker after the first result
            t0 = time.monotonic()
            while time.monotonic() - t0 < 60:
                try:
                    if len(db_rows(tmp_path / "r.db")) >= 1:
                        break
                except sqlite3.Error:
                    pass
                time.sleep(0.02)
            os.kill(pids[0], signal.SIGKILL)

        th = threading.Thread(target=killer)
        th.start()
        rep = run_sweep(
            points,
            tmp_path / "r.db",
            "tilesim.models.snn.commands.sweep_cli:run_point",
            scheduler=cluster.scheduler_address,
            progress=False,
        )
        th.join()
    rows = db_rows(tmp_path / "r.db")
    assert rep.ok == 8 and len(rows) == 8 and all(r[1] == "ok" for r in rows)


def test_two_sweeps_on_one_database_share_the_points(tmp_path):
    """Issue 19: on the old code both sweeps computed all 12 points and both said "ran 12"."""
    sweep = write(
        tmp_path,
        TINY.replace("timesteps = 8", "timesteps = 60").replace("steps = 1", "steps = 3")
        + "[grid]\nseed = [0, 1, 2, 3, 4, 5]\nlr = [1e-3, 2e-3]\n",
    )
    db = tmp_path / "r.db"
    cmd = [sys.executable, "-m", "tilesim", "sweep", str(sweep), "--db", str(db), "--workers", "1", "--json"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [e for _, e in outs]
    reps = [json.loads(o) for o, _ in outs]
    assert sum(r["ran"] for r in reps) == 12
    assert all(r["ran"] + r["skipped"] + r["busy"] == 12 for r in reps)
    rows = db_rows(db)
    assert len(rows) == 12 and all(status == "ok" and attempts == 1 for _, status, _, attempts in rows)


def test_huge_grid_is_refused_at_once_and_workers_capped(tmp_path, capsys):
    """Issue 19: a 2.56M-point grid expanded for minutes; now its size is known without expanding."""
    grid = "[grid]\n" + "\n".join(f"{k} = {list(range(1, 41))}" for k in ("batch", "seed", "steps", "timesteps"))
    sweep = write(tmp_path, '[base]\nlayers = "32-16-4"\n' + grid + "\n")
    t0 = time.monotonic()
    assert main(["sweep", str(sweep), "--db", str(tmp_path / "r.db")]) == 2
    err = capsys.readouterr().err
    assert time.monotonic() - t0 < 5 and "2,560,000 points" in err and "--force" in err
    assert not (tmp_path / "r.db").exists()
    from tilesim.running.sweep import check_workers

    assert check_workers(1000) == len(os.sched_getaffinity(0))
    assert "capped at" in capsys.readouterr().err
