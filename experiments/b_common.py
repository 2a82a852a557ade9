"""Shared helpers of the B1–B7 experiment scripts (butterfly-on-IPU paper, seed 002).

Every script: ``run(quick) -> list of row dicts``, ``plot(rows, path)``, ``main(argv)`` with
``--out DIR`` (CSV + PNG written there) and ``--quick`` (the reduced sweep the tests run).
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

SEED = 0
"""Fixed seed (the experiments are deterministic; kept for the house rule)."""


def parse_args(argv, description: str, default_out: str):
    p = argparse.ArgumentParser(description=description.strip().split("\n")[0])
    p.add_argument("--out", default=default_out, help=f"output directory (default {default_out})")
    p.add_argument("--quick", action="store_true", help="reduced sweep (used by the tests)")
    return p.parse_args(argv)


def write_csv(path, rows: list[dict]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    keys = list(rows[0])
    for r in rows[1:]:
        keys += [k for k in r if k not in keys]
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    return path


def read_csv(path) -> list[dict]:
    with Path(path).open() as fh:
        return list(csv.DictReader(fh))


def pyplot():
    import matplotlib  # matplotlib is imported only when drawing (start-up time)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # matplotlib is imported only when drawing (start-up time)

    return plt


def standard_main(module, argv, name: str):
    args = parse_args(argv, module.__doc__, f"out/experiments/{name}")
    rows = module.run(quick=args.quick)
    out = Path(args.out)
    csv_path = write_csv(out / f"{name}.csv", rows)
    module.plot(rows, out / f"{name}.png")
    print(module.summary(rows))
    print(f"wrote {csv_path} and {out / (name + '.png')}")
    return 0
