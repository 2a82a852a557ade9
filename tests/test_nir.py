"""NIR import: exact graphs load with the right sizes, weights and LIF constants; others are refused."""
import math

import numpy as np
import pytest

nir = pytest.importorskip("nir")

from models.snn.network import NetworkConfig  # noqa: E402
from models.snn.nir_import import load_nir  # noqa: E402
from tilesim.errors import ConfigError  # noqa: E402

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
    return nir.NIRGraph(nodes={"in": nir.Input(np.array([n0])), "fc1": affine(n0, n1), "lif1": lif(n1, **lif_kw),
                               "fc2": nir.Linear(weight=RNG.normal(size=(n2, n1)).astype(np.float32)),
                               "lif2": lif(n2, **lif_kw), "out": nir.Output(np.array([n2]))},
                        edges=[("in", "fc1"), ("fc1", "lif1"), ("lif1", "fc2"), ("fc2", "lif2"), ("lif2", "out")])


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
    g.nodes["lif1"] = nir.CubaLIF(tau_syn=np.zeros(n), tau_mem=np.full(n, 0.02), r=np.full(n, 10.0),
                                  v_leak=np.zeros(n), v_threshold=np.ones(n))
    assert load_nir(g, dt=1e-3).layers == (12, 8, 3)
    g.nodes["lif1"].tau_syn = np.full(n, 5e-3)
    with pytest.raises(ConfigError, match=r"NIR node 'lif1' = 'CubaLIF'.*tau_syn = 0.005 keeps a synaptic current"):
        load_nir(g, dt=1e-3)


def test_recurrent_graph(tmp_path):
    n0, n1, n2 = 10, 6, 2
    g = nir.NIRGraph(nodes={"in": nir.Input(np.array([n0])), "fc1": affine(n0, n1), "lif1": lif(n1),
                            "rec1": affine(n1, n1), "fc2": affine(n1, n2), "lif2": lif(n2),
                            "out": nir.Output(np.array([n2]))},
                     edges=[("in", "fc1"), ("fc1", "lif1"), ("lif1", "rec1"), ("rec1", "lif1"), ("lif1", "fc2"),
                            ("fc2", "lif2"), ("lif2", "out")])
    m = load_nir(roundtrip(tmp_path, g), dt=1e-3)
    assert m.layers == (10, 6, 2) and m.recurrent == (True, False)
    np.testing.assert_array_equal(m.recurrent_weights[0], g.nodes["rec1"].weight.T)
    assert m.recurrent_weights[1] is None
    assert NetworkConfig(batch=2, timesteps=4, max_activity=0.5, **m.network_kwargs()).recurrent == (True, False)


def test_delay_is_refused(tmp_path):
    g = two_layer()
    g.nodes["d"] = nir.Delay(delay=np.ones(8))
    g.edges = [("in", "fc1"), ("fc1", "lif1"), ("lif1", "d"), ("d", "fc2"), ("fc2", "lif2"), ("lif2", "out")]
    with pytest.raises(ConfigError, match=r"NIR node 'd' = 'Delay': cannot be represented exactly: the network has "
                                          r"no per-synapse delays"):
        load_nir(g, dt=1e-3)


def test_conv2d_is_refused(tmp_path):
    conv = nir.Conv2d(input_shape=(8, 8), weight=np.ones((2, 1, 3, 3), np.float32), stride=1, padding=0,
                      dilation=1, groups=1, bias=np.zeros(2, np.float32))
    g = nir.NIRGraph(nodes={"in": nir.Input(np.array([1, 8, 8])), "conv": conv,
                            "out": nir.Output(np.array([2, 6, 6]))},
                     edges=[("in", "conv"), ("conv", "out")], type_check=False)
    with pytest.raises(ConfigError, match=r"NIR node 'conv' = 'Conv2d'.*dense all-to-all layers only"):
        load_nir(roundtrip(tmp_path, g), dt=1e-3)


@pytest.mark.parametrize("change,match", [
    (lambda g: setattr(g.nodes["fc1"], "bias", np.full(8, 0.5, np.float32)), r"'fc1' = 'Affine'.*bias is nonzero"),
    (lambda g: g.nodes["lif1"].tau.__setitem__(0, 0.03), r"'lif1' = 'LIF'.*tau varies across neurons"),
    (lambda g: g.nodes.__setitem__("lif2", lif(3, tau=0.05)), r"'lif2' = 'LIF'.*tau = 0.05 differs from 0.02"),
    (lambda g: g.nodes.__setitem__("lif2", lif(3, v_reset=np.full(3, -0.5))), r"'lif2'.*v_reset = -0.5 != 0"),
    (lambda g: g.nodes.__setitem__("lif2", nir.IF(r=np.full(3, 10.0), v_threshold=np.ones(3))),
     r"'lif2' = 'IF'.*tau = inf differs from 0.02"),
    (lambda g: g.nodes.__setitem__("lif2", nir.LI(tau=np.ones(3), r=np.ones(3), v_leak=np.zeros(3))),
     r"'lif2' = 'LI'.*non-spiking"),
])
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
    cfg = NetworkConfig(layers=m.layers, batch=2, timesteps=5, max_activity=0.5, input_cap=4, **{"lif": m.lif})
    assert cfg.lif.scale == pytest.approx(0.01)
