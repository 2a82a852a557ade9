"""The benchmarks start from the checkout (issue 54): each ``benchmarks/*.py`` answers ``--help`` when run as the
README writes it (``python benchmarks/bench_X.py`` from the repository root), has the ``--quick`` flag that
``make bench-quick`` passes, and exits non-zero when one of its own targets fails (every PASS/FAIL goes through
``benchmarks/targets.py``). The cases that ``bench_against_revision`` runs on an older tree find their names in
this tree's layout and in the default base's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
SCRIPTS = sorted(p.name for p in BENCH.glob("*.py") if p.name != "targets.py")
MAKE_BENCH = sorted(n for n in SCRIPTS if n.startswith("bench_"))


def _run(args: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_benchmark_starts_from_the_checkout(name):
    """``python benchmarks/<name> --help`` from the repository root imports everything the benchmark imports
    (``experiments`` included, which is not installed) and prints its usage."""
    out = _run([f"benchmarks/{name}", "--help"])
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("usage:"), out.stdout[:500]
    if name in MAKE_BENCH:
        assert "--quick" in out.stdout, f"{name}: make bench-quick passes --quick"


def test_make_bench_runs_every_benchmark():
    assert len(MAKE_BENCH) >= 12
    make = (ROOT / "Makefile").read_text()
    assert "benchmarks/bench_*.py" in make and "bench-quick:" in make and "BENCH_FLAGS=--quick" in make


@pytest.mark.parametrize("name", MAKE_BENCH)
def test_no_benchmark_prints_a_verdict_of_its_own(name):
    """A PASS/FAIL printed without :class:`targets.Targets` would leave the exit status 0 (``bench_mapping``
    printed FAIL and exited 0)."""
    text = (BENCH / name).read_text()
    for word in ("'PASS'", '"PASS"', "'FAIL'", '"FAIL"', "NOT met", "OVER TARGET"):
        assert word not in text, f"{name} spells {word}: use targets.Targets.check"
    if "check(" in text:
        assert "targets.status(" in text, f"{name} checks targets but does not return Targets.status()"


def test_a_failed_target_is_a_failed_exit_status(capsys):
    sys.path.insert(0, str(BENCH))
    try:
        from targets import Targets
    finally:
        sys.path.remove(str(BENCH))
    t = Targets()
    assert t.check(True, "fast") == "PASS" and t.status("bench_x") == 0
    assert t.check(False, "small") == "FAIL" and t.check(False, "cheap") == "FAIL"
    assert t.status("bench_x") == 1
    assert "bench_x: FAILED 2 target(s): small, cheap" in capsys.readouterr().out


def _resolve_in(tree: Path) -> tuple[list[str], list[str]]:
    """The names of ``bench_against_revision.HOMES`` that ``_use`` binds in a fresh process on ``tree``, and all
    of them."""
    sys.path.insert(0, str(BENCH))
    try:
        import bench_against_revision as b
    finally:
        sys.path.remove(str(BENCH))
    code = "_use(*HOMES)\nRESULT = sorted(k for k in HOMES if k in globals())\n"
    return b.run_in_tree(tree, code, "names"), sorted(b.HOMES)


def test_the_revision_cases_find_their_names_in_this_tree():
    found, names = _resolve_in(ROOT)
    assert found == names


@pytest.mark.slow
def test_the_revision_cases_find_their_names_in_the_default_base():
    """The tree before issue 24's seam (flat ``models.snn`` modules, ``tilesim/machine.py``): ``make bench`` exited
    2 in a second there (``No module named 'models.snn.training'``); its ``run`` command is found through its own
    pyproject's plug-ins (the installed entry points name today's modules)."""
    sys.path.insert(0, str(BENCH))
    try:
        import bench_against_revision as b
    finally:
        sys.path.remove(str(BENCH))
    try:
        base = b._default_base()
        subprocess.run(["git", "cat-file", "-e", base], cwd=ROOT, check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("no git history here")
    commands = b.OWN_COMMANDS + (
        "from tilesim.cli import build_parser\n"
        "RESULT = sorted(metadata.entry_points(group='tilesim.commands').names)\n"
        "build_parser().parse_args(['run', '--steps', '1'])\n"  # the demo case's command is there
    )
    with b.exported(base) as old:
        found, names = _resolve_in(old)
        plugins = b.run_in_tree(old, commands, "commands")
    assert found == names
    assert "snn" in plugins
