"""``tilesim run`` (train a sparse SNN on a simulated tile machine) and ``tilesim grad``.

Registered through the ``tilesim.commands`` entry point, so the core CLI stays workload-free.
Every ``run`` flag can also be set in a TOML file (``tilesim run CONFIG.toml``; keys are the
flag names with underscores); flags on the command line win.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from tilesim.errors import ConfigError, MappingError, SramOverflowError, config_message, require

DATASETS = ("synthetic", "shd", "nmnist", "dvsgesture")
RUN_DEFAULTS = {
    "machine": "gc200", "chips": None, "layers": "700-1462-1460-20", "dataset": "synthetic", "data": None,
    "batch": 48, "timesteps": 100, "max_activity": 0.05, "input_cap": 48, "second_threshold": 0.9,
    "output_second_threshold": None, "caps": None, "activity": "natural", "neurons_per_tile": None,
    "mapping": "contiguous", "optimizer": "adam", "lr": 1e-3, "steps": 5, "seed": 0, "out": None,
    "json": False, "recurrent": False, "weight_mul": 2.0, "memory_check": "raise",
    "model": None, "dt": 1e-3, "steps_per_execution": 52, "costs": None,
}


def _caps(text):
    try:
        return tuple(int(x) for x in str(text).replace(",", "-").split("-") if x)
    except ValueError:
        raise argparse.ArgumentTypeError(f"caps = {text!r}: give integers like 32-72-72-2") from None


def _add_network_flags(p, defaults_none: bool):
    d = (lambda k: None) if defaults_none else RUN_DEFAULTS.get
    p.add_argument("--max-activity", type=float, default=d("max_activity"),
                   help="cap fraction a: N_max = 2*floor(a*N/2) per layer (default 0.05)")
    p.add_argument("--caps", type=_caps, default=d("caps"), help="explicit N_max per neuron layer, e.g. 72-72-2")
    p.add_argument("--input-cap", type=int, default=d("input_cap"), help="max input spikes per step and sample")
    p.add_argument("--second-threshold", type=float, default=d("second_threshold"),
                   help="theta2: gradient-only entries need theta2 < v <= theta1 (default 0.9)")
    p.add_argument("--output-second-threshold", type=float, default=d("output_second_threshold"),
                   help="theta2 of the output layer (the paper's early runs: -100)")
    p.add_argument("--machine", default=d("machine"), help="machine preset or TOML file (default gc200)")
    p.add_argument("--chips", type=int, default=d("chips"), help="number of chips (default: the machine's)")
    p.add_argument("--neurons-per-tile", type=int, default=d("neurons_per_tile"),
                   help="neurons per tile (default: smallest even value that fits)")
    p.add_argument("--mapping", default=d("mapping"),
                   help="placement: contiguous (the paper's, default), round_robin, balanced, graph, or a mapping JSON file")


def _add_run_flags(r) -> None:
    r.add_argument("config", nargs="?", help="TOML file with any of the flags below (dashes as underscores)")
    r.add_argument("--layers", help="layer sizes N0-N1-...-C (default 700-1462-1460-20, SHD 2-layer)")
    r.add_argument("--dataset", choices=DATASETS, help="data shape / generator (default synthetic)")
    r.add_argument("--data", help="a real data file/folder: SHD/SSC .h5, N-MNIST folder, tonic .npz")
    r.add_argument("--batch", type=int)
    r.add_argument("--timesteps", type=int)
    r.add_argument("--activity", choices=("natural", "fixed"))
    r.add_argument("--optimizer", choices=("adam", "sgd"))
    r.add_argument("--lr", type=float)
    r.add_argument("--steps", type=int, help="training steps (default 5)")
    r.add_argument("--seed", type=int)
    r.add_argument("--recurrent", action="store_const", const=True, default=None, help="recurrent weights in every layer")
    r.add_argument("--weight-mul", type=float)
    r.add_argument("--memory-check", choices=("raise", "report"))
    r.add_argument("--steps-per-execution", type=int,
                   help="training steps per device execution; the host copy of weights and optimizer state "
                        "after each execution is amortised over them (default 52, as in the calibration runs)")
    r.add_argument("--costs", help="cost-model TOML (default: the shipped calibration, "
                                   "tilesim/presets/costs/snn.toml; make your own with tilesim calibrate)")
    r.add_argument("--model", help="a NIR graph (.nir): Input -> (Affine|Linear) -> LIF ... -> Output; sets "
                                   "--layers, --recurrent, the LIF constants and the initial weights")
    r.add_argument("--dt", type=float, help="time step of one network step in the NIR graph's time unit "
                                            "(default 1e-3, i.e. 1 ms for tau in seconds): alpha = exp(-dt/tau)")
    _add_network_flags(r, defaults_none=True)


def register(sub) -> None:
    r = sub.add_parser("run", help="train a sparse spiking network on a simulated tile machine",
                       description="Train a sparse SNN (the paper's algorithm) and predict the machine's time per step.")
    _add_run_flags(r)
    r.add_argument("--out", help="directory for summary.json, summary.md, trace.json, mapping.json and pictures")
    r.add_argument("--json", action="store_const", const=True, default=None, help="print the summary as JSON")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    r.set_defaults(func=cmd_run)

    from models.snn.mapsearch import register_map_search
    register_map_search(sub, _add_run_flags)

    g = sub.add_parser("grad", help="loss and weight gradients of one batch (no update), for comparison with your framework")
    g.add_argument("--weights", required=True, help="W.npz with W0..W{L-1} [N_in, N_out] float32")
    g.add_argument("--inputs", required=True, help="X.npz with spikes [T, B, N0] (0/1) and labels [B]")
    g.add_argument("--out", required=True, help="G.npz to write: loss, dW0.., out_counts [B, classes]")
    _add_network_flags(g, defaults_none=False)
    g.set_defaults(func=cmd_grad)


# --------------------------------------------------------------------------------------------
def _merge(args) -> dict:
    opts = dict(RUN_DEFAULTS)
    if args.config:
        from tilesim.io import read_toml
        data = read_toml(args.config, "run config file")
        for k, v in data.items():
            if k not in RUN_DEFAULTS:
                raise ConfigError(config_message(f"{args.config}: {k}", v, "unknown key",
                                                 f"allowed: {', '.join(sorted(RUN_DEFAULTS))}"))
            opts[k] = v
    for k in RUN_DEFAULTS:
        v = getattr(args, k, None)
        if v is not None:
            opts[k] = v
    if isinstance(opts["caps"], (str, int)):
        opts["caps"] = _caps(opts["caps"])
    return opts


def _nir(opts):
    """The NIR model of ``opts['model']`` (or None), checked against ``--layers``/``--recurrent``."""
    if not opts.get("model"):
        return None
    from models.snn.network import parse_layers
    from models.snn.nir_import import load_nir
    require(isinstance(opts["dt"], (int, float)) and opts["dt"] > 0, "dt", opts["dt"], "must be > 0")
    model = load_nir(opts["model"], float(opts["dt"]))
    if opts["layers"] != RUN_DEFAULTS["layers"]:
        require(parse_layers(opts["layers"]) == tuple(model.layers), "--layers", opts["layers"],
                f"must match the NIR graph's {'-'.join(map(str, model.layers))}", "drop --layers when using --model")
    return model


def _costs(opts):
    """The cost model of ``opts['costs']`` (None: the shipped calibrated one)."""
    if not opts.get("costs"):
        return None
    from tilesim.costs import load_costs
    return load_costs(opts["costs"])


def _config(opts, model=None):
    """The network of ``opts``; ``model`` (a loaded NIR graph, else read from ``opts['model']``)
    sets the layers, recurrence and LIF constants."""
    from models.snn.network import NetworkConfig
    model = model if model is not None else _nir(opts)
    extra = {}
    if model is not None:
        extra = {"lif": model.lif}
        opts = {**opts, "layers": model.layers, "recurrent": model.recurrent}
    return NetworkConfig(**extra, layers=opts["layers"], batch=opts["batch"], timesteps=opts["timesteps"],
                         max_activity=opts["max_activity"], caps=opts["caps"], input_cap=opts["input_cap"],
                         second_threshold=opts["second_threshold"],
                         output_second_threshold=opts["output_second_threshold"], activity=opts["activity"],
                         optimizer=opts["optimizer"], lr=opts["lr"], seed=opts["seed"],
                         recurrent=opts["recurrent"], weight_mul=opts["weight_mul"])


def place(config, machine, neurons_per_tile=None, mapping="contiguous", memory_check="raise"):
    """Place ``config`` on ``machine`` (see :func:`models.snn.placing.place_network`): a strategy
    name (with ``neurons_per_tile`` None, the smallest even value that fits), a mapping JSON
    file or a :class:`mapping.Mapping`. Returns ``(placement, ledger, neurons_per_tile)``."""
    from models.snn.placing import place_network
    p = place_network(config, machine, neurons_per_tile, mapping, memory_check)
    return p.placement, p.ledger, p.neurons_per_tile


def _dataset(opts, config, n_samples):
    from models.snn import data as D
    if opts["data"]:
        path = Path(opts["data"])
        require(path.exists(), "--data", str(path), "no such file or folder")
        if path.suffix in (".h5", ".hdf5"):
            ds = D.read_shd(path, n_channels=config.layers[0])
        elif path.is_dir():
            ds = D.read_nmnist_folder(path)
        else:
            raise ConfigError(config_message("--data", str(path), "unknown format",
                                             "give an SHD/SSC .h5 file or an N-MNIST folder"))
        require(ds.n_channels == config.layers[0], "--layers N0", config.layers[0],
                f"must equal the data's {ds.n_channels} channels")
        require(ds.n_classes <= config.layers[-1], "--layers classes", config.layers[-1],
                f"must be >= the data's {ds.n_classes} classes")
        return ds
    name = opts["dataset"]
    shape = {"shd": (700, D.shd_like), "nmnist": (2312, D.nmnist_like), "dvsgesture": (4608, D.dvsgesture_like)}
    if name == "synthetic":
        return D.synthetic(config.layers, n_samples, config.timesteps, seed=config.seed)
    n0, gen = shape[name]
    require(config.layers[0] == n0, "--layers N0", config.layers[0], f"must be {n0} for --dataset {name}")
    ds = gen(n_samples, seed=config.seed)
    require(ds.n_classes <= config.layers[-1], "--layers classes", config.layers[-1],
            f"must be >= {ds.n_classes} for --dataset {name}")
    return ds


def run_training(opts: dict, progress=None) -> dict:
    """Train for ``opts['steps']`` steps; returns the summary dict (and writes ``--out``)."""
    from models.snn.network import init_network, train_step
    from models.snn.explain import label_tile_cycles
    from models.snn.timing import build_step_program
    from tilesim.engine import simulate
    from tilesim.machine import load_machine

    t_all = time.perf_counter()
    model = _nir(opts)
    config = _config(opts, model)
    require(isinstance(opts["steps"], int) and opts["steps"] >= 1, "steps", opts["steps"], "must be an integer >= 1")
    machine = load_machine(opts["machine"], opts["chips"])
    from models.snn.placing import place_network
    placed = place_network(config, machine, opts["neurons_per_tile"], opts["mapping"], opts["memory_check"])
    placement, ledger, npt = placed.placement, placed.ledger, placed.neurons_per_tile
    costs = _costs(opts)
    state = init_network(config, placement)
    if model is not None:          # the graph's weights replace the random initialisation
        state.W = [w.copy() for w in model.weights]
        state.V = [None if v is None else v.copy() for v in model.recurrent_weights]
    ds = _dataset(opts, config, max(config.batch * min(opts["steps"], 20), config.batch * 2))
    rng = np.random.default_rng(config.seed + 1)
    losses, accs, pred, walls, results, counters, programs = [], [], [], [], [], [], []
    batches = iter(())
    program = None
    for step in range(opts["steps"]):
        try:
            spikes, labels = next(batches)
        except StopIteration:
            batches = ds.batches(config.batch, config.timesteps, config.input_cap, rng)
            spikes, labels = next(batches)
        t0 = time.perf_counter()
        res = train_step(state, spikes, labels, per_step_counters=True)
        program = build_step_program(config, placement, res.counters, machine, costs,
                                     steps_per_execution=opts["steps_per_execution"])
        sim = simulate(program, machine)
        walls.append(time.perf_counter() - t0)
        losses.append(float(res.loss))
        accs.append(float(res.accuracy))
        pred.append(sim.total_s)
        results.append(sim)
        counters.append(res.counters.totals_only())
        programs.append(label_tile_cycles(program))
        if progress:
            progress(step, res, sim)
    med = int(np.argsort(pred)[len(pred) // 2])
    sim = results[med]
    from models.snn.explain import exchange_matrices, explain_critical
    explain = explain_critical(sim, config, placement, counters[med], machine, programs[med])
    exchange = exchange_matrices(config, placement, counters[med], machine, chip=explain["chip"])
    explain["exchange_bytes"] = exchange["totals_bytes"]
    n_weights = sum(w.size for w in state.W) + sum(v.size for v in state.V if v is not None)
    summary = {
        "predicted_step_s": float(pred[med]),          # the median step (upper middle for even counts)
        "samples_per_s": config.batch / float(pred[med]),
        "breakdown_s": sim.breakdown_s(),
        "memory": ledger.to_dict(),
        "network": {"layers": list(config.layers), "neurons": int(sum(config.layers[1:])), "weights": int(n_weights),
                    "caps": list(config.n_max), "neurons_per_tile": npt},
        "machine": machine.name, "chips": machine.chips,
        "mapping": placed.mapping.summary(),
        "loss": losses, "accuracy": accs,
        "predicted_step_s_per_step": pred,
        "wall_s_per_step": float(np.median(walls[1:] if len(walls) > 1 else walls)),
        "by_phase": sim.by_label(),
        "explain": explain,
    }
    summary["wall_s_total"] = time.perf_counter() - t_all
    if opts["out"]:
        from tilesim.cli import write_outputs
        used = placement.tile_of_neuron
        trace_tiles = sorted({int(used[0][0]), int(used[-1][0])})
        write_outputs(Path(opts["out"]), sim, program, ledger, trace_tiles, extra=summary, exchange=exchange)
        placed.mapping.save(Path(opts["out"]) / "mapping.json")
    return summary


def format_run(summary: dict) -> str:
    m = summary["memory"]
    bd = summary["breakdown_s"]
    total = summary["predicted_step_s"]
    top = sorted(summary["by_phase"].items(), key=lambda kv: -kv[1]["time_s"])[:3]
    lines = [f"network {'-'.join(map(str, summary['network']['layers']))}: {summary['network']['neurons']:,} neurons, "
             f"{summary['network']['weights']:,} weights, caps {summary['network']['caps']}, "
             f"{summary['network']['neurons_per_tile']} neurons/tile on {summary['machine']}",
             f"predicted {total * 1e3:.3f} ms per training step = {summary['samples_per_s']:,.0f} samples/s  "
             + "  ".join(f"{k} {v / total * 100:.0f}%" for k, v in bd.items() if v > 0),
             "  slowest phases: " + "; ".join(f"{k} {v['time_s'] * 1e3:.2f} ms (critical tile {v['critical_tile']})"
                                              for k, v in top),
             f"SRAM: fullest tile {m['max_tile']} uses {m['max_tile_bytes']:,} of {m['budget_bytes']:,} B "
             f"({100 * m['max_tile_bytes'] / m['budget_bytes']:.0f} %), largest: "
             + ", ".join(f"{e['label']} {e['bytes']:,} B" for e in m["max_tile_entries"][:3]),
             "  " + summary["explain"]["sentence"],
             f"loss {summary['loss'][0]:.3f} -> {summary['loss'][-1]:.3f}, accuracy {summary['accuracy'][-1]:.2f}; "
             f"host {summary['wall_s_per_step']:.3f} s per step"]
    return "\n".join(lines)


def cmd_run(args) -> int:
    import sys

    from tqdm import tqdm
    opts = _merge(args)
    with tqdm(total=opts["steps"], desc="training", unit=" step", file=sys.stderr, leave=False,
              disable=bool(args.quiet or opts["json"] or opts["steps"] < 2)) as bar:
        summary = run_training(opts, progress=lambda step, res, sim: (
            bar.set_postfix_str(f"loss {res.loss:.3f}, {sim.total_s * 1e3:.2f} ms/step", refresh=False), bar.update(1)))
    if opts["json"]:
        print(json.dumps(summary, indent=2))
    else:
        print(format_run(summary))
        if opts["out"]:
            print(f"wrote {opts['out']}/: summary.md, summary.json, trace.json (https://ui.perfetto.dev), mapping.json, "
                  "memory.png, work.png, exchange.png, timeline.png, breakdown.png")
    return 0


def _npz(path, what):
    p = Path(path)
    require(p.is_file(), what, str(path), "no such file")
    try:
        return dict(np.load(p))
    except Exception as exc:   # a corrupt or non-npz file
        raise ConfigError(config_message(what, str(path), f"is not a readable .npz file ({exc})")) from None


def cmd_grad(args) -> int:
    from models.snn.network import NetworkConfig, compute_gradients, init_network
    from tilesim.machine import load_machine
    from tilesim.io import atomic_write_bytes

    W = _npz(args.weights, "--weights")
    X = _npz(args.inputs, "--inputs")
    keys = sorted((k for k in W if k.startswith("W") and k[1:].isdigit()), key=lambda k: int(k[1:]))
    require(keys and keys == [f"W{i}" for i in range(len(keys))], "--weights keys", sorted(W),
            "must be W0, W1, ... W{L-1}")
    Ws = [np.asarray(W[k], np.float32) for k in keys]
    for i, w in enumerate(Ws):
        require(w.ndim == 2, f"W{i}.shape", w.shape, "must be 2-D [N_in, N_out]")
        if i:
            require(w.shape[0] == Ws[i - 1].shape[1], f"W{i}.shape", w.shape,
                    f"must start with {Ws[i - 1].shape[1]} (the outputs of W{i - 1})")
    require("spikes" in X and "labels" in X, "--inputs keys", sorted(X), "must contain 'spikes' and 'labels'")
    spikes, labels = np.asarray(X["spikes"]), np.asarray(X["labels"])
    require(spikes.ndim == 3 and spikes.shape[2] == Ws[0].shape[0], "spikes.shape", spikes.shape,
            f"must be [T, B, {Ws[0].shape[0]}]")
    layers = [Ws[0].shape[0]] + [w.shape[1] for w in Ws]
    T, B = spikes.shape[:2]
    cfg = NetworkConfig(layers=layers, batch=B, timesteps=T, max_activity=args.max_activity, caps=args.caps,
                        input_cap=args.input_cap, second_threshold=args.second_threshold,
                        output_second_threshold=args.output_second_threshold)
    machine = load_machine(args.machine, args.chips)
    placement, _, _ = place(cfg, machine, args.neurons_per_tile, args.mapping, "report")
    state = init_network(cfg, placement)
    state.W = Ws
    res = compute_gradients(state, spikes.astype(np.uint8), labels.astype(np.int64))
    dW, _ = res.grads
    out = {"loss": np.float64(res.loss), "out_counts": res.logits}
    out.update({f"dW{i}": g for i, g in enumerate(dW)})
    import io
    buf = io.BytesIO()
    np.savez(buf, **out)
    atomic_write_bytes(args.out, buf.getvalue())
    print(f"loss {res.loss:.6f}; wrote {args.out} ({', '.join(out)})")
    return 0
