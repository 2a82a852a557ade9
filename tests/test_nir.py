"""NIR import: exact graphs load with the right sizes, weights and LIF constants; others are refused."""

import importlib.util
import math
from pathlib import Path

import nir
import numpy as np
import pytest

from tilesim.errors import ConfigError
from tilesim.models.snn.training.network import NetworkConfig
from tilesim.models.snn.training.nir_import import load_nir

RNG = np.random.default_rng(0)


def lif(n, tau=0.02, r=10.0, thr=1.0, **kw):
    return nir.LIF(tau=np.full(n, tau), r=np.full(n, r), v_leak=np.zeros(n), v_threshold=np.full(n, thr), **kw)


def affine(n_in, n_out, bias=0.0):
    return nir.Affine(weight=RNG.normal(size=(n_out, n_in)).astype(np.float32), bias=np.full(n_out, bias, np.float32))


def roundtrip(tmp_path, graph):
    p = tmp_path / "g.nir"
    nir.write(p, graph)
    return p


def two_layer(n0=12, n1=8, n2=3, **lif_kw):
    return nir.NIRGraph(
        nodes={
            "in": nir.Input(np.array([n0])),
            "fc1": affine(n0, n1),
            "lif1": lif(n1, **lif_kw),
            "fc2": nir.Linear(weight=RNG.normal(size=(n2, n1)).astype(np.float32)),
            "lif2": lif(n2, **lif_kw),
            "out": nir.Output(np.array([n2])),
        },
        edges=[("in", "fc1"), ("fc1", "lif1"), ("lif1", "fc2"), ("fc2", "lif2"), ("lif2", "out")],
    )


def test_two_layer_graph_from_file(tmp_path):
    g = two_layer()
    m = load_nir(roundtrip(tmp_path, g), dt=1e-3)
    assert m.layers == (12, 8, 3) and m.recurrent == (False, False) and m.nodes == ("lif1", "lif2")
    assert [w.shape for w in m.weights] == [(12, 8), (8, 3)]
    assert sum(w.size for w in m.weights) == 12 * 8 + 8 * 3
    np.testing.assert_array_equal(m.weights[0], g.nodes["fc1"].weight.T)
    np.testing.assert_array_equal(m.weights[1], g.nodes["fc2"].weight.T)
    assert m.lif.decay == pytest.approx(math.exp(-1e-3 / 0.02))
    assert (m.lif.threshold, m.lif.input_scale) == (1.0, 10.0)
    cfg = NetworkConfig(batch=2, timesteps=4, max_activity=0.5, **m.network_kwargs())
    assert cfg.layers == (12, 8, 3) and cfg.lif.scale == pytest.approx(10.0 * (1 - m.lif.decay))


def test_euler_and_cubalif_with_instant_synapse(tmp_path):
    g = two_layer()
    assert load_nir(g, dt=1e-3, discretization="euler").lif.decay == pytest.approx(1 - 1e-3 / 0.02)
    n = 8
    g.nodes["lif1"] = nir.CubaLIF(
        tau_syn=np.zeros(n), tau_mem=np.full(n, 0.02), r=np.full(n, 10.0), v_leak=np.zeros(n), v_threshold=np.ones(n)
    )
    assert load_nir(g, dt=1e-3).layers == (12, 8, 3)
    g.nodes["lif1"].tau_syn = np.full(n, 5e-3)
    with pytest.raises(ConfigError, match=r"NIR node 'lif1' = 'CubaLIF'.*tau_syn = 0.005 keeps a synaptic current"):
        load_nir(g, dt=1e-3)


def test_recurrent_graph(tmp_path):
    n0, n1, n2 = 10, 6, 2
    g = nir.NIRGraph(
        nodes={
            "in": nir.Input(np.array([n0])),
            "fc1": affine(n0, n1),
            "lif1": lif(n1),
            "rec1": affine(n1, n1),
            "fc2": affine(n1, n2),
            "lif2": lif(n2),
            "out": nir.Output(np.array([n2])),
        },
        edges=[
            ("in", "fc1"),
            ("fc1", "lif1"),
            ("lif1", "rec1"),
            ("rec1", "lif1"),
            ("lif1", "fc2"),
            ("fc2", "lif2"),
            ("lif2", "out"),
        ],
    )
    m = load_nir(roundtrip(tmp_path, g), dt=1e-3)
    assert m.layers == (10, 6, 2) and m.recurrent == (True, False)
    np.testing.assert_array_equal(m.recurrent_weights[0], g.nodes["rec1"].weight.T)
    assert m.recurrent_weights[1] is None
    assert NetworkConfig(batch=2, timesteps=4, max_activity=0.5, **m.network_kwargs()).recurrent == (True, False)


def test_delay_is_refused(tmp_path):
    g = two_layer()
    g.nodes["d"] = nir.Delay(delay=np.ones(8))
    g.edges = [("in", "fc1"), ("fc1", "lif1"), ("lif1", "d"), ("d", "fc2"), ("fc2", "lif2"), ("lif2", "out")]
    with pytest.raises(
        ConfigError,
        match=r"NIR node 'd' = 'Delay': cannot be represented exactly: the network has "
        r"no per-synapse delays",
    ):
        load_nir(g, dt=1e-3)


def test_conv2d_is_refused(tmp_path):
    conv = nir.Conv2d(
        input_shape=(8, 8),
        weight=np.ones((2, 1, 3, 3), np.float32),
        stride=1,
        padding=0,
        dilation=1,
        groups=1,
        bias=np.zeros(2, np.float32),
    )
    g = nir.NIRGraph(
        nodes={"in": nir.Input(np.array([1, 8, 8])), "conv": conv, "out": nir.Output(np.array([2, 6, 6]))},
        edges=[("in", "conv"), ("conv", "out")],
        type_check=False,
    )
    with pytest.raises(ConfigError, match=r"NIR node 'conv' = 'Conv2d'.*dense all-to-all layers only"):
        load_nir(roundtrip(tmp_path, g), dt=1e-3)


@pytest.mark.parametrize(
    "change,match",
    [
        (lambda g: setattr(g.nodes["fc1"], "bias", np.full(8, 0.5, np.float32)), r"'fc1' = 'Affine'.*bias is nonzero"),
        (lambda g: g.nodes["lif1"].tau.__setitem__(0, 0.03), r"'lif1' = 'LIF'.*tau varies across neurons"),
        (lambda g: g.nodes.__setitem__("lif2", lif(3, tau=0.05)), r"'lif2' = 'LIF'.*tau = 0.05 differs from 0.02"),
        (lambda g: g.nodes.__setitem__("lif2", lif(3, v_reset=np.full(3, -0.5))), r"'lif2'.*v_reset = -0.5 != 0"),
        (
            lambda g: g.nodes.__setitem__("lif2", nir.IF(r=np.full(3, 10.0), v_threshold=np.ones(3))),
            r"'lif2' = 'IF'.*tau = inf differs from 0.02",
        ),
        (
            lambda g: g.nodes.__setitem__("lif2", nir.LI(tau=np.ones(3), r=np.ones(3), v_leak=np.zeros(3))),
            r"'lif2' = 'LI'.*non-spiking",
        ),
    ],
)
def test_inexact_graphs_are_refused(change, match):
    g = two_layer()
    change(g)
    with pytest.raises(ConfigError, match=match):
        load_nir(g, dt=1e-3)


def test_bad_dt_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="dt = 0: must be a number > 0"):
        load_nir(two_layer(), dt=0)
    with pytest.raises(ConfigError, match="NIR file = .*: no such file"):
        load_nir(tmp_path / "none.nir", dt=1e-3)
    with pytest.raises(ConfigError, match=r"dt/tau = 2 gives alpha = -1 outside \(0, 1\)"):
        load_nir(two_layer(), dt=0.04, discretization="euler")


def test_integrate_and_fire_graph(tmp_path):
    g = two_layer()
    for name, n in (("lif1", 8), ("lif2", 3)):
        g.nodes[name] = nir.IF(r=np.full(n, 10.0), v_threshold=np.ones(n))
    m = load_nir(roundtrip(tmp_path, g), dt=1e-3)
    assert m.lif.decay == 1.0 and m.lif.scale == pytest.approx(10.0 * 1e-3) and math.isinf(m.tau)
    cfg = NetworkConfig(layers=m.layers, batch=2, timesteps=5, max_activity=0.5, input_cap=4, lif=m.lif)
    assert cfg.lif.scale == pytest.approx(0.01)


# --- issue 20: graphs exported by snnTorch 1.0 and Norse 1.1 (tests/fixtures/nir/make_fixtures.py) ---

FIXTURES = Path(__file__).parent / "fixtures" / "nir"


def _make_fixtures():
    spec = importlib.util.spec_from_file_location("make_fixtures", FIXTURES / "make_fixtures.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def exported(name, tmp_path):
    """Fixture ``name`` exported afresh when torch and its exporter are installed, else the stored file."""
    exporter = name.split("_")[0]
    if all(importlib.util.find_spec(m) is not None for m in ("torch", exporter, "nirtorch")):
        return _make_fixtures().write(name, tmp_path)
    return FIXTURES / name


def test_fixtures_are_documented():
    mod = _make_fixtures()
    assert sorted(mod.FIXTURES) == sorted(p.name for p in FIXTURES.glob("*.nir"))
    assert all(v in mod.__doc__ for v in mod.VERSIONS.values())


def test_snntorch_leaky_is_read_at_its_export_step(tmp_path):
    path = exported("snntorch_leaky.nir", tmp_path)
    m = load_nir(path)  # no dt in the file: 1 ms, beta 0.9 -> alpha exp(-1)
    assert m.layers == (12, 8, 3) and m.dt == 1e-3 and m.dt_source == "default"
    assert m.lif.decay == pytest.approx(math.exp(-1), rel=1e-6)
    (w,) = m.warnings
    assert "\n" not in w and "alpha = exp(-dt/tau) = 0.368 is outside (0.5, 0.9999)" in w
    assert "--dt 0.0001 --discretization euler gives alpha = snnTorch's beta = 0.9" in w
    m = load_nir(path, dt=1e-4, discretization="euler")  # snnTorch's own step: v = beta*v + I exactly
    assert m.warnings == () and m.dt_source == "caller"
    assert m.lif.decay == pytest.approx(0.9, abs=1e-6) and m.lif.scale == pytest.approx(1.0, abs=1e-5)
    assert all(w.dtype == np.float32 and np.abs(w).max() > 0 for w in m.weights)


@pytest.mark.parametrize(
    "name,batch", [("norse_lifbox_batch.nir", 1), ("norse_lif_batch.nir", 4), ("norse_lifbox_scalar.nir", None)]
)
def test_norse_graphs_load_with_a_warning(tmp_path, name, batch):
    m = load_nir(exported(name, tmp_path), dt=1e-3)
    assert m.layers == (12, 8, 3) and m.graph_batch == batch and m.lif.input_scale == 1.0
    assert m.tau == pytest.approx(1e-5) and m.lif.decay < 1e-40  # Norse writes dt * its 10 ms
    (w,) = m.warnings
    assert "alpha = exp(-dt/tau) = 3.72e-44 is outside (0.5, 0.9999)" in w and "keeps almost nothing" in w
    if "lifbox" in name:  # Norse's own step: alpha 0.9
        assert "--dt 1e-06 --discretization euler reproduces Norse's step (alpha = 0.9)" in w
        assert load_nir(exported(name, tmp_path), dt=1e-6, discretization="euler").lif.decay == pytest.approx(0.9)
    else:  # there its synapse is real: refused
        assert "Norse's step" not in w
        with pytest.raises(ConfigError, match=r"'1' = 'CubaLIF'.*tau_syn = 5e-06 keeps a synaptic current"):
            load_nir(exported(name, tmp_path), dt=1e-6, discretization="euler")


def test_alpha_warning_bounds():
    assert load_nir(two_layer(tau=0.02), dt=1e-3).warnings == ()  # alpha 0.951
    (w,) = load_nir(two_layer(tau=20.0), dt=1e-3).warnings  # alpha 0.99995
    assert "NIR layer 'lif1' (and every layer): alpha = exp(-dt/tau) = 1 is outside" in w and "under 1 %" in w
    (w,) = load_nir(two_layer(tau=0.02), dt=0.016, discretization="euler").warnings  # alpha 0.2
    assert "alpha = 1 - dt/tau = 0.2 is outside" in w and "less than half" in w


def test_cubalif_synaptic_term_vanishes_within_float32():
    g, n = two_layer(), 8

    def cuba(tau_syn, discretization="exact"):
        g.nodes["lif1"] = nir.CubaLIF(
            tau_syn=np.full(n, tau_syn),
            tau_mem=np.full(n, 0.02),
            r=np.full(n, 10.0),
            v_leak=np.zeros(n),
            v_threshold=np.ones(n),
            w_in=np.ones(n),
        )
        return load_nir(g, dt=1e-3, discretization=discretization)

    assert cuba(5e-6).layers == (12, 8, 3)  # Norse 1.1's LIFCell: exp(-200)
    assert cuba(1e-3 / 17).layers == (12, 8, 3)  # exp(-17) = 4.1e-8 <= 2^-24
    assert cuba(0.0).layers == (12, 8, 3)
    with pytest.raises(ConfigError, match=r"exp\(-dt/tau_syn\) = 1.13e-07, \|.\| > 2\^-24 = 5.96e-08"):
        cuba(1e-3 / 16)
    assert cuba(1e-3, "euler").layers == (12, 8, 3)  # Euler at tau_syn = dt: I_t = x_t exactly
    assert cuba(0.0, "euler").layers == (12, 8, 3)
    for tau_syn, a in ((2e-3, "0.5"), (5e-6, "-199")):  # a slower synapse; Euler overshooting a faster one
        with pytest.raises(ConfigError, match=rf"\(1 - dt/tau_syn = {a}, .*use tau_syn = dt"):
            cuba(tau_syn, "euler")


def test_snntorch_synaptic_without_synaptic_memory_is_a_leaky(tmp_path):
    path = exported("snntorch_synaptic.nir", tmp_path)
    m = load_nir(path, dt=1e-4, discretization="euler")  # alpha = 0: tau_syn = dt, w_in = 1
    assert m.layers == (12, 8, 3) and m.warnings == () and m.lif.decay == pytest.approx(0.9, abs=1e-6)
    with pytest.raises(
        ConfigError,
        match=r"'1' = 'CubaLIF'.*tau_syn = 0.0001 keeps a synaptic current across "
        r"steps \(exp\(-dt/tau_syn\) = 4.54e-05",
    ):
        load_nir(path)


def test_batch_dimension_and_shapes(tmp_path):
    g = two_layer()
    g.nodes["in"], g.nodes["out"] = nir.Input(np.array([5, 12])), nir.Output(np.array([5, 3]))
    p = tmp_path / "b.nir"
    nir.write(p, g)
    with pytest.raises(ValueError):
        nir.read(p)  # nir's own type check rejects it
    m = load_nir(p, dt=1e-3)
    assert m.layers == (12, 8, 3) and m.graph_batch == 5
    g.nodes["in"] = nir.Input(np.array([1, 2, 12]))
    with pytest.raises(ConfigError, match=r"'in' = 'Input'.*input shape \(1, 2, 12\) is not \(N,\) or \(batch, N\)"):
        load_nir(g, dt=1e-3)
    g.nodes["in"], g.nodes["out"] = nir.Input(np.array([12])), nir.Output(np.array([1, 4]))
    with pytest.raises(ConfigError, match=r"'out' = 'Output'.*output size 4 != the last layer's 3 neurons"):
        load_nir(g, dt=1e-3)


def test_dt_from_the_graph_metadata(tmp_path):
    g = two_layer()
    g.metadata = {"dt": 1e-4}
    p = roundtrip(tmp_path, g)
    m = load_nir(p)
    assert (m.dt, m.dt_source) == (1e-4, "graph") and m.lif.decay == pytest.approx(math.exp(-1e-4 / 0.02))
    assert load_nir(p, dt=1e-4).dt_source == "caller"
    with pytest.raises(
        ConfigError,
        match=r"^dt = 0.001: differs from the NIR graph's metadata dt = 0.0001 s; drop "
        r"--dt to use the graph's step",
    ):
        load_nir(p, dt=1e-3)
    g.metadata = {"dt": -1.0}
    with pytest.raises(ConfigError, match=r"NIR graph metadata dt = -1.0: must be a number > 0 \(seconds\)"):
        load_nir(g)
