"""The tour (docs/tour.md) builds in quick mode: every section with its pictures and command,
three exercises with computed answers, a glossary and what is not modelled (issue 20)."""

import re

from experiments.tour import SECTIONS, main

# the notebook's set-up line that puts its pictures in the checkout (the test points it at tmp_path)
IMG_LINE = 'IMG = ROOT / "out" / "tour-notebook"'


def test_tour_quick_writes_every_section(tmp_path, capsys):
    assert main(["--quick", "--out", str(tmp_path)]) == 0
    md = (tmp_path / "tour.md").read_text()
    heads = re.findall(r"^## \d+\. (.+)$", md, flags=re.MULTILINE)
    assert len(heads) == len(SECTIONS) == 12
    images = re.findall(r"!\[[^\]]*\]\((tour/[^)]+\.png)\)", md)
    assert len(images) >= 12
    for rel in images:
        assert (tmp_path / rel).stat().st_size > 5000, rel
    assert md.count("```sh") == 12
    for needle in (
        "SRAM",
        "superstep",
        "mesh-demo",
        "gradient-only",
        "T × B",
        "16 per tile",
        "chips",
        "worker",
        "supervisor",
        "codelet",
        "compute set",
        "waits at the barrier",
        "supertile",
        "ladder",
        "Sync-Link",
        "host link",
        "steps-per-execution",
    ):
        assert needle in md, needle
    ex = md.split("## Exercises", 1)[1].split("## Glossary", 1)[0]
    assert len(re.findall(r"^\d\. ", ex, flags=re.MULTILINE)) == 3
    assert len(re.findall(r"<summary>answer</summary>[^<]*\d\.\d{3} ms", ex)) >= 2  # computed answers
    assert "| critical tile |" in md and "## What is not modelled" in md
    assert "nan" not in md.lower().replace("nanny", "")


def test_notebook_tour_runs_and_matches_the_markdown_tour(tmp_path):
    """docs/tour.ipynb (issue 29): the sections of docs/tour.md, in order, every picture drawn live;
    executed here in quick mode (well under a minute). Its pictures go to ``tmp_path``, not the checkout's
    ``out/tour-notebook`` (issue 54: a test does not write into the working tree)."""
    from pathlib import Path

    import nbformat
    from nbclient import NotebookClient

    from experiments.tour_notebook import build, titles

    path = Path(__file__).resolve().parents[1] / "docs" / "tour.ipynb"
    nb = nbformat.read(path, as_version=4)
    assert [c.source for c in nb.cells] == [c.source for c in build().cells], "run python -m experiments.tour_notebook"
    heads = [m.group(1) for c in nb.cells if (m := re.match(r"## \d+\. (.+)$", c.source))]
    assert heads == titles() and len(heads) == len(SECTIONS)
    (setup,) = [c for c in nb.cells if c.cell_type == "code" and IMG_LINE in c.source]
    setup.source = setup.source.replace(IMG_LINE, f"IMG = Path({str(tmp_path)!r})")
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not any(o.get("output_type") == "error" for o in c.outputs) for c in code)
    pictures = sum("image/png" in o.get("data", {}) for c in code for o in c.outputs)
    assert pictures >= 12
    text = "".join(o.get("data", {}).get("text/markdown", "") for c in code for o in c.outputs)
    assert "SRAM" in text and "supertile" in text and "answer" in text
    assert len(list(tmp_path.glob("**/*.png"))) >= 12
