"""Issue 37 part 4, "the house": move every module to the package named for what it holds, and
rewrite every reference to it in the repository (imports, ``mock.patch`` and entry-point strings,
lazy-export tables, ``:mod:`` roles, file paths in prose and tests).

Run from the repository root::

    python tools/reorganise.py            # move and rewrite (git mv, so history follows the files)
    python tools/reorganise.py --dry-run  # print what it would move, change nothing
    python tools/reorganise.py --extra ../shared/design/architecture.md  # rewrite that file's mentions too

Deterministic and idempotent: a move whose source is gone and whose target exists is done already
and skipped, and only the references of the moves made in this run are rewritten, so a second run
changes nothing. Behaviour and numbers do not change: only names of modules move.

What it rewrites, in one pass per file (replaced text is never scanned again):

* ``from P import m [as a], ...`` where ``P.m`` is a moved module: ``from <new parent> import <new name> as a``
  (one statement per new parent; names that are not moved modules stay where they were);
* a dotted module name ``old.module`` anywhere (``import``/``from`` lines, strings such as
  ``"models.snn.cli:register"`` or ``"tilesim.sweep.run_point"``, docstrings): ``new.module``;
* a file path ``old/module.py``: ``new/module.py``.

Then it creates each new package's ``__init__.py`` and lets ruff sort the imports and format the
files it changed (if ruff is installed). CHANGELOG.md is history and keeps the names of its time.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# (old file, new file), relative to the repository root. A missing source that was never moved
# (e.g. tilesim/runrecord.py before it exists) is skipped with a note.
MOVES: tuple[tuple[str, str], ...] = (
    # tilesim: the program IR (already a package: tilesim/program/)
    ("tilesim/rows.py", "tilesim/program/rows.py"),
    ("tilesim/program_toml.py", "tilesim/program/toml_form.py"),
    # tilesim: the machine, its fabrics and what they cost
    ("tilesim/machine.py", "tilesim/machine/description.py"),
    ("tilesim/fabric.py", "tilesim/machine/fabric.py"),
    ("tilesim/gridload.py", "tilesim/machine/gridload.py"),
    ("tilesim/fluid.py", "tilesim/machine/fluid.py"),
    ("tilesim/costs.py", "tilesim/machine/costs.py"),
    ("tilesim/memory.py", "tilesim/machine/memory.py"),
    # tilesim: the engine (the discrete-event clock and its closed form)
    ("tilesim/engine.py", "tilesim/engine/events.py"),
    ("tilesim/timeline.py", "tilesim/engine/timeline.py"),
    # tilesim: how commands run on this computer (sweeps, their store, limits, progress, memos, lazy names)
    ("tilesim/sweep.py", "tilesim/running/sweep.py"),
    ("tilesim/store.py", "tilesim/running/store.py"),
    ("tilesim/limits.py", "tilesim/running/limits.py"),
    ("tilesim/progress.py", "tilesim/running/progress.py"),
    ("tilesim/memo.py", "tilesim/running/memo.py"),
    ("tilesim/lazy.py", "tilesim/running/lazy.py"),
    # tilesim: what a run writes
    ("tilesim/records.py", "tilesim/outputs/records.py"),
    ("tilesim/runrecord.py", "tilesim/outputs/runrecord.py"),
    ("tilesim/report.py", "tilesim/outputs/report.py"),
    ("tilesim/compare.py", "tilesim/outputs/compare.py"),
    ("tilesim/page.py", "tilesim/outputs/page.py"),
    ("tilesim/plots.py", "tilesim/outputs/plots.py"),
    ("tilesim/trace.py", "tilesim/outputs/trace.py"),
    # models/snn: the kernels, their spike lists, their dense twin
    ("models/snn/kernels.py", "models/snn/kernels/lif.py"),
    ("models/snn/jit.py", "models/snn/kernels/jit.py"),
    ("models/snn/spikes.py", "models/snn/kernels/spikes.py"),
    ("models/snn/reference.py", "models/snn/kernels/reference.py"),
    ("models/snn/grad_inputs.py", "models/snn/kernels/grad_inputs.py"),
    # models/snn: the training step as a timed program
    ("models/snn/timing.py", "models/snn/step/timing.py"),
    ("models/snn/step_table.py", "models/snn/step/table.py"),
    ("models/snn/step_rows.py", "models/snn/step/rows.py"),
    ("models/snn/step_memory.py", "models/snn/step/memory.py"),
    ("models/snn/counters.py", "models/snn/step/counters.py"),
    ("models/snn/workload.py", "models/snn/step/workload.py"),
    ("models/snn/structure.py", "models/snn/step/structure.py"),
    ("models/snn/retime.py", "models/snn/step/retime.py"),
    # models/snn: placement (one word): the paper's contiguous one, fitting one, searching one, tile roles
    ("models/snn/placement.py", "models/snn/placement/contiguous.py"),
    ("models/snn/placing.py", "models/snn/placement/fit.py"),
    ("models/snn/mapsearch.py", "models/snn/placement/search.py"),
    ("models/snn/layout.py", "models/snn/placement/roles.py"),
    # models/snn: calibration, beside its data (models/snn/calibration/*.csv)
    ("models/snn/calibrate.py", "models/snn/calibration/calibrate.py"),
    # models/snn: training the network (float math, datasets, activity, diagnosis, NIR)
    ("models/snn/network.py", "models/snn/training/network.py"),
    ("models/snn/data.py", "models/snn/training/data.py"),
    ("models/snn/activity.py", "models/snn/training/activity.py"),
    ("models/snn/diagnose.py", "models/snn/training/diagnose.py"),
    ("models/snn/nir_import.py", "models/snn/training/nir_import.py"),
    # models/snn: what a run writes
    ("models/snn/report_section.py", "models/snn/outputs/record.py"),
    ("models/snn/explain.py", "models/snn/outputs/explain.py"),
    ("models/snn/activity_plot.py", "models/snn/outputs/activity_plot.py"),
    ("models/snn/scaling_plot.py", "models/snn/outputs/scaling_plot.py"),
    # models/snn: the commands and the libraries behind them
    ("models/snn/cli.py", "models/snn/commands/cli.py"),
    ("models/snn/sweep_cli.py", "models/snn/commands/sweep_cli.py"),
    ("models/snn/run.py", "models/snn/commands/run.py"),
    ("models/snn/options.py", "models/snn/commands/options.py"),
    ("models/snn/budget.py", "models/snn/commands/budget.py"),
    ("models/snn/hostmem.py", "models/snn/commands/hostmem.py"),
    ("models/snn/scaling.py", "models/snn/commands/scaling.py"),
)

# The docstring of each new package's __init__.py (written only when the file does not exist).
PACKAGES: dict[str, str] = {
    "tilesim/machine": "Machines: their descriptions (presets), exchange fabrics and links, cost models, SRAM ledger.",
    "tilesim/engine": "The engine: the discrete-event clock of a program on a machine, and its closed form.",
    "tilesim/running": "How commands run on this computer: sweeps and their store, up-front limits, progress bars, "
    "memos and lazily loaded names.",
    "tilesim/outputs": "What a run writes: result records, the report and its pictures, page, trace and comparison.",
    "models/snn/kernels": "The SNN kernels (Numba), the spike lists they read and write, and their dense NumPy twin.",
    "models/snn/step": "The SNN training step as a timed program: rows, memory, counters, assumptions, re-timing.",
    "models/snn/placement": "Placement of an SNN on tiles: the paper's contiguous placement, fitting one to a machine, "
    "searching for a faster one, and the tile roles of each layer.",
    "models/snn/calibration": "Calibration of the SNN cost model against measured step times (data beside it).",
    "models/snn/training": "Training the SNN: the network and its float math, datasets, recorded activity, diagnosis, "
    "NIR import.",
    "models/snn/outputs": "What an SNN run writes beside the core's report: summary section, explanations, pictures.",
    "models/snn/commands": "The SNN's commands (run, sweep, scaling, map-search, grad) and the libraries behind them.",
}

TEXT_SUFFIXES = {".py", ".md", ".toml", ".ipynb", ".txt", ".cfg", ".ini", ".yml", ".yaml", ".rst"}
TEXT_NAMES = {"Makefile", "run"}
SKIP = {"CHANGELOG.md", "tools/reorganise.py", "tests/test_reorganise.py"}


def dotted(path: str) -> str:
    """``"models/snn/run.py"`` -> ``"models.snn.run"``."""
    return path[: -len(".py")].replace("/", ".")


def git(*args: str) -> str:
    """Run git in the repository root and return its stdout (raises on failure)."""
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def pending_moves() -> list[tuple[str, str]]:
    """The moves still to make: source present, target absent. Raises if both exist."""
    out = []
    for old, new in MOVES:
        a, b = ROOT / old, ROOT / new
        if a.exists() and b.exists():
            raise SystemExit(f"both {old} and {new} exist: merge them by hand, then run again")
        if a.exists():
            out.append((old, new))
        elif not b.exists():
            print(f"note: {old} does not exist, nothing to move")
    return out


class Rewriter:
    """The one-pass rewrite of module references for a set of moves."""

    def __init__(self, moves: list[tuple[str, str]]):
        self.mod = {dotted(o): dotted(n) for o, n in moves}
        self.path = {o: n for o, n in moves}
        parents = sorted({m.rsplit(".", 1)[0] for m in self.mod}, key=len, reverse=True)
        alt = "|".join
        names = alt(map(re.escape, sorted(self.mod, key=len, reverse=True)))
        paths = alt(map(re.escape, sorted(self.path, key=len, reverse=True)))
        parent_alt = alt(map(re.escape, parents))
        # one regex, so that text a rule wrote is never read again by another rule
        self.any_re = re.compile(
            rf"(?P<from>^(?P<indent>[ \t]*)from[ \t]+(?P<parent>{parent_alt})[ \t]+import[ \t]+"
            r"(?P<names>[\w \t,]+?)(?P<tail>[ \t]*(?:#[^\n]*)?)$)"
            rf"|(?P<dot>(?<![\w.])(?:{names})(?!\w))"
            rf"|(?P<path>(?<![\w/.])(?:{paths})(?![\w/]))",
            re.M,
        )
        self.paren_re = re.compile(rf"^[ \t]*from[ \t]+(?:{parent_alt})[ \t]+import[ \t]*\(", re.M)

    def _sub(self, m: re.Match) -> str:
        """The replacement of one match of :attr:`any_re`."""
        if m["dot"]:
            return self.mod[m["dot"]]
        if m["path"]:
            return self.path[m["path"]]
        return self._from(m)

    def _from(self, m: re.Match) -> str:
        """``from P import a, b as c``: moved modules to their new parents, the rest left in place."""
        parent, indent, tail = m["parent"], m["indent"], self.any_re.sub(self._sub, m["tail"])
        keep: list[str] = []
        moved: dict[str, list[str]] = {}
        for item in (s.strip() for s in m["names"].split(",")):
            if not item:
                continue
            name, _, alias = (p.strip() for p in item.partition(" as "))
            new = self.mod.get(f"{parent}.{name}")
            if new is None:
                keep.append(item)
                continue
            new_parent, new_name = new.rsplit(".", 1)
            bound = alias or name
            moved.setdefault(new_parent, []).append(new_name if bound == new_name else f"{new_name} as {bound}")
        if not moved:
            return m[0][: m.start("tail") - m.start()] + tail
        lines = [f"{indent}from {parent} import {', '.join(keep)}"] if keep else []
        lines += [f"{indent}from {p} import {', '.join(ns)}" for p, ns in moved.items()]
        lines[0] += tail
        return "\n".join(lines)

    def text(self, s: str, where: str) -> str:
        """``s`` with every reference to a moved module rewritten, in one pass."""
        for m in self.paren_re.finditer(s):
            names = re.findall(r"\w+", s[m.end() : s.find(")", m.end())])
            if any(f"{m[0].split()[1]}.{w}" in self.mod for w in names):
                print(f"warning: {where}: a parenthesised import of a moved module; rewrite it by hand")
        return self.any_re.sub(self._sub, s)


def text_files(extra: list[str]) -> list[Path]:
    """Tracked and untracked (not ignored) text files of the repository, plus ``extra``."""
    names = git("ls-files", "-co", "--exclude-standard").splitlines()
    out = []
    for n in sorted(set(names)):
        p = ROOT / n
        if n in SKIP or not p.is_file() or (p.suffix not in TEXT_SUFFIXES and p.name not in TEXT_NAMES):
            continue
        out.append(p)
    return out + [Path(e).resolve() for e in extra]


def rewrite_notebook(raw: str, rw: Rewriter, where: str) -> str:
    """A notebook's cell sources rewritten, the JSON kept as nbformat writes it (indent 1)."""
    nb = json.loads(raw)
    if json.dumps(nb, indent=1, ensure_ascii=False) + "\n" != raw:
        return rw.text(raw, where)  # not in nbformat's layout: treat as text
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        new = rw.text(src, where)
        if new != src:
            cell["source"] = new.splitlines(keepends=True)
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def rewrite_all(rw: Rewriter, files: list[Path]) -> list[Path]:
    """Rewrite every file in place; returns the files that changed."""
    changed = []
    for p in files:
        raw = p.read_text(encoding="utf-8")
        where = str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)
        new = rewrite_notebook(raw, rw, where) if p.suffix == ".ipynb" else rw.text(raw, where)
        if new != raw:
            p.write_text(new, encoding="utf-8")
            changed.append(p)
    return changed


def make_packages(moves: list[tuple[str, str]]) -> list[Path]:
    """Create each target directory and its ``__init__.py`` (a docstring only) where missing."""
    made = []
    for _, new in moves:
        d = (ROOT / new).parent
        d.mkdir(parents=True, exist_ok=True)
        init = d / "__init__.py"
        rel = d.relative_to(ROOT).as_posix()
        if not init.exists():
            doc = textwrap.fill(PACKAGES.get(rel, f"The modules of {rel}."), width=100)
            init.write_text(f'"""{doc}"""\n', encoding="utf-8")
            made.append(init)
    return made


def ruff(paths: list[Path]) -> None:
    """Sort imports and format the changed Python files with ruff, if it is installed."""
    py = [str(p) for p in paths if p.suffix == ".py" and p.is_relative_to(ROOT)]
    exe = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not py or not Path(exe).exists() and shutil.which(exe) is None:
        if py:
            print("note: ruff not found; run `ruff check --select I --fix . && ruff format .` yourself")
        return
    subprocess.run([exe, "check", "--select", "I", "--fix", "--quiet", *py], cwd=ROOT, check=False)
    subprocess.run([exe, "format", "--quiet", *py], cwd=ROOT, check=False)
    long = subprocess.run(
        [exe, "check", "--select", "E501", "--output-format", "concise", "--quiet", *py],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.strip()
    if long:
        print("lines a longer module path pushed past the line length; shorten these by hand:\n" + long)


def main(argv: list[str] | None = None) -> int:
    """Move the modules still to move, rewrite their references, report what was done."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="print the moves still to make, change nothing")
    ap.add_argument("--extra", action="append", default=[], help="another text file to rewrite (repeatable)")
    args = ap.parse_args(argv)
    moves = pending_moves()
    if not moves:
        print("nothing to move: the house is in order")
        return 0
    for old, new in moves:
        print(f"{old} -> {new}")
    if args.dry_run:
        return 0
    inits = make_packages(moves)
    for old, new in moves:
        try:
            git("mv", old, new)
        except subprocess.CalledProcessError:  # not tracked (yet): move it all the same
            (ROOT / old).rename(ROOT / new)
            print(f"note: {old} is not tracked by git; moved it without git mv")
    git("add", *[str(p.relative_to(ROOT)) for p in inits])
    changed = rewrite_all(Rewriter(moves), text_files(args.extra))
    ruff(changed + inits)
    print(f"moved {len(moves)} modules, created {len(inits)} packages, rewrote {len(changed)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
