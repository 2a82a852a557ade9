"""Report writing: the pictures and summary.md of a stored run against its report.html, in one process.

A demo-sized run (the SHD network 700-1462-1460-20, B 48, T 100, on a GC200, one step) is written
once; then ``--rounds`` times, alternating, the run's pictures and summary.md are redrawn
(:func:`tilesim.outputs.report.render` without the page) and its page is written
(:func:`tilesim.outputs.page.write_page`). Printed: the median seconds of each, the page's ratio to the
pictures, and the page's size (plotly.js is inside it, ~4.7 MB).

    python benchmarks/bench_report.py [--rounds 5] [--quick]

``--quick`` (``make bench-quick``): one round. No target: it exits 0 when it runs.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from tilesim.models.snn.commands.cli import write_run_outputs
from tilesim.models.snn.commands.options import options_from_mapping
from tilesim.models.snn.commands.run import run_training
from tilesim.outputs import page, report

DEMO = dict(layers="700-1462-1460-20", dataset="shd", input_cap=48, batch=48, timesteps=100, max_activity=0.05)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="one round")
    args = ap.parse_args(argv)
    if args.quick:
        args.rounds = 1
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "demo"
        write_run_outputs(out, run_training(options_from_mapping({**DEMO, "steps": 1}, "bench")))
        summary, arrays = report.load_run(out)
        pictures, pages = [], []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            report._draw(out, summary, arrays, report.plots, page=False)
            pictures.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            path = page.write_page(out, summary, arrays)
            pages.append(time.perf_counter() - t0)
        pic, pg = statistics.median(pictures), statistics.median(pages)
        print(f"pictures + summary.md  {pic:7.3f} s")
        print(f"report.html            {pg:7.3f} s  ({pg / pic:.2f}x the pictures; {path.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
