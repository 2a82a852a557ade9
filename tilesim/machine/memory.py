"""The SRAM ledger: bytes per tile and category, with the vendor profiler's categories.

Categories (PopVision's names, ipu-hardware.md §3.3): ``variables:<role>`` (role = weights,
gradients, optimizer, state, activations, sequences (per-time-step values kept for the backward pass),
inputs, other), ``exchange_buffers``,
``vertex_state``, ``vertex_code``, ``control_code``, ``exchange_code``, ``stack``.

Every entry remembers its label and tiles, so the ledger can say *which tensor* fills a tile.
``check()`` raises :class:`SramOverflowError` naming the worst tile, bytes used vs budget, its
largest entries and a remedy; ``check(mode="report")`` returns the overflowing tiles instead.

Memory over time (PopVision's liveness report, ipu-hardware.md §3.3). A workload may name its
program steps in order (``steps``) and give an entry a :class:`Liveness`: the steps over which its
bytes are *allocated* (``first`` .. ``last``; default the whole program, PopVision's always-live)
and, for a buffer filled and emptied step by step, the fraction of its bytes that *hold live data*
at each step (``held``; default all of them while allocated). :meth:`MemoryLedger.step_bytes` gives
both per step and category for a tile or a chip (the sum over its tiles, as PopVision's per-IPU
total). A tile's peak — what ``per_tile`` returns and ``check`` compares with the budget — is the
max over steps of its allocated bytes: for entries allocated for the whole program, their sum, as
before lifetimes existed. Held bytes never raise a peak: they say what the allocated bytes hold.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tilesim.errors import ConfigError, SramOverflowError, config_message

__all__ = ["MemoryLedger", "MemoryTotals", "EntryGroup", "Liveness", "StepBytes", "CATEGORIES", "VARIABLE_ROLES"]

VARIABLE_ROLES = ("weights", "gradients", "optimizer", "state", "activations", "sequences", "inputs", "other")
CATEGORIES = tuple(f"variables:{r}" for r in VARIABLE_ROLES) + (
    "exchange_buffers",
    "vertex_state",
    "vertex_code",
    "control_code",
    "exchange_code",
    "stack",
)


WHOLE_PROGRAM = ("step",)
"""The program steps of a ledger whose workload names none: one step, every entry always live."""


@dataclass(frozen=True)
class Liveness:
    """When an entry's bytes are allocated and when they hold live data, over the ledger's named
    program steps (:attr:`MemoryLedger.steps`). ``first`` / ``last``: the first and last step the
    bytes are allocated (None: the program's first / last step; both None = always live, Poplar's
    static allocation of a variable for the whole program). ``held``: per step, the fraction of the
    bytes that hold data still to be read (e.g. values recorded step by step for a later pass);
    None = all of them at every allocated step. Held bytes are a view of the allocated ones: they
    never change a peak."""

    first: str | None = None
    last: str | None = None
    held: tuple[float, ...] | None = None

    @property
    def always(self) -> bool:
        """Allocated for the whole program."""
        return self.first is None and self.last is None


ALWAYS = Liveness()


@dataclass(frozen=True)
class StepBytes:
    """Bytes per program step and category on a tile, or summed over a chip's tiles (:meth:`MemoryLedger.step_bytes`).
    ``allocated[s, c]``: bytes of category ``CATEGORIES[c]`` allocated at step ``steps[s]``;
    ``held[s, c]``: how many of those hold live data (:class:`Liveness`)."""

    steps: tuple[str, ...]
    allocated: np.ndarray  # int64 [steps, categories]
    held: np.ndarray  # int64 [steps, categories], <= allocated

    def peak_step(self) -> int:
        """The step of the peak: the first with the most allocated bytes, of those the one holding most live data."""
        alloc = self.allocated.sum(axis=1)
        held = np.where(alloc == alloc.max(), self.held.sum(axis=1), -1)
        return int(np.argmax(held))

    def flat(self) -> bool:
        """The same bytes allocated at every step (every entry there always live)."""
        alloc = self.allocated.sum(axis=1)
        return bool((alloc == alloc[0]).all())


@dataclass(frozen=True)
class _Entry:
    label: str
    category: str
    tiles: np.ndarray  # global tile ids
    bytes: np.ndarray  # per tile, aligned with tiles
    span: tuple[int, int]  # first and last step index allocated
    held: np.ndarray | None = None  # fraction holding live data per step (None: 1 while allocated)
    lo: int = 0  # the lowest and highest tile charged (a query skips entries outside its tiles)
    hi: int = -1


class MemoryLedger:
    """Per-tile SRAM accounting for a machine (all chips)."""

    def __init__(self, machine, remedy: str = "", steps: tuple[str, ...] = WHOLE_PROGRAM):
        self.machine = machine
        self.budget = int(machine.chip.sram_bytes)
        self.total_tiles = machine.total_tiles
        self._cat_index = {c: i for i, c in enumerate(CATEGORIES)}
        self._always = np.zeros((len(CATEGORIES), self.total_tiles), np.int64)  # always-live entries
        self._peak: tuple[np.ndarray, np.ndarray] | None = None  # (per tile, table) with lifetimes, cached
        self.entries: list[_Entry] = []
        self.steps: tuple[str, ...] = WHOLE_PROGRAM
        self.set_steps(steps)
        self.remedy = remedy or (
            "put less work on each tile (use more tiles or chips), "
            "shrink batch or time steps, or use a machine with more SRAM per tile"
        )

    def set_steps(self, steps: tuple[str, ...]) -> None:
        """Name the program's steps in order (what :class:`Liveness` refers to); only before any entry
        with a lifetime is charged."""
        steps = tuple(str(x) for x in steps)
        if not steps or len(set(steps)) != len(steps):
            raise ConfigError(config_message("memory program steps", steps, "must be distinct names, at least one"))
        if steps != self.steps and any(e.span != (0, len(self.steps) - 1) or e.held is not None for e in self.entries):
            raise ConfigError(
                config_message("memory program steps", steps, "come after entries with lifetimes", "name them first")
            )
        self.steps = steps
        self._step_index = {name: i for i, name in enumerate(steps)}
        whole = (0, len(steps) - 1)
        self.entries = [_Entry(e.label, e.category, e.tiles, e.bytes, whole, None, e.lo, e.hi) for e in self.entries]
        self._peak = None

    def add(self, category: str, bytes_per_tile, tiles=None, label: str = "", liveness: Liveness | None = None) -> None:
        """Charge ``bytes_per_tile`` (scalar or aligned array) on ``tiles`` (global ids; None = all),
        allocated and live as ``liveness`` says (default: always)."""
        if category not in self._cat_index:
            raise ConfigError(
                config_message("memory category", category, "is unknown", f"use one of {', '.join(CATEGORIES)}")
            )
        name = label or category
        tiles = self._tiles(tiles, name)
        b = np.asarray(bytes_per_tile, dtype=np.float64)
        if b.ndim == 0:
            b = np.full(tiles.size, float(b))
        if b.shape != tiles.shape:
            raise ConfigError(
                config_message(f"memory '{name}' bytes", b.shape, f"must be a scalar or match the {tiles.size} tiles")
            )
        if not np.isfinite(b).all() or (b < 0).any():
            raise ConfigError(
                config_message(f"memory '{name}' bytes", "negative or non-finite", "must be finite and >= 0")
            )
        span, held = self._lifetime(liveness or ALWAYS, name)
        bi = np.ceil(b).astype(np.int64)
        if span == (0, len(self.steps) - 1):
            np.add.at(self._always[self._cat_index[category]], tiles, bi)
        self._peak = None
        bounds = (int(tiles.min()), int(tiles.max())) if tiles.size else (0, -1)
        self.entries.append(_Entry(name, category, tiles, bi, span, held, *bounds))

    def _tiles(self, tiles, name: str) -> np.ndarray:
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
                config_message(f"memory '{name}' tile", bad, f"is out of range 0..{self.total_tiles - 1}")
            )
        return tiles

    def _lifetime(self, live: Liveness, name: str) -> tuple[tuple[int, int], np.ndarray | None]:
        """(first, last) step indices allocated and the held fractions per step of ``live``."""
        S = len(self.steps)
        idx = []
        for which, step in (("first", live.first), ("last", live.last)):
            if step is not None and step not in self._step_index:
                raise ConfigError(
                    config_message(
                        f"memory '{name}' {which} step", step, "is not a program step", f"use one of {self.steps}"
                    )
                )
            idx.append(self._step_index[step] if step is not None else (0 if which == "first" else S - 1))
        if idx[0] > idx[1]:
            raise ConfigError(
                config_message(f"memory '{name}' lifetime", (live.first, live.last), "ends before it starts")
            )
        held = None
        if live.held is not None:
            held = np.asarray(live.held, np.float64)
            inside = np.zeros(S, bool)
            inside[idx[0] : idx[1] + 1] = True
            if held.shape != (S,) or not np.isfinite(held).all() or (held < 0).any() or (held > 1).any():
                raise ConfigError(
                    config_message(f"memory '{name}' held", live.held, f"must be {S} fractions in 0..1, one per step")
                )
            if held[~inside].any():
                raise ConfigError(
                    config_message(f"memory '{name}' held", live.held, "holds data at a step it is not allocated")
                )
        return (idx[0], idx[1]), held

    def add_group(self, entries, tiles) -> None:
        """Charge several entries [(category, bytes aligned with tiles, label[, liveness])] on the same tiles."""
        for category, b, label, *live in entries:
            self.add(category, b, tiles, label, *live)

    # ---- queries ---------------------------------------------------------------------------
    def _partial(self) -> list[_Entry]:
        whole = (0, len(self.steps) - 1)
        return [e for e in self.entries if e.span != whole]

    def _peaks(self) -> tuple[np.ndarray, np.ndarray]:
        """(bytes per tile at its peak step, bytes per category and tile at that step). Entries
        allocated for part of the program are summed per *segment* (a run of steps between
        lifetime ends, where every entry is allocated throughout or not at all): the max over
        segments is the max over steps, at a cost of segments x tiles, not steps x tiles."""
        if self._peak is not None:
            return self._peak
        part = self._partial()
        if not part:
            self._peak = (self._always.sum(axis=0), self._always)
            return self._peak
        cuts = np.unique([0, len(self.steps)] + [c for e in part for c in (e.span[0], e.span[1] + 1)])
        starts = cuts[:-1]
        seg = np.zeros((starts.size, self.total_tiles), np.int64)
        covers = []
        for e in part:
            on = (starts >= e.span[0]) & (starts <= e.span[1])
            covers.append(on)
            for k in np.flatnonzero(on):
                np.add.at(seg[k], e.tiles, e.bytes)
        peak_seg = np.argmax(seg, axis=0)  # first max: the earliest segment of the peak
        used = self._always.sum(axis=0) + seg[peak_seg, np.arange(self.total_tiles)]
        table = self._always.copy()
        for e, on in zip(part, covers):
            m = on[peak_seg[e.tiles]]
            np.add.at(table[self._cat_index[e.category]], e.tiles[m], e.bytes[m])
        self._peak = (used, table)
        return self._peak

    @property
    def table(self) -> np.ndarray:
        """Bytes per category (rows, :data:`CATEGORIES`) and tile at the tile's peak step."""
        return self._peaks()[1]

    def per_tile(self) -> np.ndarray:
        """Each tile's peak: the max over program steps of its allocated bytes (a new array)."""
        return self._peaks()[0].copy()

    def by_category(self, tile: int | None = None) -> dict:
        """Bytes per category of ``tile`` at its peak step (None: summed over every tile's peak)."""
        col = self.table.sum(axis=1) if tile is None else self.table[:, tile]
        return {c: int(v) for c, v in zip(CATEGORIES, col) if v}

    def step_bytes(self, tile: int | None = None, chip: int | None = None) -> StepBytes:
        """Bytes allocated and holding live data per program step and category on ``tile`` (a global
        id), or summed over the tiles of ``chip``: the data of the liveness plot, whose max over
        steps of the allocated total is ``per_tile()[tile]``."""
        if (tile is None) == (chip is None):
            raise ConfigError(config_message("memory step_bytes", (tile, chip), "give a tile or a chip, not both"))
        S, C = len(self.steps), len(CATEGORIES)
        alloc = np.zeros((S, C), np.int64)
        held = np.zeros((S, C), np.float64)
        tpc = self.machine.tiles_per_chip
        if tile is not None:
            lo = hi = int(tile)
        else:
            lo, hi = int(chip or 0) * tpc, (int(chip or 0) + 1) * tpc - 1
        for e in self.entries:
            if e.lo > hi or e.hi < lo:
                continue
            on = e.tiles == tile if tile is not None else (e.tiles >= lo) & (e.tiles <= hi)
            w = int(e.bytes[on].sum())
            if not w:
                continue
            c = self._cat_index[e.category]
            alloc[e.span[0] : e.span[1] + 1, c] += w
            if e.held is None:
                held[e.span[0] : e.span[1] + 1, c] += w
            else:
                held[:, c] += w * e.held
        return StepBytes(self.steps, alloc, np.minimum(np.rint(held).astype(np.int64), alloc))

    def max_tile(self) -> int:
        return int(np.argmax(self.per_tile()))

    def overflow_tiles(self) -> np.ndarray:
        used = self.per_tile()
        over = np.flatnonzero(used > self.budget)
        return over[np.argsort(-used[over], kind="stable")]

    def explain_tile(self, tile: int, top: int = 5) -> list[tuple[str, str, int]]:
        """The largest entries on ``tile`` at its peak step: (label, category, bytes)."""
        rows = []
        at = self.step_bytes(tile).peak_step() if self._partial() else 0
        for e in self.entries:
            if e.lo > tile or e.hi < tile:
                continue
            m = e.tiles == tile
            if m.any() and e.span[0] <= at <= e.span[1]:
                rows.append((e.label, e.category, int(e.bytes[m].sum())))
        rows.sort(key=lambda r: -r[2])
        return rows[:top]

    def peak_step(self, tile: int) -> str:
        """The program step where ``tile`` peaks (:meth:`StepBytes.peak_step`)."""
        return self.steps[self.step_bytes(tile).peak_step()]

    def _when(self, tile: int) -> str:
        """Where in the program ``tile`` peaks, for a message ("" when the workload names no steps)."""
        if self.steps == WHOLE_PROGRAM:
            return ""
        sb = self.step_bytes(tile)
        step = self.steps[sb.peak_step()]
        if sb.flat():
            return f" (allocated for the whole program; its live data peaks at program step '{step}')"
        return f" at program step '{step}'"

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
                f"{self.budget:,} B budget (+{100 * (used / self.budget - 1):.1f} %){self._when(worst)}; "
                f"largest there: {parts}; "
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
        steps = self.steps != WHOLE_PROGRAM
        head = f"{'tile':>16} {'used B':>10} {'% budget':>8} " + " ".join(f"{s:>14}" for s in short)
        head += "  peak step" if steps else ""
        lines = [f"SRAM budget {self.budget:,} B per tile; {int((used > self.budget).sum())} tile(s) over", head]
        for t in order:
            flag = " OVERFLOW" if used[t] > self.budget else ""
            lines.append(
                f"{self._where(t):>16} {used[t]:>10,} {100 * used[t] / self.budget:>7.1f}% "
                + " ".join(f"{self.table[self._cat_index[c], t]:>14,}" for c in cats)
                + (f"  {self.peak_step(t)}" if steps else "")
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
            **({"liveness": self.liveness(mt)} if self.steps != WHOLE_PROGRAM else {}),
        }

    def liveness(self, tile: int) -> dict:
        """The liveness series of ``tile`` and of its chip, JSON-ready: the steps, the tile's peak
        step, its bytes allocated per step and its bytes holding live data per step by category
        (categories it has none of left out); the chip's (the sum over its tiles, PopVision's
        per-IPU total) bytes allocated and holding live data per step."""
        chip = int(tile) // self.machine.tiles_per_chip
        own, whole = self.step_bytes(tile), self.step_bytes(chip=chip)
        return {
            "steps": list(self.steps),
            "tile": int(tile),
            "peak_step": self.steps[own.peak_step()],
            "allocated_bytes": own.allocated.sum(axis=1).tolist(),
            "held_bytes": {c: own.held[:, i].tolist() for i, c in enumerate(CATEGORIES) if own.allocated[:, i].any()},
            "chip": chip,
            "chip_allocated_bytes": whole.allocated.sum(axis=1).tolist(),
            "chip_held_bytes": whole.held.sum(axis=1).tolist(),
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

    def set_steps(self, steps: tuple[str, ...]) -> None:
        """Accepted for :class:`MemoryLedger`'s interface; the totals count every entry as always live."""

    def add(self, category: str, bytes_per_tile, tiles=None, label: str = "", liveness: Liveness | None = None) -> None:
        """As :meth:`MemoryLedger.add` for entries allocated for the whole program (held fractions
        do not change a peak); an entry allocated for part of it needs the ledger."""
        if liveness is not None and not liveness.always:
            raise TypeError("MemoryTotals counts entries allocated for the whole program only; use a MemoryLedger")
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
            if any(len(e) > 3 and not e[3].always for e in entries):
                raise TypeError("MemoryTotals counts entries allocated for the whole program only; use a MemoryLedger")
            total = sum(np.ceil(np.asarray(e[1], np.float64)).astype(np.int64) for e in entries)
            if isinstance(entries, EntryGroup):
                entries.total_bytes = total
        self.used[tiles] += total

    def per_tile(self) -> np.ndarray:
        return self.used

    def overflow_tiles(self) -> np.ndarray:
        over = np.flatnonzero(self.used > self.budget)
        return over[np.argsort(-self.used[over], kind="stable")]
