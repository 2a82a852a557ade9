"""``tilesim collective``: time all_reduce, all_gather, reduce_scatter or all_to_all on a line or
ring of a machine's chips (Tenstorrent's Ethernet; any machine's chip links).

Registered through the ``tilesim.commands`` entry point. Bad input raises
:class:`~tilesim.errors.ConfigError`; the core CLI prints it on one line and exits 2.
"""

from __future__ import annotations

import re

from tilesim.errors import ConfigError, config_message
from tilesim.io import dumps_json

__all__ = ["register", "parse_size"]

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")  # tilesim.models.collective.algorithms.OPS
UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}


def parse_size(text: str) -> int:
    """Bytes from ``1048576``, ``64K``, ``1M``, ``2G``, ``1T`` or ``1P`` (binary units, as nccl-tests' -b/-e)."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMGTP]?)i?B?\s*", str(text), re.IGNORECASE)
    if not m:
        raise ConfigError(config_message("--size-bytes", text, "is not a size", "e.g. 1048576, 64K, 1M, 2G or 1P"))
    return int(m.group(1)) * UNITS[m.group(2).upper()]


def _cmd_collective(args) -> int:
    from tilesim.machine.description import load_machine  # loaded only when the command runs (start-up time)
    from tilesim.models.collective.workload import (  # loaded only when the command runs (start-up time)
        BUS_FACTOR,
        CollectiveSpec,
        time_collective,
    )

    spec = CollectiveSpec(args.op, args.chips, args.topology, parse_size(args.size_bytes))
    t = time_collective(spec, load_machine(args.machine))
    alg = spec.size_bytes / t.total_s / 1e9
    row = {
        "machine": t.machine.name,
        "op": spec.op,
        "chips": spec.chips,
        "topology": spec.topology,
        "size_bytes": spec.size_bytes,
        "predicted_us": round(t.total_s * 1e6, 3),
        "algbw_gb_s": round(alg, 3),
        "busbw_gb_s": round(alg * BUS_FACTOR(spec.op, spec.chips), 3),
        "busiest_link": list(t.busiest_link),
        "busiest_link_bytes": round(t.busiest_link_bytes),
        "phase_us": {k: round(float(v) * 1e6, 3) for k, v in t.result.breakdown_s().items()},
    }
    if args.json:
        print(dumps_json(row, indent=2))
        return 0
    print(f"{spec.op} of {spec.size_bytes:,} B per chip on {row['machine']}: {row['predicted_us']:.2f} us")
    print(f"  algbw {row['algbw_gb_s']:.2f} GB/s, busbw {row['busbw_gb_s']:.2f} GB/s (nccl-tests' definitions)")
    a, b = t.busiest_link[1:] if t.busiest_link else ("-", "-")
    print(f"  busiest link chip {a} -> {b}: {t.busiest_link_bytes:,.0f} B")
    print("  time by phase: " + ", ".join(f"{k} {v:.2f} us" for k, v in row["phase_us"].items() if v > 0))
    return 0


def register(sub) -> None:
    """Add ``collective`` to the ``tilesim`` command line."""
    p = sub.add_parser(
        "collective",
        help="time a collective (all_reduce, all_gather, ...) on a line or ring of chips",
        description="Time one collective call on a machine's chip links: its paths over the line or "
        "ring, shared links sharing bandwidth, a latency per hop. Sizes count as the CCL benchmark "
        "and nccl-tests do: all_gather's output per chip, the others' input per chip.",
    )
    p.add_argument("--machine", default="wormhole-t3000", help="preset or TOML file (default wormhole-t3000)")
    p.add_argument("--op", choices=OPS, default="all_reduce", help="the collective (default all_reduce)")
    p.add_argument("--chips", type=int, default=8, help="chips taking part (default 8)")
    p.add_argument("--topology", choices=("line", "ring"), default="ring", help="line or ring (default ring)")
    p.add_argument("--size-bytes", default="1M", help="bytes per chip: 1048576, 64K, 1M, 2G, 1T (default 1M)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=_cmd_collective)
