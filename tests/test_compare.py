"""`tilesim compare RUN RUN [RUN ...]` (issue 37, part 3): runs ranked by throughput, what differs, N runs."""

import json
import re
import shutil

import pytest

from tilesim.cli import main
from tilesim.errors import ConfigError
from tilesim.models.snn.commands.cli import write_run_outputs
from tilesim.models.snn.commands.options import options_from_mapping
from tilesim.models.snn.commands.run import run_training
from tilesim.outputs.compare import compare_runs, format_comparison, run_folders, write_comparison

TINY = {"layers": "64-32-4", "caps": "8-4", "batch": 8, "timesteps": 10, "steps": 1}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Run folders under one root: ``a`` (batch 8), ``b`` (batch 4), ``c`` (batch 8, lr 0.01), and
    ``prog`` (the example BSP program on 4 chips: no rate of its own, steps/s). The runs' own pictures
    are not drawn (compare reads summary.json and arrays.npz; drawing them would take most of the time)."""
    root = tmp_path_factory.mktemp("cmp")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("tilesim.outputs.report._draw", lambda *a, **k: [])
        for name, extra in (("a", {}), ("b", {"batch": 4}), ("c", {"lr": 0.01})):
            write_run_outputs(root / "snn" / name, run_training(options_from_mapping({**TINY, **extra})))
        assert main(["simulate", "tilesim/examples/demo.toml", "--machine", "m2000", "--out", str(root / "prog")]) == 0
    return root


def _record(folder):
    from tilesim.outputs.report import load_run

    return load_run(folder)[0]


def test_larger_batch_is_the_higher_throughput_though_its_step_is_longer(runs):
    a, b = runs / "snn" / "a", runs / "snn" / "b"
    ra, rb = _record(a), _record(b)
    assert rb.step_s < ra.step_s and rb.rate.value < ra.rate.value  # b: shorter step, fewer samples/s
    for c in (compare_runs(a, b), compare_runs(b, a)):  # whichever is the reference
        assert c.rank_by == "throughput" and c.best == "a"
        assert c.verdict.startswith("`a` has the higher throughput: ")
        assert "its step takes longer" in c.verdict and "carries 8 samples against 4" in c.verdict
    c = compare_runs(a, b)
    differs = {r.item: r.values for r in c.section("differs")}
    assert differs == {"batch": (8, 4)}  # nothing else differs: the same machine, data and costs
    assert c.row("rank", "throughput").values == (ra.rate.value, rb.rate.value)
    assert c.row("rank", "time per step").ratios[1] == pytest.approx(rb.step_s / ra.step_s)


def test_only_labels_that_moved_are_listed_and_the_rest_counted(runs):
    c = compare_runs(runs / "snn" / "a", runs / "snn" / "b")
    labels = c.section("label")
    moved, still, total = c.labels
    assert (
        labels and len(labels) == min(moved, 12) and moved + still == total == len(_record(runs / "snn" / "a").by_label)
    )
    assert all(r.moved() for r in labels)
    assert f"{still} did not move" in format_comparison(c)


def test_three_runs_in_one_table(runs):
    c = compare_runs(*(runs / "snn" / n for n in "abc"))
    assert c.names == ("a", "b", "c") and c.best in ("a", "c") and c.names[c.ranking[-1]] == "b"
    assert all(len(r.values) == 3 and r.ratios[0] in (1.0, None) for r in c.rows)
    differs = {r.item: r.values for r in c.section("differs")}
    assert differs["batch"] == (8, 4, 8) and differs["lr"] == (0.001, 0.001, 0.01)
    md = format_comparison(c)
    assert "| | `a` | `b` | `c` |" in md and "## What differs (2 items)" in md
    assert "| batch | 8 | 4 | same |" in md and "| lr | 0.001 | same | 0.01 |" in md
    # a folder of run folders stands for the runs in it, sorted
    assert run_folders([runs / "snn"]) == [runs / "snn" / n for n in "abc"]
    assert compare_runs(runs / "snn").names == ("a", "b", "c")


def test_json_keeps_full_precision_while_markdown_rounds(runs, tmp_path):
    a, b = runs / "snn" / "a", runs / "snn" / "b"
    c = compare_runs(a, b)
    written = write_comparison(c, tmp_path / "out")
    assert [p.name for p in written] == ["compare.md", "compare.json", "compare.png", "plotly.min.js", "compare.html"]
    assert all(p.stat().st_size > 500 for p in written)
    data = json.loads((tmp_path / "out" / "compare.json").read_text())
    rows = {(r["section"], r["item"]): r for r in data["rows"]}
    ra, rb = _record(a), _record(b)
    assert rows["rank", "time per step"]["values"] == [ra.step_s, rb.step_s]  # bit for bit
    assert rows["rank", "throughput"]["values"] == [ra.rate.value, rb.rate.value]
    assert data["ranking"] == ["a", "b"] and data["rank_by"] == "throughput" and data["reference"] == "a"
    md = (tmp_path / "out" / "compare.md").read_text()
    assert repr(ra.step_s) not in md and not re.search(r"\d\.\d{6,}", md), "a long float in compare.md"
    assert f"{ra.rate.value:,.0f} samples/s" in md and re.search(r"\(0\.\d\dx\)", md)
    assert re.search(r"\| time per step \| \d+(\.\d+)? µs \|", md)
    page = (tmp_path / "out" / "compare.html").read_text()
    assert "<code>a</code> has the higher throughput" in page


def test_runs_of_different_workloads_are_set_side_by_side_but_not_ranked(runs, capsys):
    """An SNN run and a program do different work per step (issue 41, part 6): the table shows both,
    the verdict names no faster run, --json says they are not comparable and ranks none."""
    c = compare_runs(runs / "snn" / "a", runs / "prog")
    assert not c.comparable and c.rank_by == "step time"  # the table's rates: steps/s for both
    assert c.verdict.startswith("The runs are of different workloads, so none is ranked above another")
    assert "`a` snn (" in c.verdict and "`prog` program (" in c.verdict
    assert not re.search(r"faster than|higher throughput|least time|\d+x\b", c.verdict)
    assert "(not ranked: different workloads)" in format_comparison(c)
    assert main(["compare", str(runs / "snn" / "a"), str(runs / "prog"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["comparable"] is False and data["rank_by"] == "none" and data["ranking"] == []
    same = compare_runs(runs / "snn" / "a", runs / "snn" / "b")
    assert same.comparable and same.to_dict()["comparable"] is True and same.to_dict()["ranking"] == ["a", "b"]
    assert {r.item for r in c.section("rank")} >= {"throughput (samples/s)", "throughput (steps/s)"}
    items = {r.item for r in c.section("differs")}
    assert {"workload", "program", "machine", "chips", "data", "cost model"} <= items
    assert len(c.section("chip")) == 4  # prog's four chips (a has one)
    from tilesim.outputs.page import _pair_steps

    fig = _pair_steps(c)  # compare.html marks no best across workloads either
    assert not any("(best)" in str(n) for n in fig.data[0].y) and "not ranked" in fig.layout.annotations[0].text


def test_cli_prints_writes_and_guards_its_out_folder(runs, tmp_path, capsys):
    a, b = str(runs / "snn" / "a"), str(runs / "snn" / "b")
    out = tmp_path / "cmp"
    assert main(["compare", a, b, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "**`a` has the higher throughput" in printed and "compare.png" in printed
    assert main(["compare", a, b, "--out", str(out)]) == 0  # its own earlier comparison is replaced
    capsys.readouterr()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "compare.md").write_text("my notes\n")
    assert main(["compare", a, b, "--out", str(mine)]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "--force" in err and err.count("\n") == 1
    assert (mine / "compare.md").read_text() == "my notes\n"
    assert main(["compare", a, b, "--out", str(mine), "--force", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["verdict"].startswith("`a` has the higher throughput") and len(data["runs"]) == 2
    assert (mine / "compare.md").read_text() != "my notes\n"


@pytest.mark.parametrize(
    "case, match",
    [
        ("one", r"RUN = .*compare needs 2 or more runs, these hold 1; give two or more run folders"),
        ("twice", r"RUN = '.*a': is given twice \(runs 1 and 3\); give each run folder once"),
        ("within", r"RUN = '.*a': is given twice \(within '.*snn', and again itself\); give each run folder once"),
        ("missing", r"RUN = '.*nope': does not exist; give a folder written by `tilesim run --out`"),
        ("empty", r"RUN = '.*empty': holds no run: no manifest.json in it or in any folder inside it; give"),
        ("broken", r"RUN = '.*broken': has a summary.json that differs from the one its run wrote .*; re-run"),
    ],
)
def test_bad_arguments_get_one_line_naming_the_argument_and_the_fix(runs, tmp_path, capsys, case, match):
    a, b = runs / "snn" / "a", runs / "snn" / "b"
    (tmp_path / "empty").mkdir()
    shutil.copytree(a, tmp_path / "broken")
    summary = tmp_path / "broken" / "summary.json"
    summary.write_text(summary.read_text().replace('"batch": 8', '"batch": 9'))
    args = {
        "one": [a],
        "twice": [a, b, a],
        "within": [runs / "snn", a],
        "missing": [a, tmp_path / "nope"],
        "empty": [a, tmp_path / "empty"],
        "broken": [a, tmp_path / "broken"],
    }[case]
    with pytest.raises(ConfigError, match=match):
        compare_runs(*args)
    assert main(["compare", *map(str, args)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tilesim: error: RUN = ") and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.slow
def test_map_search_out_folder_compares_baseline_and_best(tmp_path, capsys):
    out = tmp_path / "search"
    argv = ["map-search", "--layers", "120-64-64-4", "--caps", "16-8-8", "--batch", "4", "--timesteps", "10"]
    assert main([*argv, "--max-evals", "30", "--quiet", "--out", str(out)]) == 0
    assert "as full runs: `" in capsys.readouterr().out
    for name in ("best-mapping.json", "compare.md", "compare.json", "compare.png", "compare.html"):
        assert (out / name).is_file(), name
    best = json.loads((out / "best" / "summary.json").read_text())
    used, found = ((out / p).read_text() for p in ("best/mapping.json", "best-mapping.json"))
    assert json.loads(used) == json.loads(found)
    cmp = json.loads((out / "compare.json").read_text())
    assert [r["name"] for r in cmp["runs"]] == ["baseline", "best"] and cmp["runs"][1]["step_s"] == best["step_s"]
    # the search folder itself stands for its two runs
    assert compare_runs(out).names == ("baseline", "best")
    # a .json --out is still the best mapping alone
    assert main([*argv, "--max-evals", "10", "--quiet", "--out", str(tmp_path / "m.json")]) == 0
    assert json.loads((tmp_path / "m.json").read_text())["format"]
