"""report.html in a real browser (issue 29): Debian's headless chromium opens the page of a two-chip
run offline, with no console errors; the heat map and the timeline carry the run's numbers; hovering
a tile shows its bytes. On failure a screenshot is kept (``out/browser-test/``, a CI artefact).

Issue 39 (part 5): the page loads plotly.js from ``plotly.min.js`` beside it (written once per
folder), fetches nothing else, and stays under :data:`PAGE_BYTES`; a page whose plotly.min.js is
missing or of another version says so. Issue 41 (part 5): a run whose every field holds markup runs
none of it (tests/test_page_escaping.py checks each field of the HTML).

``make test`` installs chromium and chromium-driver (``make browser``); without them this test is
skipped on a workstation and fails under CI."""

import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from tilesim.models.snn.commands.cli import write_run_outputs
from tilesim.models.snn.commands.options import RunOptions
from tilesim.models.snn.commands.run import run_training

ARTEFACTS = Path(os.environ.get("TILESIM_ARTEFACTS", "out/browser-test"))
CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
PAGE_BYTES = 1_500_000
"""Most bytes of a run's report.html (issue 39: a demo-sized run's page, its plotly.js beside it)."""


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("page") / "run"
    summary = run_training(
        RunOptions(machine="gc200x2", layers="700-1466-1466-1466-20", steps=1, batch=8, timesteps=20)
    )
    write_run_outputs(out, summary)
    return out


@pytest.fixture(scope="module")
def browser():
    if not (CHROMIUM and DRIVER):
        if os.environ.get("CI"):
            pytest.fail("chromium and chromedriver are not installed: run `make browser` (Debian packages)")
        pytest.skip("chromium and chromedriver are not installed (`make browser`)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",  # the machine has no network: no update or sync calls
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1300,2400",
    ):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def _open(driver, path, plots: int):
    """Load ``path`` and wait (up to 60 s, for a loaded machine) until ``plots`` figures are drawn."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(path.resolve().as_uri())
    WebDriverWait(driver, 60).until(lambda d: _plots(d) >= plots)


@pytest.fixture
def page(browser, run_dir, request):
    _open(browser, run_dir / "report.html", 6)
    yield browser
    if getattr(getattr(request.node, "rep_call", None), "failed", False):  # tests/conftest.py sets rep_call
        ARTEFACTS.mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(ARTEFACTS / f"{request.node.name}.png"))


def _plots(driver) -> int:
    return driver.execute_script("return document.querySelectorAll('.js-plotly-plot').length")


def _scripts(html: str) -> list[str]:
    return re.findall(r"<script[^>]*\ssrc=['\"]?([^'\" >]+)", html)


def test_page_loads_offline_without_console_errors(page, run_dir):
    from plotly.offline import get_plotlyjs, get_plotlyjs_version

    html = (run_dir / "report.html").read_text()
    assert _scripts(html) == ["plotly.min.js"]  # the one script it loads, beside it
    assert (run_dir / "plotly.min.js").read_text() == get_plotlyjs()
    assert page.execute_script("return window.Plotly.version") == get_plotlyjs_version()
    loaded = page.execute_script("return [...document.scripts].filter(s => s.src).map(s => s.src)")
    assert loaded == [(run_dir / "plotly.min.js").resolve().as_uri()]  # from the folder, not the network
    assert not re.search(r"""(src|href)=['"]?(https?:)?//""", html)
    assert _plots(page) >= 6  # timeline, labels, tiles, chips, memory, exchange
    assert not page.find_elements("id", "plotly-missing")
    errors = [e for e in page.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors


def test_the_page_is_small(run_dir):
    """Issue 39: each page held its own 4.8 MB of plotly.js (6.2 MB for the demo); plotly.js is now
    written once beside it."""
    assert (run_dir / "report.html").stat().st_size <= PAGE_BYTES


@pytest.mark.parametrize("js", [None, "window.Plotly = {version: '0.0.1', newPlot: function () {}};"])
def test_a_page_without_its_plotly_js_says_so(browser, run_dir, tmp_path, js):
    """The page copied alone (or beside another plotly.js) draws no figure, or may draw them wrong:
    its top says which file is missing or of which version, and how to write it again."""
    from selenium.webdriver.support.ui import WebDriverWait

    shutil.copy(run_dir / "report.html", tmp_path / "report.html")
    if js is not None:
        (tmp_path / "plotly.min.js").write_text(js)
    browser.get((tmp_path / "report.html").resolve().as_uri())
    WebDriverWait(browser, 60).until(lambda d: d.find_elements("id", "plotly-missing"))
    note = browser.find_element("id", "plotly-missing").text
    assert ("was not found" if js is None else "is plotly.js 0.0.1, not the") in note
    assert "tilesim report DIR" in note and _plots(browser) == 0
    browser.get_log("browser")  # its errors ("Plotly is not defined") are this page's, not the next test's


def test_report_writes_plotly_js_again(run_dir, tmp_path):
    """`tilesim report DIR` leaves the page's plotly.min.js whole: a damaged or missing one is written
    again (it is the installed plotly's, not the run's: no manifest lists it, so a newer plotly
    rewrites it without the folder failing its check)."""
    from plotly.offline import get_plotlyjs

    from tilesim.cli import main

    out = tmp_path / "run"
    shutil.copytree(run_dir, out)
    assert "plotly.min.js" not in json.loads((out / "manifest.json").read_text())["files"]
    (out / "plotly.min.js").write_text("damaged")
    assert main(["report", str(out)]) == 0
    assert (out / "plotly.min.js").read_text() == get_plotlyjs()
    (out / "plotly.min.js").unlink()
    assert main(["report", str(out)]) == 0
    assert (out / "plotly.min.js").read_text() == get_plotlyjs()


def test_heat_map_and_timeline_carry_the_runs_numbers(page, run_dir):
    summary = json.loads((run_dir / "summary.json").read_text())
    with np.load(run_dir / "arrays.npz") as a:
        tpc, mem = int(a["tiles_per_chip"]), a["memory_bytes"]
    z = page.execute_script("return document.getElementById('tiles-chip0').data[0].z")
    shown = np.array([v for row in z for v in row if v is not None], float)
    assert shown.size == tpc and np.array_equal(shown, mem[:tpc].astype(float))
    end_us = page.execute_script(
        "const d = document.getElementById('timeline');"
        "return Math.max(...d.data.map(t => Math.max(...t.base.map((b, i) => b + t.x[i]))));"
    )
    assert end_us == pytest.approx(summary["step_s"] * 1e6, rel=1e-6)
    drawn = page.execute_script("return document.querySelectorAll('#timeline .bars path').length")
    assert drawn > 100
    views = page.execute_script(
        "return document.getElementById('tiles-chip0')._fullLayout.updatemenus[0].buttons.map(b => b.label)"
    )
    assert views[:2] == ["SRAM bytes", "compute, all labels"] and any("compute of '" in v for v in views)


def test_the_timeline_draws_every_phase_in_its_own_lane(page):
    """Issue 37: zoomed out, the exchange drawn over the compute hid it (41 % of the demo step). Each
    phase now has its own lane of a chip's row: compute bars are drawn, with height, and no compute
    bar shares its vertical band with an exchange bar."""
    boxes = page.execute_script(
        "const d = document.getElementById('timeline');"
        "const traces = document.querySelectorAll('#timeline .barlayer .trace');"
        "const out = {};"
        "d.data.forEach((t, i) => { out[t.name] = [...traces[i].querySelectorAll('path')]"
        "  .map(p => p.getBBox()).filter(b => b.width > 0 && b.height > 0).map(b => [b.y, b.y + b.height]); });"
        "return out;"
    )
    assert len(boxes["compute"]) > 10 and len(boxes["exchange"]) > 10
    lanes = {name: {(round(a, 1), round(b, 1)) for a, b in spans} for name, spans in boxes.items()}
    assert not any(a < d and c < b for a, b in lanes["compute"] for c, d in lanes["exchange"])


def test_hovering_a_tile_shows_its_bytes(page, run_dir):
    from selenium.webdriver.common.action_chains import ActionChains

    with np.load(run_dir / "arrays.npz") as a:
        mem = a["memory_bytes"]
    drag = page.find_element("css selector", "#tiles-chip0 .nsewdrag")
    page.execute_script("arguments[0].scrollIntoView({block: 'center'})", drag)
    ActionChains(page).move_to_element_with_offset(drag, 5, 3).perform()
    text = page.execute_script("return document.querySelector('#tiles-chip0 .hoverlayer').textContent")
    m = re.search(r"global (\d+)\).*?SRAM ([\d,]+) B of", text)
    assert m, text
    lines = page.execute_script("return document.querySelectorAll('#tiles-chip0 .hoverlayer tspan.line').length")
    assert "<br>" not in text and lines >= 4  # each part on its own line
    tile, nbytes = int(m.group(1)), int(m.group(2).replace(",", ""))
    assert nbytes == int(mem[tile])


def test_compare_page_opens_with_both_runs(browser, run_dir, tmp_path):
    from tilesim.cli import main

    other = tmp_path / "other"
    summary = run_training(
        RunOptions(
            machine="gc200x2", layers="700-1466-1466-1466-20", steps=1, batch=8, timesteps=20, neurons_per_tile=4
        )
    )
    write_run_outputs(other, summary)
    assert main(["compare", str(run_dir), str(other), "--out", str(tmp_path / "cmp")]) == 0
    assert _scripts((tmp_path / "cmp" / "compare.html").read_text()) == ["plotly.min.js"]
    assert (tmp_path / "cmp" / "compare.html").stat().st_size <= PAGE_BYTES
    _open(browser, tmp_path / "cmp" / "compare.html", 3)
    assert not [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not browser.find_elements("id", "plotly-missing")
    names = browser.execute_script("return document.getElementById('steps').data[0].y")
    assert sorted(n.replace(" (best)", "") for n in names) == ["other", "run"]
    assert sum(n.endswith(" (best)") for n in names) == 1


def test_a_wafer_sized_chip_is_drawn_in_blocks_of_tiles():
    """850,000 PEs are drawn as 8 x 8 blocks (13,375 cells, each the block's largest value);
    every tile is in exactly one cell; a chip of up to 16,384 tiles is drawn tile by tile."""
    import numpy as np

    from tilesim.outputs.page import PAGE_CELLS, _Grid

    assert _Grid.of(9, 8).k == 1 and _Grid.of(128, 128).k == 1
    g = _Grid.of(850, 1000)
    assert g.k == 8
    values = np.arange(850_000, dtype=float)
    img = g.image(values)
    assert img.shape == (107, 125) and img.size <= PAGE_CELLS
    assert img[0, 0] == 7 * 1000 + 7 and img[-1, -1] == 849_999  # the block's largest tile
    cells = g.cells()
    assert np.array_equal(np.sort(np.concatenate(cells)), np.arange(850_000))


def test_a_run_whose_every_field_holds_markup_runs_none_of_it(browser, run_dir, tmp_path):
    """Issue 41: every string of summary.json and every superstep label of arrays.npz holds a script
    and an image with an onerror handler (the folder sealed again): the page draws them as text."""
    from tilesim.cli import main
    from tilesim.outputs.report import seal_run_folder

    bad = '<script>window.pwned = 1</script>"><img src=x onerror="window.pwned = 2"><b>bold</b>'

    def inject(node):  # every string but a workload chart's choices (a file name, a style: refused if not one)
        if isinstance(node, dict):
            return {k: v if k in ("file", "style", "right_scale") else inject(v) for k, v in node.items()}
        if isinstance(node, list):
            return [inject(v) for v in node]
        return bad + node if isinstance(node, str) else node

    out = tmp_path / "run"
    shutil.copytree(run_dir, out)
    summary = inject(json.loads((out / "summary.json").read_text()))
    summary["settings"] = {f"{bad}{k}": v for k, v in summary["settings"].items()}
    summary["notes"] = [bad]
    summary["findings"] = [{"kind": bad, "message": bad, "fix": bad}]
    (out / "summary.json").write_text(json.dumps(summary))
    with np.load(out / "arrays.npz") as z:
        a = {k: z[k] for k in z.files}
    a["labels"] = np.asarray([f"{bad}{x}" for x in a["labels"]])
    np.savez_compressed(out / "arrays.npz", **a)
    seal_run_folder(out, json.loads((out / "manifest.json").read_text())["files"])
    assert main(["report", str(out)]) == 0
    _open(browser, out / "report.html", 6)
    assert browser.execute_script("return window.pwned") is None
    assert browser.find_elements("css selector", "img") == []
    bold = browser.execute_script(  # <b>bold</b> drawn as markup: an element (or plotly's tspan) of its own
        "return [...document.querySelectorAll('b, tspan')].filter(e => e.textContent === 'bold').length"
    )
    assert bold == 0
    shown = browser.execute_script("return document.body.innerText")
    assert bad + "snn training step" in shown  # the title, as the characters it holds
    tick = browser.execute_script(
        "return [...document.querySelectorAll('#labels .ytick text')].map(t => t.textContent)"
    )
    assert tick and all(t.startswith(bad) for t in tick)  # plotly draws the label's characters, no markup
