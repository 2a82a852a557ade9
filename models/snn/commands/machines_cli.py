"""One SNN run's network on other machines: what ``tilesim compare RUN --machines A,B,...`` runs.

:func:`run_on_machine` re-runs the run stored in a folder with its settings — the network, batch,
time steps, caps, optimizer, data, activity, steps, stack choice and structure — on another machine,
and writes a run folder (the same record and outputs as ``tilesim run --out``). What belongs to the
old machine is dropped: its chip count (the new machine's own, or the ``NAME:C`` chips asked for),
its neurons per tile and a mapping file (the new machine's default placement, with the run's
strategy when it named one: placement is the machine's and its stack's, not the network's). A run
whose network overflows SRAM is still written (SRAM overflow reported, not raised; where no
neurons-per-tile value fits, at the fewest that places the network on the machine), so the
comparison names SRAM as what limits that machine.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tilesim.errors import ConfigError, SramOverflowError, config_message
from tilesim.io import read_toml
from tilesim.models.snn.commands.options import RUN_OPTIONS, RunOptions, options_from_mapping

__all__ = ["options_on_machine", "run_on_machine", "train_placed", "fewest_that_place"]


def options_on_machine(options: RunOptions, machine: str, chips: int | None, out) -> RunOptions:
    """``options`` with the machine (and ``chips``) replaced and what belonged to the old machine
    dropped (module docstring); SRAM overflow is reported, not raised; written to ``out``."""
    from tilesim.models.snn.placement.fit import strategy_or_auto  # loaded only when the comparison runs

    return dataclasses.replace(
        options,
        machine=machine,
        chips=chips,
        neurons_per_tile=None,
        mapping=strategy_or_auto(options.mapping),  # a mapping file belongs to the old machine
        memory_check="report",
        out=str(out),
        json=False,
    )


def run_on_machine(run_folder, machine: str, chips: int | None, out, force: bool = False) -> Path:
    """Re-run the run stored in ``run_folder`` on ``machine`` (:func:`options_on_machine`) and write
    its run folder ``out`` (:func:`tilesim.models.snn.commands.cli.write_run_outputs`); returns ``out``.
    Raises :class:`ConfigError` for a folder without stored options, a run that does not fit the
    host's memory, or an ``out`` that holds files of another program (unless ``force``)."""
    from tilesim.io import check_run_folder  # loaded only when the comparison runs
    from tilesim.models.snn.commands.budget import check_run_memory
    from tilesim.models.snn.commands.cli import write_run_outputs

    stored = Path(run_folder) / RUN_OPTIONS
    if not stored.is_file():
        raise ConfigError(
            config_message(
                "RUN", str(run_folder), f"has no {RUN_OPTIONS} to re-run", "give a folder of `tilesim run --out`"
            )
        )
    stored_options = options_from_mapping(read_toml(stored, "stored run options"), where=str(stored))
    options = options_on_machine(stored_options, machine, chips, out)
    check_run_memory(options)
    check_run_folder(out, "--out", force)
    write_run_outputs(out, train_placed(options))
    return Path(out)


def train_placed(options: RunOptions):
    """:func:`tilesim.models.snn.commands.run.run_training` of ``options``; where no neurons-per-tile value
    fits SRAM, at the fewest that places the network (:func:`fewest_that_place`), its overflow reported."""
    from tilesim.models.snn.commands.run import run_training  # loaded only when the comparison runs

    try:
        return run_training(options)
    except SramOverflowError:
        npt = fewest_that_place(options)
        if npt is None or options.neurons_per_tile is not None:
            raise
        return run_training(dataclasses.replace(options, neurons_per_tile=npt))


def fewest_that_place(options: RunOptions) -> int | None:
    """The fewest (even) neurons per tile with which ``options``' mapping strategy places its network on
    its machine, fitting SRAM or not (None: none places it)."""
    from tilesim.errors import MappingError
    from tilesim.machine.description import load_machine
    from tilesim.models.snn.commands.run import network_config
    from tilesim.models.snn.placement.fit import default_strategy, strategy_mapping

    config, machine = network_config(options), load_machine(options.machine, options.chips)
    strategy = default_strategy(machine, options.stack) if options.mapping == "auto" else options.mapping
    for npt in range(2, 4097, 2):  # the candidates of the default placement
        try:
            strategy_mapping(strategy, config, machine, npt)
        except MappingError:
            continue
        return npt
    return None
