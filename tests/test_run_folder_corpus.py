"""Issue 41 (part 3): a hand-edited run folder is read or refused in one line, never with a traceback.

A real small run's ``summary.json`` has each of its fields mutated in turn — a list, an object, text,
a number as text, true, null where the field was; zero, a negative, a fraction, NaN, infinity and
huge numbers; the key deleted — and its manifest sealed again (as a user who edits a folder can).
``tilesim compare BASE EDITED`` and ``tilesim report EDITED`` run in-process on each: exit 0, or exit
2 with one ``tilesim: error:`` line that names the file and the field (its key path). The same for the
file itself (not UTF-8, truncated, a folder, a device, nested past the parser) and for the numbers
of ``arrays.npz`` that a page divides by (clock, tiles per chip, SRAM budget)."""

import json
import math
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from tilesim.cli import main
from tilesim.errors import ConfigError
from tilesim.models.snn.commands.cli import write_run_outputs
from tilesim.models.snn.commands.options import RunOptions
from tilesim.models.snn.commands.run import run_training
from tilesim.outputs.report import MANIFEST, seal_run_folder

DELETE = object()
SWAPS = (("a list", []), ("an object", {}), ("text", "x"), ("a number as text", "12"), ("true", True), ("null", None))
NUMBERS = (
    ("zero", 0),
    ("negative", -1),
    ("a fraction", 0.5),
    ("NaN", math.nan),
    ("infinity", math.inf),
    ("huge", 1e308),
    ("a huge whole number", 10**40),
)
# mappings whose keys are the workload's (phases, categories, labels): their first entry stands for all
FREE = {"breakdown_s", "by_category_bytes", "total_by_category_bytes", "held_bytes", "exchange_bytes"}
FREE |= {"exchange_received_bytes", "settings", "structure", "data", "detail", "split"}


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A small two-chip run (memory liveness, sections, explain) with one finding and one note."""
    out = tmp_path_factory.mktemp("corpus") / "base"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("tilesim.outputs.report._draw", lambda *a, **k: [])
        summary = run_training(
            RunOptions(machine="wormhole-n300", layers="24-16-4", steps=1, batch=2, timesteps=6, max_activity=0.25)
        )
        write_run_outputs(out, summary)
    d = json.loads((out / "summary.json").read_text())
    d["findings"] = d["findings"] or [{"kind": "dead layer", "message": "layer 1 never fired", "fix": "raise it"}]
    d["notes"] = d["notes"] or ["a note"]
    (out / "summary.json").write_text(json.dumps(d))
    _seal(out)
    return out


def _seal(out: Path) -> None:
    seal_run_folder(out, json.loads((out / MANIFEST).read_text())["files"])


def _paths(node, path=()):
    """Every field of ``node`` by key path (a list's first item stands for all; a :data:`FREE`
    mapping's first entry for all of its entries)."""
    if path:
        yield path
    if isinstance(node, list) and node:
        yield from _paths(node[0], path + (0,))
    elif isinstance(node, dict):
        items = list(node.items())
        if path and path[-1] in FREE:
            items = items[:1]
        for k, v in items:
            yield from _paths(v, path + (k,))


def _mutations(value):
    """What each field becomes: every type swap and the deletion; numbers also every bad number."""
    out = [("deleted", DELETE), *SWAPS]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        out += NUMBERS
    return [(name, v) for name, v in out if not (type(v) is type(value) and v == value)]


def _apply(d, path, value):
    d = json.loads(json.dumps(d))
    parent = d
    for p in path[:-1]:
        parent = parent[p]
    if value is DELETE:
        if isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent.pop(path[-1])
    else:
        parent[path[-1]] = value
    return d


def _check(rc: int, err: str, case) -> bool:
    """Exit 0, or exit 2 with one error line: returns True when refused."""
    if rc == 2:
        assert err.startswith("tilesim: error:") and err.count("\n") == 1, (case, err)
        return True
    assert rc == 0, (case, err)
    return False


def _no_pictures(monkeypatch):
    from tilesim.outputs import plots

    for name in ("timeline", "breakdown_bars", "tile_heatmap", "exchange_matrices", "link_load", "draw_chart"):
        monkeypatch.setattr(plots, name, lambda *a, **k: None)
    monkeypatch.setattr(plots, "comparison_figure", lambda c, path: path)


def _related(a: tuple, b: tuple) -> bool:
    return a[: len(b)] == b or b[: len(a)] == a


def _groups(d: dict, accepted: list, size: int = 24) -> list[list]:
    """The accepted edits in groups of edits to unrelated fields that are accepted together (each
    group is one summary.json that the commands then read whole)."""
    from tilesim.outputs.runrecord import read_record

    groups: list[list] = []
    for case in accepted:
        for g in groups:
            if len(g) < size and not any(_related(case[0], c[0]) for c in g):
                try:
                    read_record(_apply_all(d, [*g, case]))
                except ConfigError:
                    continue
                g.append(case)
                break
        else:
            groups.append([case])
    return groups


def _apply_all(d: dict, cases) -> dict:
    for path, _, value in sorted(cases, key=lambda c: [str(p) for p in c[0]], reverse=True):
        d = _apply(d, path, value)  # list items from the last, so that a deletion moves no other edit
    return d


def _run_both(base: Path, out: Path, capsys, case) -> bool:
    """``compare BASE OUT`` and ``report OUT``: each exit 0, or exit 2 with one line naming the file;
    True when both refused."""
    refused = []
    for argv in (["compare", str(base), str(out)], ["report", str(out)]):
        rc = main(argv)
        refused.append(_check(rc, capsys.readouterr().err, (argv[0], case)))
    return all(refused)


def test_every_field_of_summary_json_mutated_is_read_or_refused_in_one_line(base, tmp_path, capsys, monkeypatch):
    """Each edit is read by the one check of a run record (what compare and report read a folder
    through): refused in one line naming the file and the field, or accepted. The accepted edits, in
    groups of unrelated fields, and a sample of the refused ones then go through ``compare`` and
    ``report`` themselves (their pages, tables and verdicts read every field)."""
    from tilesim.outputs.runrecord import read_record

    _no_pictures(monkeypatch)
    out = tmp_path / "edited"
    shutil.copytree(base, out)
    where = str(out / "summary.json")
    d = json.loads((base / "summary.json").read_text())
    cases = [(p, name, v) for p in _paths(d) if p != ("format",) for name, v in _mutations(_at(d, p))]
    assert len(cases) > 600
    accepted, refused, unnamed = [], [], []
    for case in cases:
        try:
            read_record(json.loads(json.dumps(_apply(d, case[0], case[2]))), where)
        except ConfigError as exc:
            msg = str(exc)
            if "\n" in msg or not msg.startswith(where) or _key(case[0]) not in msg or "; " not in msg:
                unnamed.append((case[:2], msg[len(where) :]))
            refused.append(case)
            continue
        accepted.append(case)
    assert not unnamed, unnamed[:10]  # the file, the field, the value, the problem; the fix
    assert len(refused) > len(cases) / 2 and accepted
    groups = _groups(d, accepted)
    assert len(groups) < 40
    for group in groups:
        (out / "summary.json").write_text(json.dumps(_apply_all(d, group)))
        _seal(out)
        assert not _run_both(base, out, capsys, group)  # accepted by the check: the commands run through
    for case in refused[::40]:
        (out / "summary.json").write_text(json.dumps(_apply(d, case[0], case[2])))
        _seal(out)
        assert _run_both(base, out, capsys, case)


def _at(d, path):
    for p in path:
        d = d[p]
    return d


def _key(path) -> str:
    """The key path as the error names it, up to the first list index: ``memory.max_tile``."""
    out = ""
    for p in path:
        if isinstance(p, int):
            return out
        out = f"{out}.{p}" if out else p
    return out


@pytest.mark.parametrize(
    "field, value, problem",
    [
        (("memory", "max_tile"), DELETE, "memory.max_tile = (missing): is required"),
        (("memory", "budget_bytes"), 0, "memory.budget_bytes = 0: must be >= 1"),
        (("tiles_per_chip",), -3, "tiles_per_chip = -3: must be >= 1"),
        (("chips",), "2", "chips = '2': must be a number, not text"),
        (("step_s",), math.nan, "step_s = nan: is not a finite number"),
        (("step_s",), 1e308, "step_s = 1e+308: is larger than any run holds"),
        (("bytes",), [1, 2], "bytes = [1, 2]: must be an object, not a list"),
        (("memory", "max_tile"), 10**9, "memory.max_tile = 1000000000: is not a tile of this run"),
        (("format",), 3, "format = 3: this tilesim reads formats 1..2"),
    ],
)
def test_the_error_names_the_file_the_field_the_value_and_the_fix(base, tmp_path, capsys, field, value, problem):
    out = tmp_path / "edited"
    shutil.copytree(base, out)
    d = json.loads((base / "summary.json").read_text())
    (out / "summary.json").write_text(json.dumps(_apply(d, field, value)))
    _seal(out)
    assert main(["report", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{out / 'summary.json'}" in err and problem in err, err
    assert "; " in err.split(problem, 1)[1]  # and a fix


def _bytes_cases(d: dict) -> dict:
    text = json.dumps(d)
    return {
        "not UTF-8": text.encode()[:40] + b"\xff\xfe" + text.encode()[40:],
        "truncated": text.encode()[: len(text) // 2],
        "empty": b"",
        "nested past the parser": b"[" * 100_000 + b"]" * 100_000,
        "not JSON": b"<html>",
        "a list": b"[1, 2]",
        "a number of 5000 digits": text.replace('"chips": 2', '"chips": ' + "9" * 5000).encode(),
    }


def test_a_summary_json_that_cannot_be_read_is_refused_in_one_line(base, tmp_path, capsys):
    d = json.loads((base / "summary.json").read_text())
    for case, data in _bytes_cases(d).items():
        out = tmp_path / case.replace(" ", "-")
        shutil.copytree(base, out)
        (out / "summary.json").write_bytes(data)
        _seal(out)
        for argv in (["compare", str(base), str(out)], ["report", str(out)]):
            assert main(argv) == 2, (case, argv)
            err = capsys.readouterr().err
            assert err.startswith("tilesim: error:") and err.count("\n") == 1 and "summary.json" in err, (case, err)


@pytest.mark.parametrize("kind", ["a folder", "a device"])
def test_a_summary_json_that_is_not_a_file_is_refused_without_reading_it(base, tmp_path, capsys, kind):
    out = tmp_path / "edited"
    shutil.copytree(base, out)
    (out / "summary.json").unlink()
    if kind == "a folder":
        (out / "summary.json").mkdir()
    else:
        os.symlink("/dev/zero", out / "summary.json")  # read whole, it would never end
    for argv in (["compare", str(base), str(out)], ["report", str(out)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "summary.json" in err and "not a regular file" in err, err


@pytest.mark.parametrize("key", ["clock_hz", "tiles_per_chip", "memory_budget"])
def test_the_numbers_of_arrays_npz_a_page_divides_by_are_checked(base, tmp_path, capsys, monkeypatch, key):
    _no_pictures(monkeypatch)
    out = tmp_path / "edited"
    shutil.copytree(base, out)
    with np.load(base / "arrays.npz") as z:
        a = {k: z[k] for k in z.files}
    for value in (0, -1, np.nan, 1e308, "x", [1.0, 2.0]):
        np.savez_compressed(out / "arrays.npz", **{**a, key: np.asarray(value)})
        _seal(out)
        for argv in (["compare", str(base), str(out)], ["report", str(out)]):
            rc = main(argv)
            err = capsys.readouterr().err
            assert rc == 2 and err.count("\n") == 1 and f"arrays.npz {key}" in err, (key, value, err)


@pytest.mark.parametrize(
    "summary, field",
    [
        ({"memory": [1, 2]}, "summary memory = '[1, 2]': must be an object"),
        ({"loss": "low"}, "summary loss = 'low': must be a list"),
        ({"breakdown_s": {"compute": [1]}}, "summary compute_s = '[1]': must be a finite number"),
        ({"predicted_step_s": math.nan}, "summary predicted_step_s = 'nan': must be a finite number"),
        ({"memory": {"max_tile": {"a": 1}}}, "summary max_tile = "),
    ],
)
def test_a_sweep_row_edited_by_hand_is_one_line_for_results(tmp_path, capsys, summary, field):
    """``tilesim results`` reads each point's stored summary: a part of the wrong kind or a value that is
    no finite number is named with the database and the point, not a traceback."""
    from tilesim.running.store import ResultStore

    db = tmp_path / "r.db"
    with ResultStore(db) as s:
        s.put("p1" * 8, status="ok", summary=summary, swept={"batch": 2}, config={"batch": 2}, version="1")
    for argv in (
        ["results", str(db)],
        ["results", str(db), "--json"],
        ["results", str(db), "--csv", str(tmp_path / "r.csv")],
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"results database {db}: point p1p1p1p1p1p1" in err and field in err, err
