"""Write ``docs/tour.ipynb``: the tour of ``docs/tour.md`` as a notebook whose every number and
picture is computed when it runs (the sections are :data:`experiments.tour.SECTIONS`).

The notebook is committed without outputs; ``tests/test_tour.py`` executes it (nbclient) in quick
mode. Re-run this script after adding or renaming a tour section.

    python -m experiments.tour_notebook [--out docs/tour.ipynb]
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from experiments.tour import SECTIONS

TOUR_MD = Path(__file__).resolve().parents[1] / "docs" / "tour.md"

INTRO = """# A tour of tilesim (notebook)

The architecture of a tile machine (a Graphcore IPU), explained with the simulator's own pictures, in the
order of `docs/tour.md`. Nothing here is pasted: each cell runs the simulator and prints what it finds, so
the numbers follow the current cost model. `QUICK = True` uses smaller networks (the whole notebook runs in
well under a minute); set it to `False` for the paper's sizes (a few minutes).

Run it from a clone after `make demo` (or `make install`): `.venv/bin/python -m jupyter notebook docs/tour.ipynb`,
or in VS Code with the `.venv` kernel."""

SETUP = """import sys
from pathlib import Path

from IPython.display import Image, Markdown, display

# the repository's root (this notebook lives in docs/): experiments/ is not an installed package
ROOT = next(p for p in (Path.cwd(), *Path.cwd().parents) if (p / "experiments" / "tour.py").is_file())
sys.path.insert(0, str(ROOT))

from experiments import tour  # noqa: E402 (after the path is set)

QUICK = True  # False: the paper's sizes
IMG = ROOT / "out" / "tour-notebook"
IMG.mkdir(parents=True, exist_ok=True)


def show(section):
    \"\"\"Run one tour section: its text with this run's numbers, its pictures and the command to try.\"\"\"
    s = section(IMG, QUICK)
    display(Markdown(s["text"]))
    for p in s["images"]:
        display(Image(filename=str(p)))
    display(Markdown(f"Try it:\\n```sh\\n{s['command']}\\n```"))
    return s"""

EXERCISES = """for i, (question, answer, command) in enumerate(tour.exercises(QUICK), 1):
    reveal = f"<details><summary>answer</summary>{answer}</details>"
    display(Markdown(f"**{i}. {question}**\\n\\n`{command}`\\n\\n{reveal}"))"""

GLOSSARY = """rows = "\\n".join(f"| {t} | {d} |" for t, d in tour.GLOSSARY)
display(Markdown("| term | meaning |\\n|---|---|\\n" + rows))
display(Markdown("**What is not modelled**\\n\\n" + "\\n".join(f"* {x}" for x in tour.NOT_MODELLED)))"""


def titles(tour_md: Path = TOUR_MD) -> list[str]:
    """The section headings of ``docs/tour.md`` (written by the same :data:`SECTIONS`)."""
    found = re.findall(r"^## \d+\. (.+)$", tour_md.read_text(), flags=re.MULTILINE)
    if len(found) != len(SECTIONS):
        raise SystemExit(
            f"{tour_md} has {len(found)} sections, the tour {len(SECTIONS)}: run python -m experiments.tour"
        )
    return found


def build() -> nbformat.NotebookNode:
    """The notebook: intro, set-up, one heading and one cell per section, exercises, glossary."""
    cells = [new_markdown_cell(INTRO), new_code_cell(SETUP)]
    for i, (fn, title) in enumerate(zip(SECTIONS, titles()), 1):
        cells.append(new_markdown_cell(f"## {i}. {title}"))
        cells.append(new_code_cell(f"show(tour.{fn.__name__});"))
    cells += [
        new_markdown_cell("## Exercises\n\nTry each command, then open the answer (computed just now)."),
        new_code_cell(EXERCISES),
        new_markdown_cell("## Glossary"),
        new_code_cell(GLOSSARY),
    ]
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="docs/tour.ipynb")
    a = ap.parse_args(argv)
    nbformat.write(build(), Path(a.out))
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
