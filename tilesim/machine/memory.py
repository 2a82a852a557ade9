"""The SRAM ledger: bytes per tile and category, with the vendor profiler's categories.

Categories (PopVision's names, ipu-hardware.md §3.3): ``variables:<role>`` (role = weights,
gradients, optimizer, state, activations, sequences (per-time-step values kept for the backward pass),
inputs, other), ``exchange_buffers``,
``vertex_state``, ``vertex_code``, ``control_code``, ``exchange_code``, ``stack``.

Every entry remembers its label and tiles, so the ledger can say *which tensor* fills a tile.
``check()`` raises :class:`SramOverflowError` naming the worst tile, bytes used vs budget, its
largest entries and a remedy; ``check(mode="report")`` returns the overflowing tiles instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tilesim.errors import ConfigError, SramOverflowError, config_message

__all__ = ["MemoryLedger", "MemoryTotals", "EntryGroup", "CATEGORIES", "VARIABLE_ROLES"]

VARIABLE_ROLES = ("weights", "gradients", "optimizer", "state", "activations", "sequences", "inputs", "other")
CATEGORIES = tuple(f"variables:{r}" for r in VARIABLE_ROLES) + (
    "exchange_buffers",
    "vertex_state",
    "vertex_code",
    "control_code",
    "exchange_code",
    "stack",
)


@dataclass(frozen=True)
class _Entry:
    label: str
    category: str
    tiles: np.ndarray  # global tile ids
    bytes: np.ndarray  # per tile, aligned with tiles


class MemoryLedger:
    """Per-tile SRAM accounting for a machine (all chips)."""

    def __init__(self, machine, remedy: str = ""):
        self.machine = machine
        self.budget = int(machine.chip.sram_bytes)
        self.total_tiles = machine.total_tiles
        self._cat_index = {c: i for i, c in enumerate(CATEGORIES)}
        self.table = np.zeros((len(CATEGORIES), self.total_tiles), np.int64)
        self.entries: list[_Entry] = []
        self.remedy = remedy or (
            "put less work on each tile (use more tiles or chips), "
            "shrink batch or time steps, or use a machine with more SRAM per tile"
        )

    def add(self, category: str, bytes_per_tile, tiles=None, label: str = "") -> None:
        """Charge ``bytes_per_tile`` (scalar or aligned array) on ``tiles`` (global ids; None = all)."""
        if category not in self._cat_index:
            raise ConfigError(
                config_message("memory category", category, "is unknown", f"use one of {', '.join(CATEGORIES)}")
            )
        if tiles is None:
            tiles = np.arange(self.total_tiles)
        elif isinstance(tiles, slice):
            tiles = np.arange(self.total_tiles)[tiles]
        tiles = np.asarray(tiles)
        if tiles.dtype == bool:
            tiles = np.flatnonzero(tiles)
        tiles = tiles.astype(np.int64).ravel()
        if tiles.size and (tiles.min() < 0 or tiles.max() >= self.total_tiles):
            bad = int(tiles[(tiles < 0) | (tiles >= self.total_tiles)][0])
            raise ConfigError(
                config_message(f"memory '{label or category}' tile", bad, f"is out of range 0..{self.total_tiles - 1}")
            )
        b = np.asarray(bytes_per_tile, dtype=np.float64)
        if b.ndim == 0:
            b = np.full(tiles.size, float(b))
        if b.shape != tiles.shape:
            raise ConfigError(
                config_message(
                    f"memory '{label or category}' bytes", b.shape, f"must be a scalar or match the {tiles.size} tiles"
                )
            )
        if not np.isfinite(b).all() or (b < 0).any():
            raise ConfigError(
                config_message(
                    f"memory '{label or category}' bytes", "negative or non-finite", "must be finite and >= 0"
                )
            )
        bi = np.ceil(b).astype(np.int64)
        np.add.at(self.table[self._cat_index[category]], tiles, bi)
        self.entries.append(_Entry(label or category, category, tiles, bi))

    def add_group(self, entries, tiles) -> None:
        """Charge several entries [(category, bytes aligned with tiles, label)] on the same tiles."""
        for category, b, label in entries:
            self.add(category, b, tiles, label)

    # ---- queries ---------------------------------------------------------------------------
    def per_tile(self) -> np.ndarray:
        return self.table.sum(axis=0)

    def by_category(self, tile: int | None = None) -> dict:
        col = self.table.sum(axis=1) if tile is None else self.table[:, tile]
        return {c: int(v) for c, v in zip(CATEGORIES, col) if v}

    def max_tile(self) -> int:
        return int(np.argmax(self.per_tile()))

    def overflow_tiles(self) -> np.ndarray:
        used = self.per_tile()
        over = np.flatnonzero(used > self.budget)
        return over[np.argsort(-used[over], kind="stable")]

    def explain_tile(self, tile: int, top: int = 5) -> list[tuple[str, str, int]]:
        """The largest entries on ``tile``: (label, category, bytes)."""
        rows = []
        for e in self.entries:
            m = e.tiles == tile
            if m.any():
                rows.append((e.label, e.category, int(e.bytes[m].sum())))
        rows.sort(key=lambda r: -r[2])
        return rows[:top]

    def _where(self, tile: int) -> str:
        chip, t = divmod(int(tile), self.machine.tiles_per_chip)
        return f"tile {t} of chip {chip}" if self.machine.chips > 1 else f"tile {t}"

    def check(self, mode: str = "raise") -> np.ndarray:
        """Raise on overflow (``mode="raise"``) or return the overflowing tiles (``"report"``)."""
        if mode not in ("raise", "report"):
            raise ConfigError(config_message("memory check mode", mode, "must be 'raise' or 'report'"))
        over = self.overflow_tiles()
        if over.size and mode == "raise":
            worst = int(over[0])
            used = int(self.per_tile()[worst])
            parts = ", ".join(f"{lab} [{cat}] {b:,} B" for lab, cat, b in self.explain_tile(worst, 3))
            msg = (
                f"SRAM overflow on {over.size} tile(s): {self._where(worst)} needs {used:,} B of "
                f"{self.budget:,} B budget (+{100 * (used / self.budget - 1):.1f} %); largest there: {parts}; "
                f"fix: {self.remedy}"
            )
            raise SramOverflowError(msg, tiles=over.tolist(), report=self.report())
        return over

    def report(self, top: int = 10) -> str:
        """Text table of the ``top`` fullest tiles, by category."""
        used = self.per_tile()
        order = np.argsort(-used, kind="stable")[:top]
        cats = [c for c in CATEGORIES if self.table[self._cat_index[c]].any()]
        short = [c.replace("variables:", "var:") for c in cats]
        head = f"{'tile':>16} {'used B':>10} {'% budget':>8} " + " ".join(f"{s:>14}" for s in short)
        lines = [f"SRAM budget {self.budget:,} B per tile; {int((used > self.budget).sum())} tile(s) over", head]
        for t in order:
            flag = " OVERFLOW" if used[t] > self.budget else ""
            lines.append(
                f"{self._where(t):>16} {used[t]:>10,} {100 * used[t] / self.budget:>7.1f}% "
                + " ".join(f"{self.table[self._cat_index[c], t]:>14,}" for c in cats)
                + flag
            )
        return "\n".join(lines)

    def to_dict(self) -> dict:
        used = self.per_tile()
        mt = int(np.argmax(used))
        return {
            "budget_bytes": self.budget,
            "max_tile_bytes": int(used[mt]),
            "max_tile": mt,
            "overflow_tiles": self.overflow_tiles().tolist(),
            "by_category_bytes": self.by_category(mt),
            "total_by_category_bytes": self.by_category(),
            "max_tile_entries": [{"label": lab, "category": c, "bytes": b} for lab, c, b in self.explain_tile(mt, 8)],
        }


class EntryGroup(list):
    """Entries [(category, bytes, label)] charged together on the same tiles (``add_group``);
    :class:`MemoryTotals` keeps their rounded sum on the object, so a list reused across calls
    (a cached layer) is summed once."""

    total_bytes: np.ndarray | np.integer | int | None = None  # rounded bytes (int64 array or scalar; 0: no entries)


class MemoryTotals:
    """Bytes per tile only (no categories, labels or entries): what a search needs to reject a
    placement that overflows, at a fraction of :class:`MemoryLedger`'s cost. Same ``add`` (each
    entry rounded up to whole bytes, as in the ledger) and ``overflow_tiles``; inputs are
    trusted (they come from a workload's own memory model, already checked by the ledger)."""

    def __init__(self, machine, remedy: str = ""):
        self.budget = int(machine.chip.sram_bytes)
        self.total_tiles = machine.total_tiles
        self.used = np.zeros(self.total_tiles, np.int64)

    def add(self, category: str, bytes_per_tile, tiles=None, label: str = "") -> None:
        b = np.ceil(np.asarray(bytes_per_tile, np.float64)).astype(np.int64)
        if tiles is None or isinstance(tiles, slice):
            self.used[tiles if tiles is not None else slice(None)] += b
        elif isinstance(tiles, np.ndarray) and tiles.size > 1 and (np.diff(tiles) > 0).all():
            self.used[tiles] += b  # distinct tiles: no scatter-add needed
        elif b.ndim == 0:
            self.used += np.bincount(np.asarray(tiles).ravel(), minlength=self.total_tiles) * b
        else:
            np.add.at(self.used, np.asarray(tiles).ravel(), np.broadcast_to(b, np.shape(tiles)).ravel())

    def add_group(self, entries, tiles) -> None:
        """As :meth:`MemoryLedger.add_group`; the entries' rounded sum is kept with the list (a
        search passes the same list object while a layer's grouping is unchanged)."""
        total = getattr(entries, "total_bytes", None)
        if total is None:
            total = sum(np.ceil(np.asarray(b, np.float64)).astype(np.int64) for _, b, _ in entries)
            if isinstance(entries, EntryGroup):
                entries.total_bytes = total
        self.used[tiles] += total

    def per_tile(self) -> np.ndarray:
        return self.used

    def overflow_tiles(self) -> np.ndarray:
        over = np.flatnonzero(self.used > self.budget)
        return over[np.argsort(-self.used[over], kind="stable")]
