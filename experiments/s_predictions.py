"""Falsifiable predictions: measurements that would tell the SNN step model's hypotheses apart.

Each row is one measurement anyone with an IPU can make with the authors' code
(``jrfinkbeiner/graphcore_snn``, ``benchmarking_script.py``), the hypotheses it separates and the
model's number under each (predicted milliseconds per step, with the fitted coefficients' leave-one-out
band). Every number is computed here, none typed in: ``experiments/README.md`` shows this script's
``--markdown`` output.

Two hypotheses for the fitted host rate (``host_copy_ns_per_byte``, 1.57 ns per byte and direction, 4.7×
slower than Graphcore's documented 3 GB/s): **H1** it is what it is modelled as, a per-byte cost of the
per-epoch round trip of weights and optimizer slots; **H2** the round trip runs at the documented rate and
the rest of the fitted term is a cost paid every step that the fit could not tell apart (its correlation
with ``vertex_calls`` is −0.97: ``tilesim calibrate``'s identifiability report). H2's predictions are the
calibrated step less what the documented-rate copy alone would save.

1. **SGD against Adam** on the calibration network (N-MNIST 2312-1466-1466-10, B 48, T 100, 5 % caps,
   52 steps per epoch, one execution per epoch): the round trip moves 8 bytes per weight with SGD, 24
   with Adam. H1: SGD saves the fitted rate on 16 bytes per weight; H2: only the documented rate.
2. **200 against 52 steps per epoch** (same network, Adam): H1 spreads the whole fitted round trip over
   200 steps; H2 only the documented-rate copy.
3. **A 2-IPU PopVision trace of the backward replicate copies** (the §4.4 SHD network on 2 IPUs,
   npt 2, B 24, T 10, SGD): the per-layer ``Copy`` programs as one exchange each (``copies =
   separate``, the default) or merged into one; and whether supersteps without cross-chip data sync
   both IPUs (``sync_scope``). The trace's count of exchanges per backward time step and the row's
   time separate them.
"""

from __future__ import annotations

import sys
from dataclasses import replace

from experiments.b_common import pyplot, standard_main
from tilesim.machine.description import load_machine
from tilesim.models.snn.calibration.calibrate import case_setup, read_cases
from tilesim.models.snn.commands.scaling import PAPER_STRUCTURE, ScalingRecipe, _config, coefficient_sets, recipe_layers
from tilesim.models.snn.placement.fit import place
from tilesim.models.snn.step.retime import retime
from tilesim.models.snn.step.structure import DEFAULT_STRUCTURE

CALIBRATION_CASE = "nmnist-L2-a05-t090"
REPLICATE_ROW = "bwd: replicate lists"


H_BYTES = "H1: the fitted rate is a per-byte cost of the round trip (1.57 ns/B)"
H_STEP = "H2: the round trip at the documented 3 GB/s; the fitted excess is paid every step"
EITHER = "H1 and H2 (the calibrated step)"


def _times(config, placement, machine, spe, structure, sets) -> list:
    """Step milliseconds under each coefficient set (the first is the fit)."""
    return [retime(None, config, placement, machine, cm, None, spe, structure).step_s * 1e3 for cm in sets]


def _band(values) -> tuple:
    """(the fit's value, lo, hi) over the coefficient sets."""
    return values[0], min(values), max(values)


def _row(measurement, setting, hypothesis, values, unit="ms per step", **extra) -> dict:
    mid, lo, hi = _band(values)
    return {
        "measurement": measurement,
        "setting": setting,
        "hypothesis": hypothesis,
        "predicted": mid,
        "band_lo": lo,
        "band_hi": hi,
        "unit": unit,
        **extra,
    }


def _two_rates(case, sets, **change) -> tuple:
    """Step ms per coefficient set of ``case`` (with ``change``: optimizer, steps_per_execution) at
    the fitted and at the documented host rate."""
    c = replace(case, **change)
    config, machine, placement = case_setup(c)
    return tuple(
        _times(config, placement, machine, c.steps_per_execution, replace(DEFAULT_STRUCTURE, host_rate=r), sets)
        for r in ("fitted", "documented")
    )


def _h2(fit_base, doc_base, doc_other) -> list:
    """H2's prediction: the calibrated step, less what the documented-rate copy saves."""
    return [f - (a - b) for f, a, b in zip(fit_base, doc_base, doc_other)]


def _contrast_rows(case, base, sets, title: str, base_label: str, label: str, **change) -> list:
    """A measurement that contrasts ``case`` (its step ms ``base``: fitted and documented rate, from
    :func:`_two_rates`) with ``change``: the measured base, and what H1 and H2 predict for the change."""
    fit, doc = base
    other_fit, other_doc = _two_rates(case, sets, **change)
    return [
        _row(title, base_label, EITHER, fit, measured_ms=case.measured_ms),
        _row(title, label, H_BYTES, other_fit),
        _row(title, label, H_STEP, _h2(fit, doc, other_doc)),
    ]


def _contrast_measurements(sets) -> list:
    """Measurement 1: SGD (8 bytes per weight moved) against Adam (24); measurement 2: 200 against 52 steps
    per epoch (one execution per epoch, Adam). Both against the calibration network as measured (Adam, 52)."""
    case = next(c for c in read_cases() if c.case == CALIBRATION_CASE)
    base = _two_rates(case, sets)
    return _contrast_rows(
        case, base, sets, "1. SGD vs Adam (calibration network)", "adam", "sgd", optimizer="sgd"
    ) + _contrast_rows(
        case, base, sets, "2. steps per epoch (calibration network)", "52 steps", "200 steps", steps_per_execution=200
    )


def _trace_rows(sets) -> list:
    """Measurement 3: a 2-IPU trace of the replicate copies (exchanges per backward time step, the
    row's time per step) under copies separate / merged and sync scope chip / all."""
    recipe = ScalingRecipe(dataset="shd", neurons_per_tile=2, batch=24)
    layers = recipe_layers(recipe, 2)
    config = _config(recipe, layers)
    machine = load_machine(recipe.machine, 2)
    placement = place(config, machine, 2, "contiguous", "report")[0]
    rows = []
    for copies in ("separate", "merged"):
        for scope in ("chip", "all"):
            st = replace(PAPER_STRUCTURE, copies=copies, sync_scope=scope)
            pred = [retime(None, config, placement, machine, cm, None, recipe.steps_per_execution, st) for cm in sets]
            rep = [p.result.by_label()[REPLICATE_ROW]["time_s"] * 1e3 for p in pred]
            prog = pred[0].program
            idx = prog.labels.index(REPLICATE_ROW)
            at = prog.label_id == idx
            exchanges = int(at.sum()) + int(prog.exchange_extra_cycles[at].sum() // machine.chip.exchange_fixed_cycles)
            setting = f"copies {copies}, sync {scope}"
            rows.append(
                _row(
                    "3. 2-IPU trace: replicate copies",
                    setting,
                    f"{REPLICATE_ROW}: time per step",
                    rep,
                    exchanges_per_backward_step=exchanges / config.timesteps,
                    layers=len(layers) - 1,
                )
            )
            t = [p.step_s * 1e3 for p in pred]
            rows.append(_row("3. 2-IPU trace: replicate copies", setting, "the whole step", t))
    return rows


def run(quick: bool = False) -> list[dict]:
    sets = coefficient_sets()[:2] if quick else coefficient_sets()
    return _contrast_measurements(sets) + _trace_rows(sets)


def markdown(rows) -> str:
    """The rows as the table of experiments/README.md."""
    lines = [
        "| measurement | setting | hypothesis | model predicts | leave-one-out band | measured |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        extra = (
            f" ({r['exchanges_per_backward_step']:.0f} exchange(s) per backward time step)"
            if r.get("exchanges_per_backward_step", "") != ""
            else ""
        )
        lines.append(
            f"| {r['measurement']} | {r['setting']} | {r['hypothesis']} | {r['predicted']:.3f} {r['unit']}{extra} "
            f"| {r['band_lo']:.3f}–{r['band_hi']:.3f} | {r.get('measured_ms', '') or '—'} |"
        )
    return "\n".join(lines)


def summary(rows) -> str:
    return markdown(rows)


def plot(rows, path):
    """The predicted values with their bands, one bar per row, grouped by measurement."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(11, 0.45 * len(rows) + 1.5))
    y = list(range(len(rows)))[::-1]
    for yi, r in zip(y, rows):
        ax.barh(yi, r["predicted"], color="tab:blue", alpha=0.6)
        ax.errorbar(
            r["predicted"], yi, xerr=[[r["predicted"] - r["band_lo"]], [r["band_hi"] - r["predicted"]]], color="k"
        )
    ax.set_yticks(y)
    ax.set_yticklabels([f"{r['measurement'][:2]} {r['setting']}: {r['hypothesis']}" for r in rows], fontsize=7)
    ax.set_xlabel("predicted ms (per step; row 3: also the replicate row's share)")
    ax.set_title("Falsifiable predictions: what each measurement would show under each hypothesis")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    return standard_main(sys.modules[__name__], argv, "s_predictions")


if __name__ == "__main__":
    sys.exit(main())
