"""``tilesim run`` (train a sparse SNN on a simulated tile machine), ``tilesim map-search`` and
``tilesim grad``: argument parsing and printing only.

Registered through the ``tilesim.commands`` entry point, so the core CLI stays workload-free.
The ``run`` and ``map-search`` flags are derived from :class:`tilesim.models.snn.commands.options.RunOptions`
(one flag per field, ``--name-with-dashes``); every one can also be set in a TOML file
(``tilesim run CONFIG.toml``; keys are the field names) and flags on the command line win.
The work is :mod:`tilesim.models.snn.commands.run` and :mod:`tilesim.models.snn.placement.search`.
"""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path
from typing import TYPE_CHECKING

from tilesim.errors import ConfigError, config_message, require
from tilesim.io import (
    atomic_write_bytes,
    check_output_path,
    check_own_outputs,
    dumps_json,
    is_run_folder,
    json_keys,
    staged_folder,
)

# only the parsers load at start-up (`tilesim --help` in under 0.3 s): the work's modules (Numba,
# networkx, matplotlib) are imported by the command that runs
from tilesim.models.snn.commands.options import (
    RUN_OPTIONS,
    RunOptions,
    add_option_flags,
    option_names,
    options_from_args,
    options_toml,
)
from tilesim.running.progress import progress_bar

if TYPE_CHECKING:
    from tilesim.models.snn.commands.run import RunSummary

# the options `tilesim grad` takes (the network's caps and thresholds and its placement)
GRAD_OPTIONS = (
    "max_activity",
    "caps",
    "input_cap",
    "second_threshold",
    "output_second_threshold",
    "machine",
    "chips",
    "neurons_per_tile",
    "mapping",
)
# map-search has its own --out (the best mapping) and --json (the search result)
SEARCH_OPTIONS = tuple(  # places the sparse run
    n for n in option_names() if n not in ("out", "json", "implementation", "input_dtype", "input_shape")
)


# `tilesim demo` (and `make demo`, which calls it): the SHD-shaped 2-layer paper network (700-1462-1460-20, B 48,
# T 100, 5 % caps) trained for a few steps on a simulated GC200. Flags given with `demo` change it, as with `run`.
DEMO_OPTIONS = {
    "layers": (700, 1462, 1460, 20),
    "dataset": "shd",
    "input_cap": 48,
    "batch": 48,
    "timesteps": 100,
    "max_activity": 0.05,
    "machine": "gc200",
    "steps": 4,
    "out": "out/demo",
}


def register(sub) -> None:
    """Add ``run``, ``demo``, ``map-search``, ``grad`` and ``scaling`` to the sub-command parsers ``sub``,
    and make ``tilesim compare RUN --machines ...`` re-run SNN runs on other machines."""
    from tilesim.outputs.runners import register_machine_runner

    register_machine_runner("snn", "tilesim.models.snn.commands.machines_cli:run_on_machine")
    _register_scaling(sub)
    _register_demo(sub)
    r = sub.add_parser(
        "run",
        help="train a sparse spiking network on a simulated tile machine",
        description="Train a sparse SNN (the paper's algorithm) and predict the machine's time per step.",
    )
    r.add_argument("config", nargs="?", help="TOML file with any of the options below (dashes as underscores)")
    r.add_argument(
        "--from",
        dest="from_dir",
        metavar="DIR",
        help="re-run the run stored in DIR (its options.toml and mapping.json); flags given here change it",
    )
    add_option_flags(r)
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    r.add_argument(
        "--force",
        action="store_true",
        help="run more steps than fit in an hour, or write --out into a folder that is not a tilesim run "
        "(memory limits still apply)",
    )
    r.set_defaults(func=cmd_run)

    p = sub.add_parser(
        "map-search",
        help="search neuron-to-tile placements for the fastest predicted step",
        description="Record one training step, then re-time it under many placements "
        "(annealing from the paper's contiguous mapping, the other strategies and a --mapping FILE "
        "if given); never returns a mapping that overflows SRAM.",
    )
    p.add_argument("config", nargs="?", help="TOML file with any of the run options (dashes as underscores)")
    add_option_flags(p, SEARCH_OPTIONS)
    p.add_argument("--budget-s", type=float, default=10.0, help="wall-clock budget of the search (default 10)")
    p.add_argument("--max-evals", type=int, help="stop after this many mappings")
    p.add_argument(
        "--fixed-neurons-per-tile",
        action="store_true",
        help="every layer keeps the baseline placement's tiles: search only where they sit (tile order, "
        "layer placement, dealing)",
    )
    p.add_argument(
        "--out",
        help="FILE.json: write the best mapping there (use it with --mapping FILE); DIR: also run the "
        "baseline and the best as full runs (DIR/baseline, DIR/best) and compare them (DIR/compare.md, .png)",
    )
    p.add_argument(
        "--json", action="store_true", help="print the result as JSON (keys baseline, best, evaluated, wall_s, ...)"
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--force", action="store_true", help="replace files and folders of --out DIR that map-search did not write"
    )
    p.set_defaults(func=cmd_map_search)

    g = sub.add_parser(
        "grad", help="loss and weight gradients of one batch (no update), for comparison with your framework"
    )
    g.add_argument("--weights", required=True, help="W.npz with W0..W{L-1} [N_in, N_out] float32")
    g.add_argument("--inputs", required=True, help="X.npz with spikes [T, B, N0] (0/1) and labels [B]")
    g.add_argument("--out", required=True, help="G.npz to write: loss, dW0.., out_counts [B, classes]")
    add_option_flags(g, GRAD_OPTIONS)
    g.set_defaults(func=cmd_grad)


# --------------------------------------------------------------------------------------------
def write_run_outputs(out, summary: RunSummary) -> None:
    """summary.json (the run's record), summary.md, trace.json, the pictures, mapping.json and the
    resolved options (``options.toml``: ``tilesim run --from DIR`` re-runs it) of a run into ``out``;
    the host's own measurements (wall times, peak RSS) in ``wall.json``
    (:func:`tilesim.models.snn.outputs.record.split_wall_clock`)."""
    from tilesim.cli import write_outputs
    from tilesim.models.snn.outputs.record import run_record

    a = summary.artifacts
    options = a.options if a.options is not None else RunOptions()
    mapping = (dumps_json(a.mapping.to_dict(), indent=1) + "\n").encode()  # as Mapping.save writes it
    record, wall = run_record(summary, options)
    files = {"mapping.json": mapping, RUN_OPTIONS: options_toml(options).encode()}
    write_outputs(
        Path(out),
        record,
        a.result,
        a.program,
        a.ledger,
        list(a.trace_tiles),
        exchange=a.exchange,
        files=files,
        unsealed={"wall.json": (dumps_json(wall, indent=2) + "\n").encode()},
    )


def _register_demo(sub) -> None:
    d = sub.add_parser(
        "demo",
        help="the main job on its embedded default: the SHD-shaped paper network trained on a simulated GC200 "
        "(what `make demo` runs)",
        description="`tilesim run` with the demo's options (layers 700-1462-1460-20, --dataset shd, --input-cap 48, "
        "--batch 48, --timesteps 100, --max-activity 0.05, --machine gc200, --steps 4, --out out/demo); any run "
        "flag given here changes it.",
    )
    add_option_flags(d)
    d.add_argument("--quiet", action="store_true", help="no progress bar")
    d.add_argument("--force", action="store_true", help="as for `tilesim run`")
    d.set_defaults(func=cmd_demo, config=None, from_dir=None)


def cmd_demo(args) -> int:
    """``tilesim demo``: :func:`cmd_run` with :data:`DEMO_OPTIONS` under the flags given."""
    return _run(options_from_args(args, given=DEMO_OPTIONS), args)


def cmd_run(args) -> int:
    """``tilesim run``: options from the TOML file (or a run folder's, ``--from``) and the flags,
    train, print (and write --out)."""
    return _run(options_from_args(args) if not args.from_dir else _options_from_run(args), args)


def _run(options: RunOptions, args) -> int:
    """Check, train, print and write the run of ``options`` (``args``: --quiet, --force)."""
    if options.implementation != "sparse":  # snnTorch's dense build (models/snntorch)
        from tilesim.models.snntorch.cli import run_snntorch_command  # loaded only when the command runs

        return run_snntorch_command(options, args)
    from tilesim.models.snn.commands.budget import (  # loaded only when the command runs (start-up time)
        check_run_memory,
        check_run_time,
    )

    check_run_memory(options)  # refused before anything is allocated
    check_run_time(options, args.force)
    if options.out:  # before the training, not after it
        from tilesim.io import check_run_folder  # loaded only when the command runs (start-up time)

        check_run_folder(options.out, "--out", args.force)
    from tilesim.models.snn.commands.run import run_training  # loaded only when the command runs (start-up time)

    with progress_bar(
        options.steps, "training", " step", quiet=bool(args.quiet or options.json or options.steps < 2)
    ) as bar:
        summary = run_training(
            options,
            progress=lambda step, res, sim: (
                bar.set_postfix_str(f"loss {res.loss:.3f}, {sim.total_s * 1e3:.2f} ms/step", refresh=False),
                bar.update(1),
            ),
        )
    out = options.output
    if out.out:
        write_run_outputs(out.out, summary)
    if out.json:
        print(dumps_json(summary.to_dict(), indent=2))
    else:
        print(format_run(summary.to_dict()))
        if out.out:
            print(
                f"wrote {out.out}/: report.html (open it in a browser), summary.md, summary.json, trace.json "
                "(https://ui.perfetto.dev), mapping.json, "
                "memory.png, work.png, exchange.png, timeline.png, breakdown.png"
                + (", activity.png" if summary.artifacts.history else "")
                + (", links.png" if (Path(out.out) / "links.png").is_file() else "")
            )
    return 0


def _options_from_run(args) -> RunOptions:
    """The options of the run stored in ``args.from_dir`` (its :data:`RUN_OPTIONS`, the placement of
    its ``mapping.json`` when the run read one), then the flags given on the command line."""
    import dataclasses

    from tilesim.outputs.report import verify_run_folder  # loaded only when the command runs (start-up time)

    if args.config:
        raise ConfigError(
            config_message("--from", args.from_dir, f"is given with a config file ({args.config})", "give one of them")
        )
    folder = Path(args.from_dir)
    try:
        verify_run_folder(folder)
    except ConfigError as exc:
        raise ConfigError(f"--from: {exc}") from None
    if not (folder / RUN_OPTIONS).is_file():
        raise ConfigError(
            config_message(
                "--from",
                args.from_dir,
                f"has no {RUN_OPTIONS} (a folder of another command, or written before tilesim stored a run's options)",
                "give a folder written by `tilesim run --out`",
            )
        )
    args.config = str(folder / RUN_OPTIONS)
    # the run's own options.toml: tilesim wrote its paths absolute, the files that run read (not a shared config)
    options = options_from_args(args, confine=False)
    if options.mapping == "mapping.json" and getattr(args, "mapping", None) is None:
        options = dataclasses.replace(options, mapping=str(folder / "mapping.json"))
    return options


def cmd_map_search(args) -> int:
    """``tilesim map-search``: options as for ``run``, then the search; prints its result."""
    require(args.budget_s > 0, "--budget-s", args.budget_s, "must be > 0", "e.g. --budget-s 10")
    options = options_from_args(args, SEARCH_OPTIONS)
    folder = Path(args.out) if args.out and not args.out.endswith(".json") else None
    if folder:
        check_own_outputs(folder, "--out", "map-search", _SEARCH_OUTPUTS, args.force)
    elif args.out:
        check_output_path(args.out, "--out", "file")
    bar, progress = None, None
    if not args.json and not args.quiet:
        bar = progress_bar(None, "map-search", " mappings")

        def progress(n, best):
            bar.update(n - bar.n)
            bar.set_postfix_str(f"best {best * 1e3:.3f} ms", refresh=False)

    try:
        if folder:
            out = _search_into_folder(options, args, progress, folder)
        else:
            out = _search(options, args, progress, args.out)
    finally:
        if bar is not None:
            bar.close()
    if args.json:
        print(dumps_json(out, indent=2))
    else:
        b, o = out["baseline"], out["best"]
        print(
            f"baseline ({b['strategy']}): {b['predicted_step_s'] * 1e3:.3f} ms/step, "
            f"neurons/tile {b['neurons_per_tile']} "
            "(the first training step's activity: `tilesim run` prints the median of its steps, "
            "its predicted_step_s_per_step[0] is this step)"
        )
        print(
            f"best found:         {o['predicted_step_s'] * 1e3:.3f} ms/step ({out['speedup']:.3f}x), "
            f"neurons/tile {o['neurons_per_tile']}, chips {o['chips_of_layer']}"
            + (f", tile order {o['tile_order']}" if o["tile_order"] else "")
        )
        for line in out["why"]:
            print(f"  why: {line}")
        print(
            f"{out['evaluated']} mappings evaluated in {out['wall_s']:.1f} s "
            f"({out['mappings_per_s']:.1f}/s)" + (f"; wrote {args.out}" if args.out else "")
        )
        if folder:
            print(f"as full runs: {out['compare']}; see {folder}/compare.md, baseline/ and best/")
    return 0


def _search(options, args, progress, best_file: str | None) -> dict:
    """The search of ``map-search`` (:func:`tilesim.models.snn.placement.search.search_mapping`) with the
    command's budget, limits and ``--fixed-neurons-per-tile``, its best mapping saved to ``best_file``."""
    from tilesim.models.snn.placement.search import search_mapping  # loaded only when the command runs (start-up time)

    out, _ = search_mapping(
        options,
        args.budget_s,
        options.seed,
        args.max_evals,
        progress,
        out=best_file,
        fixed_tiles=args.fixed_neurons_per_tile,
    )
    return out


def _search_into_folder(options, args, progress, folder: Path) -> dict:
    """``map-search --out DIR``: the search, its best mapping (``best-mapping.json``), the two full runs
    and their comparison (:func:`_write_search_folder`), all written into a staging folder beside
    ``DIR`` and swapped in as one (:func:`tilesim.io.staged_folder`): a kill at any moment leaves the
    previous search's folder whole or the new one, never the best of one network beside the baseline
    of another. The user's own files in ``DIR`` stay. Returns the search's summary."""
    final = folder.expanduser().absolute()
    with staged_folder(folder, drop=frozenset((*_SEARCH_OUTPUTS, "plotly.min.js"))) as stage:
        out = _search(options, args, progress, str(stage / "best-mapping.json"))
        out["compare"] = _write_search_folder(options, stage, str(stage / "best-mapping.json"), final)
    out["best"]["mapping_file"] = str(folder / "best-mapping.json")
    return out


def _write_search_folder(options, folder: Path, mapping_file: str, final: Path | None = None) -> str:
    """``map-search --out DIR``: the baseline (the run's own placement) and the best mapping as full runs of
    ``options`` (``DIR/baseline``, ``DIR/best``) and their comparison through
    :func:`tilesim.outputs.compare.compare_runs` (``DIR/compare.md|json|png|html``, baseline the reference,
    ranked by throughput); returns the comparison's verdict. ``folder`` may be the staging folder of
    ``final``, the folder the comparison names as where its runs are."""
    from tilesim.models.snn.commands.options import (  # when the command runs (start-up time)
        options_dict,
        options_from_mapping,
    )
    from tilesim.models.snn.commands.run import run_training
    from tilesim.models.snn.placement.search import baseline_mapping
    from tilesim.outputs.compare import compare_runs, write_comparison

    for name, mapping in (("baseline", baseline_mapping(options)), ("best", mapping_file)):
        values = {**options_dict(options, json_safe=False), "mapping": mapping, "out": None, "json": False}
        write_run_outputs(folder / name, run_training(options_from_mapping(values, "map-search")))
    comparison = compare_runs(folder / "baseline", folder / "best")
    if final is not None:  # the runs' folders as they will be, not the staging folder
        comparison = dataclasses.replace(comparison, folders=(str(final / "baseline"), str(final / "best")))
    write_comparison(comparison, folder, force=True)  # DIR is this command's own folder: its compare.* are its own
    return comparison.verdict


def _host_structure(stack: str) -> bool:
    """Whether the step's structure options shape stack ``stack``'s program ("" : a record from before stacks)."""
    if not stack:
        return True
    from tilesim.models.snn.stacks import stack_class  # loaded only when the command runs (start-up time)

    return stack_class(stack).host_structure


def format_run(summary: dict) -> str:
    """The human-readable summary of a run (the dict of :meth:`RunSummary.to_dict`)."""
    m = summary["memory"]
    bd = summary["breakdown_s"]
    total = summary["predicted_step_s"]
    top = sorted(summary["by_phase"].items(), key=lambda kv: -kv[1]["time_s"])[:3]
    lines = [
        f"network {'-'.join(map(str, summary['network']['layers']))}: {summary['network']['neurons']:,} neurons, "
        f"{summary['network']['weights']:,} weights, caps {summary['network']['caps']}, "
        f"{summary['network']['neurons_per_tile']} neurons/tile on {summary['machine']}",
        f"predicted {total * 1e3:.3f} ms per training step = {summary['samples_per_s']:,.0f} samples/s  "
        + "  ".join(f"{k} {v / total * 100:.0f}%" for k, v in bd.items() if v > 0),
        "  slowest phases: "
        + "; ".join(f"{k} {v['time_s'] * 1e3:.2f} ms (critical tile {v['critical_tile']})" for k, v in top),
        f"SRAM: fullest tile {m['max_tile']} uses {m['max_tile_bytes']:,} of {m['budget_bytes']:,} B "
        f"({100 * m['max_tile_bytes'] / m['budget_bytes']:.0f} %), largest: "
        + ", ".join(f"{e['label']} {e['bytes']:,} B" for e in m["max_tile_entries"][:3]),
        "  " + summary["explain"]["sentence"],
        (
            f"loss {summary['loss'][0]:.3f} -> {summary['loss'][-1]:.3f}, accuracy {summary['accuracy'][-1]:.2f}; "
            if summary["loss"]
            else ""
        )
        + (  # a stored summary.json keeps the host's wall times in wall.json
            f"simulator wall time {summary['wall_s_per_step']:.3f} s per step" if "wall_s_per_step" in summary else ""
        ),
    ]
    lines += [f"  {n}" for n in summary.get("notes", [])]
    st = summary.get("structure")
    stack = summary.get("stack", "")
    if stack:
        from tilesim.models.snn.stacks import describe_stack  # loaded only when the command runs (start-up time)

        lines.append(f"  execution stack {describe_stack(stack)} (models/snn/stacks/)")
    if st and _host_structure(stack):  # the structure's host and copy options (the Poplar stack's)
        lines.append(
            f"  assumed structure: sync {st['sync_scope']}, copies {st['copies']}, host {st['host_transfer']} "
            f"{st['host_direction']} at the {st.get('host_rate', 'fitted')} rate per "
            f"{st.get('host_shared', 'chip').replace('_', ' ')} (models/snn/step/structure.py)"
        )
    from tilesim.models.snn.commands.extrapolation import HOST_EXCESS_KIND  # loaded when a run is printed

    lines += [
        f"  {'prediction' if f['kind'] == HOST_EXCESS_KIND else 'training'}: {f['message']}; fix: {f['fix']}"
        for f in summary.get("findings", [])
    ]
    return "\n".join(lines)


def _npz(path, what):
    import numpy as np  # loaded only when the command runs (start-up time)

    p = Path(path)
    require(p.is_file(), what, str(path), "no such file", "give the path of an existing .npz file")
    try:
        return dict(np.load(p))
    except Exception as exc:  # a corrupt or non-npz file
        raise ConfigError(
            config_message(what, str(path), f"is not a readable .npz file ({exc})", "write it with numpy.savez")
        ) from None


def _grad_weights(path) -> list:
    from tilesim.models.snn.kernels.grad_inputs import grad_weights  # loaded only when the command runs (start-up time)

    return grad_weights(_npz(path, "--weights"))


def cmd_grad(args) -> int:
    """``tilesim grad``: loss and weight gradients of one batch from W.npz and X.npz into G.npz."""
    import numpy as np  # loaded only when the command runs (start-up time)

    from tilesim.models.snn.commands.run import batch_gradients
    from tilesim.models.snn.kernels.grad_inputs import grad_batch  # loaded only when the command runs (start-up time)

    check_output_path(args.out, "--out", "file")
    Ws = _grad_weights(args.weights)
    spikes, labels = grad_batch(_npz(args.inputs, "--inputs"), int(Ws[0].shape[0]), int(Ws[-1].shape[1]))
    layers = tuple([int(Ws[0].shape[0])] + [int(w.shape[1]) for w in Ws])
    T, B = (int(n) for n in spikes.shape[:2])
    options = options_from_args(args, GRAD_OPTIONS, given={"layers": layers, "batch": B, "timesteps": T})
    out = batch_gradients(Ws, spikes, labels, options)
    buf = io.BytesIO()
    np.savez(buf, **out)
    atomic_write_bytes(args.out, buf.getvalue())
    print(f"loss {out['loss']:.6f}; wrote {args.out} ({', '.join(out)})")
    return 0


def _register_scaling(sub) -> None:
    """``tilesim scaling``: weak or strong scaling efficiency of the authors' network recipe."""
    from tilesim.models.snn.step.structure import (  # loaded only when the command runs (start-up time)
        COPIES,
        HOST_DIRECTIONS,
        HOST_RATES,
        HOST_SHARED,
        HOST_TRANSFERS,
        SYNC_SCOPES,
    )

    s = sub.add_parser(
        "scaling",
        help="weak or strong scaling efficiency of the SNN step over 1 -> N chips, with the structural band",
        description="Time the authors' multi_neuron network (per chip 1471 x npt neurons in 3 npt/2 layers) "
        "at fixed activity on 1..N chips (no training); per point the compute/sync/exchange/links/host/"
        "split and, for each structural assumption switched the other way, the efficiency it gives.",
    )
    s.add_argument("--mode", choices=("weak", "strong"), default="weak", help="weak (default) or strong scaling")
    s.add_argument("--chips", default="1,2,4,8,16", help="chip counts, comma-separated (default 1,2,4,8,16)")
    s.add_argument("--dataset", choices=("shd", "nmnist"), default="shd", help="input shape (default shd)")
    s.add_argument("--neurons-per-tile", type=int, default=8, help="neurons per tile (default 8)")
    s.add_argument("--batch", type=int, default=24, help="samples per step (default 24)")
    s.add_argument("--max-activity", type=float, default=0.05, help="fixed activity: every list at this cap")
    s.add_argument("--machine", default="bow", help="machine preset (default bow)")
    s.add_argument("--sync-scope", choices=SYNC_SCOPES, default="chip", help="sync scope (default chip)")
    s.add_argument("--copies", choices=COPIES, default="separate", help="per-layer copies (default separate)")
    s.add_argument("--host-transfer", choices=HOST_TRANSFERS, default="per_epoch", help="default per_epoch")
    s.add_argument("--host-direction", choices=HOST_DIRECTIONS, default="round_trip", help="default round_trip")
    s.add_argument(
        "--host-rate",
        choices=HOST_RATES,
        default="fitted",
        help="the host copy at the rate fitted to the measured steps, or the documented 3 GB/s (default fitted)",
    )
    s.add_argument(
        "--host-shared",
        choices=HOST_SHARED,
        default="chip",
        help="host copy made per chip in parallel, or serially per host link (default chip)",
    )
    s.add_argument(
        "--sensitivity",
        action="store_true",
        help="also the S6 table: E(max chips) for npt 2/4/8 x batch 24/96/384 under every combination of "
        "the structural unknowns (64 rows) at the fitted coefficients, with the verdict on each half of S6 "
        "(several minutes; with the leave-one-out band: experiments/s6_combinations.py)",
    )
    s.add_argument("--no-band", action="store_true", help="skip the structural band")
    s.add_argument("--json", action="store_true", help="print the study as JSON")
    s.add_argument("--out", help="folder for scaling.json and scaling.png")
    s.add_argument("--force", action="store_true", help="replace files of --out that tilesim scaling did not write")
    s.set_defaults(func=cmd_scaling)


def _scaling_folder(path: Path) -> bool:
    """True when ``path`` lies in a folder whose scaling.json tilesim scaling wrote."""
    return {"mode", "recipe", "points"} <= json_keys(path.parent / "scaling.json")


_SCALING_OUTPUTS = dict.fromkeys(("scaling.json", "scaling.png", "sensitivity.json", "sensitivity.md"), _scaling_folder)
"""What ``scaling --out`` writes, each ours when the folder's scaling.json is a study's."""

_SEARCH_OUTPUTS = {
    "best-mapping.json": lambda p: {"format", "strategy", "layers"} <= json_keys(p),
    "baseline": is_run_folder,
    "best": is_run_folder,
    **dict.fromkeys(
        ("compare.md", "compare.json", "compare.png", "compare.html"),
        lambda p: {"verdict", "rows"} <= json_keys(p.parent / "compare.json"),
    ),
}
"""What ``map-search --out DIR`` writes, and how each is known to be a search's."""


def _chip_list(text: str) -> tuple:
    try:
        out = tuple(int(x) for x in str(text).split(",") if x.strip())
    except ValueError:
        out = ()
    if not out or min(out) < 1 or max(out) > 4096:
        raise ConfigError(
            config_message("--chips", text, "must be integers in 1..4096, comma-separated", "e.g. 1,2,4,8,16")
        )
    return out


def cmd_scaling(args) -> int:
    """Run a scaling study; print the table or JSON; ``--out`` writes scaling.json and scaling.png."""
    from tilesim.models.snn.commands.scaling import (  # loaded only when the command runs (start-up time)
        PAPER_EXECUTIONS_PER_EPOCH,
        ScalingRecipe,
        format_sensitivity,
        format_table,
        scaling_study,
        sensitivity_table,
    )
    from tilesim.models.snn.step.structure import StepStructure  # loaded only when the command runs (start-up time)

    recipe = ScalingRecipe(
        dataset=args.dataset,
        neurons_per_tile=args.neurons_per_tile,
        batch=args.batch,
        max_activity=args.max_activity,
        machine=args.machine,
    )
    structure = StepStructure(
        sync_scope=args.sync_scope,
        copies=args.copies,
        host_transfer=args.host_transfer,
        host_direction=args.host_direction,
        executions_per_epoch=PAPER_EXECUTIONS_PER_EPOCH,
        host_rate=args.host_rate,
        host_shared=args.host_shared,
    )
    chips = _chip_list(args.chips)
    if args.out:  # before the study, not after it
        check_own_outputs(args.out, "--out", "scaling", _SCALING_OUTPUTS, args.force)
    study = scaling_study(recipe, chips, args.mode, structure, band=not args.no_band)
    table = sensitivity_table(recipe, max(chips), structure) if args.sensitivity else None
    if args.json:
        print(dumps_json({**study.to_dict(), "sensitivity": table.to_dict() if table else None}, indent=1))
    else:
        print(format_table(study) + ("\n\n" + format_sensitivity(table) if table else ""))
    if args.out:
        from tilesim.models.snn.outputs.scaling_plot import (
            plot_scaling,  # matplotlib is imported only when drawing (start-up time)
        )

        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(out / "scaling.json", (dumps_json(study.to_dict(), indent=1) + "\n").encode())
        png = io.BytesIO()
        plot_scaling(study, png)
        atomic_write_bytes(out / "scaling.png", png.getvalue())
        if table:
            atomic_write_bytes(out / "sensitivity.json", (dumps_json(table.to_dict(), indent=1) + "\n").encode())
            atomic_write_bytes(out / "sensitivity.md", (format_sensitivity(table) + "\n").encode())
        if not args.json:
            extra = ", sensitivity.json, sensitivity.md" if table else ""
            print(f"wrote {out}/scaling.json, {out}/scaling.png{extra}")
    return 0
