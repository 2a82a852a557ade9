"""Programs written by hand: the TOML format of ``tilesim simulate`` (``tilesim/examples/demo.toml``),
read, bounded and validated into a :class:`tilesim.program.Program` (one-line errors naming the
field, the value, the limit and the fix)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from tilesim.errors import ConfigError, config_message, require
from tilesim.io import read_toml
from tilesim.program import ProgramBuilder

__all__ = ["parse_tiles", "program_size", "multicast_sizes", "program_from_dict", "load_program", "MAX_QUANTITY"]


def parse_tiles(spec, n: int, where: str) -> np.ndarray:
    """Tile selection: "all", an int, "0-735", "0-9,20-29" or a list of ints, within 0..n-1."""
    if spec == "all":
        return np.arange(n)
    require(
        not isinstance(spec, bool),
        where,
        spec,
        "must be 'all', an index, a range 'a-b' or a list",
        'e.g. tiles = "0-735"',
    )
    fix = f"give 'all', an index, a range like '0-{n - 1}' or a list of indices in 0..{n - 1}"

    def in_range(v):
        require(0 <= v < n, where, v, f"is out of range 0..{n - 1}", fix)
        return v

    if isinstance(spec, int):
        return np.asarray([in_range(spec)])
    if isinstance(spec, list):
        require(
            bool(spec) and all(isinstance(v, int) and not isinstance(v, bool) for v in spec),
            where,
            spec,
            "must be a non-empty list of integer indices",
            fix,
        )
        return np.asarray([in_range(v) for v in spec], np.int64)
    require(isinstance(spec, str), where, spec, "must be 'all', an index, a range 'a-b' or a list", fix)
    parts = []
    for part in spec.split(","):
        part = part.strip()
        try:
            lo, sep, hi = part.partition("-")
            a, b = int(lo), (int(hi) if sep else int(lo))
            if b < a:
                raise ValueError
        except ValueError:
            raise ConfigError(
                config_message(where, spec, "is not a tile range like '0-735' or '0-9,20-29'", fix)
            ) from None
        in_range(a), in_range(b)  # checked before a range is expanded
        parts.append(np.arange(a, b + 1, dtype=np.int64))
    return np.concatenate(parts)


_STEP_KEYS = {
    "label",
    "repeat",
    "sync",
    "compute_cycles",
    "compute",
    "exchange_bytes",
    "exchange_in_bytes",
    "exchange_out_bytes",
    "exchange",
    "flows",
    "transfers",
    "multicasts",
    "host_bytes",
}
_MEM_KEYS = {"category", "tiles", "chips", "bytes", "label"}


def _selection(entry: dict, machine, where: str) -> np.ndarray:
    tiles = parse_tiles(entry.get("tiles", "all"), machine.tiles_per_chip, f"{where}.tiles")
    chips = parse_tiles(entry.get("chips", "all"), machine.chips, f"{where}.chips")
    return (chips[:, None] * machine.tiles_per_chip + tiles[None, :]).ravel()


# cycles and bytes beyond 2**53 (the largest integer a float64 holds exactly) are not meaningful
MAX_QUANTITY = float(2**53)


def _number(v, where):
    require(
        not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) and 0 <= v <= MAX_QUANTITY,
        where,
        v,
        "must be a finite number >= 0 and at most 2**53",
        "give a plain number such as 1000",
    )
    return float(v)


def _tables(value, where: str, example: str) -> list:
    """``value`` as a list of tables (TOML ``[[...]]``), else one-line ConfigError."""
    require(
        isinstance(value, list) and all(isinstance(e, dict) for e in value),
        where,
        value,
        "must be a list of tables",
        f"write each entry as [[{example}]] with its keys below",
    )
    return value


def _repeat(v, where):
    require(
        not isinstance(v, bool) and isinstance(v, int) and v >= 1,
        where,
        v,
        "must be an integer >= 1",
        "e.g. repeat = 8",
    )
    return v


def _sync(v, where, chips: int):
    """'chip', 'all' or a list of chip groups (lists of chip indices)."""
    if v in ("chip", "all"):
        return v
    ok = (
        isinstance(v, list)
        and v
        and all(isinstance(g, list) and all(isinstance(c, int) and not isinstance(c, bool) for c in g) for g in v)
    )
    require(
        bool(ok),
        where,
        v,
        "must be 'chip', 'all' or a list of chip groups",
        f"e.g. sync = [[0, 1], [2, 3]] (chips 0..{chips - 1})",
    )
    return v


def program_size(data: dict, machine) -> tuple:
    """``(supersteps, bytes)`` a program table would build to, without building it: the
    per-tile rows (float32 compute and, for supersteps with exchange, bytes in and out), twice
    (the rows and their stacked copy). Malformed entries count as one superstep."""
    steps = data.get("superstep", [])
    S = rows = 0
    for st in steps if isinstance(steps, list) else []:
        r = st.get("repeat", 1) if isinstance(st, dict) else 1
        r = r if isinstance(r, int) and not isinstance(r, bool) and r >= 1 else 1
        ex = isinstance(st, dict) and any(
            k in st
            for k in (
                "exchange_bytes",
                "exchange_in_bytes",
                "exchange_out_bytes",
                "exchange",
                "transfers",
                "multicasts",
            )
        )
        S += r
        rows += r * (3 if ex else 1)
    return S, 2 * 4 * rows * machine.total_tiles


def multicast_sizes(data: dict) -> list[tuple[str, object, int]]:
    """``(field, value, destination tiles x repeats)`` of every multicast of a program table, without
    building it: the engine routes a multicast's tree once per destination and per repeat, so this is
    its work and memory. A malformed entry counts 0 (the build names what is wrong with it)."""
    out: list[tuple[str, object, int]] = []
    steps = data.get("superstep", [])
    for i, st in enumerate(steps if isinstance(steps, list) else []):
        if not isinstance(st, dict) or not isinstance(st.get("multicasts"), list):
            continue
        r = st.get("repeat", 1)
        r = r if isinstance(r, int) and not isinstance(r, bool) and r >= 1 else 1
        for j, t in enumerate(st["multicasts"]):
            w = f"superstep[{i}].multicasts[{j}]"
            rect = t.get("rectangle") if isinstance(t, dict) else None
            dsts = t.get("dst_tiles") if isinstance(t, dict) else None
            if isinstance(rect, list) and len(rect) == 4 and all(isinstance(v, int) for v in rect):
                x0, y0, x1, y1 = rect
                out.append((f"{w}.rectangle", rect, r * (abs(x1 - x0) + 1) * (abs(y1 - y0) + 1)))
            elif isinstance(dsts, list):
                out.append((f"{w}.dst_tiles", f"[{len(dsts):,} tiles]", r * len(dsts)))
    return out


def _step_compute(st: dict, where: str, machine) -> np.ndarray:
    """Per-tile compute cycles of superstep table ``st``: ``compute_cycles`` everywhere, overridden by
    each ``[[superstep.compute]]`` entry on its tiles/chips."""
    N = machine.total_tiles
    comp = np.full(N, _number(st.get("compute_cycles", 0), f"{where}.compute_cycles"))
    for j, e in enumerate(_tables(st.get("compute", []), f"{where}.compute", "superstep.compute")):
        w = f"{where}.compute[{j}]"
        for k in e:
            require(k in {"tiles", "chips", "cycles"}, f"{w}.{k}", e[k], "unknown key", "allowed: tiles, chips, cycles")
        comp[_selection(e, machine, w)] = _number(e.get("cycles", 0), f"{w}.cycles")
    return comp


def _step_exchange(st: dict, where: str, machine) -> tuple:
    """``(bytes_out, bytes_in)`` per tile of superstep table ``st`` (both None without exchange keys):
    ``exchange_bytes`` or the in/out values everywhere, overridden by each ``[[superstep.exchange]]``."""
    N = machine.total_tiles
    bout = bin_ = None
    if any(k in st for k in ("exchange_bytes", "exchange_in_bytes", "exchange_out_bytes", "exchange")):
        both = _number(st.get("exchange_bytes", 0), f"{where}.exchange_bytes")
        bin_ = np.full(N, _number(st.get("exchange_in_bytes", both), f"{where}.exchange_in_bytes"))
        bout = np.full(N, _number(st.get("exchange_out_bytes", both), f"{where}.exchange_out_bytes"))
        for j, e in enumerate(_tables(st.get("exchange", []), f"{where}.exchange", "superstep.exchange")):
            w = f"{where}.exchange[{j}]"
            for k in e:
                require(
                    k in {"tiles", "chips", "in_bytes", "out_bytes"},
                    f"{w}.{k}",
                    e[k],
                    "unknown key",
                    "allowed: tiles, chips, in_bytes, out_bytes",
                )
            sel = _selection(e, machine, w)
            bin_[sel] = _number(e.get("in_bytes", 0), f"{w}.in_bytes")
            bout[sel] = _number(e.get("out_bytes", 0), f"{w}.out_bytes")
    return bout, bin_


def _step_flows(st: dict, where: str) -> list:
    """``(src, dst, bytes)`` of every ``{src, dst, bytes}`` flow table of superstep table ``st``."""
    flows = []
    for j, f in enumerate(_tables(st.get("flows", []), f"{where}.flows", "superstep.flows")):
        w = f"{where}.flows[{j}]"
        require(
            isinstance(f, dict) and set(f) == {"src", "dst", "bytes"},
            w,
            f,
            "must be a table with exactly src, dst, bytes",
            "e.g. {src = 0, dst = 1, bytes = 4096}",
        )
        flows.append((f["src"], f["dst"], _number(f["bytes"], f"{w}.bytes")))
    return flows


def _step_transfers(st: dict, where: str, machine) -> list:
    """``(src, dst, bytes)`` with global tile ids of every on-chip transfer table of superstep ``st``
    (``src_tile``/``dst_tile`` of one ``chip``, default 0); raises :class:`ConfigError` for bad keys,
    chips or tiles."""
    xfers = []
    for j, t in enumerate(_tables(st.get("transfers", []), f"{where}.transfers", "superstep.transfers")):
        w = f"{where}.transfers[{j}]"
        require(
            isinstance(t, dict)
            and {"src_tile", "dst_tile", "bytes"} <= set(t)
            and set(t) <= {"src_tile", "dst_tile", "bytes", "chip"},
            w,
            t,
            "must be a table with src_tile, dst_tile, bytes (and optional chip)",
            "e.g. {src_tile = 0, dst_tile = 5, bytes = 256}",
        )
        chip = _chip_of(t, machine, w)
        src, dst = (_tile_of(t[k], machine, f"{w}.{k}") for k in ("src_tile", "dst_tile"))
        base = chip * machine.tiles_per_chip
        xfers.append((base + src, base + dst, _number(t["bytes"], f"{w}.bytes")))
    return xfers


def _chip_of(t: dict, machine, where: str) -> int:
    """The ``chip`` of a transfer or multicast table (default 0), checked against the machine."""
    chip = t.get("chip", 0)
    require(
        isinstance(chip, int) and not isinstance(chip, bool) and 0 <= chip < machine.chips,
        f"{where}.chip", chip, f"must be in 0..{machine.chips - 1}", "use a chip of the machine (or --chips)",
    )  # fmt: skip
    return chip


def _tile_of(v, machine, where: str) -> int:
    require(
        not isinstance(v, bool) and isinstance(v, int) and 0 <= v < machine.tiles_per_chip,
        where, v, f"must be in 0..{machine.tiles_per_chip - 1}", "use a tile index of one chip",
    )  # fmt: skip
    return int(v)


def _step_multicasts(st: dict, where: str, machine) -> list:
    """``(src, dst tiles, bytes)`` with global tile ids of every multicast table of superstep ``st``:
    ``src_tile``, ``bytes``, and ``dst_tiles = [...]`` or ``rectangle = [x0, y0, x1, y1]`` (columns
    and rows of the chip's grid, inclusive; a mesh or torus machine), optional ``chip``."""
    from tilesim.machine.fabric import grid_shape, rectangle_tiles  # the machine's grid, only for a rectangle

    out = []
    keys = {"src_tile", "dst_tiles", "rectangle", "bytes", "chip"}
    for j, t in enumerate(_tables(st.get("multicasts", []), f"{where}.multicasts", "superstep.multicasts")):
        w = f"{where}.multicasts[{j}]"
        require(
            isinstance(t, dict)
            and {"src_tile", "bytes"} <= set(t) <= keys
            and ("dst_tiles" in t) != ("rectangle" in t),
            w, t, "must be a table with src_tile, bytes and one of dst_tiles or rectangle (and optional chip)",
            "e.g. {src_tile = 0, rectangle = [2, 2, 3, 3], bytes = 4096}",
        )  # fmt: skip
        chip = _chip_of(t, machine, w)
        src = _tile_of(t["src_tile"], machine, f"{w}.src_tile")
        if "rectangle" in t:
            grid = grid_shape(machine)
            r = t["rectangle"]
            require(grid is not None, f"{w}.rectangle", r, "needs a machine whose tiles sit on a grid (mesh or torus)",
                    "give dst_tiles instead")  # fmt: skip
            assert grid is not None
            rows, cols = grid
            ok = isinstance(r, list) and len(r) == 4 and all(isinstance(v, int) and not isinstance(v, bool) for v in r)
            ok = ok and 0 <= min(r[0], r[2]) and max(r[0], r[2]) < cols
            require(ok and 0 <= min(r[1], r[3]) and max(r[1], r[3]) < rows,
                    f"{w}.rectangle", r, f"must be [x0, y0, x1, y1] within {cols} columns x {rows} rows",
                    "e.g. rectangle = [0, 0, 3, 3]")  # fmt: skip
            dsts = rectangle_tiles(cols, *r)
        else:
            d = t["dst_tiles"]
            require(
                isinstance(d, list) and len(d) > 0,
                f"{w}.dst_tiles",
                d,
                "must be a non-empty list of tiles",
                "e.g. [1, 2, 3]",
            )
            dsts = [_tile_of(v, machine, f"{w}.dst_tiles") for v in d]
        base = chip * machine.tiles_per_chip
        out.append((base + src, [base + v for v in dsts], _number(t["bytes"], f"{w}.bytes")))
    return out


def _memory_entries(data: dict, machine) -> list:
    """``(category, tile selection, bytes, label)`` of every ``[[memory]]`` table of a program table."""
    memory = []
    for j, m in enumerate(_tables(data.get("memory", []), "memory", "memory")):
        w = f"memory[{j}]"
        require(isinstance(m, dict), w, m, "must be a table", "write each entry as a [[memory]] table")
        for k in m:
            require(k in _MEM_KEYS, f"{w}.{k}", m[k], "unknown key", f"allowed: {', '.join(sorted(_MEM_KEYS))}")
        require(
            "category" in m and "bytes" in m,
            w,
            m,
            "needs 'category' and 'bytes'",
            'e.g. category = "variables:weights" and bytes = 4096',
        )
        memory.append(
            (
                str(m["category"]),
                _selection(m, machine, w),
                _number(m["bytes"], f"{w}.bytes"),
                str(m.get("label", m["category"])),
            )
        )
    return memory


def program_from_dict(data: dict, machine, source: str = "program"):
    """Parse a program table (see ``tilesim/examples/demo.toml``) into ``(Program, memory entries)``."""
    allowed = {"name", "description", "superstep", "memory"}
    for k in data:
        require(k in allowed, f"{source}: {k}", data[k], "unknown key", f"allowed: {', '.join(sorted(allowed))}")
    steps = data.get("superstep", [])
    require(
        isinstance(steps, list) and bool(steps),
        f"{source}: [[superstep]]",
        steps,
        "needs at least one superstep",
        "add a [[superstep]] table with e.g. compute_cycles = 1000",
    )
    b = ProgramBuilder.for_machine(machine, str(data.get("name", Path(source).stem)))
    for i, st in enumerate(steps):
        where = f"superstep[{i}]"
        require(isinstance(st, dict), where, st, "must be a table", "write each superstep as a [[superstep]] table")
        for k in st:
            require(k in _STEP_KEYS, f"{where}.{k}", st[k], "unknown key", f"allowed: {', '.join(sorted(_STEP_KEYS))}")
        comp = _step_compute(st, where, machine)
        bout, bin_ = _step_exchange(st, where, machine)
        flows = _step_flows(st, where)
        xfers = _step_transfers(st, where, machine)
        mcast = _step_multicasts(st, where, machine)
        host = st.get("host_bytes")
        b.superstep(
            str(st.get("label", f"step{i}")),
            comp,
            bytes_out=bout,
            bytes_in=bin_,
            flows=flows,
            transfers=xfers,
            multicasts=mcast,
            host_bytes=None if host is None else _number(host, f"{where}.host_bytes"),
            sync=_sync(st.get("sync", "chip"), f"{where}.sync", machine.chips),
            repeat=_repeat(st.get("repeat", 1), f"{where}.repeat"),
        )
    memory = _memory_entries(data, machine)
    return b.build(), memory


def load_program(path, machine):
    """Read a program TOML file for ``machine``; returns ``(Program, memory entries)``."""
    return program_from_dict(read_toml(path, "program file"), machine, str(path))
