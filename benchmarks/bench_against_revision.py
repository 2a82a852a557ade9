"""This tree against an older revision, case by case, in alternating subprocesses (issue 24).

A refactoring must not slow down what users wait for. Four cases, each timed inside a fresh
process whose ``PYTHONPATH`` is either this tree or an export of ``--base`` (``git archive``), the two
alternating ``--rounds`` times (the machines are noisy); printed: each tree's median seconds and the
ratio this / base (< 1: faster now).

* ``functional step``: one training step of the paper's N-MNIST network 2312-1466-1466-10 (B 48,
  T 100, 5 % caps) on a GC200 — kernels, per-step counters, the step program, the engine — after a
  warm-up step (Numba compiles once per tree and caches);
* ``64-chip step``: the §4.4 weak-scaling network on 64 Bow chips re-timed at fixed activity
  (placement done before the clock starts);
* ``re-timing``: the mapping search's objective on 12 mappings of the N-MNIST network (SRAM
  ledger + re-timing from one recorded step), seconds per mapping;
* ``demo``: ``make demo``'s command in one process from its first import (Numba's cache warm, as
  on a user's second run): four training steps of the SHD network on a GC200 and every output
  written (summary, trace, pictures and, from issue 29, report.html).

    python benchmarks/bench_against_revision.py [--base REV] [--rounds 3] [--cases retime functional]

``--base`` defaults to the parent of the commit that added ``tilesim/workload.py`` (the code before the
workload/fabric seam of issue 24). The cases name what they use through :data:`HOMES` (``_use``), so that they run
on a tree of any layout since then. ``--quick`` (``make bench-quick``): one round of ``functional`` and
``retime``. No target: it exits 0 when every case runs on both trees.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Where each name the cases use is defined, newest layout first: the cases run on this tree and on an export of
# an older one, and the modules moved (issue 37: models/snn in subpackages, tilesim/machine.py a package; issue
# 39: models -> tilesim.models, which _in_layout_of rewrites). `_use(name, ...)` binds each name from the first
# of its modules that the tree has.
_NETWORK = ("tilesim.models.snn.training.network", "tilesim.models.snn.network")
_PLACING = ("tilesim.models.snn.placement.fit", "tilesim.models.snn.placing")
HOMES: dict[str, tuple[str, ...]] = {
    "NetworkConfig": _NETWORK,
    "init_network": _NETWORK,
    "train_step": _NETWORK,
    "place_network": _PLACING,
    "strategy_mapping": _PLACING,
    "make_objective": ("tilesim.models.snn.placement.search", "tilesim.models.snn.mapsearch"),
    "retime": ("tilesim.models.snn.step.retime", "tilesim.models.snn.retime"),
    "load_machine": ("tilesim.machine.description", "tilesim.machine"),
    "weak_config": ("experiments.s_common",),
}
USE = f"""
import importlib
HOMES = {HOMES!r}
def _use(*names):
    for name in names:
        errors = []
        for module in HOMES[name]:
            try:
                globals()[name] = getattr(importlib.import_module(module), name)
                break
            except (ImportError, AttributeError) as exc:
                errors.append(f"{{module}}: {{exc}}")
        else:
            raise ImportError(f"{{name}} is in none of its modules: {{'; '.join(errors)}}")
"""

OWN_COMMANDS = """
from importlib import metadata
try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib
# the tree's own command plug-ins: the installed distribution's entry points name this checkout's modules
_OWN = metadata.EntryPoints(
    metadata.EntryPoint(name, value, "tilesim.commands")
    for name, value in tomllib.loads((_root / "pyproject.toml").read_text())["project"]["entry-points"][
        "tilesim.commands"
    ].items()
)
_entry_points = metadata.entry_points
metadata.entry_points = lambda **kw: _OWN if kw.get("group") == "tilesim.commands" else _entry_points(**kw)
"""

NMNIST = """
import time, numpy as np
_use("NetworkConfig", "init_network", "train_step", "place_network", "load_machine")
cfg = NetworkConfig(layers="2312-1466-1466-10", batch=48, timesteps=100, max_activity=0.05, input_cap=32)
m = load_machine("gc200")
st = init_network(cfg, place_network(cfg, m, mapping="contiguous").placement)
rng = np.random.default_rng(0)
x = (rng.random((100, 48, 2312)) < 0.02).astype(np.float32)
"""  # the paper's N-MNIST network on a GC200 and one batch of its input (both cases below)

CASES = {
    "functional": NMNIST
    + """y = rng.integers(0, 10, 48)
train_step(st, x, y, per_step_counters=True)
t0 = time.perf_counter()
train_step(st, x, y, per_step_counters=True)
RESULT = time.perf_counter() - t0
""",
    "64-chip": """
import time
_use("weak_config", "place_network", "retime", "load_machine")
cfg = weak_config("shd", 8, 64, batch=24, max_activity=0.05)
m = load_machine("bow", 64)
pl = place_network(cfg, m, 8, "contiguous").placement
t0 = time.perf_counter()
retime(None, cfg, pl, m, steps_per_execution=1000)
RESULT = time.perf_counter() - t0
""",
    "retime": NMNIST
    + """
_use("make_objective", "strategy_mapping")
res = train_step(st, x, rng.integers(0, 10, 48))
objective = make_objective(cfg, m, res.activity)
maps = [strategy_mapping(s, cfg, m, n) for s in ("contiguous", "round_robin") for n in (2, 3, 4, 5, 6, 8)]
objective(maps[0])
t0 = time.perf_counter()
for mp in maps:
    objective(mp)
RESULT = (time.perf_counter() - t0) / len(maps)
""",
    "demo": """
import time
T0 = time.perf_counter()  # before any import: the imports are part of what `make demo` waits for
import tempfile
"""
    + OWN_COMMANDS
    + """from tilesim.cli import main
with tempfile.TemporaryDirectory() as d:
    main(["run", "--layers", "700-1462-1460-20", "--dataset", "shd", "--input-cap", "48", "--batch", "48",
          "--timesteps", "100", "--max-activity", "0.05", "--machine", "gc200", "--steps", "4", "--quiet",
          "--out", d + "/demo"])
RESULT = time.perf_counter() - T0
""",
}


def revision_before(*log_args: str) -> str:
    """The revision just before the oldest commit ``git log <log_args>`` lists (``HEAD`` if it lists none);
    raises ``OSError`` / ``CalledProcessError`` where there is no git history."""
    out = subprocess.run(
        ["git", "log", "--format=%H", *log_args], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return (out[-1] + "^") if out else "HEAD"


def _default_base() -> str:
    """The revision before the workload/fabric seam (issue 24)."""
    return revision_before("--diff-filter=A", "--", "tilesim/workload.py")


def _export(rev: str, into: Path) -> Path:
    """The tree of ``rev`` unpacked into ``into / "tree"`` (its Numba cache stays there)."""
    archive = into / "base.tar"
    subprocess.run(["git", "archive", "--format=tar", "-o", str(archive), rev], cwd=ROOT, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "tree", filter="data")
    return into / "tree"


def resolve_base(rev: str | None, default) -> str | None:
    """``rev``, else ``default()`` (a revision); None, after a line saying so, where there is no git history."""
    try:
        return rev or default()
    except (OSError, subprocess.CalledProcessError):
        print("no git history here: nothing to compare with")
        return None


@contextlib.contextmanager
def exported(rev: str) -> Iterator[Path]:
    """The tree of ``rev`` (:func:`_export`) in a temporary folder, removed afterwards."""
    with tempfile.TemporaryDirectory() as tmp:
        yield _export(rev, Path(tmp))


def alternate(rounds: int, run, base_tree: Path) -> dict:
    """``{"this": [...], "base": [...]}``: ``run(tree)`` on the base tree and on this one, alternating ``rounds``
    times (the machines are noisy: each round sees both under the same load)."""
    runs: dict = {"this": [], "base": []}
    for _ in range(rounds):
        runs["base"].append(run(base_tree))
        runs["this"].append(run(ROOT))
    return runs


def _in_layout_of(tree: Path, code: str) -> str:
    """``code`` as ``tree`` names its modules: a tree from before issue 39 has the top-level packages
    ``models`` and ``mapping`` where this one has ``tilesim.models`` and ``tilesim.mapping`` (and
    importing those there would reach the installed clone's folders, not the tree's)."""
    if '"tilesim.models" = "models"' in (tree / "pyproject.toml").read_text():
        return code
    return code.replace("tilesim.models.", "models.").replace("tilesim.mapping", "mapping")


# First in every process on a tree: that tree's models/ and mapping/ folders are its tilesim.models and
# tilesim.mapping (an install maps them by pyproject's package-dir; a tree on PYTHONPATH alone would reach
# the installed clone's folders instead)
TREE_PACKAGES = """
import sys, tilesim
from pathlib import Path
_root = Path(tilesim.__file__).resolve().parents[1]
if (_root / "models" / "__init__.py").is_file():
    tilesim.__path__.append(str(_root))
"""


def run_in_tree(tree: Path, code: str, what: str = "case"):
    """The ``RESULT`` (a JSON value) that ``code`` sets, run in a fresh process on ``tree`` with that
    tree's module layout (:data:`TREE_PACKAGES`, :func:`_in_layout_of`); exits naming ``what`` if it fails."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    prog = (
        TREE_PACKAGES + _in_layout_of(tree, USE + code) + "\nimport json, sys\nsys.stdout.write(json.dumps(RESULT))\n"
    )
    out = subprocess.run([sys.executable, "-c", prog], cwd=tree, env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{what} failed on {tree}:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _time(tree: Path, code: str) -> float:
    """Seconds the case reports, run in a fresh process on ``tree``."""
    return float(run_in_tree(tree, code))


def main(argv=None) -> int:
    """Print the per-case medians and ratios; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default=None, help="git revision to compare with (default: before the seam)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    ap.add_argument("--quick", action="store_true", help="one round of the functional and retime cases")
    a = ap.parse_args(argv)
    if a.quick:
        a.rounds, a.cases = 1, ["functional", "retime"]
    base = resolve_base(a.base, _default_base)
    if base is None:
        return 0
    with exported(base) as old:
        print(f"this tree vs {base}; {a.rounds} alternating rounds per case")
        for name in a.cases:
            code = CASES[name]
            _time(old, code), _time(ROOT, code)  # warm-up: Numba caches in each tree
            runs = alternate(a.rounds, lambda tree, code=code: _time(tree, code), old)
            n, o = statistics.median(runs["this"]), statistics.median(runs["base"])
            print(f"{name:12s} this {n:8.4f} s   base {o:8.4f} s   ratio {n / o:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
