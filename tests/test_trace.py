"""trace.json (issue 20): slices named by superstep label and phase, per-chip byte counters,
IPU-Link flow arrows from the sending chip to the receiving one, critical tiles by default."""

import numpy as np

from tilesim.engine.events import simulate
from tilesim.outputs.records import critical_tiles
from tilesim.outputs.trace import trace_events
from tilesim.program import ProgramBuilder


def _program(m):
    b = ProgramBuilder(m.chips, m.tiles_per_chip, "two-chip")
    comp = np.zeros(m.chips * m.tiles_per_chip)
    comp[1], comp[m.tiles_per_chip + 2] = 500, 900  # chip 1's tile 2 is the slowest
    b.superstep("forward", compute_cycles=comp, flows=[(0, 1, 4000.0)], sync="all")
    b.superstep("backward", compute_cycles=comp / 2, flows=[(1, 0, 1000.0), (0, 1, 2000.0)], sync="all")
    return b.build()


def test_slices_counters_flows_and_tiles(round2):
    p = _program(round2)
    res = simulate(p, round2)
    doc = trace_events(res, p)
    ev = doc["traceEvents"]
    names = {e["name"] for e in ev if e["ph"] == "X" and e["tid"] == 0}
    assert "forward · compute" in names and "backward · links" in names
    assert {e["cat"] for e in ev if e["ph"] == "X" and e["tid"] == 0} >= {"compute", "sync", "links"}
    # one byte counter track per chip; the links counter is what each chip sends
    cnt = [e for e in ev if e["ph"] == "C" and e["name"] == "bytes"]
    assert {e["pid"] for e in cnt} == {0, 1}
    sent = {c: sum(e["args"]["links"] for e in cnt if e["pid"] == c) for c in (0, 1)}
    assert sent == {0: 6000.0, 1: 1000.0}
    # a flow arrow per link transfer: start on the sender, finish on the receiver
    starts = sorted((e["id"], e["pid"]) for e in ev if e["ph"] == "s")
    ends = sorted((e["id"], e["pid"]) for e in ev if e["ph"] == "f")
    assert len(starts) == 3 and [s[1] for s in starts] == [0, 1, 0] and [f[1] for f in ends] == [1, 0, 1]
    # default tile tracks: the critical tile first (chip 1, tile 2)
    assert critical_tiles(res)[0] == round2.tiles_per_chip + 2
    assert doc["otherData"]["tile_tracks"][0] == round2.tiles_per_chip + 2
    tracks = [e for e in ev if e["ph"] == "M" and e["name"] == "thread_name" and e["tid"] > 0]
    assert any(e["pid"] == 1 and "tile 2 (critical)" == e["args"]["name"] for e in tracks)


def test_run_trace_tiles_option():
    import pytest

    from tilesim.errors import ConfigError
    from tilesim.models.snn.commands.options import RunOptions
    from tilesim.models.snn.commands.run import run_training

    kw = dict(layers="40-24-4", caps="8-2", batch=4, timesteps=8, steps=1, memory_check="report")
    s = run_training(RunOptions(trace_tiles="5-7", **kw))
    assert s.artifacts.trace_tiles == (5, 7)
    doc = trace_events(s.artifacts.result, s.artifacts.program, s.artifacts.trace_tiles)
    assert doc["otherData"]["tile_tracks"] == [5, 7]
    default = run_training(RunOptions(**kw)).artifacts
    assert default.trace_tiles == critical_tiles(default.result)
    with pytest.raises(ConfigError, match="--trace-tiles"):
        run_training(RunOptions(trace_tiles="99999", **kw))


def test_digest_work_leaves_host_booked_supersteps_out(round2):
    from tilesim.outputs.records import ProgramDigest

    b = ProgramBuilder(round2.chips, round2.tiles_per_chip, "work and host copy")
    n = round2.chips * round2.tiles_per_chip
    b.superstep("work", compute_cycles=np.full(n, 10.0), sync="all")
    b.superstep("host: copy", compute_cycles=np.full(n, 1000.0), sync="all")
    p = b.build()
    assert ProgramDigest.of(p).work_cycles.tolist() == [1010.0] * n
    assert ProgramDigest.of(p, host_labels=("host: copy",)).work_cycles.tolist() == [10.0] * n
    res = simulate(p, round2).book_as_host(("host: copy",))
    assert res.breakdown_s()["compute"] * round2.clock_hz == 10.0 and res.total_s == simulate(p, round2).total_s
