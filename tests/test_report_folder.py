"""Issue 19: a run folder is written under a manifest (written last, SHA-256 of every file), so a
run killed half-way never passes for a run; `tilesim report` refuses broken folders in one line."""

import io
import json
import os
from pathlib import Path

import numpy as np
import pytest

from tilesim.cli import main

PROGRAM = '[[superstep]]\nlabel = "{label}"\ncompute_cycles = {cycles}\nexchange_bytes = 64\n'


def simulate(tmp_path, out, cycles=100, label="a"):
    p = tmp_path / f"p{cycles}.toml"
    p.write_text(PROGRAM.format(cycles=cycles, label=label))
    return main(["simulate", str(p), "--machine", "gc200", "--out", str(out)])


def report(out, capsys):
    rc = main(["report", str(out)])
    err = capsys.readouterr().err
    return rc, err


def test_complete_folder_reports(tmp_path, capsys):
    out = tmp_path / "run"
    assert simulate(tmp_path, out) == 0
    man = json.loads((out / "manifest.json").read_text())
    assert {"summary.json", "arrays.npz", "trace.json"} <= set(man["files"])
    (out / "notes.txt").write_text("the user's own file")
    rc, err = report(out, capsys)
    assert rc == 0 and err == ""
    assert (out / "notes.txt").read_text() == "the user's own file"


def test_run_killed_after_summary_leaves_no_mix(tmp_path, capsys, monkeypatch):
    """Old code: the new summary.json beside the old arrays.npz, and `report` drew the mix (exit 0).
    Issue 28: the new run is staged beside the folder, so the interrupted re-run leaves the old run
    whole, and `report` redraws it."""
    out = tmp_path / "run"
    assert simulate(tmp_path, out, cycles=100) == 0
    import tilesim.outputs.trace

    def killed(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(tilesim.outputs.trace, "write_trace", killed)
    assert simulate(tmp_path, out, cycles=999, label="b") == 130
    monkeypatch.undo()
    capsys.readouterr()
    stored = json.loads((out / "summary.json").read_text())
    assert {x["label"] for x in stored["by_label"]} == {"a"}  # the old run, whole
    rc, err = report(out, capsys)
    assert rc == 0, err
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".run")] == []  # no staging left behind


def test_summary_from_another_run_is_refused(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    assert simulate(tmp_path, a, cycles=100) == 0 and simulate(tmp_path, b, cycles=999) == 0
    (a / "summary.json").write_bytes((b / "summary.json").read_bytes())
    rc, err = report(a, capsys)
    assert rc == 2 and "summary.json that differs from the one its run wrote" in err


@pytest.mark.parametrize(
    "damage,needle",
    [
        ("truncate", "arrays.npz that differs"),
        ("summary []", "summary.json that differs"),
        ("summary {}", "summary.json that differs"),
        ("no manifest", "has no manifest.json"),
        ("manifest junk", "unreadable manifest.json"),
    ],
)
def test_damaged_folders_are_refused(tmp_path, capsys, damage, needle):
    out = tmp_path / "run"
    assert simulate(tmp_path, out) == 0
    if damage == "truncate":
        data = (out / "arrays.npz").read_bytes()
        (out / "arrays.npz").write_bytes(data[: len(data) // 2])
    elif damage.startswith("summary"):
        (out / "summary.json").write_text(damage.split()[1])
    elif damage == "no manifest":
        (out / "manifest.json").unlink()
    else:
        (out / "manifest.json").write_text("[1, 2")
    rc, err = report(out, capsys)
    assert rc == 2 and err.count("\n") == 1 and needle in err and "Traceback" not in err


@pytest.mark.parametrize(
    "damage,needle",
    [
        ("drop time_s", "arrays.npz without time_s"),
        ("drop timeline_end", "arrays.npz without timeline_end"),
        ("summary []", "summary.json = 'list': is not a JSON object"),
        ("summary {}", "summary.json machine = (missing): is required in a run record"),
        ("truncate", "cannot be read"),
    ],
)
def test_contents_are_checked_even_under_a_matching_manifest(tmp_path, capsys, damage, needle):
    """A folder re-sealed after damage (or written by hand) is still checked for what report reads."""
    from tilesim.outputs.report import seal_run_folder

    out = tmp_path / "run"
    assert simulate(tmp_path, out) == 0
    if damage.startswith("drop"):
        a = dict(np.load(out / "arrays.npz"))
        del a[damage.split()[1]]
        buf = io.BytesIO()
        np.savez(buf, **a)
        (out / "arrays.npz").write_bytes(buf.getvalue())
    elif damage == "truncate":
        data = (out / "arrays.npz").read_bytes()
        (out / "arrays.npz").write_bytes(data[: len(data) // 2])
    else:
        (out / "summary.json").write_text(damage.split()[1])
    seal_run_folder(out, json.loads((out / "manifest.json").read_text())["files"])
    rc, err = report(out, capsys)
    assert rc == 2 and err.count("\n") == 1 and needle in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_folder_is_refused(tmp_path, capsys):
    out = tmp_path / "run"
    assert simulate(tmp_path, out) == 0
    out.chmod(0o555)
    try:
        rc, err = report(out, capsys)
    finally:
        out.chmod(0o755)
    assert rc == 2 and "read-only" in err


def test_read_only_paths_are_refused_even_as_root(tmp_path, capsys, monkeypatch):
    """The same check with the permission answer forced (root may write anywhere): every command's
    output path goes through tilesim.io.check_output_path before any work."""
    import tilesim.io

    out = tmp_path / "run"
    assert simulate(tmp_path, out) == 0
    capsys.readouterr()
    monkeypatch.setattr(tilesim.io.os, "access", lambda *a, **k: False)
    rc, err = report(out, capsys)
    assert rc == 2 and "is a read-only folder" in err and err.count("\n") == 1
    p = tmp_path / "p.toml"
    p.write_text(PROGRAM.format(cycles=1, label="a"))
    assert main(["simulate", str(p), "--out", str(tmp_path / "new")]) == 2
    assert "is read-only; give a path under a folder you can write to" in capsys.readouterr().err


def test_a_run_folder_written_before_the_record_still_renders(tmp_path):
    """Issue 37: tests/fixtures/run_v1 was written by tilesim before the run record (flat summary
    keys, predicted_step_s and by_phase); `report` converts it and redraws everything."""
    import shutil

    from tilesim.outputs.report import load_run

    out = tmp_path / "old"
    shutil.copytree(Path(__file__).parent / "fixtures" / "run_v1", out)
    record, _ = load_run(out)
    assert record.format == 1 and record.workload == "snn" and record.rate.unit == "samples/s"
    assert record.step_s == json.loads((out / "summary.json").read_text())["predicted_step_s"]
    assert main(["report", str(out)]) == 0
    md = (out / "summary.md").read_text()
    assert f"{record.step_s * 1e3:.3f} ms" in md and "snn (stored before run records)" in md
    assert (out / "report.html").is_file()


def test_a_rerun_removes_what_the_old_run_wrote_and_keeps_the_users_files(tmp_path):
    """Issue 41 part 4: a re-run into a run folder kept pictures the new run did not write (links.png after a
    mesh run, then an IPU one), and the closing line listed them; the user's own files stay."""
    import json

    from tilesim.cli import main

    out = tmp_path / "run"
    tiny = ["run", "--layers", "40-30-4", "--batch", "4", "--timesteps", "8", "--max-activity", "0.2"]
    tiny += ["--input-cap", "8", "--activity", "fixed", "--quiet"]
    assert main([*tiny, "--machine", "mesh-demo", "--out", str(out)]) == 0
    assert (out / "links.png").is_file() and "links.png" in json.loads((out / "manifest.json").read_text())["written"]
    (out / "notes.txt").write_text("mine")
    assert main([*tiny, "--machine", "gc200", "--out", str(out)]) == 0
    assert not (out / "links.png").exists() and (out / "notes.txt").read_text() == "mine"
    assert (out / "memory.png").is_file()
