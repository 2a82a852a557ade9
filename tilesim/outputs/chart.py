"""A workload's own picture as data: :class:`Chart`, drawn by the core from the run's record.

A workload that wants a picture of its own (a quantity per step of its run, say) puts a
:class:`Chart` in its :class:`tilesim.outputs.runrecord.Section`; the chart is stored in
``summary.json`` with the section, so ``tilesim run`` and ``tilesim report`` draw the same picture
from the same numbers (:func:`tilesim.outputs.plots.draw_chart`), and the core never knows what the
lines mean.

A chart is panels side by side over one x axis; a panel holds line series on its left axis and,
optionally, on a right axis of its own (e.g. a total beside per-part counts)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from tilesim.errors import ConfigError, config_message

__all__ = ["Series", "Panel", "Chart", "STYLES", "SCALES"]

STYLES = ("line", "thin", "dotted")
"""How a series is drawn: a line, a thin grey line (context), a dotted line (a second quantity)."""
SCALES = ("linear", "symlog")
"""Scales of a panel's right axis (``symlog``: linear within ±1, logarithmic beyond)."""
_FILE = re.compile(r"[A-Za-z0-9_-]{1,64}\.png")


def _bad(field: str, value, problem: str, fix: str) -> ConfigError:
    return ConfigError(config_message(f"chart {field}", value, problem, fix))


def _numbers(values, field: str) -> tuple[float, ...]:
    """``values`` as finite floats (a stored chart is read back through here)."""
    try:
        out = tuple(float(v) for v in values)
    except (TypeError, ValueError):
        raise _bad(field, str(values)[:40], "must be a list of numbers", "re-run to rewrite summary.json") from None
    if not all(math.isfinite(v) for v in out):
        raise _bad(field, "non-finite value", "must be finite", "re-run to rewrite summary.json")
    return out


@dataclass(frozen=True)
class Series:
    """One line: its ``name`` (the legend), ``values`` (one per x), ``style`` (:data:`STYLES`) and
    whether it is read on the panel's ``right`` axis."""

    name: str
    values: tuple[float, ...]
    style: str = "line"
    right: bool = False

    def __post_init__(self):
        if self.style not in STYLES:
            raise _bad("style", self.style, f"must be one of {', '.join(STYLES)}", "use line, thin or dotted")

    def to_dict(self) -> dict:
        """The ``summary.json`` form."""
        return {"name": self.name, "values": list(self.values), "style": self.style, "right": self.right}

    @classmethod
    def from_dict(cls, d: Mapping) -> Series:
        """The series of its :meth:`to_dict` form."""
        return cls(str(d["name"]), _numbers(d["values"], "values"), str(d.get("style", "line")), bool(d.get("right")))


@dataclass(frozen=True)
class Panel:
    """One panel: the left axis' label, its series, the right axis' label and scale (when a series
    is on it) and an optional upper limit of the left axis."""

    y_label: str
    series: tuple[Series, ...]
    right_label: str = ""
    right_scale: str = "linear"
    y_max: float | None = None

    def __post_init__(self):
        if self.right_scale not in SCALES:
            raise _bad("right_scale", self.right_scale, f"must be one of {', '.join(SCALES)}", "linear or symlog")

    def to_dict(self) -> dict:
        """The ``summary.json`` form."""
        return {
            "y_label": self.y_label,
            "series": [s.to_dict() for s in self.series],
            "right_label": self.right_label,
            "right_scale": self.right_scale,
            "y_max": self.y_max,
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> Panel:
        """The panel of its :meth:`to_dict` form."""
        y_max = d.get("y_max")
        return cls(
            str(d["y_label"]),
            tuple(Series.from_dict(s) for s in d["series"]),
            str(d.get("right_label", "")),
            str(d.get("right_scale", "linear")),
            None if y_max is None else _numbers([y_max], "y_max")[0],
        )


@dataclass(frozen=True)
class Chart:
    """A picture of the workload's: written as ``file`` (a plain ``NAME.png``) into the run folder,
    ``panels`` side by side over the shared ``x`` values."""

    file: str
    title: str
    x_label: str
    x: tuple[float, ...]
    panels: tuple[Panel, ...]

    def __post_init__(self):
        if not _FILE.fullmatch(self.file):
            raise _bad("file", self.file, "must be a plain file name NAME.png", "e.g. activity.png")
        for p in self.panels:
            for s in p.series:
                if len(s.values) != len(self.x):
                    raise _bad(
                        f"series {s.name!r}",
                        len(s.values),
                        f"must have one value per x ({len(self.x)})",
                        "give one value per x",
                    )

    def to_dict(self) -> dict:
        """The ``summary.json`` form."""
        return {
            "file": self.file,
            "title": self.title,
            "x_label": self.x_label,
            "x": list(self.x),
            "panels": [p.to_dict() for p in self.panels],
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> Chart:
        """The chart of its :meth:`to_dict` form (a hand-edited one is checked: a ConfigError)."""
        try:
            return cls(
                str(d["file"]),
                str(d["title"]),
                str(d["x_label"]),
                _numbers(d["x"], "x"),
                tuple(Panel.from_dict(p) for p in d["panels"]),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise _bad("in summary.json", type(exc).__name__, "is malformed", "re-run to rewrite the folder") from None
