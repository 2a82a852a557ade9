"""``tilesim matmul``: time a dense matmul on a grid of Tensix cores (Wormhole, Blackhole).

Registered through the ``tilesim.commands`` entry point. Bad input raises
:class:`~tilesim.errors.ConfigError`; the core CLI prints it on one line and exits 2.
"""

from __future__ import annotations

from tilesim.errors import ConfigError, config_message
from tilesim.io import dumps_json

__all__ = ["register"]

DTYPES = ("BFLOAT16", "BFLOAT8_B", "BFLOAT4_B")  # tilesim.models.tensix.matmul.DTYPES
FIDELITIES = ("LoFi", "HiFi2", "HiFi3", "HiFi4")


def _grid(text: str) -> tuple[int, int]:
    parts = str(text).lower().split("x")
    if len(parts) != 2 or not all(p.strip().isdigit() and int(p) > 0 for p in parts):
        raise ConfigError(config_message("--grid", text, "must be COLSxROWS", "e.g. --grid 8x8"))
    return int(parts[0]), int(parts[1])


def _cmd_matmul(args) -> int:
    from tilesim.machine.description import load_machine  # loaded only when the command runs (start-up time)
    from tilesim.models.tensix.matmul import (  # loaded only when the command runs (start-up time)
        MatmulSpec,
        time_matmul,
    )

    machine = load_machine(args.machine)
    gx, gy = _grid(args.grid) if args.grid else (machine.fabric.cols or 1, machine.fabric.rows or 1)
    spec = MatmulSpec(args.m, args.k, args.n, args.dtype, args.fidelity, gx, gy, args.in0, args.in1, args.out)
    total_s, plan, _ = time_matmul(spec, machine)
    flops = 2.0 * spec.m * spec.k * spec.n
    row = {
        "machine": machine.name,
        "predicted_ns": round(total_s * 1e9, 1),
        "tflops": round(flops / total_s / 1e12, 2),
        "bound": plan.bound,
        "per_core_block_tiles": [plan.block_m, plan.block_n],
        "subblock_tiles": list(plan.subblock),
        "math_cycles": plan.math_cycles,
        "unpack_cycles": round(plan.unpack_cycles, 1),
        "dram_cycles": round(plan.dram_cycles, 1),
        "noc_cycles": round(plan.noc_cycles, 1),
        "l1_bytes_per_core": plan.l1_bytes,
        "l1_budget_bytes": machine.chip.sram_bytes,
    }
    if args.json:
        print(dumps_json(row, indent=2))
        return 0
    print(f"{spec.m}x{spec.k}x{spec.n} {spec.dtype} {spec.math_fidelity} on {gx}x{gy} cores of {machine.name}: "
          f"{total_s * 1e6:.2f} us, {row['tflops']:.1f} TFLOPS")  # fmt: skip
    print(f"  bound: {plan.bound}; per core {plan.block_m}x{plan.block_n} output tiles x {plan.kt} K tiles, "
          f"sub-block {plan.subblock[0]}x{plan.subblock[1]}")  # fmt: skip
    print(f"  cycles per core: math {plan.math_cycles:,.0f}, unpack {plan.unpack_cycles:,.0f}, "
          f"DRAM stream {plan.dram_cycles:,.0f}, NoC multicasts {plan.noc_cycles:,.0f}; "
          f"L1 {plan.l1_bytes:,} of {machine.chip.sram_bytes:,} B")  # fmt: skip
    return 0


def register(sub) -> None:
    """Add ``matmul`` to the ``tilesim`` command line."""
    p = sub.add_parser(
        "matmul",
        help="time a dense matmul on a grid of Tensix cores (Tenstorrent Wormhole, Blackhole)",
        description="Time C[M,N] = A[M,K] B[K,N] as TT-Metal's 2-D multicast matmul runs it: the matrix "
        "engine's cycles per tile at the math fidelity, the unpacker, the DRAM stream, L1 per core.",
    )
    p.add_argument("--machine", default="wormhole-n150", help="a machine with a matrix engine (default wormhole-n150)")
    p.add_argument("--m", type=int, default=4096, help="rows of A and C (default 4096)")
    p.add_argument("--k", type=int, default=4096, help="columns of A, rows of B (default 4096)")
    p.add_argument("--n", type=int, default=4096, help="columns of B and C (default 4096)")
    p.add_argument("--dtype", choices=DTYPES, default="BFLOAT16", help="data format (default BFLOAT16)")
    p.add_argument("--fidelity", choices=FIDELITIES, default="HiFi2", help="math fidelity (default HiFi2)")
    p.add_argument("--grid", help="cores COLSxROWS (default: the machine's whole grid)")
    for name, where in (("in0", "A"), ("in1", "B"), ("out", "C")):
        p.add_argument(f"--{name}", choices=("L1", "DRAM"), default="DRAM", help=f"where {where} lives (default DRAM)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=_cmd_matmul)
