"""S7 — sparse training (caps 1/5/10 %, second-threshold schedule) vs dense training: convergence and accuracy.

Claim (Finkbeiner et al., arXiv 2311.04386; seed-claims.md S7): sparse training with a second
threshold ϑ2 does not reduce final accuracy nor slow convergence ("without a significant slowdown
in training convergence or reduction in final model performance").

Reproduction on the learnable synthetic task of :func:`tilesim.models.snn.training.data.synthetic` (class templates
with dropped events, jitter and background noise; a held-out test split from the same templates),
same network, data order and initial weights (same seed) in every mode, the library's defaults
otherwise (weight_mul 4.0, output-layer ϑ2 −100: issue 18):

* ``dense``: caps = N (every neuron can spike and carry a gradient), ϑ2 = −100 constant in every
  layer (the surrogate everywhere, as the authors' dense GPU reference);
* ``theta2 only``: caps = N, hidden ϑ2 on the schedule below (separates ϑ2 from the caps);
* ``sparse a``: hidden caps N_max = 2·⌊a·N/2⌋ for a = 10 %, 5 %, 1 %; hidden ϑ2 on the authors'
  schedule (:class:`tilesim.models.snn.training.network.SecondThresholdSchedule`: −100, then
  ϑ2 ← ϑ2 + 0.5·(0.9 − ϑ2) after every batch, snn-on-ipu.md §1.2).

The output layer keeps cap C and ϑ2 −100 in every mode (the sweeps read out all classes; a 2-spike
output cap would test the readout, not sparse hidden activity). Adam, three seeds, enough epochs
for the held-out accuracy to plateau; per epoch the train loss/accuracy and the held-out accuracy,
plus the predicted ``bow`` step time of the epoch's last step (its recorded activity re-timed at
that step's ϑ2) to show what the sparsity buys.
"""

from __future__ import annotations

import sys

import numpy as np

from experiments.s_common import SEED, machine, pyplot, standard_main
from tilesim.models.snn.placement.fit import place
from tilesim.models.snn.step.retime import retime
from tilesim.models.snn.training import data as D
from tilesim.models.snn.training.data import EventDataset

TASKS = {  # name -> (layers "input-hidden-hidden-classes", synthetic() options)
    # 8 spikes per active channel: ≈ 10 input events per 1 ms step (SHD-like drive)
    "easy": (
        "200-800-400-10",
        dict(active_fraction=0.2, spikes_per_channel=8, keep_prob=0.7, jitter_ms=3.0, noise_per_ms=2.0),
    ),
    "hard": (
        "200-800-400-20",
        dict(active_fraction=0.2, spikes_per_channel=8, keep_prob=0.6, jitter_ms=3.0, noise_per_ms=4.0),
    ),
}
TIMESTEPS = 30  # 1 ms bins
BATCH = 32
N_TRAIN, N_TEST = 640, 160  # samples
EPOCHS = 20  # 400 steps: the dense and 5-10 % runs are flat over the last 5 epochs
SEEDS = (SEED, SEED + 1, SEED + 2)
LR = 1e-3  # the authors' Adam rate of the single-IPU runs
INPUT_CAP = 32
MODES = (
    ("dense", None, False),
    ("theta2 only", None, True),
    ("sparse 10%", 0.10, True),
    ("sparse 5%", 0.05, True),
    ("sparse 1%", 0.01, True),
)  # (name, hidden cap fraction, schedule theta2)
THETA2_FINAL, THETA2_START = 0.9, -100.0
PLATEAU_EPOCHS = 5  # "plateau": the last 5 epochs raise the best held-out accuracy by <= 0.02
QUICK = dict(
    tasks={"easy": ("200-400-200-10", TASKS["easy"][1])},
    timesteps=20,
    n_train=256,
    n_test=64,
    epochs=3,
    seeds=(SEED,),
    modes=(("dense", None, False), ("sparse 5%", 0.05, True)),
    lr=3e-3,
)


def _split(ds, idx):

    return EventDataset(ds.name, ds.n_channels, ds.n_classes, tuple(ds.samples[i] for i in idx), ds.labels[idx])


def _caps(sizes, a):
    if a is None:
        return tuple(sizes[1:])
    return tuple(max(2 * int(a * n / 2), 1) for n in sizes[1:-1]) + (sizes[-1],)


def _evaluate(state, test, T):
    from tilesim.models.snn.training.network import (
        compute_gradients,  # Numba kernels load only when they run (start-up time)
    )

    accs, losses = [], []
    for x, y in test.batches(BATCH, T, INPUT_CAP, np.random.default_rng(SEED + 7), shuffle=False):
        r = compute_gradients(state, x, y)
        accs.append(r.accuracy)
        losses.append(r.loss)
    return float(np.mean(accs)), float(np.mean(losses))


def train_mode(layers, T, a, seed, epochs, train, test, mach, lr=LR, schedule=None):
    """Rows of one (mode, seed) run: epoch 0 = before training, then one row per epoch."""
    from tilesim.models.snn.training.network import (  # Numba kernels load only when they run (start-up time)
        NetworkConfig,
        SecondThresholdSchedule,
        init_network,
        train_step,
    )

    schedule = a is not None if schedule is None else schedule
    sizes = tuple(int(x) for x in layers.split("-"))
    cfg = NetworkConfig(
        layers,
        batch=BATCH,
        timesteps=T,
        caps=_caps(sizes, a),
        input_cap=INPUT_CAP,
        second_threshold=THETA2_FINAL if schedule else THETA2_START,
        output_second_threshold=THETA2_START,
        optimizer="adam",
        lr=lr,
        seed=seed,
        second_threshold_schedule=SecondThresholdSchedule(THETA2_START, 0.5) if schedule else None,
    )
    placement, _, _ = place(cfg, mach, None, "contiguous", "report")
    state = init_network(cfg, placement)
    rng = np.random.default_rng(seed + 1)
    acc0, loss0 = _evaluate(state, test, T)
    caps = "-".join(map(str, cfg.n_max))
    rows = [
        dict(
            epoch=0,
            train_loss=loss0,
            train_acc="",
            test_acc=acc0,
            test_loss=loss0,
            theta2=cfg.second_thresholds_at(0)[0],
            predicted_step_ms="",
            caps=caps,
        )
    ]
    for epoch in range(1, epochs + 1):
        losses, accs = [], []
        for x, y in train.batches(BATCH, T, INPUT_CAP, rng):
            step = state.step
            res = train_step(state, x, y)
            losses.append(res.loss)
            accs.append(res.accuracy)
        step_ms = retime(res.activity, cfg.at_step(step), placement, mach).step_s * 1e3
        acc, loss = _evaluate(state, test, T)
        rows.append(
            dict(
                epoch=epoch,
                train_loss=float(np.mean(losses)),
                train_acc=float(np.mean(accs)),
                test_acc=acc,
                test_loss=loss,
                theta2=cfg.second_thresholds_at(state.step)[0],
                predicted_step_ms=step_ms,
                caps=caps,
            )
        )
    return rows


def run(quick: bool = False) -> list[dict]:

    q = (
        QUICK
        if quick
        else dict(
            tasks=TASKS,
            timesteps=TIMESTEPS,
            n_train=N_TRAIN,
            n_test=N_TEST,
            epochs=EPOCHS,
            seeds=SEEDS,
            modes=MODES,
            lr=LR,
        )
    )
    mach = machine(1)
    rows = []
    for task, (layers, opts) in q["tasks"].items():
        for seed in q["seeds"]:
            full = D.synthetic(layers, q["n_train"] + q["n_test"], q["timesteps"], seed=seed, **opts)
            train = _split(full, np.arange(q["n_train"]))
            test = _split(full, np.arange(q["n_train"], q["n_train"] + q["n_test"]))
            for mode, a, schedule in q["modes"]:
                for r in train_mode(layers, q["timesteps"], a, seed, q["epochs"], train, test, mach, q["lr"], schedule):
                    rows.append(
                        {
                            "task": task,
                            "mode": mode,
                            "max_activity": a if a is not None else 1.0,
                            "seed": seed,
                            "layers": layers,
                            **r,
                        }
                    )
    return rows


def _curves(rows, task, mode, key):
    seeds = sorted({r["seed"] for r in rows if r["task"] == task and r["mode"] == mode})
    return np.array(
        [
            [
                float(r[key]) if r[key] != "" else np.nan
                for r in sorted(
                    (r for r in rows if (r["task"], r["mode"], r["seed"]) == (task, mode, s)), key=lambda r: r["epoch"]
                )
            ]
            for s in seeds
        ]
    )


def convergence(rows, task) -> dict:
    """Per mode of ``task``: mean/std over seeds of the final and best held-out accuracy, of the epochs
    to the best accuracy (first epoch that reaches it) and to 95 % of the dense run's best; mean
    predicted step time."""
    out = {}
    modes = list(dict.fromkeys(r["mode"] for r in rows if r["task"] == task))
    dense_best = _curves(rows, task, "dense", "test_acc").max(axis=1) if "dense" in modes else None
    for mode in modes:
        acc = _curves(rows, task, mode, "test_acc")
        best = acc.max(axis=1)
        to_best = [int(np.argmax(a == b)) for a, b in zip(acc, best)]
        ref = dense_best if dense_best is not None else best
        to_95 = [int(np.argmax(a >= 0.95 * r)) if (a >= 0.95 * r).any() else np.nan for a, r in zip(acc, ref)]
        steps = _curves(rows, task, mode, "predicted_step_ms")
        k = min(PLATEAU_EPOCHS, acc.shape[1] - 1)
        plateau = [bool(a[-k:].max() - a[:-k].max() <= 0.02) for a in acc]  # no gain over the last k epochs
        out[mode] = dict(
            final=(acc[:, -1].mean(), acc[:, -1].std()),
            best=(best.mean(), best.std()),
            plateau=f"{sum(plateau)}/{len(plateau)}",
            epochs_to_best=(np.mean(to_best), np.std(to_best)),
            epochs_to_95_dense=(np.mean(to_95), np.std(to_95)),
            step_ms=float(np.nanmean(steps)),
        )
    return out


def summary(rows) -> str:
    lines = []
    for task in dict.fromkeys(r["task"] for r in rows):
        sel = [r for r in rows if r["task"] == task]
        lines.append(
            f"S7 {task}: {sel[0]['layers']}, {len({r['seed'] for r in sel})} seed(s), "
            f"{max(r['epoch'] for r in sel)} epochs; held-out accuracy (mean ± std over seeds)"
        )
        for mode, c in convergence(rows, task).items():
            lines.append(
                f"  {mode:11s}: final {c['final'][0]:.3f} ± {c['final'][1]:.3f}, best {c['best'][0]:.3f}, "
                f"epochs to best {c['epochs_to_best'][0]:.1f} ± {c['epochs_to_best'][1]:.1f}, "
                f"to 95 % of dense best {c['epochs_to_95_dense'][0]:.1f}; plateau {c['plateau']}; "
                f"predicted step {c['step_ms']:.2f} ms"
            )
    return "\n".join(lines)


def plot(rows, path):
    plt = pyplot()
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    fig, axes = plt.subplots(2, len(tasks), figsize=(6 * len(tasks), 8), squeeze=False)
    for col, task in enumerate(tasks):
        ax, ax2 = axes[0][col], axes[1][col]
        sel = [r for r in rows if r["task"] == task]
        for mode in dict.fromkeys(r["mode"] for r in sel):
            epochs = sorted({r["epoch"] for r in sel if r["mode"] == mode})
            acc = _curves(rows, task, mode, "test_acc")
            (line,) = ax.plot(epochs, acc.mean(axis=0), "o-", label=mode)
            ax.fill_between(epochs, acc.min(axis=0), acc.max(axis=0), color=line.get_color(), alpha=0.15)
            ax2.plot(
                epochs, _curves(rows, task, mode, "train_loss").mean(axis=0), "o-", color=line.get_color(), label=mode
            )
        ax.axhline(1.0 / int(sel[0]["layers"].split("-")[-1]), color="k", ls=":", label="chance")
        ax.set_title(f"{task} task: {sel[0]['layers']}")
        ax.set_xlabel("epoch")
        ax.set_ylabel("held-out accuracy (band: min..max over seeds)")
        ax.legend(fontsize=8)
        ax2.set_xlabel("epoch")
        ax2.set_ylabel("train loss (epoch 0: held-out, before training)")
        ax2.set_yscale("log")
        ax2.legend(fontsize=8)
    fig.suptitle(
        "S7: sparse (hidden caps, theta2 schedule -100 -> 0.9) vs dense training on the synthetic task, same seeds"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    return standard_main(sys.modules[__name__], argv, "s7_convergence")


if __name__ == "__main__":
    sys.exit(main())
