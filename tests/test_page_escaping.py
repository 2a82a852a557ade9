"""Issue 41 (part 5): a page escapes every field of a run folder. A run folder is data: a summary.json
edited (and its manifest sealed again) so that a field holds ``<script>`` or ``"><img onerror=…>``
must reach report.html and compare.html as text — in the HTML and in the figures' text, which
plotly draws as markup — or be refused in one line (a field of the wrong type), never with a
traceback. Each field of the record (``RunRecord.to_dict``) is injected on its own: string and number
values, the keys of its mappings, whole sub-records; and the superstep labels of arrays.npz.

The browser side (the page of a run with every field injected at once runs none of it) is in
tests/test_report_page.py."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tilesim.cli import main
from tilesim.models.snn.commands.cli import write_run_outputs
from tilesim.models.snn.commands.options import RunOptions
from tilesim.models.snn.commands.run import run_training
from tilesim.outputs.report import MANIFEST, seal_run_folder

MARK = "window.pwned"
PAYLOAD = f'<script>{MARK}=1</script>"><img src=x onerror={MARK}=2>'
# mappings whose keys and values are the workload's or the user's (no schema): injected as a whole
FREE = {
    ("settings",),
    ("structure",),
    ("sections", "data"),
    ("explain", "detail"),
    ("explain", "exchange_bytes"),
    ("explain", "exchange_received_bytes"),
    ("breakdown_s",),
    ("by_label", "breakdown_s"),
    ("memory", "by_category_bytes"),
    ("memory", "total_by_category_bytes"),
}


# a workload chart's choices (tilesim/outputs/chart.py): a file name and styles from a fixed list, refused in one
# line when they are not one of them
CHART_CHOICES = ("file", "style", "right_scale")

# the fields report.html shows (the rest are for summary.md, compare and scripts)
SHOWN = {
    ("program",),
    ("machine",),
    ("breakdown_s", "<all keys>"),
    ("by_label", 0, "label"),
    ("throughput", "unit"),
    ("memory", "total_by_category_bytes", "<all keys>"),
    ("explain", "sentence"),
    ("findings", 0, "message"),
    ("findings", 0, "fix"),
    ("notes", 0),
    ("settings", "<all values>"),
    ("settings", "<all keys>"),
    ("provenance", "tilesim_version"),
    ("provenance", "cost_model"),
    ("provenance", "data"),
    ("sections", 0, "title"),
    ("sections", 0, "lines", 0),
}


def assert_escaped(page: str) -> None:
    """No injected markup in ``page``: none in its HTML, and none in its figures' JSON (where plotly's
    JSON writes a raw ``<`` as ``\\u003c``: a string that reached a figure unescaped, which plotly
    would draw as markup). The run's summary for scripts (``#run-summary``) holds its values as
    JSON, every ``<`` written ``\\u003c``: data, not markup."""
    head, sep, rest = page.partition("<script type='application/json' id='run-summary'>")
    meta, _, tail = rest.partition("</script>")
    assert "<" not in meta
    page = head + sep + tail
    for raw in (f"<script>{MARK}", "<img", f"\\u003cscript\\u003e{MARK}", "\\u003cimg"):
        assert raw not in page, raw


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A small two-chip run with every list of its record holding an item (findings and notes added)."""
    out = tmp_path_factory.mktemp("esc") / "run"
    summary = run_training(
        RunOptions(machine="wormhole-n300", layers="40-30-4", steps=1, batch=4, timesteps=8, max_activity=0.2)
    )
    write_run_outputs(out, summary)
    d = json.loads((out / "summary.json").read_text())
    d["findings"] = d["findings"] or [{"kind": "dead layer", "message": "layer 1 never fired", "fix": "raise it"}]
    d["notes"] = d["notes"] or ["a note"]
    d["busiest_link_groups"] = d["busiest_link_groups"] or [{"group": "chip 0 -> chip 1", "bytes": 64}]
    (out / "summary.json").write_text(json.dumps(d))
    _seal(out)
    return out


def _seal(out: Path) -> None:
    seal_run_folder(out, json.loads((out / MANIFEST).read_text())["files"])


def _path_key(path) -> tuple:
    return tuple(p for p in path if isinstance(p, str))


def _mutations(node, path=()):
    """(path, mutate) for each injection into ``node``: every scalar on its own (the first item of a
    list stands for all), every sub-record replaced as a whole; a mapping of :data:`FREE` as a whole
    (all its values, all its keys). A record's own keys are the reader's schema, not injected."""
    if path and not isinstance(node, (dict, list)):
        yield path, lambda parent, k: parent.__setitem__(k, PAYLOAD)
        return
    if path:
        yield path, lambda parent, k: parent.__setitem__(k, PAYLOAD)  # a sub-record replaced by a string
    if isinstance(node, list):
        if node:
            yield from _mutations(node[0], path + (0,))
        return
    if _path_key(path) in FREE:
        yield path + ("<all values>",), lambda parent, k: parent.__setitem__(k, _deep(parent[k]))
        yield (
            path + ("<all keys>",),
            lambda parent, k: parent.__setitem__(k, {f"{PAYLOAD}{i}": v for i, v in enumerate(parent[k].values())}),
        )
        return
    for key, value in node.items():
        yield from _mutations(value, path + (key,))


def _deep(node):
    if isinstance(node, dict):
        return {k: _deep(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_deep(v) for v in node]
    return PAYLOAD


def _apply(d: dict, path, mutate) -> dict:
    """A copy of ``d`` with ``mutate(parent, key)`` applied where ``path`` points (its last step
    named in angle brackets mutates the node itself)."""
    d = json.loads(json.dumps(d))
    root = {"root": d}
    parent, key = root, "root"
    steps = [p for p in path if not (isinstance(p, str) and p.startswith("<"))]
    for p in steps:
        parent, key = parent[key], p
    mutate(parent, key)
    return root["root"]


def _no_pictures(monkeypatch):
    """The pictures are left out (matplotlib per injection would take minutes; they hold no HTML)."""
    from tilesim.outputs import plots

    for name in ("timeline", "breakdown_bars", "tile_heatmap", "exchange_matrices", "link_load"):
        monkeypatch.setattr(plots, name, lambda *a, **k: None)


def test_every_field_of_a_run_folder_reaches_the_page_escaped_or_is_refused(run_dir, tmp_path, capsys, monkeypatch):
    _no_pictures(monkeypatch)
    out = tmp_path / "run"
    shutil.copytree(run_dir, out)
    base = json.loads((run_dir / "summary.json").read_text())
    muts = [(p, m) for p, m in _mutations(base) if p != ("format",)]
    assert len(muts) > 60
    shown, refused = [], []
    for path, mutate in muts:
        (out / "summary.json").write_text(json.dumps(_apply(base, path, mutate)))
        _seal(out)
        (out / "report.html").unlink(missing_ok=True)
        rc = main(["report", str(out)])
        err = capsys.readouterr().err
        if rc == 2:  # a field of the wrong type: refused in one line
            assert err.startswith("tilesim: error:") and err.count("\n") == 1, (path, err)
            refused.append(path)
            continue
        assert rc == 0, (path, err)
        page = (out / "report.html").read_text()
        assert_escaped(page)
        if "&lt;script&gt;" in page:
            shown.append(path)
    assert SHOWN <= set(shown), SHOWN - set(shown)  # what a page shows did show, escaped
    strings = [p for p in refused if isinstance(_at(base, p), str) and p[-1] not in CHART_CHOICES]
    assert not strings, strings  # a string where a string was written is never refused (but for a choice)


def _at(d, path):
    for p in path:
        if isinstance(p, str) and p.startswith("<"):
            return None
        d = d[p]
    return d


def test_labels_of_the_arrays_reach_the_page_escaped(run_dir, tmp_path, monkeypatch):
    """The superstep labels stored in arrays.npz are drawn in the timeline's hover text, and name the
    'colour tiles by' views."""
    _no_pictures(monkeypatch)
    out = tmp_path / "run"
    shutil.copytree(run_dir, out)
    with np.load(out / "arrays.npz") as z:
        a = {k: z[k] for k in z.files}
    a["labels"] = np.asarray([f"{PAYLOAD}{i}" for i in range(len(a["labels"]))])
    np.savez_compressed(out / "arrays.npz", **a)
    _seal(out)
    assert main(["report", str(out)]) == 0
    page = (out / "report.html").read_text()
    assert_escaped(page)
    assert "compute of &#x27;&lt;script&gt;" not in page and "compute of '&lt;script&gt;" in page


def test_the_compare_page_escapes_every_run_and_its_name(run_dir, tmp_path, monkeypatch, capsys):
    """Two runs, every string of their records injected at once, one in a folder named with the
    markup: compare.html shows them all as text."""
    _no_pictures(monkeypatch)
    base = json.loads((run_dir / "summary.json").read_text())
    runs = []
    for name in ("ref", PAYLOAD.replace("/", "|")):
        out = tmp_path / name
        shutil.copytree(run_dir, out)
        d = _strings(base)
        d["by_label"] = [{**x, "label": f"{PAYLOAD}{i}"} for i, x in enumerate(d["by_label"])]
        (out / "summary.json").write_text(json.dumps(d))
        _seal(out)
        runs.append(str(out))
    assert main(["compare", *runs, "--out", str(tmp_path / "cmp")]) == 0, capsys.readouterr().err
    page = (tmp_path / "cmp" / "compare.html").read_text()
    assert_escaped(page)
    assert page.count("&lt;script&gt;") > 5


def _strings(node):
    """``node`` with every string value (not a key, nor a chart's choice of file name and style) replaced
    by the payload."""
    if isinstance(node, dict):
        return {k: v if k in CHART_CHOICES else _strings(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_strings(v) for v in node]
    return PAYLOAD if isinstance(node, str) else node
