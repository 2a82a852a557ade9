"""How a workload's stored run is re-run on another machine (``tilesim compare RUN --machines ...``).

A workload registers, where it adds its commands, the dotted path of a function
``runner(run_folder, machine, chips, out, force) -> Path`` that re-runs the run stored in
``run_folder`` with its settings on ``machine`` (a preset name or TOML file; ``chips``: None for the
machine's own) into the run folder ``out`` and returns it. The path is resolved only when a
comparison runs, so registering loads nothing (the command line starts without NumPy); the core
never imports a workload (:func:`tilesim.outputs.compare.runs_on_machines` calls the runner).
"""

from __future__ import annotations

from importlib import import_module

__all__ = ["MACHINE_RUNNERS", "register_machine_runner", "machine_runner"]

MACHINE_RUNNERS: dict[str, str] = {}
"""Per workload (``record.workload``): the ``"module:function"`` path of its runner."""


def register_machine_runner(workload: str, path: str) -> None:
    """Make the function at ``path`` (``"package.module:function"``) the way runs of ``workload`` are
    re-run on other machines (:data:`MACHINE_RUNNERS`)."""
    MACHINE_RUNNERS[workload] = path


def machine_runner(workload: str):
    """The registered runner of ``workload`` (imported now), or None when it registered none."""
    path = MACHINE_RUNNERS.get(workload)
    if path is None:
        return None
    module, _, name = path.partition(":")
    return getattr(import_module(module), name)
