"""The ``tilesim`` command line.

Core commands: ``machines``, ``simulate``, ``demo``. Workloads add commands through the
``tilesim.commands`` entry-point group (a callable ``register(subparsers)`` that adds a parser
whose ``func(args) -> int`` runs it), so the core never imports ``models`` or ``mapping``.

Bad input prints one line ``tilesim: error: ...`` and exits 2; never a traceback. Every
command's ``--help`` lists each flag with its default. ``-v`` / ``-vv`` / ``-q`` before the
command set the log level (INFO / DEBUG / errors only; default WARNING) of the ``tilesim`` and
``models`` loggers, which report progress and warnings on stderr.
"""

from __future__ import annotations

import argparse
import difflib
import errno
import logging
import re
import sys
from importlib import metadata, resources
from pathlib import Path

from tilesim.errors import ConfigError, TileSimError, config_message
from tilesim.io import dumps_json
from tilesim.running.limits import check_numba_env

__all__ = ["main", "write_outputs", "format_summary"]

log = logging.getLogger("tilesim")


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer; give a whole number such as 2") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{v} must be >= 1; give a whole number such as 2")
    return v


def _tile_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of tile ids (e.g. 0,736)") from None


def format_summary(result, ledger=None) -> str:
    """A short human-readable summary of a simulated program."""
    total = result.total_s
    lines = [
        f"{result.program_name} on {result.machine_name}: {result.supersteps} supersteps, "
        f"{total * 1e3:.4f} ms simulated"
    ]
    bd = result.breakdown_s()
    lines.append("  " + "  ".join(f"{k} {v / total * 100 if total else 0:5.1f}%" for k, v in bd.items()))
    by = result.by_label()
    for lab in sorted(by, key=lambda k: -by[k]["time_s"])[:5]:
        d = by[lab]
        top = max(d["breakdown_s"], key=d["breakdown_s"].get)
        lines.append(
            f"  {lab:<34} {d['time_s'] * 1e6:10.2f} us  x{d['supersteps']:<5} mostly {top}; "
            f"critical tile {d['critical_tile']} (chip {d['critical_chip']})"
        )
    if ledger is not None:
        m = ledger.to_dict()
        chip, t = divmod(m["max_tile"], ledger.machine.tiles_per_chip)
        lines.append(
            f"  SRAM: fullest tile {t} (chip {chip}) {m['max_tile_bytes']:,} B of "
            f"{m['budget_bytes']:,} B ({100 * m['max_tile_bytes'] / m['budget_bytes']:.1f} %); "
            f"{len(m['overflow_tiles'])} tile(s) over budget"
        )
    return "\n".join(lines)


def write_outputs(
    out: Path,
    record,
    result,
    program=None,
    ledger=None,
    trace_tiles=(),
    exchange: dict | None = None,
    files: dict | None = None,
    unsealed: dict | None = None,
) -> dict:
    """A run folder: ``summary.json`` (the run's :class:`tilesim.outputs.runrecord.RunRecord`), trace.json,
    arrays.npz, summary.md and the pictures (timeline, breakdown, work and — with a ledger — memory;
    with ``exchange`` matrices, exchange.png), and ``files`` ({name: bytes}, e.g. mapping.json,
    options.toml; ``unsealed`` files are left out of the manifest: the host's own measurements, which
    differ between identical runs). The folder's manifest is removed first and written last
    (:func:`tilesim.outputs.report.seal_run_folder`); everything is written into a staging folder beside
    ``out`` and swapped in whole (:func:`tilesim.io.staged_folder`), so a kill at any moment leaves
    the previous run or the new one. Returns the record's JSON form."""
    from tilesim.io import (  # loaded only when the command runs (start-up time)
        atomic_write_bytes,
        atomic_write_text,
        staged_folder,
    )
    from tilesim.outputs.report import (  # loaded only when the command runs (start-up time)
        run_files,
        seal_run_folder,
        write_run_report,
    )
    from tilesim.outputs.trace import write_trace  # loaded only when the command runs (start-up time)

    summary = record.to_dict()
    # the old run stays whole until the new one is complete; then what it wrote goes, the user's files stay
    with staged_folder(out, drop=run_files(out)) as stage:
        sealed = ["summary.json", "trace.json", "arrays.npz"]
        for name, data in (files or {}).items():
            atomic_write_bytes(stage / name, data)
            sealed.append(name)
        for name, data in (unsealed or {}).items():  # measurements of the host, not of the run
            atomic_write_bytes(stage / name, data)
        atomic_write_text(stage / "summary.json", dumps_json(summary, indent=2))
        write_trace(stage / "trace.json", result, program, trace_tiles)
        if ledger is not None:
            atomic_write_text(stage / "memory.txt", ledger.report() + "\n")
            sealed.append("memory.txt")
        write_run_report(stage, result, program, ledger, exchange)
        seal_run_folder(stage, sealed)
    return summary


def _cmd_report(args) -> int:
    from tilesim.outputs.report import render  # loaded only when the command runs (start-up time)

    written = render(Path(args.dir), verify=True)
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


def _cmd_compare(args) -> int:
    from tilesim.outputs.compare import (  # when it runs (start-up time)
        check_compare_out,
        compare_runs,
        format_comparison,
        runs_on_machines,
        write_comparison,
    )

    if args.machines is not None and (len(args.runs) != 1 or not args.out):
        raise ConfigError(
            config_message(
                "--machines",
                args.machines,
                "re-runs one RUN on each machine into --out DIR",
                "give one run folder and --out, e.g. tilesim compare out/demo --machines bow:16,wse2 --out out/m",
            )
        )
    if args.out:
        check_compare_out(args.out, args.force)
    runs = args.runs
    if args.machines is not None:
        runs = runs_on_machines(args.runs[0], [m for m in args.machines.split(",") if m.strip()], args.out, args.force)
    comparison = compare_runs(*runs)
    if args.json:
        print(dumps_json(comparison.to_dict(), indent=1))
    else:
        print(format_comparison(comparison))
    if args.out:
        written = write_comparison(comparison, args.out, force=args.force)
        if not args.json:
            print(f"wrote {', '.join(str(p) for p in written)}")
    return 0


def _cmd_machines(args) -> int:
    from tilesim.machine.description import (  # loaded only when the command runs (start-up time)
        load_machine,
        preset_names,
        preset_text,
    )

    if args.name is None:
        if args.json:
            print(dumps_json([load_machine(n).derived() for n in preset_names()], indent=2))
            return 0
        names = preset_names()
        width = max(map(len, names))
        for n in names:
            m = load_machine(n)
            shape = f"{m.chips} x {m.chip.tiles} tiles"
            links = "" if m.chips == 1 else f", {m.system.topology} of chips"
            print(
                f"{n:<{width}}  {shape:>18}, {m.chip.sram_bytes // 1024:>5} KiB/tile, {m.clock_hz / 1e9:.2f} GHz, "
                f"{m.fabric.kind + links:<22} {m.description}"
            )
        print(
            "sources: every number of a preset carries an evidence tag and a section of "
            "tilesim/presets/EVIDENCE.md (tilesim machines NAME --toml shows them)"
        )
        return 0
    m = load_machine(args.name, args.chips)
    if args.toml:
        is_preset = args.name in preset_names() and args.chips is None
        print(preset_text(args.name) if is_preset else m.to_toml(), end="")
    elif args.json:
        print(dumps_json({**m.derived(), "description": m.to_dict()}, indent=2))
    else:
        for k, v in m.derived().items():
            print(f"{k:<22} {v}")
    return 0


def check_program_size(data: dict, machine, force: bool = False) -> None:
    """Refuse a program table whose build would not fit in memory, or (without ``force``) take
    longer than :data:`tilesim.running.limits.TIME_LIMIT_S`; estimated before anything is built."""
    from tilesim.program.toml_form import (  # loaded only when the command runs (start-up time)
        multicast_sizes,
        program_size,
    )
    from tilesim.running.limits import (  # loaded only when the command runs (start-up time)
        MULTICAST_BYTES_PER_DESTINATION,
        MULTICAST_NS_PER_DESTINATION,
        SIM_NS_PER_TILE_STEP,
        check_memory,
        check_time,
    )

    steps, nbytes = program_size(data, machine)
    fix = "lower the repeat counts (a loop's time scales linearly: simulate fewer iterations and multiply)"
    check_memory(f"program of {steps:,} supersteps x {machine.total_tiles:,} tiles", nbytes, fix)
    check_time(
        f"program of {steps:,} supersteps x {machine.total_tiles:,} tiles",
        steps * machine.total_tiles * SIM_NS_PER_TILE_STEP * 1e-9,
        force,
        fix,
    )
    mcasts = multicast_sizes(data)
    if mcasts:
        dests = sum(n for *_, n in mcasts)
        field, value, n = max(mcasts, key=lambda m: m[2])
        what = f"{field} {value} ({n:,} destination tiles x repeats; {dests:,} in all multicasts)"
        fix = (
            "multicast to fewer tiles or lower that superstep's repeat (a loop's time scales linearly: "
            "simulate fewer iterations and multiply)"
        )
        check_memory(what, dests * MULTICAST_BYTES_PER_DESTINATION, fix)
        check_time(what, dests * MULTICAST_NS_PER_DESTINATION * 1e-9, force, fix)


def _simulate_file(
    program_path, machine_name, chips, out, as_json, trace_tiles, memory_check, force: bool = False
) -> int:
    import numpy as np  # loaded only when the command runs (start-up time)

    from tilesim.engine.events import simulate
    from tilesim.io import check_run_folder, read_toml  # loaded only when the command runs (start-up time)
    from tilesim.machine.description import load_machine  # loaded only when the command runs (start-up time)
    from tilesim.machine.memory import MemoryLedger  # loaded only when the command runs (start-up time)
    from tilesim.outputs.records import critical_tiles
    from tilesim.program.toml_form import program_from_dict  # loaded only when the command runs (start-up time)

    if out:
        check_run_folder(out, "--out", force)
    machine = load_machine(machine_name, chips)
    for t in trace_tiles:
        if not 0 <= t < machine.total_tiles:
            raise ConfigError(
                f"--trace-tiles = {t}: must be in 0..{machine.total_tiles - 1}; "
                "give global tile ids (chip * tiles_per_chip + tile)"
            )
    data = read_toml(program_path, "program file")
    check_program_size(data, machine, force)
    program, memory = program_from_dict(data, machine, str(program_path))
    ledger = MemoryLedger(machine)
    for cat, tiles, nbytes, label in memory:
        ledger.add(cat, nbytes, tiles, label)
    ledger.check(memory_check)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # checked just below
        result = simulate(program, machine)
    if not (np.isfinite(result.total_s) and np.isfinite(list(result.breakdown_s().values())).all()):
        raise ConfigError(
            f"machine {machine.name!r}: the simulated time is not finite ({result.total_s}): a rate "
            "or latency of the machine is too extreme; give rates and latencies of real hardware "
            "(see `tilesim machines gc200 --toml`)"
        )
    from tilesim.outputs.runrecord import Provenance, RunRecord, tilesim_version

    record = RunRecord.of(
        result,
        workload="program",
        ledger=ledger,
        settings={
            "program": str(program_path),
            "machine": machine_name,
            "chips": chips,
            "memory_check": memory_check,
            "trace_tiles": list(trace_tiles),
        },
        provenance=Provenance(tilesim_version(), "the program file's own cycles and bytes", str(program_path)),
    )
    if out:
        tiles = list(trace_tiles) or list(critical_tiles(result))
        summary = write_outputs(Path(out), record, result, program, ledger, tiles)
    else:
        summary = record.to_dict()
    if as_json:
        print(dumps_json(summary, indent=2))
    else:
        print(format_summary(result, ledger))
        if out:
            print(
                f"  wrote {out}/report.html (open it in a browser), summary.md, summary.json, trace.json "
                "(open in https://ui.perfetto.dev), "
                f"timeline.png, breakdown.png, memory.png, work.png"
            )
    return 0


def _cmd_simulate(args) -> int:
    return _simulate_file(
        args.program, args.machine, args.chips, args.out, args.json, args.trace_tiles, args.memory_check, args.force
    )


def _cmd_example(args) -> int:
    path = resources.files("tilesim") / "examples" / "demo.toml"
    with resources.as_file(path) as p:
        return _simulate_file(p, args.machine, None, args.out, args.json, [], "report", args.force)


def _load_plugins(sub) -> None:
    for ep in metadata.entry_points(group="tilesim.commands"):
        try:
            register = ep.load()
        except Exception as exc:  # a broken plug-in must not break the core commands
            log.warning("command plug-in %r failed to load: %s", ep.name, exc)
            continue
        register(sub)


class _DefaultsFormatter(argparse.HelpFormatter):
    """Help that shows every flag's default (unless its help already names one)."""

    def _get_help_string(self, action):
        text = action.help or ""
        d = action.default
        if (
            action.option_strings
            and "default" not in text
            and "%(default)" not in text
            and d not in (None, False, [], ())
            and d is not argparse.SUPPRESS
        ):
            text += " (default: %(default)s)"
        return text


class _Parser(argparse.ArgumentParser):
    """argparse with the house error form: one line naming the problem and where help is, exit 2
    (sub-command parsers, including the plug-ins', are of this class too), and help that shows
    the defaults."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _DefaultsFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message):
        where = self.prog.removeprefix("tilesim").strip()  # the sub-command ("run"), or nothing
        hint = _did_you_mean_choice(self, message)
        self.exit(2, f"tilesim: error: {where + ': ' if where else ''}{message}{hint}; see `{self.prog} --help`\n")

    def parse_args(self, args=None, namespace=None):
        """As argparse's, but an unknown flag is reported by the sub-command it was given to, with
        the closest flag that sub-command has (``did you mean --chips?``)."""
        ns, extras = self.parse_known_args(args, namespace)
        if extras:
            parser = _subcommand_parsers(self).get(getattr(ns, "command", None), self)
            parser.error(_unrecognized(extras, parser))
        return ns


def _subcommand_parsers(parser: argparse.ArgumentParser) -> dict:
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            return dict(a.choices)
    return {}


def _closest(word: str, names) -> str:
    """The name most like ``word`` (dashes aside: ``--bogus`` is not like ``--out``), or ``""``."""
    bare = {n.lstrip("-"): n for n in names}
    close = difflib.get_close_matches(word.lstrip("-"), list(bare), n=1, cutoff=0.6)
    return bare[close[0]] if close else ""


def _unrecognized(extras: list, parser: argparse.ArgumentParser) -> str:
    """``unrecognized argument --chip; did you mean --chips?``"""
    message = f"unrecognized argument{'s' if len(extras) > 1 else ''} {' '.join(extras)}"
    flags = [e.split("=", 1)[0] for e in extras if e.startswith("-")]
    close = _closest(flags[0], parser._option_string_actions) if flags else ""
    return message + (f"; did you mean {close}?" if close else "")


def _did_you_mean_choice(parser: argparse.ArgumentParser, message: str) -> str:
    """``; did you mean run?`` for argparse's "argument X: invalid choice: 'rnu'" message."""
    m = re.match(r"argument (\S+): invalid choice: '([^']*)'", message)
    if not m:
        return ""
    for a in parser._actions:
        if a.choices is not None and argparse._get_action_name(a) == m.group(1):
            close = _closest(m.group(2), [str(c) for c in a.choices])
            return f"; did you mean {close}?" if close else ""
    return ""


def _add_compare(sub) -> None:
    """``tilesim compare RUN RUN [RUN ...] [--out DIR] [--force] [--json]``, or ``tilesim compare RUN
    --machines M1,M2,... --out DIR`` (the run's settings on each machine, then compared)."""
    c = sub.add_parser(
        "compare",
        help="stored runs side by side: which has the higher throughput, what differs, and where",
        description="Line up two or more run folders (any command's --out; the first is the reference): "
        "throughput (the workload's own rate, e.g. samples/s; higher is better) and step time, every setting "
        "that differs, time by phase, the superstep labels whose time moved, chips, bytes, SRAM, critical "
        "and fullest tiles, and the workload's own numbers that differ. A folder of run folders (e.g. "
        "map-search --out) stands for the runs in it. With --out: compare.md, compare.json (full precision), "
        "compare.png and compare.html (every run on shared axes). With --machines: one run's network, batch "
        "and settings re-run on each machine (DIR/<machine>), side by side with what limits each.",
    )
    c.add_argument(
        "runs",
        metavar="RUN",
        nargs="+",
        help="a run folder, or a folder of run folders; two or more runs in all (the first is the reference)",
    )
    c.add_argument(
        "--machines",
        metavar="M1,M2,...",
        help="re-run the one RUN's settings on each machine (a preset or TOML file, NAME:C for C of its chips, "
        "e.g. bow:16,wormhole-galaxy,wse2) into --out DIR/<machine>, each with its own placement, and compare "
        "those runs (the first is the reference)",
    )
    c.add_argument("--out", help="folder for compare.md, compare.json, compare.png and compare.html")
    c.add_argument(
        "--force",
        action="store_true",
        help="write --out over compare.* files that tilesim compare did not write",
    )
    c.add_argument(
        "--json",
        action="store_true",
        help="print the comparison as JSON (keys runs, rank_by, ranking, verdict, rows with values and ratios)",
    )
    c.set_defaults(func=_cmd_compare)


def build_parser() -> argparse.ArgumentParser:
    """The ``tilesim`` parser: the core commands plus every workload's, found by entry point."""
    p = _Parser(prog="tilesim", description=__doc__.split("\n")[0])
    p.add_argument("--version", action="version", version=f"tilesim {metadata.version('tilesim')}")
    p.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="log progress (-v: INFO, -vv: DEBUG) on stderr; put it before the command",
    )
    p.add_argument(
        "-q",
        "--quiet",
        dest="log_quiet",
        action="store_true",
        help="log errors only (no warnings); put it before the command",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    m = sub.add_parser("machines", help="list machine presets, or describe one")
    m.add_argument("name", nargs="?", help="preset name or path to a machine TOML file")
    m.add_argument("--chips", type=_positive_int, help="resize the system to this many chips")
    g = m.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true", help="description and derived figures as JSON")
    g.add_argument("--toml", action="store_true", help="print as an editable TOML file")
    m.set_defaults(func=_cmd_machines)

    s = sub.add_parser("simulate", help="time a BSP program described in a TOML file")
    s.add_argument("program", help="program TOML file (see tilesim/examples/demo.toml)")
    s.add_argument("--machine", default="gc200", help="preset or machine TOML (default gc200)")
    s.add_argument("--chips", type=_positive_int, help="number of chips (default: the machine's)")
    s.add_argument("--out", help="directory for summary.json, trace.json and pictures")
    s.add_argument("--json", action="store_true", help="print the summary as JSON")
    s.add_argument("--trace-tiles", type=_tile_list, default=[], help="global tile ids with own trace tracks")
    s.add_argument(
        "--memory-check",
        choices=["raise", "report"],
        default="raise",
        help="stop on SRAM overflow (raise) or mark the tiles and go on (report)",
    )
    s.add_argument(
        "--force",
        action="store_true",
        help="run a program estimated to take longer than an hour, or write --out into a folder that is not a "
        "tilesim run (memory limits still apply)",
    )
    s.set_defaults(func=_cmd_simulate)

    d = sub.add_parser(
        "example",
        help="time the built-in multi-chip BSP example program and write its outputs",
        description="Simulate the core's example program (tilesim/examples/demo.toml: a forward and backward "
        "matmul over 4 chips, no workload) — the program-file side of tilesim in one command.",
    )
    d.add_argument("--machine", default="m2000", help="machine with 4 chips (default m2000)")
    d.add_argument("--out", default="out/example", help="output directory (default out/example)")
    d.add_argument("--json", action="store_true", help="print the summary as JSON")
    d.add_argument(
        "--force",
        action="store_true",
        help="write --out into a folder that is not a tilesim run (its other files are kept)",
    )
    d.set_defaults(func=_cmd_example)

    r = sub.add_parser(
        "report",
        help="re-render the pictures and summary.md of a stored run",
        description="Redraw timeline/breakdown/memory/work/exchange pictures and summary.md "
        "from a run folder's summary.json and arrays.npz (no re-simulation).",
    )
    r.add_argument("dir", help="a folder written by `tilesim run --out` or `tilesim simulate --out`")
    r.set_defaults(func=_cmd_report)

    _add_compare(sub)
    _load_plugins(sub)
    return p


def set_log_level(verbose: int = 0, quiet: bool = False) -> int:
    """Send the ``tilesim`` logger (the workloads' ``tilesim.models.*`` loggers included) to stderr at
    the level ``-v`` / ``-q`` ask for."""
    level = logging.ERROR if quiet else (logging.WARNING, logging.INFO, logging.DEBUG)[min(verbose, 2)]
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(name)s: %(levelname)s: %(message)s"))
    lg = logging.getLogger("tilesim")
    lg.handlers[:] = [handler]
    lg.setLevel(level)
    lg.propagate = False
    return level


def main(argv=None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); returns the exit status: 0, or 2
    with one line on stderr for bad input (never a traceback for a TileSimError); 130 with one line
    when interrupted (Ctrl-C) at any moment, while the parser and the plug-ins load too."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        return _interrupted()


def _interrupted() -> int:
    print("tilesim: interrupted", file=sys.stderr)
    return 130


def _main(argv) -> int:
    """:func:`main` but for its handling of Ctrl-C."""
    argv = _hoist_log_flags(sys.argv[1:] if argv is None else list(argv))
    set_log_level(*_log_flags(argv))  # plug-ins that fail to load are logged
    parser = build_parser()
    args = parser.parse_args(argv)
    set_log_level(args.verbose, args.log_quiet)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        check_numba_env()  # before any command imports Numba
        return int(args.func(args) or 0)
    except TileSimError as exc:
        print(f"tilesim: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into `head` and closed early
        sys.stderr.close()
        return 0
    except MemoryError:
        print(
            "tilesim: error: out of memory; make the problem smaller (fewer supersteps, tiles or points)",
            file=sys.stderr,
        )
        return 2
    except OSError as exc:  # the file system refused a write the up-front checks could not foresee
        print(f"tilesim: error: {os_error_message(exc)}", file=sys.stderr)
        return 2


def os_error_message(exc: OSError) -> str:
    """One line for a write the file system refused: the path, what happened and the fix."""
    where = f" {exc.filename}" if exc.filename else ""
    if exc.errno == errno.ENOSPC:
        return f"no space left to write{where}: free space on that disk, or write to another (e.g. --out elsewhere)"
    return f"cannot access{where}: {exc.strerror or exc}; check the path and its permissions"


def _is_log_flag(a: str) -> bool:
    """``-q``, ``-v``, ``-vv``, ... or ``--verbose``: the log level's flags (no sub-command has its own)."""
    return a in ("-q", "--verbose") or (a.startswith("-v") and len(a) > 1 and set(a[1:]) == {"v"})


def _hoist_log_flags(argv: list) -> list:
    """``argv`` with the log level's flags given after the command (``tilesim run -q ...``) moved before
    it, where the parser reads them (``--quiet`` after a command stays: ``run --quiet`` hides its
    progress bar)."""
    first = next((i for i, a in enumerate(argv) if not a.startswith("-")), len(argv))
    late = [a for a in argv[first + 1 :] if _is_log_flag(a)]
    if not late:
        return argv
    return argv[:first] + late + argv[first : first + 1] + [a for a in argv[first + 1 :] if not _is_log_flag(a)]


def _log_flags(argv) -> tuple:
    """``-v``/``-q`` before the command, read before the parser is built."""
    argv = sys.argv[1:] if argv is None else list(argv)
    verbose, quiet = 0, False
    for a in argv:
        if not a.startswith("-"):
            break
        if a in ("-q", "--quiet"):
            quiet = True
        elif _is_log_flag(a):  # -v, -vv, ... or --verbose
            verbose += 1 if a == "--verbose" else len(a) - 1
    return verbose, quiet


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
