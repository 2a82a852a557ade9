"""``tilesim layer --via poptorch`` (issue 40 part 2): the notebook's PopTorch loop around a static PopSparse matmul,
its re-laying copies counted by hand, and the notebook's held-out rows read and checked by ``validate``."""

import csv
import json

import numpy as np
import pytest

from tilesim.cli import main
from tilesim.models.linear.measured import read_sparse_cases, shipped_sparse_cases, validate_sparse
from tilesim.models.linear.poptorch_path import linear_tiles, loop_carry_relayout, regroup_relayout

SMALL = ("layer", "--kind", "block-sparse", "--n", "256", "--batch", "64", "--density", "1/4", "--block", "16",
         "--precision", "fp16", "--forward-only", "--machine", "bow", "--json")  # fmt: skip


def _layer(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_via_defaults_to_direct_and_changes_nothing(capsys):
    code, plain, _ = _layer(capsys, *SMALL)
    code_d, direct, _ = _layer(capsys, *SMALL, "--via", "direct")
    assert code == code_d == 0 and json.loads(plain) == json.loads(direct)
    code, out, _ = _layer(capsys, *SMALL, "--via", "poptorch")
    via = json.loads(out)
    assert code == 0 and via["via"] == "poptorch" and set(via["part_s"]) == {"loop", "relayout", "forward"}
    assert via["part_s"]["forward"] == pytest.approx(json.loads(plain)["step_s"])  # the matmul itself unchanged
    assert via["step_s"] > json.loads(plain)["step_s"]
    code, _, err = _layer(capsys, *[a for a in SMALL if a != "--forward-only"], "--via", "poptorch")
    assert code == 2 and "--via = 'poptorch'" in err and "--forward-only" in err


def test_linear_mapping_keeps_poputils_128_byte_minimum():
    # 32 halves fit the 64-element minimum of one tile; 128 halves: 2 tiles of 64 (splitRegions)
    assert set(linear_tiles(np.arange(32), 32, 4, 4, 64)) == {0}
    assert list(np.bincount(linear_tiles(np.arange(128), 128, 4, 4, 64))) == [64, 64]


def test_relayout_bytes_counted_by_hand():
    # (16 x 8) fp16 on 4 tiles. Body input: row-major, 64 elements on tiles 0 and 1 (rows 0-7, 8-15).
    # Block 4: PopSparse's output [4][8][4] in grains of 16 -> 32 elements a tile, rows 4t..4t+3 on tile t:
    # rows 4-7 go 1 -> 0, rows 8-11 go 2 -> 1 and 12-15 go 3 -> 1, each element its own 2-byte region
    r = loop_carry_relayout(16, 8, 4, 2, 4)
    assert list(r.bytes_out) == [0, 64, 64, 64] and list(r.bytes_in) == [64, 128, 0, 0] and r.moved == 96
    assert list(r.regions_in) == [32, 64, 0, 0]
    # every element arrives (or is reordered on its tile) as its own 2-byte atom: poplin's rearrangement estimate
    assert [list(a) for a in r.atom_bytes] == [[128, 128, 0, 0], [0, 0, 0, 0]]
    assert list(r.rearrange_cycles()) == [587 + 659, 587 + 659, 0, 0]  # 5271 / 1024 cycles a byte: 658.9
    # block 1: the output is row-major too (grain 4, 32 a tile): 32-63 go 1 -> 0, 64-95 2 -> 1, 96-127 3 -> 1,
    # one contiguous region per source tile
    r1 = loop_carry_relayout(16, 8, 1, 2, 4)
    assert list(r1.bytes_in) == [64, 128, 0, 0] and list(r1.regions_in) == [1, 2, 0, 0]
    assert not r1.rearrange_cycles().any()  # whole runs: written in place by the exchange
    # regroup to the planner's k-grouping 4: rows of 8 halves on one tile -> from-grouping 8; 4 transpositions of
    # 4 x 8, one a tile: rows 4-7 go 0 -> 1, rows 8-11 go 1 -> 2, rows 12-15 go 1 -> 3
    g = regroup_relayout(16, 8, 4, 2, 4, 6)
    assert g is not None and g.shape == (4, 8) and list(g.transposes) == [1, 1, 1, 1]
    assert list(g.bytes_out) == [64, 128, 0, 0] and list(g.bytes_in) == [0, 64, 64, 64]
    assert not g.rearrange_cycles().any()  # 16-byte rows of a transposition
    assert regroup_relayout(16, 8, 1, 2, 4, 6) is None  # element-wise: the reference is grouped along n too


def _notebook() -> str:
    (path,) = [p for p in shipped_sparse_cases() if p.name == "popsparse_poptorch_notebook.csv"]
    return str(path)


def test_notebook_rows_are_held_out_and_validated_via_poptorch(tmp_path):
    from tilesim.models.validate import _files  # validate with no file checks every shipped file

    path = _notebook()
    assert path in {str(p) for p in _files(type("Args", (), {"cases": []})())}
    cases = read_sparse_cases(path)
    assert len(cases) == 13 and not [c for c in cases if c.problem]
    assert all(not c.calibrate and c.spec.via == "poptorch" and c.machine == "bow" for c in cases)
    with open(path) as fh:
        rows = list(csv.DictReader(fh))
    assert all("graphcore-research/notebooks@24a76f7" in r["source"] for r in rows)
    keep = ("nb_static_fp16_b16_1_16_n2048", "nb_dynamic_fp32_b1_1_64_n512")
    small = tmp_path / "nb.csv"
    with open(small, "w", newline="") as fh:
        w = csv.DictWriter(fh, list(rows[0]))
        w.writeheader()
        w.writerows(r for r in rows if r["case"] in keep)
        w.writerows(dict(r, case="direct", via="direct") for r in rows if r["case"] == keep[0])
    got = {r["case"]: r for r in validate_sparse(small)}
    b16, dyn, direct = got[keep[0]], got[keep[1]], got["direct"]
    assert b16["measured"] == 18.0305 and b16["use"] == "check" and b16["group"].endswith("via poptorch")
    assert b16["predicted"] < direct["predicted"]  # the loop and the re-layout add time to the same matmul
    assert dyn["predicted"] is None and "block-sparse or dense" in dyn["problem"]
