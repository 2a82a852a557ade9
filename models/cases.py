"""What every workload's measured-cases CSV shares: reading it with its required columns, numbers
that name their row when they are not numbers, and the rows ``tilesim validate`` prints (predicted
and measured in the file's unit; a row that cannot be predicted says why and stops nothing)."""

from __future__ import annotations

import csv
from pathlib import Path

from tilesim.errors import ConfigError, config_message

__all__ = ["read_table", "number", "result_row"]


def read_table(path, columns: tuple[str, ...]) -> list[dict]:
    """The rows of a cases CSV; raises :class:`ConfigError` naming the missing columns."""
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in columns if c not in (reader.fieldnames or [])]
        if missing:
            raise ConfigError(
                config_message(
                    f"{Path(path).name}: columns", ",".join(missing), "missing", f"give {', '.join(columns)}"
                )
            )
        return list(reader)


def number(row: dict, col: str, case: str, *, integer: bool = False) -> float:
    """``row[col]`` as a number (an integer where ``integer``), or a :class:`ConfigError` naming the row."""
    text = (row.get(col) or "").strip()
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(config_message(f"{case}: {col}", text, "must be a number", "fix the row")) from None
    if integer:
        if not value.is_integer():
            raise ConfigError(config_message(f"{case}: {col}", text, "must be a whole number", "fix the row"))
        return int(value)
    return value


def result_row(workload: str, case: str, machine: str, quantity: str, use: str, predicted, measured, problem) -> dict:
    """One ``tilesim validate`` row: ``predicted`` a number or None (then ``problem`` says why)."""
    ok = predicted is not None
    return {
        "workload": workload,
        "case": case,
        "machine": machine,
        "quantity": quantity,
        "use": use,
        "predicted": round(float(predicted), 3) if ok else None,
        "measured": measured,
        "error_pct": round(100 * (predicted - measured) / measured, 2) if ok and measured else None,
        "problem": None if ok else problem,
    }
