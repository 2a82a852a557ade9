"""One error hierarchy for everything a user can get wrong.

Every message names the object, the value, the limit and the fix, so that the CLI can print
it as one line and exit 2 (no traceback for bad input).
"""

from __future__ import annotations


class TileSimError(Exception):
    """Base class of every error tilesim raises on purpose."""


class ConfigError(TileSimError, ValueError):
    """A machine, program, workload or command-line value is malformed or out of range."""


class MappingError(TileSimError, ValueError):
    """A placement of work on tiles is incomplete, overlapping or out of range."""


class MissingDataError(TileSimError, KeyError):
    """A record was asked for data it does not hold (e.g. counters of a phase a layer never ran)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class SramOverflowError(TileSimError):
    """At least one tile needs more SRAM than its budget.

    Attributes
    ----------
    tiles : list[int]
        Global indices of the overflowing tiles, worst first.
    report : str
        The ledger's text report of the worst tiles.
    """

    def __init__(self, message: str, tiles=(), report: str = ""):
        super().__init__(message)
        self.tiles = list(tiles)
        self.report = report


def require(cond: bool, field: str, value, limit: str, fix: str = "") -> None:
    """Raise :class:`ConfigError` with the house message form unless ``cond`` holds."""
    if not cond:
        raise ConfigError(config_message(field, value, limit, fix))


def config_message(field: str, value, limit: str, fix: str = "") -> str:
    """The house one-line error text ``"<field> = <value!r>: <limit>; <fix>"`` (no ``; <fix>`` when
    ``fix`` is empty); never raises."""
    msg = f"{field} = {value!r}: {limit}"
    if fix:
        msg += f"; {fix}"
    return msg
