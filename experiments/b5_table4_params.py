"""B5 — Table 4 parameter counts of the single-hidden-layer CIFAR-10 model.

Claim (paper Table 4): baseline 1,059,850; butterfly 16,390; fastfood 14,346; circulant 12,298;
low-rank 13,322; pixelfly 404,490; butterfly compression 98.5 %. The counts are
``sum(p.size for p in model.params)`` of :func:`tilesim.models.linear.shl.shl_model` (1024 inputs, 1024
hidden, 10 classes). Pixelfly: block 16, butterfly size 16, rank 32, one bias — the configuration
that gives 404,490 (``models/linear/shl.py`` explains why it is unique up to blocking).
"""

from __future__ import annotations

import sys

from experiments.b_common import pyplot, standard_main
from tilesim.models.linear.shl import PIXELFLY_SHL, SHL_METHODS, TABLE4_PARAMS, compression_ratio, shl_model


def run(quick: bool = False) -> list[dict]:
    rows = []
    for method in SHL_METHODS:
        m = shl_model(method)
        rows.append(
            {
                "method": method,
                "paper_params": TABLE4_PARAMS[method],
                "params": m.n_params,
                "hidden_params": m.n_hidden_params,
                "exact": m.n_params == TABLE4_PARAMS[method],
                "compression_pct": round(100 * compression_ratio(method), 2),
                "config": str(PIXELFLY_SHL) if method == "pixelfly" else "",
            }
        )
    return rows


def summary(rows) -> str:
    bf = next(r for r in rows if r["method"] == "butterfly")
    return (
        f"B5: {sum(r['exact'] for r in rows)}/{len(rows)} Table 4 counts exact; butterfly compression "
        f"{bf['compression_pct']} % (paper 98.5 %)"
    )


def plot(rows, path):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.5))
    x = range(len(rows))
    ax.bar([i - 0.2 for i in x], [r["paper_params"] for r in rows], 0.4, label="paper Table 4")
    ax.bar([i + 0.2 for i in x], [r["params"] for r in rows], 0.4, label="tilesim layers")
    ax.set_xticks(list(x), [r["method"] for r in rows])
    ax.set_yscale("log")
    ax.set_ylabel("parameters")
    ax.legend()
    ax.set_title("B5: SHL parameter counts")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    return standard_main(sys.modules[__name__], argv, "b5_table4_params")


if __name__ == "__main__":
    sys.exit(main())
