"""``tilesim shl``, ``tilesim layer`` and ``tilesim exchange-bench`` (butterfly-on-IPU study).

Registered through the ``tilesim.commands`` entry point (``register(subparsers)``). Bad input raises
:class:`~tilesim.errors.ConfigError` ("field = value: limit; fix"); the core CLI prints it and exits 2.
"""

from __future__ import annotations

import argparse

from tilesim.errors import ConfigError, config_message
from tilesim.io import dumps_json
from tilesim.models.linear.names import BLOCK_PATTERNS, LAYER_KINDS, SHL_DENSE_ALIASES, SHL_METHODS, SPARSE_KINDS

__all__ = ["register", "exchange_bench"]


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def _int_list(text: str) -> list[int]:
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers") from None
    if not vals:
        raise argparse.ArgumentTypeError(f"{text!r} names no value")
    return vals


def _positive(name: str, v: int, fix: str = "") -> None:
    if v < 1:
        raise ConfigError(config_message(name, v, "must be >= 1", fix))


def _print_timing(t, extra: dict, as_json: bool) -> None:
    d = {**extra, **t.to_dict()}
    if as_json:
        print(dumps_json(d, indent=2))
        return
    print(
        f"{t.name} on {t.machine}: {t.step_s * 1e6:.2f} us per step ({t.compute_sets} compute sets), "
        f"{t.params:,} parameters"
    )
    print("  " + "  ".join(f"{k} {v * 1e6:.2f} us" for k, v in t.part_s.items()))
    print(
        f"  SRAM: fullest tile {t.max_tile_bytes:,} B; fits = {t.fits}; "
        + ", ".join(f"{k} {v:,} B" for k, v in t.memory_by_category.items())
    )
    if t.host_s:
        print(f"  host input (not in step_s): {t.host_s * 1e6:.2f} us")


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def _fraction(text: str) -> float:
    """A number or ``a/b`` (``1/16``)."""
    if "/" in text:
        a, _, b = text.partition("/")
        try:
            return float(a) / float(b)
        except (ValueError, ZeroDivisionError):
            raise argparse.ArgumentTypeError(f"{text!r} is not a fraction such as 1/16") from None
    return _float(text)


def _cmd_shl(args) -> int:
    import sys  # loaded only when the command runs (start-up time)

    from tilesim.models.linear.timing import time_shl  # loaded only when the command runs (start-up time)

    _positive("--batch", args.batch, "the paper uses 50")
    if args.method in SHL_DENSE_ALIASES.values():
        print(
            f"tilesim shl: note: --method {args.method} is the paper's name of 'dense' (as tilesim layer "
            f"--kind dense); both are accepted",
            file=sys.stderr,
        )
    t = time_shl(args.method, args.batch, args.machine, precision=args.precision, lowering=args.lowering)
    _print_timing(t, {"method": args.method, "batch": args.batch, "lowering": args.lowering}, args.json)
    return 0


def _check_layer_args(args) -> None:
    """Refuse flag combinations ``tilesim layer`` cannot honour, naming the flag and the fix."""
    _positive("--n", args.n, "the layer is n x n")
    _positive("--batch", args.batch, "the paper uses 50")
    if args.kind not in SPARSE_KINDS and (args.density is not None or args.block is not None):
        raise ConfigError(
            config_message(
                "--density/--block",
                args.density if args.density is not None else args.block,
                "only apply to --kind block-sparse or dynamic-sparse",
                "drop them or use --kind block-sparse",
            )
        )
    if args.kind != "block-sparse" and args.pattern is not None:
        raise ConfigError(
            config_message(
                "--pattern",
                args.pattern,
                "only applies to --kind block-sparse (a dynamic layer is planned from its density alone)",
                "drop it or use --kind block-sparse",
            )
        )
    if (
        args.lowering == "poptorch"
        and args.kind in ("dense", *SPARSE_KINDS)
        and (args.memory_proportion is not None or args.partials != "fp32")
    ):
        raise ConfigError(
            config_message(
                "--lowering",
                "poptorch",
                "takes PopTorch's planner defaults",
                "drop --memory-proportion/--partials or use --lowering fused",
            )
        )
    if args.operands != "previous-op" and (args.kind != "dense" or args.lowering != "fused" or args.via != "direct"):
        raise ConfigError(
            config_message(
                "--operands",
                args.operands,
                "applies to --kind dense with the fused lowering, timed direct",
                "drop --operands or use --kind dense without --lowering poptorch / --via poptorch",
            )
        )
    if args.kind in SPARSE_KINDS and args.lowering != "fused":
        raise ConfigError(
            config_message(
                "--lowering",
                args.lowering,
                f"{args.kind} has the fused (PopSparse) lowering only",
                "use --lowering fused",
            )
        )


def _cmd_layer_via(args) -> int:
    """``tilesim layer --via poptorch``: one iteration of the notebook's PopTorch loop (poptorch_path)."""
    from tilesim.models.linear.poptorch_path import explain_via, time_via_poptorch  # loaded when it runs
    from tilesim.models.linear.timing import BlockSparseConfig  # loaded only when the command runs

    if not args.forward_only or args.lowering != "fused" or args.memory_proportion is not None:
        raise ConfigError(
            config_message(
                "--via", args.via, "times the notebook's forward custom op with PopTorch's defaults",
                "add --forward-only; drop --lowering and --memory-proportion",
            )
        )  # fmt: skip
    bs = {
        k: v for k, v in (("density", args.density), ("block", args.block), ("pattern", args.pattern)) if v is not None
    }
    cfg = BlockSparseConfig(**bs) if args.kind in SPARSE_KINDS else None
    t = time_via_poptorch(args.kind, args.n, args.batch, args.machine, precision=args.precision, block_sparse=cfg)
    extra = {"kind": args.kind, "n": args.n, "batch": args.batch, "via": args.via}
    if cfg is not None:
        extra.update(density=cfg.density, block=cfg.block)
    if args.explain and args.json:
        extra["explain"] = explain_via(t)
    _print_timing(t, extra, args.json)
    if args.explain and not args.json:
        print("\n".join(explain_via(t)))
    return 0


def _cmd_layer(args) -> int:
    from tilesim.models.linear.timing import (  # loaded only when the command runs (start-up time)
        BlockSparseConfig,
        MatmulOptions,
        explain_step,
        time_layer,
        versus_dense,
    )

    _check_layer_args(args)
    if args.via != "direct":
        return _cmd_layer_via(args)
    opts = MatmulOptions(
        **({} if args.memory_proportion is None else {"memory_proportion": args.memory_proportion}),
        partials_precision=args.partials,
        operands_in_place=args.operands == "in-place",
    )
    kw = {"matmul": opts} if args.lowering == "fused" else {}
    if args.kind in SPARSE_KINDS:
        bs = {
            k: v
            for k, v in (("density", args.density), ("block", args.block), ("pattern", args.pattern))
            if v is not None
        }
        kw["block_sparse"] = BlockSparseConfig(**bs)
    t = time_layer(
        args.kind,
        args.n,
        args.batch,
        args.machine,
        precision=args.precision,
        backward=not args.forward_only,
        lowering=args.lowering,
        **kw,
    )
    extra = {
        "kind": args.kind,
        "n": args.n,
        "batch": args.batch,
        "lowering": args.lowering,
        "forward_s": t.part_s.get("forward", 0.0),
        "backward_s": t.part_s.get("backward", 0.0),
    }
    if args.kind in SPARSE_KINDS:
        extra.update(density=kw["block_sparse"].density, block=kw["block_sparse"].block)
    if args.kind == "block-sparse":
        extra["pattern"] = kw["block_sparse"].pattern
    text = explain_step(t, args.machine, args.lowering) if args.explain else ""
    if args.explain and args.kind in SPARSE_KINDS:
        dense = time_layer(
            "dense", args.n, args.batch, args.machine, precision=args.precision, backward=not args.forward_only,
            lowering=args.lowering, matmul=opts,
        )  # fmt: skip
        text += "\n" + "\n".join(versus_dense(t, dense, kw["block_sparse"].density))
    if args.explain and args.json:
        extra["explain"] = text.splitlines()
    _print_timing(t, extra, args.json)
    if args.explain and not args.json:
        print(text)
    return 0


def exchange_bench(machine, src: int, dsts, sizes) -> list[dict]:
    """Point-to-point transfer cycles ``src -> dst`` for every ``dst`` and size (the fabric's model)."""
    from tilesim.machine.description import load_machine  # loaded only when the command runs (start-up time)
    from tilesim.machine.fabric import make_fabric  # loaded only when the command runs (start-up time)

    m = load_machine(machine)
    tiles = m.tiles_per_chip
    for name, t in [("--src", src)] + [("--dst", d) for d in dsts]:
        if not 0 <= t < tiles:
            raise ConfigError(
                config_message(
                    name, t, f"must be a tile in 0..{tiles - 1} ({m.name} has {tiles} tiles)", "pick tiles of one chip"
                )
            )
    for b in sizes:
        if b < 1:
            raise ConfigError(config_message("--bytes", b, "must be >= 1", "message sizes are positive"))
    fab = make_fabric(m)
    out = []
    for d in dsts:
        hops = fab.hops(src, d) if hasattr(fab, "hops") else 0
        for b in sizes:
            cyc = float(fab.point_to_point_cycles(src, d, b))
            out.append(
                {
                    "src": src,
                    "dst": d,
                    "bytes": b,
                    "cycles": cyc,
                    "seconds": cyc / m.clock_hz,
                    "bytes_per_s": b / (cyc / m.clock_hz),
                    "hops": hops,
                    "machine": m.name,
                }
            )
    return out


def _cmd_exchange(args) -> int:
    rows = exchange_bench(args.machine, args.src, args.dst, args.bytes)
    if args.json:
        print(dumps_json(rows, indent=2))
        return 0
    print(f"{'src':>5} {'dst':>5} {'hops':>4} {'bytes':>9} {'cycles':>9} {'us':>9} {'GB/s':>7}")
    for r in rows:
        print(
            f"{r['src']:>5} {r['dst']:>5} {r['hops']:>4} {r['bytes']:>9} {r['cycles']:>9.0f} "
            f"{r['seconds'] * 1e6:>9.3f} {r['bytes_per_s'] / 1e9:>7.2f}"
        )
    return 0


OPERANDS = ("previous-op", "in-place")
"""``tilesim layer --operands``: how a dense matmul's operands were made (:class:`MatmulOptions.operands_in_place`)."""

_LOWERING_HELP = (
    "fused (default): one compute set per butterfly factor, a hand-written Poplar program; "
    "poptorch: one PopLibs program per PyTorch op, as the paper ran it"
)


def _shl_choices(methods) -> list:
    return ["dense"] + list(methods)


def _add_sparse_flags(la) -> None:
    """``tilesim layer``'s flags of the PopSparse layers: ``--density``, ``--block``, ``--pattern``."""
    la.add_argument(
        "--density",
        type=_fraction,
        default=None,
        help="block-sparse, dynamic-sparse: fraction of non-zero blocks, e.g. 1/16 (default 1/16)",
    )
    la.add_argument(
        "--block",
        type=_int,
        default=None,
        help="block-sparse, dynamic-sparse: block size 1 (element-wise), 4, 8 or 16 (default 16)",
    )
    la.add_argument(
        "--pattern",
        choices=BLOCK_PATTERNS,
        default=None,
        help="block-sparse: where the non-zero blocks are: a random draw (default) or matmul_bench, the pattern "
        "the PopSparse paper's benchmark measured (its createProblem, seed 123)",
    )


def register(subparsers) -> None:
    """Add ``shl``, ``layer`` and ``exchange-bench`` to the ``tilesim`` command line."""

    s = subparsers.add_parser("shl", help="time one training step of the paper's single-hidden-layer model")
    s.add_argument(
        "--method",
        required=True,
        choices=_shl_choices(SHL_METHODS),
        help="hidden layer; 'dense' (as tilesim layer --kind dense) is also accepted as 'baseline', "
        "the paper's Table 4 name",
    )
    s.add_argument("--batch", type=_int, default=50, help="mini-batch (default 50, paper Table 3)")
    s.add_argument("--machine", default="gc200", help="preset or machine TOML (default gc200)")
    s.add_argument("--precision", choices=["fp32", "fp16"], default="fp32", help="arithmetic of the matmuls")
    s.add_argument("--lowering", choices=["fused", "poptorch"], default="fused", help=_LOWERING_HELP)
    s.add_argument("--json", action="store_true", help="print the result as JSON")
    s.set_defaults(func=_cmd_shl)

    la = subparsers.add_parser("layer", help="time one n x n layer (forward + backward)")
    la.add_argument("--kind", required=True, choices=LAYER_KINDS, help="the layer's weight structure")
    la.add_argument("--n", type=_int, required=True, help="layer width (power of two for structured kinds)")
    la.add_argument("--batch", type=_int, default=50, help="mini-batch (paper Table 3)")
    la.add_argument("--machine", default="gc200", help="preset or machine TOML")
    la.add_argument("--precision", choices=["fp32", "fp16"], default="fp32", help="arithmetic of the matmuls")
    la.add_argument("--forward-only", action="store_true", help="time the forward pass only")
    la.add_argument("--lowering", choices=["fused", "poptorch"], default="fused", help=_LOWERING_HELP)
    _add_sparse_flags(la)
    la.add_argument(
        "--memory-proportion",
        type=_float,
        default=None,
        help="PopLibs availableMemoryProportion: fraction of tile SRAM a matmul's temporary data may "
        "use (default 0.6; dense: 0 = least temporary memory; the sparse kinds refuse a plan over it, as "
        "PopSparse does)",
    )
    la.add_argument("--partials", choices=["fp32", "fp16"], default="fp32", help="matmul partials type (default fp32)")
    la.add_argument(
        "--operands",
        choices=OPERANDS,
        default="previous-op",
        help="dense, fused: how the matmul's operands were made. previous-op (default): the input comes from the "
        "previous op of a network, in flat chunks, and is exchanged to the plan's blocks; in-place: both "
        "operands created in the plan's layout (createMatMulInputLHS/RHS), as a benchmark of the matmul alone "
        "makes them and as `tilesim validate` times the PopSparse paper's dense rows",
    )
    la.add_argument(
        "--explain",
        action="store_true",
        help="print each matmul plan: partition, serial splits, bytes per tile by category, cycles by phase",
    )
    la.add_argument(
        "--via",
        choices=["direct", "poptorch"],
        default="direct",
        help="direct (default): the PopLibs/PopSparse call in its own Poplar program; poptorch: one iteration of "
        "Graphcore's SpMM notebook loop (custom op in poptorch.for_loop: PopART's loop copies and the dense "
        "input re-laid out for PopSparse; --forward-only, block-sparse or dense)",
    )
    la.add_argument("--json", action="store_true", help="print the result as JSON")
    la.set_defaults(func=_cmd_layer)

    e = subparsers.add_parser("exchange-bench", help="point-to-point exchange cycles between tiles")
    e.add_argument("--machine", default="gc200", help="preset or machine TOML")
    e.add_argument("--src", type=_int, default=0, help="sending tile")
    e.add_argument("--dst", type=_int_list, default=[1, 644], help="comma-separated destination tiles")
    e.add_argument("--bytes", type=_int_list, default=[64, 4096, 65536], help="comma-separated sizes")
    e.add_argument("--json", action="store_true", help="print the result as JSON")
    e.set_defaults(func=_cmd_exchange)
