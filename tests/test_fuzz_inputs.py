"""Issue 28: the last silent answers and tracebacks, and inputs nobody had tried — hostile NIR
HDF5 files, machine files with extreme numbers, simulate/stencil/layer/calibrate arguments, a
scheduler address that is no dask scheduler. Every case states its exit code and the field its
one-line error names (the contract of tests/test_fuzz.py: exit 0, or exit 2 with one line)."""

from __future__ import annotations

import contextlib
import errno
import json
import socket
import threading

import numpy as np
import pytest
from test_fuzz import call, check_contract

from tilesim.machine.description import preset_text

RUN = ["run", "--layers", "40-30-4", "--batch", "4", "--timesteps", "8", "--input-cap", "8", "--max-activity", "0.2"]


def refused(argv, field: str) -> str:
    """Run ``tilesim argv``; assert exit 2 with one line naming ``field``; return the line."""
    rc, out, err = call(argv)
    check_contract(argv, rc, out, err)
    assert rc == 2, (argv, out[-300:], err)
    assert field in err, (field, err)
    return err.strip()


# ---- the cases ---------------------------------------------------------------------------
def test_a_deeply_nested_toml_is_refused_not_a_recursion_error(tmp_path):
    deep = tmp_path / "deep.toml"
    deep.write_text("a=" + "[" * 100000 + "]" * 100000 + "\n")
    assert "nests arrays or tables too deeply" in refused(["run", deep], "run config file")
    assert "too deeply" in refused(["simulate", deep, "--machine", "gc200"], str(deep))


@pytest.mark.parametrize(
    "flags, field",
    [
        (["--weight-mul", "1e308"], "--weight-mul"),
        (["--weight-mul", "1e38"], "--weight-mul"),  # finite, but a fan-in of 40 sums past float32
        (["--lr", "1e300"], "--lr"),
        (["--second-threshold=-1e300"], "--second-threshold"),
    ],
)
def test_numbers_that_overflow_float32_are_refused(flags, field):
    line = refused([*RUN, "--steps", "1", *flags], field.lstrip("-").replace("-", "_"))
    assert "float32" in line


def test_the_message_blames_the_field_that_is_too_large():
    line = refused([*RUN[:-4], "--batch", "48", "--timesteps", "1000000000", "--steps", "1"], "--timesteps")
    assert "e.g. --timesteps" in line and "--batch = " not in line


def test_nir_weights_with_nan_or_inf_are_refused(tmp_path):
    nir = pytest.importorskip("nir")
    for bad in (np.nan, np.inf, 1e39):
        w = np.ones((5, 8), np.float32)
        w[2, 3] = bad
        g = nir.NIRGraph.from_list(
            nir.Input(input_type=np.array([8])),
            nir.Linear(weight=w.astype(np.float64) if bad == 1e39 else w),
            nir.LIF(tau=np.full(5, 0.02), r=np.ones(5), v_leak=np.zeros(5), v_threshold=np.ones(5)),
            nir.Output(output_type=np.array([5])),
        )
        path = tmp_path / f"g{bad}.nir"
        nir.write(path, g)
        line = refused(["run", "--model", path, "--batch", "4", "--timesteps", "8", "--input-cap", "4", "--steps", "1"],
                       "weight[2, 3]")  # fmt: skip
        assert "finite in float32" in line


def test_an_empty_sync_group_is_refused(tmp_path):
    prog = tmp_path / "p.toml"
    prog.write_text('[[superstep]]\nlabel = "x"\ncompute_cycles = 10\nsync = [[0, 1], []]\n')
    assert "is empty" in refused(["simulate", prog, "--machine", "m2000"], "sync group")


def test_workers_with_a_scheduler_are_said_to_be_ignored(tmp_path, monkeypatch):
    import tilesim.running.sweep

    monkeypatch.setattr(tilesim.running.sweep, "CONNECT_TIMEOUT_S", 1.0)
    sweep = tmp_path / "s.toml"
    sweep.write_text('[base]\nlayers = "40-30-4"\nbatch = 4\n[grid]\nseed = [0]\n')
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    port = srv.getsockname()[1]
    held = []  # not a dask scheduler: it takes every connection and never says a word (issue 29's CI hang)

    def silent():
        with contextlib.suppress(OSError):
            while True:
                held.append(srv.accept()[0])

    threading.Thread(target=silent, daemon=True).start()
    rc, out, err = call(["sweep", sweep, "--db", tmp_path / "r.db", "--workers", "1000", "--scheduler",
                         f"tcp://127.0.0.1:{port}", "--quiet"])  # fmt: skip
    srv.close()
    check_contract(["sweep"], rc, out, "\n".join(ln for ln in err.splitlines() if not ln.startswith("tilesim: --")))
    assert "--workers 1000 ignored" in err and rc == 2 and "--scheduler" in err


def test_a_full_disk_names_the_path_and_the_fix():
    from tilesim.cli import os_error_message

    msg = os_error_message(OSError(errno.ENOSPC, "No space left on device", "/data/run/summary.json"))
    assert "/data/run/summary.json" in msg and "free space" in msg and "--db" not in msg


def test_two_identical_runs_write_byte_identical_summaries(tmp_path):
    for d in ("a", "b"):
        rc, out, err = call([*RUN, "--steps", "2", "--quiet", "--out", tmp_path / d])
        assert rc == 0, err
    for name in ("summary.json", "summary.md", "arrays.npz", "mapping.json", "manifest.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    wall = json.loads((tmp_path / "a" / "wall.json").read_text())
    assert set(wall) == {"wall_s_per_step", "wall_s_total", "peak_rss_bytes"}


# ---- inputs nobody had tried ---------------------------------------------------------------------
def _h5(path, build):
    h5py = pytest.importorskip("h5py")
    with h5py.File(path, "w") as f:
        build(f)
    return path


def _loop(f):
    f.create_group("node")
    f["node/self"] = __import__("h5py").SoftLink("/node")


def _huge(f):
    f.create_dataset("node/weight", shape=(10**6, 10**6), dtype="f4", chunks=(1, 1))


def _bomb(f):
    f.create_dataset("node/weight", data=np.zeros((4000, 4000), np.float32), compression="gzip")


HOSTILE = {
    "empty": lambda f: None,
    "deep groups": lambda f: f.create_group("/".join(["g"] * 200)),
    "soft link loop": _loop,
    "huge declared shape": _huge,
    "compression bomb": _bomb,
    "text where numbers are": lambda f: f.create_dataset("node/weight", data=np.array([b"x"] * 4)),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_nir_files_end_in_one_line(tmp_path, name):
    path = _h5(tmp_path / "g.nir", HOSTILE[name])
    refused(
        ["run", "--model", path, "--batch", "4", "--timesteps", "8", "--input-cap", "4", "--steps", "1"], "NIR file"
    )


@pytest.mark.parametrize(
    "key, value",
    [("tiles", "1e18"), ("sram_bytes", "1e300"), ("clock_hz", "1e-300"), ("exchange_bytes_per_cycle", "1e-300"),
     ("tiles", "-1"), ("clock_hz", "nan"), ("sync_cycles", "inf")],
)  # fmt: skip
def test_machine_files_with_extreme_numbers_end_in_one_line(tmp_path, key, value):
    import re

    text = re.sub(rf"(?m)^{key}\s*=\s*[^#\n]+", f"{key} = {value}", preset_text("gc200"), count=1)
    m = tmp_path / "m.toml"
    m.write_text(text)
    for argv in (["machines", m, "--json"], [*RUN, "--steps", "1", "--machine", m], ["stencil", "--image-size", "64x32",
                 "--machine", m, "--iterations", "2"]):  # fmt: skip
        rc, out, err = call(argv)
        check_contract(argv, rc, out, err)
        if rc == 2:
            assert key in err or "machine" in err, err


@pytest.mark.parametrize(
    "argv, field",
    [
        (["stencil", "--image-size", "0x10"], "--image-size"),
        (["stencil", "--image-size", "99999999x99999999", "--iterations", "1"], "image"),
        (["stencil", "--image-size", "64x32", "--ipus", "1000"], "--ipus"),
        (["stencil", "--image-size", "64x32", "--iterations", "-3"], "--iterations"),
        (["layer", "--kind", "dense", "--n", "0"], "--n"),
        (["layer", "--kind", "block-sparse", "--n", "4096", "--density", "2"], "density"),
        (["layer", "--kind", "dense", "--n", "4096", "--batch", "1e9"], "--batch"),
        (["calibrate", "/nonexistent.csv", "--out", "/tmp/x.toml"], "/nonexistent.csv"),
        (["simulate", "/nonexistent.toml", "--machine", "gc200"], "/nonexistent.toml"),
    ],
)
def test_untried_arguments_end_in_one_line_naming_the_field(argv, field):
    refused(argv, field)
