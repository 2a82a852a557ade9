import numpy as np
import pytest

from tilesim.errors import ConfigError, SramOverflowError
from tilesim.machine.description import load_machine
from tilesim.machine.memory import CATEGORIES, MemoryLedger


def test_ledger_sums_and_explains():
    m = load_machine("gc200x2")
    led = MemoryLedger(m)
    led.add("variables:weights", 1000, label="W")
    led.add("variables:gradients", np.arange(10) * 100, tiles=np.arange(10), label="dW")
    led.add("vertex_code", 500, tiles=slice(0, 4), label="code")
    assert led.per_tile()[9] == 1900 and led.per_tile()[3] == 1800
    assert led.max_tile() == 9
    assert led.explain_tile(3)[0] == ("W", "variables:weights", 1000)
    d = led.to_dict()
    assert d["by_category_bytes"] == {"variables:weights": 1000, "variables:gradients": 900}
    assert d["total_by_category_bytes"]["variables:weights"] == 1000 * m.total_tiles
    assert "tile 9 of chip 0" in led.report(3)


def test_overflow_raises_with_tile_bytes_categories_and_fix():
    m = load_machine("gc200")
    led = MemoryLedger(m)
    led.add("variables:weights", 400_000, label="W")
    led.add("variables:gradients", 300_000, tiles=[735, 736], label="dW per-worker copies")
    with pytest.raises(
        SramOverflowError,
        match=r"SRAM overflow on 2 tile\(s\): tile 735 needs 700,000 B of "
        r"638,976 B budget \(\+9.6 %\); largest there: W \[variables:weights\] "
        r"400,000 B, dW per-worker copies .* fix: ",
    ) as exc:
        led.check()
    assert exc.value.tiles == [735, 736]
    assert "OVERFLOW" in exc.value.report
    # report-only mode keeps going and marks the tiles
    assert led.check(mode="report").tolist() == [735, 736]


def test_ledger_input_errors():
    led = MemoryLedger(load_machine("gc200"))
    with pytest.raises(ConfigError, match=r"memory category = 'weights': is unknown"):
        led.add("weights", 1)
    with pytest.raises(ConfigError, match=r"memory 'x' tile = 1472: is out of range 0..1471"):
        led.add("stack", 1, tiles=[1472], label="x")
    with pytest.raises(ConfigError, match=r"must be finite and >= 0"):
        led.add("stack", -1)
    with pytest.raises(ConfigError, match=r"memory check mode = 'warn'"):
        led.check("warn")
    assert set(CATEGORIES) >= {
        "exchange_buffers",
        "vertex_state",
        "vertex_code",
        "control_code",
        "exchange_code",
        "stack",
    }


def test_heatmap(tmp_path):
    from tilesim.outputs.plots import memory_heatmap

    led = MemoryLedger(load_machine("mesh-demo"))
    led.add("variables:state", np.linspace(0, 200_000, 256), label="v")
    p = memory_heatmap(led, tmp_path / "m.png")
    assert p.stat().st_size > 5000
