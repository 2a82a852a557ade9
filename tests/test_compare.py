"""`tilesim compare RUN_A RUN_B` (issue 29): two stored runs side by side, for SNN and stencil runs."""

import json
import subprocess
import sys

import pytest

from models.snn.cli import write_run_outputs
from models.snn.options import RunOptions
from models.snn.run import run_training
from tilesim.cli import main
from tilesim.compare import compare_runs, format_comparison


@pytest.fixture(scope="module")
def two_mappings(tmp_path_factory):
    """The same small network placed two ways: 2 and 4 neurons per tile."""
    root = tmp_path_factory.mktemp("cmp")
    base = dict(layers="120-64-64-4", caps="16-8-8", batch=4, timesteps=10, steps=1)
    runs = []
    for name, npt in (("a", 2), ("b", 4)):
        summary = run_training(RunOptions(neurons_per_tile=npt, **base))
        write_run_outputs(root / name, summary)
        runs.append((root / name, json.loads((root / name / "summary.json").read_text())))
    return runs


def test_rows_are_the_runs_own_numbers(two_mappings):
    (da, sa), (db, sb) = two_mappings
    c = compare_runs(da, db)
    step = c.section("step")[0]
    assert step.a == sa["predicted_step_s"] and step.b == sb["predicted_step_s"]
    phases = c.section("phase")
    # the phases add up to the step, in A, in B and in their difference
    assert sum(r.a for r in phases) == pytest.approx(sa["total_s"], rel=1e-9)
    assert sum(r.delta for r in phases) == pytest.approx(sb["total_s"] - sa["total_s"], rel=1e-6, abs=1e-12)
    onchip = {r.item: r for r in c.section("bytes")}["onchip"]
    assert (onchip.a, onchip.b) == (sa["bytes"]["onchip"], sb["bytes"]["onchip"])
    mem = {r.item: r for r in c.section("memory")}
    assert mem["fullest tile"].a == sa["memory"]["max_tile_bytes"]
    # the workload's own section: what differs between the two placements
    work = {r.item: r for r in c.section("workload")}
    assert "mapping.neurons_per_tile" in work or "network.neurons_per_tile" in work
    assert "mapping.strategy" not in work  # the same strategy is not a difference


def test_verdict_names_the_faster_run_and_why(two_mappings):
    (da, sa), (db, sb) = two_mappings
    c = compare_runs(da, db)
    faster = "B" if sb["predicted_step_s"] < sa["predicted_step_s"] else "A"
    assert c.verdict.startswith(f"{faster} is ") and "most of the difference is in" in c.verdict
    md = format_comparison(c)
    assert c.verdict in md and "| time per step |" in md
    swapped = compare_runs(db, da)
    assert swapped.section("step")[0].ratio == pytest.approx(1 / c.section("step")[0].ratio)


def test_cli_writes_table_json_and_picture(two_mappings, tmp_path, capsys):
    (da, _), (db, _) = two_mappings
    assert main(["compare", str(da), str(db), "--out", str(tmp_path / "cmp")]) == 0
    printed = capsys.readouterr().out
    assert "## Time by phase" in printed and "compare.png" in printed
    for name in ("compare.md", "compare.json", "compare.png"):
        assert (tmp_path / "cmp" / name).stat().st_size > 200, name
    assert main(["compare", str(da), str(db), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {"a", "b", "verdict", "rows"} <= set(data) and data["rows"][0]["item"] == "time per step"


@pytest.mark.parametrize("which", ["same", "missing", "not-a-run"])
def test_bad_folders_get_one_line(two_mappings, tmp_path, which):
    (da, _), _ = two_mappings
    (tmp_path / "empty").mkdir()
    other = {"same": da, "missing": tmp_path / "nope", "not-a-run": tmp_path / "empty"}[which]
    out = subprocess.run(
        [sys.executable, "-m", "tilesim", "compare", str(da), str(other)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 2 and out.stderr.startswith("tilesim: error: ") and out.stderr.count("\n") == 1
    assert "Traceback" not in out.stderr


def test_stencil_runs_compare_through_the_same_command(tmp_path, capsys):
    for name, ipus in (("one", "1"), ("four", "4")):
        assert main(["stencil", "--image-size", "600x300", "--ipus", ipus, "--out", str(tmp_path / name)]) == 0
    capsys.readouterr()
    c = compare_runs(tmp_path / "one", tmp_path / "four")
    assert {r.item for r in c.section("phase")} >= {"compute", "links"}
    assert len(c.section("chip")) == 4  # B's four chips (A has one)
    assert {r.item for r in c.section("workload")} >= {"machine"}


def test_map_search_out_folder_writes_baseline_best_and_comparison(tmp_path, capsys):
    out = tmp_path / "search"
    argv = ["map-search", "--layers", "120-64-64-4", "--caps", "16-8-8", "--batch", "4", "--timesteps", "10"]
    assert main([*argv, "--max-evals", "30", "--quiet", "--out", str(out)]) == 0
    assert "as full runs:" in capsys.readouterr().out
    for name in ("best-mapping.json", "compare.md", "compare.json", "compare.png", "baseline/summary.json"):
        assert (out / name).is_file(), name
    best = json.loads((out / "best" / "summary.json").read_text())
    used, found = ((out / p).read_text() for p in ("best/mapping.json", "best-mapping.json"))
    assert json.loads(used) == json.loads(found)
    cmp = json.loads((out / "compare.json").read_text())
    assert cmp["rows"][0]["b"] == best["predicted_step_s"]
    # a .json --out is still the best mapping alone
    assert main([*argv, "--max-evals", "10", "--quiet", "--out", str(tmp_path / "m.json")]) == 0
    assert json.loads((tmp_path / "m.json").read_text())["format"]
