import numpy as np
import pytest

from tilesim.errors import ConfigError
from tilesim.machine.description import load_machine
from tilesim.program import ProgramBuilder
from tilesim.program.toml_form import load_program, parse_tiles


def test_parse_tiles():
    assert list(parse_tiles("0-3,7", 10, "t")) == [0, 1, 2, 3, 7]
    assert list(parse_tiles(4, 10, "t")) == [4]
    with pytest.raises(ConfigError, match=r"t = 12: is out of range 0..9"):
        parse_tiles([12], 10, "t")
    with pytest.raises(ConfigError, match="is not a tile range"):
        parse_tiles("a-b", 10, "t")


def test_builder_errors():
    b = ProgramBuilder(chips=2, tiles_per_chip=4)
    with pytest.raises(ConfigError, match=r"compute_cycles = -1.0: must be finite and >= 0"):
        b.superstep("x", -1)
    with pytest.raises(ConfigError, match=r"must be a scalar or have length 8"):
        b.superstep("x", [1, 2, 3])
    with pytest.raises(ConfigError, match=r"repeat = 0: must be an integer >= 1"):
        b.superstep("x", 1, repeat=0)
    with pytest.raises(ConfigError, match=r"transfer dst_tile = 8: must be in 0..7"):
        b.superstep("x", 1, transfers=[(0, 8, 10)])
    with pytest.raises(ConfigError, match=r"sync = 'some': must be 'chip', 'all'"):
        b.superstep("x", 1, sync="some")
    with pytest.raises(ConfigError, match=r"source and destination chip must differ"):
        b.superstep("x", 1, sync="all", flows=[(1, 1, 5)])
        b.build()
    with pytest.raises(ConfigError, match=r"tiles_per_chip = 0"):
        ProgramBuilder(chips=1, tiles_per_chip=0)


def test_partitions_are_canonical():
    b = ProgramBuilder(chips=4, tiles_per_chip=1)
    b.superstep("a", 1, sync=[[0, 1], [2, 3]])
    b.superstep("b", 1, sync=[[3, 2], [1, 0]])
    b.superstep("c", 1, sync=[[0, 1, 2, 3]])
    b.superstep("d", 1, sync=[[0], [1], [2], [3]])
    p = b.build()
    assert list(p.sync_scope) == [1, 1, 0, -1]
    assert len(p.partitions) == 1


def write(tmp_path, text):
    p = tmp_path / "prog.toml"
    p.write_text(text)
    return p


def test_program_file(tmp_path):
    m = load_machine("gc200x2")
    prog, mem = load_program(
        write(
            tmp_path,
            """
name = "t"
[[superstep]]
label = "a"
repeat = 3
sync = "all"
compute_cycles = 10
exchange_bytes = 8
[[superstep.compute]]
tiles = "0-9"
chips = [1]
cycles = 99
[[superstep.flows]]
src = 0
dst = 1
bytes = 100
[[memory]]
category = "variables:weights"
tiles = "0-3"
bytes = 64
""",
        ),
        m,
    )
    assert prog.supersteps == 3 and prog.flow_step.tolist() == [0, 1, 2]
    assert prog.compute_cycles[0, 1472:1482].tolist() == [99] * 10 and prog.compute_cycles[0, 0] == 10
    assert mem[0][0] == "variables:weights" and len(mem[0][1]) == 8


@pytest.mark.parametrize(
    "text,match",
    [
        ("[[superstep]]\ncompute_cycles = -5\n", r"superstep\[0\].compute_cycles = -5: must be a finite number >= 0"),
        ("[[superstep]]\ncycles = 5\n", r"superstep\[0\].cycles = 5: unknown key"),
        (
            '[[superstep]]\n[[superstep.compute]]\ntiles = "0-5000"\ncycles = 1\n',
            r"tiles = 5000: is out of range 0..1471; give",
        ),
        ('[[superstep]]\nsync = "all"\n[[superstep.flows]]\nsrc = 0\ndst = 3\nbytes = 1\n', r"flow dst chip = 3"),
        ("[[superstep]]\n[[superstep.flows]]\nsrc = 0\ndst = 1\nbytes = 1\n", r"crosses sync groups"),
        ('[[memory]]\ncategory = "weights"\nbytes = 1\n[[superstep]]\n', None),
        ("title = 3\n", r"title = 3: unknown key"),
        ("[[superstep\n", r"is not valid TOML"),
    ],
)
def test_program_file_errors(tmp_path, text, match):
    m = load_machine("gc200x2")
    if match is None:  # unknown memory category is caught by the ledger
        from tilesim.machine.memory import MemoryLedger

        _, mem = load_program(write(tmp_path, text), m)
        with pytest.raises(ConfigError, match=r"memory category = 'weights': is unknown"):
            MemoryLedger(m).add(*mem[0][:3])
        return
    with pytest.raises(ConfigError, match=match):
        load_program(write(tmp_path, text), m)


# issue 19: malformed program entries are one-line ConfigErrors naming the fix (tracebacks or a
# runaway range expansion on the old code)
@pytest.mark.parametrize(
    "text,match",
    [
        ("[[superstep]]\ncompute = [5]\n", r"superstep\[0\].compute = \[5\]: must be a list of tables; write each"),
        ("[[superstep]]\nsync = 3\n", r"superstep\[0\].sync = 3: must be 'chip', 'all' or a list of chip groups; e.g."),
        ("[[superstep]]\nsync = [3]\n", r"superstep\[0\].sync = \[3\]: must be"),
        (
            '[[superstep]]\n[[superstep.compute]]\ntiles = "0-99999999999"\ncycles = 1\n',
            r"tiles = 99999999999: is out of range 0..1471",
        ),
        ("[[superstep]]\n[[superstep.compute]]\ntiles = [[1]]\ncycles = 1\n", r"must be a non-empty list of integer"),
        ("[[superstep]]\nexchange_bytes = 1\nexchange = 7\n", r"superstep\[0\].exchange = 7: must be a list of tables"),
        ('[[superstep]]\nflows = "x"\n', r"flows = 'x': must be a list of tables"),
        ("memory = 5\n[[superstep]]\n", r"memory = 5: must be a list of tables"),
        ("[[superstep]]\nrepeat = 2.5\n", r"repeat = 2.5: must be an integer >= 1; e.g."),
        (
            "[[superstep]]\ncompute_cycles = 1e300\n",
            r"compute_cycles = 1e\+300: must be a finite number >= 0 and at most",
        ),
    ],
)
def test_malformed_program_entries_are_one_line_errors(tmp_path, text, match):
    with pytest.raises(ConfigError, match=match):
        load_program(write(tmp_path, text), load_machine("gc200x2"))


def test_program_size_is_estimated_without_building():
    from tilesim.program.toml_form import program_size

    m = load_machine("gc200x2")
    data = {"superstep": [{"repeat": 10**9}, {"exchange_bytes": 1, "repeat": 2}]}
    S, nbytes = program_size(data, m)
    assert S == 10**9 + 2 and nbytes == 2 * 4 * (10**9 + 3 * 2) * m.total_tiles


def test_program_file_multicasts(tmp_path):
    """A program file's multicast to a rectangle of a mesh machine costs its tree once; a rectangle
    off the grid is refused with the grid's size."""
    from tilesim.engine.events import simulate

    m = load_machine("mesh-demo")
    f = tmp_path / "p.toml"
    f.write_text(
        '[[superstep]]\nlabel = "m"\nmulticasts = [{src_tile = 0, rectangle = [8, 8, 15, 15], bytes = 4096}]\n'
        '[[superstep]]\nlabel = "u"\ntransfers = [{src_tile = 0, dst_tile = 136, bytes = 4096}]\n'
    )
    p = load_program(f, m)[0]
    assert p.bytes_out[0, 0] == 4096 and (p.bytes_in[0] > 0).sum() == 64
    r = simulate(p, m)
    # 20 fixed + 4096 B at 8 B/cycle over the tree (512 cycles) + 30 hops x 3 cycles to tile 255
    assert r.phase_s[0, 2] * m.clock_hz == 20 + 512 + 30 * 3
    f.write_text("[[superstep]]\nmulticasts = [{src_tile = 0, rectangle = [8, 8, 16, 15], bytes = 64}]\n")
    with pytest.raises(
        ConfigError, match=r"rectangle = \[8, 8, 16, 15\]: must be \[x0, y0, x1, y1\] within 16 columns"
    ):
        load_program(f, m)


def test_a_transfer_is_exactly_src_dst_bytes():
    """A transfer with a fourth field is refused, not truncated (multicasts have their own argument)."""
    b = ProgramBuilder(chips=1, tiles_per_chip=4)
    with pytest.raises(ConfigError, match=r"transfer = \(0, 1, 64, 7\): must be \(src_tile, dst_tile, bytes\)"):
        b.superstep("x", 0, transfers=[(0, 1, 64, 7)])


# ---- the core chooses the form and builds the compact one (issue 37) ---------------------------


class _Rows:
    """A workload's rows one chip at a time (tilesim.program.forms.ChipRows), from dense arrays."""

    def __init__(self, comp, b_in, b_out, tpc):
        self.arrays, self.tpc = (comp, b_in, b_out), tpc

    def chip_rows(self, chip):
        cols = slice(chip * self.tpc, (chip + 1) * self.tpc)
        return tuple(a[:, cols] for a in self.arrays)

    def touched_rows(self, chip):
        return np.flatnonzero(
            np.any([a[:, chip * self.tpc : (chip + 1) * self.tpc].any(axis=1) for a in self.arrays], 0)
        )


@pytest.mark.parametrize("name", ["gc200x2", "mesh-demo"])
def test_the_core_builds_the_compact_form_with_the_dense_forms_times(name):
    """The same rows as a dense Program and as the core's compact_program time the same, with the same
    critical tiles and per-tile label sums; a row a chip does not touch is zero there."""
    from tilesim.engine.events import simulate
    from tilesim.outputs.records import label_tile_cycles
    from tilesim.program import Program
    from tilesim.program.forms import compact_program, program_form

    m = load_machine(name)
    rng = np.random.default_rng(7)
    S, n = 5, m.total_tiles
    comp = rng.uniform(100, 900, (S, n)).astype(np.float32)
    comp[2, : m.tiles_per_chip] = 0.0
    b_in = rng.uniform(0, 512, (S, n)).astype(np.float32)
    b_out = b_in[:, ::-1].copy()
    labels, label_id, scope = ("a", "b"), np.array([0, 0, 1, 1, 0]), np.zeros(S, np.int32)
    dense = Program.from_arrays(
        chips=m.chips, tiles_per_chip=m.tiles_per_chip, compute_cycles=comp, labels=labels, label_id=label_id,
        sync_scope=scope, bytes_in=b_in, bytes_out=b_out,
    )  # fmt: skip
    compact = compact_program(
        _Rows(comp, b_in, b_out, m.tiles_per_chip), m, name="program", labels=labels, label_id=label_id,
        sync_scope=scope,
    )  # fmt: skip
    assert compact.form == "compact" and dense.form == "dense"
    a, b = simulate(dense, m), simulate(compact, m)
    assert b.total_s == pytest.approx(a.total_s, rel=1e-12)
    assert np.array_equal(a.critical_tile, b.critical_tile)
    assert np.allclose(label_tile_cycles(dense), label_tile_cycles(compact))
    assert program_form(m, "peaks") == ("compact" if name == "mesh-demo" else "peaks")
    assert program_form(m, "dense") == "dense"
    with pytest.raises(ConfigError, match="form.*sparse.*must be one of"):
        program_form(m, "sparse")
