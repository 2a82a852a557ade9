"""Every command's --help shows a line and the default of each flag; -v/-q set the log level
(issue 20)."""

import argparse
import subprocess
import sys

from tilesim.cli import _DefaultsFormatter, build_parser


def _subparsers(parser):
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            return dict(a.choices)
    return {}


def test_every_flag_has_help_and_default():
    subs = _subparsers(build_parser())
    assert {"run", "simulate", "map-search", "sweep", "report"} <= set(subs)
    fmt = _DefaultsFormatter("x")
    for name, p in subs.items():
        assert p.formatter_class is _DefaultsFormatter, name
        for a in p._actions:
            if not a.option_strings or a.help == argparse.SUPPRESS or isinstance(a, argparse._HelpAction):
                continue
            assert a.help, f"{name} {a.option_strings[0]} has no help line"
            d = a.default
            if d not in (None, False, [], ()):
                shown = fmt._get_help_string(a) % {"default": d, "prog": name}
                assert "default" in shown, f"{name} {a.option_strings[0]}: default {d!r} not shown"


def _run(*args):
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "tilesim",
            *args,
            "run",
            "--layers",
            "40-24-4",
            "--caps",
            "8-2",
            "--batch",
            "4",
            "--timesteps",
            "8",
            "--steps",
            "2",
            "--quiet",
            "--memory-check",
            "report",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_verbose_logs_steps_quiet_does_not():
    v = _run("-v")
    assert v.returncode == 0, v.stderr
    assert "INFO: step 1/2: loss" in v.stderr and "INFO: step 2/2" in v.stderr
    q = _run("-q")
    assert q.returncode == 0 and "INFO" not in q.stderr and "WARNING" not in q.stderr
    assert "INFO" not in _run().stderr


def test_log_flags_after_the_command_are_taken_too():
    """Issue 39: `tilesim run -q ...` was refused ("unrecognized argument -q"); -q, -v and -vv are
    the command line's, wherever they stand. `--quiet` after a command stays the command's own."""
    from tilesim.cli import _hoist_log_flags

    assert _hoist_log_flags(["run", "--layers", "4-2", "-q"]) == ["-q", "run", "--layers", "4-2"]
    assert _hoist_log_flags(["-v", "run", "-vv", "--quiet"]) == ["-v", "-vv", "run", "--quiet"]
    assert _hoist_log_flags(["run", "--second-threshold", "-0.5"]) == ["run", "--second-threshold", "-0.5"]
    args = ["run", "--layers", "40-24-4", "--caps", "8-2", "--batch", "4", "--timesteps", "8", "--steps", "2"]
    done = subprocess.run(
        [sys.executable, "-m", "tilesim", *args, "-v", "--quiet"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "INFO: step 1/2: loss" in done.stderr


HEAVY = ("numpy", "numba", "llvmlite", "networkx", "matplotlib", "pandas", "dask", "scipy", "tqdm")
_HELP_IMPORTS = """
import contextlib, io, json, sys
from tilesim.cli import _subcommand_parsers, build_parser
for cmd in [[]] + [[name] for name in _subcommand_parsers(build_parser())]:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
        build_parser().parse_args(cmd + ["--help"])
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules} | {m for m in sys.modules if m.startswith("tilesim.")})))
"""


def test_help_of_every_command_imports_no_heavy_library():
    """Start-up (issue 29): `tilesim --help` and each command's `--help` load the parsers only;
    Numba, networkx, matplotlib, pandas, dask and NumPy itself load when a command runs."""
    import json

    out = subprocess.run([sys.executable, "-c", _HELP_IMPORTS], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    loaded = set(json.loads(out.stdout))
    assert "tilesim.models" in loaded  # the workloads' parsers were registered
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def _error(argv) -> str:
    out = subprocess.run([sys.executable, "-m", "tilesim", *argv], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stdout == "", (out.returncode, out.stdout)
    assert out.stderr.count("\n") == 1, out.stderr
    return out.stderr


def test_a_flag_typo_names_the_sub_command_and_the_closest_flag():
    err = _error(["run", "--neuron-per-tile", "4"])
    assert err.startswith("tilesim: error: run: unrecognized argument --neuron-per-tile;")
    assert "did you mean --neurons-per-tile?" in err and "see `tilesim run --help`" in err
    assert "tilesim: error: tilesim" not in err  # the prefix once
    err = _error(["sweep", "s.toml", "--db", "x.sqlite", "--wrokers", "2", "--bogus"])
    assert "sweep: unrecognized arguments" in err and "see `tilesim sweep --help`" in err


def test_a_command_typo_gets_the_closest_command():
    err = _error(["rnu"])
    assert "invalid choice: 'rnu'" in err and "did you mean run?" in err and "see `tilesim --help`" in err
    assert "did you mean" not in _error(["--bogus"])  # nothing close: no guess


def test_a_strategy_typo_gets_the_closest_strategy():
    err = _error(["run", "--layers", "40-24-4", "--caps", "8-2", "--mapping", "round_robbin"])
    assert "did you mean round_robin?" in err


def test_progress_bars_only_on_a_terminal(monkeypatch):
    """A captured log gets no bar (issue 29: hundreds of redraws in `map-search` logs)."""
    import io

    from tilesim.running.progress import progress_bar

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stderr", io.StringIO())
    with progress_bar(3, "x", " step") as bar:
        assert bar.disable
    monkeypatch.setattr(sys, "stderr", Terminal())
    with progress_bar(3, "x", " step") as bar:
        assert not bar.disable and not bar.leave
    with progress_bar(3, "x", " step", quiet=True) as bar:
        assert bar.disable


def test_map_search_into_a_log_draws_no_bar():
    argv = ["map-search", "--layers", "40-24-4", "--caps", "8-2", "--batch", "4", "--timesteps", "8"]
    out = subprocess.run(
        [sys.executable, "-m", "tilesim", *argv, "--max-evals", "30", "--budget-s", "5"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "best found" in out.stdout
    assert "\r" not in out.stderr and "mappings" not in out.stderr, out.stderr
