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
