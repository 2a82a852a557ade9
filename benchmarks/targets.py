"""What every benchmark shares (issue 54): the checkout on ``sys.path`` and an exit status that follows its targets.

A benchmark runs as ``python benchmarks/bench_X.py`` from the repository root (its folder is then on
``sys.path``, so ``from targets import ...`` finds this file). :data:`ROOT` goes on the path too, so that the
checkout's ``experiments`` package (not installed) imports; child processes get it through
:func:`child_env`. Each target is printed as ``PASS`` or ``FAIL`` by :meth:`Targets.check`, and the
benchmark exits with :meth:`Targets.status`: 1 when any target failed (``make bench`` reports it).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def child_env() -> dict[str, str]:
    """This process's environment with :data:`ROOT` first on ``PYTHONPATH`` (for a measured child process that
    imports ``experiments``, whatever the folder it was started from)."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))


@dataclass
class Targets:
    """The verdicts of one benchmark's targets: ``check(ok)`` gives the word to print, ``status()`` the exit code."""

    failed: list[str] = field(default_factory=list)

    def check(self, ok: bool, what: str = "target") -> str:
        """``"PASS"`` or ``"FAIL"`` for one target; a failure is remembered under ``what``."""
        if not ok:
            self.failed.append(what)
        return "PASS" if ok else "FAIL"

    def status(self, name: str) -> int:
        """0 when every target passed; else 1, after a line naming the failed targets."""
        if self.failed:
            print(f"{name}: FAILED {len(self.failed)} target(s): {', '.join(self.failed)}")
            return 1
        return 0
