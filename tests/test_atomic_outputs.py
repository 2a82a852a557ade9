"""Issue 28: a run never loses a good result and never writes where it was not asked to."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tilesim.errors import ConfigError
from tilesim.io import check_run_folder, recover_folder, staged_folder
from tilesim.outputs.report import verify_run_folder

RUN = [
    sys.executable, "-m", "tilesim", "run", "--layers", "40-30-4", "--batch", "4", "--timesteps", "20",
    "--max-activity", "0.2", "--input-cap", "8", "--steps", "3", "--quiet",
]  # fmt: skip


def _run(out: Path, *extra: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([*RUN, "--out", str(out), *extra], capture_output=True, text=True, check=check)


def _loss(out: Path) -> list:
    """The loss per step a run folder's record holds (its training section)."""
    sections = json.loads((out / "summary.json").read_text())["sections"]
    return next(s["data"]["loss"] for s in sections if s["title"] == "Training")


@pytest.mark.slow
def test_killing_a_rerun_at_any_moment_leaves_the_old_run_or_the_new_one(tmp_path):
    """SIGKILL (and SIGINT) of a re-run into a good run's folder, at several moments: the folder
    always verifies (its manifest matches every file) and holds one run whole, the old or the new."""
    good = tmp_path / "good"
    _run(good, "--seed", "1")
    old_loss = _loss(good)
    t0 = time.perf_counter()
    _run(tmp_path / "timing", "--seed", "2")
    whole = time.perf_counter() - t0
    outcomes = []
    for frac, sig in [(0.2, signal.SIGKILL), (0.5, signal.SIGKILL), (0.8, signal.SIGKILL), (0.95, signal.SIGKILL),
                      (0.6, signal.SIGINT)]:  # fmt: skip
        k = tmp_path / f"k{frac}{sig.name}"
        shutil.copytree(good, k)
        p = subprocess.Popen(
            [*RUN, "--out", str(k), "--seed", "2"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        time.sleep(frac * whole)
        p.send_signal(sig)
        p.wait(timeout=120)
        verify_run_folder(k)  # never neither, never a mix
        outcomes.append("old" if _loss(k) == old_loss else "new")
    assert "old" in outcomes, outcomes  # a kill during training leaves the previous run


def test_a_swap_cut_short_between_its_two_renames_is_undone(tmp_path, monkeypatch):
    """Where the one-step exchange is not available, a kill between the two renames leaves the old
    run retired beside its folder; the next write (or recover_folder) puts it back first."""
    import tilesim.io as io

    target = tmp_path / "run"
    target.mkdir()
    (target / "a.txt").write_text("old")
    monkeypatch.setattr(io, "_renameat2_exchange", lambda a, b: False)
    real_rename = os.rename
    calls = []

    def dying_rename(src, dst):
        calls.append((src, dst))
        real_rename(src, dst)
        if len(calls) == 1:  # the old folder has just been retired: die here
            raise KeyboardInterrupt

    monkeypatch.setattr(io.os, "rename", dying_rename)
    with pytest.raises(KeyboardInterrupt):
        with staged_folder(target) as stage:
            (stage / "a.txt").write_text("new")
    monkeypatch.setattr(io.os, "rename", real_rename)
    assert not target.exists()  # the moment the kill hit: the old run is retired beside it
    recover_folder(target)
    assert (target / "a.txt").read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


def test_an_error_while_writing_leaves_the_old_folder_untouched(tmp_path):
    target = tmp_path / "run"
    target.mkdir()
    (target / "summary.json").write_text("{}")
    with pytest.raises(RuntimeError):
        with staged_folder(target) as stage:
            (stage / "summary.json").write_text('{"new": 1}')
            raise RuntimeError("the run failed")
    assert (target / "summary.json").read_text() == "{}"
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


def test_the_users_own_files_in_a_run_folder_are_kept(tmp_path):
    target = tmp_path / "run"
    target.mkdir()
    (target / "summary.json").write_text("{}")
    (target / "my notes.txt").write_text("keep me")
    with staged_folder(target) as stage:
        (stage / "summary.json").write_text('{"new": 1}')
    assert (target / "my notes.txt").read_text() == "keep me"
    assert json.loads((target / "summary.json").read_text()) == {"new": 1}


def test_a_folder_that_is_not_a_run_needs_force(tmp_path):
    mine = tmp_path / "thesis"
    mine.mkdir()
    (mine / "summary.md").write_text("my chapter")
    with pytest.raises(ConfigError, match=r"--out = .*thesis.*not a tilesim run.*--force"):
        check_run_folder(mine, "--out")
    res = _run(mine, check=False)
    assert res.returncode == 2 and "not a tilesim run" in res.stderr and "Traceback" not in res.stderr
    assert (mine / "summary.md").read_text() == "my chapter"
    check_run_folder(mine, "--out", force=True)  # allowed with --force
    check_run_folder(tmp_path / "new", "--out")  # a new folder, an empty one, a run: fine
    (tmp_path / "empty").mkdir()
    check_run_folder(tmp_path / "empty", "--out")


def test_out_from_a_config_file_stays_beside_the_config(tmp_path, monkeypatch):
    from tilesim.models.snn.commands.options import config_out_path

    cfg = tmp_path / "shared" / "run.toml"
    cfg.parent.mkdir()
    assert config_out_path("results/a", cfg) == str((cfg.parent / "results" / "a").resolve())
    for bad in ("../../../../home/you/escape", "/tmp/elsewhere", "results/../../x"):
        with pytest.raises(ConfigError, match=r"out \(in .*run.toml\) = .*leaves the config file's folder.*--out"):
            config_out_path(bad, cfg)
    cfg.write_text('layers = "40-30-4"\nbatch = 4\ntimesteps = 8\ninput_cap = 8\nout = "../escape"\n')
    res = subprocess.run(
        [sys.executable, "-m", "tilesim", "run", str(cfg), "--steps", "1"], capture_output=True, text=True
    )
    assert res.returncode == 2 and "leaves the config file's folder" in res.stderr
    assert not (tmp_path / "escape").exists()
