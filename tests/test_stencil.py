"""Stencil workload (issue 16): partition, real blur vs NumPy twin and scipy, program, preset, CLI, M2."""

import subprocess
import sys

import numpy as np
import pytest

from tilesim.errors import ConfigError
from tilesim.machine.description import load_machine
from tilesim.models.stencil.kernels import blur_slices
from tilesim.models.stencil.partition import partition_image
from tilesim.models.stencil.reference import blur_slices_ref, blur_zero_padded
from tilesim.models.stencil.workload import StencilConfig, run_stencil


@pytest.mark.parametrize("h,w,ipus,mr,mc", [(40, 53, 2, 3, 3), (1122, 2200, 16, 1, 1), (302, 499, 4, 6, 6)])
def test_partition_covers_image_once(h, w, ipus, mr, mc):
    b = partition_image(h, w, ipus, 1216 if h > 100 else 16, mr, mc)
    cov = np.zeros((h, w), int)
    for i in range(b.count):
        cov[b.r0[i] : b.r1[i], b.c0[i] : b.c1[i]] += 1
    assert (cov == 1).all() and b.worker.max() <= 5


def test_cheese_one_ipu_grid_as_authors():
    b = partition_image(1122, 2200, 1, 1216, 1, 1)
    tiles = np.unique(b.tile)
    assert tiles.size == 49 * 24  # ceil(sqrt(1216 * 2200/1122)) columns x 1216 // 49 rows


def test_kernel_matches_twin_and_scipy_inside():
    rng = np.random.default_rng(0)
    img = rng.random((40, 53, 4), dtype=np.float32)
    b = partition_image(40, 53, 2, 16, 3, 3)
    out = np.zeros_like(img)
    blur_slices(img, out, b.r0, b.r1, b.c0, b.c1)
    np.testing.assert_allclose(out, blur_slices_ref(img, b.r0, b.r1, b.c0, b.c1), atol=1e-6)
    z = blur_zero_padded(img)
    np.testing.assert_allclose(out[2:-2, 2:-2], z[2:-2, 2:-2], atol=1e-6)  # edges: the authors' rule
    assert not np.allclose(out, z)


def test_phase_split_16_ipus_within_25_percent():
    run = run_stencil(StencilConfig(1122, 2200, "float", 16, 1, 1, 2), load_machine("gc2x16"), keep_timeline=False)
    for name, meas in (("sync", 640), ("exchange", 397), ("globExchange", 4048)):
        assert abs(run.phases[name] - meas) / meas < 0.25, (name, run.phases[name])


def test_existing_presets_sync_unchanged_and_gc2x16_grows_with_chips():
    assert [load_machine("gc2").group_sync_cycles(n) for n in (1, 2, 4, 16)] == [90, 138, 186, 330]
    m = load_machine("gc2x16")
    s = [m.group_sync_cycles(n) for n in (1, 2, 4, 8, 16)]
    assert s == sorted(s) and s[0] == 90 and s[-1] == 90 + 156 + 240  # chip + fixed [F] + 5 hops x 15 ns x 2


def test_bad_config_errors():
    with pytest.raises(ConfigError, match="--dtype = 'half8'"):
        StencilConfig(10, 10, "half8")
    with pytest.raises(ConfigError, match="--ipus = 4"):
        run_stencil(StencilConfig(64, 64, "float", 4), load_machine("gc2x16", 2))


def test_cli_one_line_errors_and_run(tmp_path):
    def run(*a):
        return subprocess.run(
            [sys.executable, "-m", "tilesim", "stencil", *a], capture_output=True, text=True, timeout=300
        )

    for args, needle in (
        (["--image-size", "22x"], "--image-size = '22x'"),
        (["--image-size", "64x48", "--ipus", "17"], "--ipus = 17"),
        (["--image", str(tmp_path / "none.png"), "--out", str(tmp_path)], "no such file"),
    ):
        r = run(*args)
        assert r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = run(
        "--image-size",
        "2200x1122",
        "--dtype",
        "float2",
        "--ipus",
        "16",
        "--min-partition",
        "6x6",
        "--iterations",
        "4",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    import json

    d = json.loads(r.stdout)
    assert d["fits"] and 15 < d["us_per_iteration"] < 30


def test_m2_quick(tmp_path):
    from experiments import m2_stencil_scaling as m2

    assert m2.main(["--quick", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "m2_stencil_scaling.png").stat().st_size > 0
    from experiments.b_common import read_csv

    rows = read_csv(tmp_path / "m2_stencil_scaling.csv")
    sc = [abs(float(r["error_pct"])) for r in rows if r["kind"] == "scaling"]
    assert len(sc) == 45 and np.mean(sc) <= 10.0 and max(sc) <= 25.0  # the targets
    assert all(abs(e) <= 15.0 for *_, e in m2.speedups(rows)) and len(m2.speedups(rows)) == 9
    for r in rows:
        if r["kind"] == "phase" and r["ipus"] == "16" and r["phase"] in ("sync", "exchange", "globExchange"):
            assert abs(float(r["error_pct"])) <= 25.0, r


def test_png_run_writes_the_real_blur(tmp_path):
    import matplotlib.image as mpimg

    from tilesim.models.stencil.plots import read_png
    from tilesim.models.stencil.workload import blur_image

    rng = np.random.default_rng(3)
    mpimg.imsave(tmp_path / "in.png", rng.random((30, 41, 4)).astype(np.float32))
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "tilesim",
            "stencil",
            "--image",
            str(tmp_path / "in.png"),
            "--ipus",
            "2",
            "--min-partition",
            "2x2",
            "--iterations",
            "2",
            "--out",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    got = read_png(tmp_path / "o" / "blurred.png")
    want = blur_image(read_png(tmp_path / "in.png"), StencilConfig(30, 41, "float", 2, 2, 2, 2), 1216)
    np.testing.assert_allclose(got, want, atol=1 / 255 + 1e-6)
    assert (tmp_path / "o" / "trace.json").is_file() and (tmp_path / "o" / "timeline.png").is_file()


def test_calibrate_prediction_matches_the_workload():
    """The fit's fast re-timing path gives the same numbers as run_stencil at the preset's values."""
    from tilesim.models.stencil.calibrate import _SCALE, _predict, _targets
    from tilesim.models.stencil.measured import shipped_stencil_cases
    from tilesim.models.stencil.workload import plan_stencil

    targets = [
        t for t in _targets(shipped_stencil_cases()) if t[0] in ("leaf float 4 IPU", "cheese float 16 IPU globExchange")
    ]
    assert len(targets) == 2
    base = load_machine("gc2x16")
    s = base.system
    x = np.array([s.global_sync_fixed_cycles, s.link_latency_s, s.link_message_bytes]) / _SCALE
    plans = [plan_stencil(cfg, base.with_chips(cfg.ipus)) for _, cfg, _, _ in targets]
    got = _predict(targets, plans, base, x)
    want = [
        run_stencil(targets[0][1], base.with_chips(4), keep_timeline=False).us_per_iteration,
        run_stencil(targets[1][1], base, keep_timeline=False).phases["globExchange"],
    ]
    np.testing.assert_allclose(got, want, rtol=1e-9)


@pytest.mark.parametrize(
    "old,new,match",
    [
        (
            "global_sync_fixed_cycles = 156",
            "global_sync_fixed_cycles = -1",
            r"system.global_sync_fixed_cycles = -1: must be >= 0",
        ),
        (
            "global_sync_fixed_cycles = 156",
            "global_sync_fixed_cycles = 1.5",
            r"system.global_sync_fixed_cycles = 1.5: must be an integer",
        ),
        ("link_message_bytes = 56.0", "link_message_bytes = -8.0", r"system.link_message_bytes = -8.0: must be >= 0"),
    ],
)
def test_multi_chip_fields_are_validated(tmp_path, old, new, match):
    from tilesim.machine.description import preset_text

    text = preset_text("gc2x16")
    assert old in text
    p = tmp_path / "m.toml"
    p.write_text(text.replace(old, new, 1))
    with pytest.raises(ConfigError, match=match):
        load_machine(p)


def test_too_many_iterations_refused_before_building(monkeypatch):
    monkeypatch.setenv("TILESIM_MEMORY_LIMIT", "1e8")
    with pytest.raises(ConfigError, match=r"--iterations = '~0.2 GB of memory': exceeds the limit"):
        run_stencil(StencilConfig(1122, 2200, "float", 16, 6, 6, 100), load_machine("gc2x16"))
