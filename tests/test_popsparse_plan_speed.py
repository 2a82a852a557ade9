"""PopSparse's static planner scores every ``(S_n, S_k)`` with NumPy (issue 40 part 4) and picks what the
candidate-by-candidate search before it picked (kept below as ``_old_choose``) on random layouts and batches."""

import math

import numpy as np
import pytest

from tilesim.errors import ConfigError, SramOverflowError
from tilesim.models.linear import popsparse_plan as S
from tilesim.models.linear.blocksparse import StaticBlockCosts
from tilesim.models.linear.layers import random_block_layout
from tilesim.models.linear.phases import ceil_div


def _old_spread(prob, count):
    return math.ceil(math.sqrt(prob * (1 - prob) * count))


def _old_geometry(counts, sk, tiles, shape):
    """``_band_geometry`` before issue 40 part 4: one band count on one tile count, in Python numbers."""
    m_blocks, k_blocks, density, grain = shape
    bounds, per_band, _ = S._bands(counts, sk)
    per_tile = S._tiles_for_bands.__wrapped__(per_band, tiles, grain)
    if not per_tile:
        return None
    b = int(np.argmax(np.asarray(per_band) / np.asarray(per_tile)))
    blocks_band, tiles_band, k_band = per_band[b], per_tile[b], bounds[b + 1] - bounds[b]
    nz_tile = ceil_div(blocks_band, tiles_band)
    m_tile = ceil_div(m_blocks, tiles_band)
    k_tile = min(math.ceil(blocks_band / density), k_blocks) if m_tile == 1 else k_band
    row_prob = 1.0 - (1.0 - density) ** k_tile
    m_sparse = min(math.ceil(row_prob * m_tile + _old_spread(row_prob, m_tile)), m_tile)
    col_prob = 1.0 - (1.0 - density) ** m_tile
    k_sparse = min(math.ceil(col_prob * k_tile + _old_spread(col_prob, k_tile)), k_tile)
    r = max(math.ceil((row_prob * sk + _old_spread(row_prob, sk)) * k_band / k_tile), 1)
    return nz_tile, k_band, k_tile, m_sparse, k_sparse, r


def _old_sub(p, vertex, sn, sk, counts, n_part, tiles_part):
    """``_sub_estimate`` before issue 40 part 4: one ``(n per part, tiles per part)`` of one candidate."""
    geo = _old_geometry(counts, sk, tiles_part, (p.m_blocks, p.k_blocks, p.density, p.tile_grain))
    if geo is None:
        return None
    nz_tile, k_band, k_tile, m_sparse, k_sparse, r = geo
    factor = 1 if p.block == 1 else 8 * p.block
    if S._bands(counts, sk)[2] * p.block * n_part * p.eb > S.USHORT_MAX * factor:
        return None
    e = p.exchange_bytes_per_cycle
    rhs_bytes = n_part * k_sparse * p.block * p.eb
    rhs = int(ceil_div(rhs_bytes, int(2 * e)) * (k_tile / k_sparse))
    nz_bytes = nz_tile * p.block * p.block * p.eb
    nz = ceil_div(nz_bytes, int(e)) if sn > 1 else 0
    if p.block == 1:
        compute = int(vertex.elementwise_cycles(m_sparse, nz_tile, n_part, p.eb, p.workers))
    else:
        compute = int(vertex.cycles(m_sparse, nz_tile, n_part, p.block, p.eb, p.workers, p.eb))
    out_bytes = m_sparse * n_part * p.eb * p.block
    partial_bytes = ceil_div(out_bytes * (r - 1), r)
    move = ceil_div(p.m_blocks * p.block * p.n_pad * p.eb, p.tiles)
    reduce = 0 if r == 1 else S._reduce_cycles(ceil_div(out_bytes // p.eb, r), p.eb, r, p.workers)
    cycles = rhs + nz + compute + ceil_div(partial_bytes, int(e)) + reduce + move
    return cycles, max(rhs_bytes + nz_bytes + out_bytes, partial_bytes + out_bytes)


def _old_choose(layout, n, *, block, element_bytes, tiles, workers, exchange_bytes_per_cycle, tile_grain,
                sram_bytes, memory_proportion, vertex):  # fmt: skip
    """``choose_static_partition`` before issue 40 part 4 (a Python call per candidate and part)."""
    grain = 4 if element_bytes == 2 else 2
    n_pad = ceil_div(n, grain) * grain
    col_count = layout.sum(axis=0).astype(np.int64)
    m_blocks, k_blocks = layout.shape
    p = S._Problem(m_blocks, k_blocks, n_pad, block, element_bytes, tiles, tile_grain, workers,
                   float(exchange_bytes_per_cycle), min(int(col_count.sum()) / (m_blocks * k_blocks), 1.0))  # fmt: skip
    n_end = min(S.MAX_N_SPLIT, ceil_div(n_pad, grain))
    k_end = min(S.MAX_K_SPLIT, ceil_div(k_blocks, 1 if block == 1 else grain))
    counts, found = col_count.tobytes(), []
    for sn in range(1, n_end + 1):
        sizes = S._n_partition(n_pad, sn, grain)
        tiles_n = S._tile_partition(sizes, tiles, tile_grain)
        if any(t <= 0 for t in tiles_n):
            continue
        unique = sorted(set(zip(sizes, tiles_n)))
        for sk in range(1, min(k_end, tiles // tile_grain // sn) + 1):
            subs = [_old_sub(p, vertex, sn, sk, counts, a, b) for a, b in unique]
            if all(sub is not None for sub in subs):
                found.append((max(s[0] for s in subs), max(s[1] for s in subs), sn, sk))
    if not found:
        return "no partition"
    within = [f for f in found if f[1] <= memory_proportion * sram_bytes]
    if not within:
        return ("overflow", min(f[1] for f in found))
    cycles, memory, sn, sk = min(within, key=lambda f: f[0])
    bounds, per_band, _ = S._bands(counts, sk)
    return S.StaticChoice(sn, len(per_band), bounds, int(cycles), int(memory))


def _outcome(fn, layout, n, kw):
    try:
        return fn(layout, n, **kw)
    except ConfigError:
        return "no partition"
    except SramOverflowError as e:
        return ("overflow", int(str(e).split("needs ")[1].split(" B")[0]))


@pytest.mark.parametrize("seed", range(4))
def test_vectorised_static_search_chooses_what_the_candidate_by_candidate_one_chose(seed):
    rng = np.random.default_rng(seed)
    for _ in range(12):
        block = int(rng.choice([1, 4, 8, 16]))
        side = int(rng.choice([64, 128, 256, 512])) if block > 1 else int(rng.choice([32, 64, 128, 256]))
        wide = side * int(rng.choice([1, 2]))
        layout = random_block_layout(side, wide, block, float(rng.choice([1 / 2, 1 / 8, 1 / 32, 1 / 100])), seed=seed)
        if rng.random() < 0.3:  # lumpy columns: some hold most blocks
            layout = layout | (rng.random(layout.shape) < np.linspace(0, 0.8, layout.shape[1]) ** 4)
        kw = dict(block=block, element_bytes=int(rng.choice([2, 4])), tiles=int(rng.choice([8, 30, 64, 200, 1472])),
                  workers=6, exchange_bytes_per_cycle=float(rng.choice([4, 8])), tile_grain=int(rng.choice([1, 2])),
                  sram_bytes=int(rng.choice([2000, 20000, 638976])), memory_proportion=0.6,
                  vertex=StaticBlockCosts())  # fmt: skip
        n = int(rng.choice([1, 3, 4, 17, 64, 256, 1000, 4096, 20000]))
        assert _outcome(S.choose_static_partition, layout, n, kw) == _outcome(_old_choose, layout, n, kw)


def _old_band_order(layout, boundaries):
    """``blocksparse._band_order`` before issue 40 part 4 (``np.nonzero``, a stable sort, three gathers)."""
    rows, cols = np.nonzero(layout)
    edges = np.asarray(boundaries, dtype=np.int64)
    start, widths = edges[:-1], edges[1:] - edges[:-1]
    band = np.repeat(np.arange(start.size, dtype=np.int64), widths)[cols]
    order = np.argsort(band, kind="stable")
    rows, cols, band = rows[order], cols[order], band[order]
    change = np.ones(rows.size, dtype=bool)
    change[1:] = (rows[1:] != rows[:-1]) | (band[1:] != band[:-1])
    return rows, cols, band, cols - start[band], change, int(widths.max())


def test_band_order_from_runs_of_the_flat_indices_is_the_sorted_nonzeros_and_kept_only_for_read_only_layouts():
    from tilesim.models.linear.blocksparse import _band_order

    rng = np.random.default_rng(5)
    for _ in range(20):
        layout = rng.random((int(rng.integers(1, 90)), int(rng.integers(1, 300)))) < rng.choice([0.02, 0.3, 0.9])
        layout[0, 0] = True
        bounds = (0, *sorted(set(rng.integers(1, layout.shape[1] + 1, int(rng.integers(1, 140))).tolist())))
        bounds = bounds if bounds[-1] == layout.shape[1] else (*bounds, layout.shape[1])
        for _ in range(2):  # the second from the cache, for a read-only layout
            order = _band_order(layout, bounds)
            got = (order.rows, order.cols, order.band, order.local_cols, order.row_change)
            want = _old_band_order(layout, bounds)
            assert all(np.array_equal(a, b) for a, b in zip(want[:5], got)) and order.width == want[5]
            assert [a.dtype for a in got] == [a.dtype for a in want[:5]]
            layout.setflags(write=False)
    tail = rng.random((30, 50)) < 0.3
    tail[:, 41:] = False  # band_boundaries stops at the last column holding a block
    order, want = _band_order(tail, (0, 7, 20, 41)), _old_band_order(tail, (0, 7, 20, 41))
    assert all(
        np.array_equal(a, b)
        for a, b in zip(want[:5], (order.rows, order.cols, order.band, order.local_cols, order.row_change))
    )
    writable = np.eye(4, dtype=bool)
    first = _band_order(writable, (0, 2, 4))
    writable[3, 0] = True  # a writable layout is never served from the cache
    assert _band_order(writable, (0, 2, 4)).rows.size == first.rows.size + 1


def _old_search(q, vertex, bound):
    """``dynamicsparse._search`` before issue 40 part 4: every split estimated one at a time (Python numbers)."""
    from dataclasses import replace

    from tilesim.models.linear import dynamicsparse as D

    best = smallest = best_key = small_key = None
    zs = [d for d in range(1, q.Z + 1) if q.Z % d == 0]
    y_scale = 4 if q.eb == 4 else 2
    for px in D._splits(q.X):
        for py in (p for p in D._splits(q.Y) if px * p <= q.tiles):
            for pz in (p for p in zs if px * py * p <= q.tiles):
                if q.block == 1 and max((ceil_div(q.Y, py) - 1) * (q.Z // pz) * q.gz * y_scale,
                                        ceil_div(q.X, px) - 1) > 0xFFFF:  # fmt: skip
                    continue
                s = D._split(q, px, py, pz)
                est = D._estimate(q, s, vertex)
                if small_key is None or est[1] < small_key[1]:
                    smallest, small_key = s, est
                if est[1] <= bound and (best_key is None or est[:2] < best_key[:2]):
                    best, best_key = s, est
    fields = ("estimate", "temp", "fwd_estimate")
    pairs = ((best, best_key), (smallest, small_key))
    return tuple(None if s is None else replace(s, **dict(zip(fields, k))) for s, k in pairs)


@pytest.mark.parametrize("seed", range(3))
def test_vectorised_dynamic_search_chooses_what_the_split_by_split_one_chose(seed):
    from tilesim.models.linear import dynamicsparse as D

    rng = np.random.default_rng(seed)
    for _ in range(40):
        block, eb = int(rng.choice([1, 4, 8, 16])), int(rng.choice([2, 4]))
        pb = 4 if block == 1 else max(eb, int(rng.choice([2, 4])))
        gz = 8 // eb if block == 1 else 1
        x, y, n = (int(rng.choice(c)) for c in ([1, 3, 16, 100, 256, 1024], [1, 5, 64, 256, 1024], [1, 3, 64, 1000]))
        density = float(rng.choice([1.0, 1 / 16, 0.003]))
        q = D._Problem(block, density, gz, x, y, -(-n // gz), max(math.ceil(density * x * y), 1), eb, pb,
                       int(rng.choice([4, 6])), int(rng.choice([1, 64, 1472])))  # fmt: skip
        bound = float(rng.choice([1e3, 4e4, 4e5, 1e9]))
        assert D._search(q, D.DynamicCosts(), bound) == _old_search(q, D.DynamicCosts(), bound)


def test_tiles_of_all_band_counts_at_once_are_the_band_by_band_allocation():
    rng = np.random.default_rng(11)
    per, count, tiles, want = np.zeros((400, 40), np.int64), np.zeros(400, np.int64), np.zeros(400, np.int64), []
    grain = 2
    for i in range(400):
        bands = int(rng.integers(1, 41))
        per[i, :bands] = rng.integers(1, int(rng.choice([3, 50, 3000])), bands)
        count[i], tiles[i] = bands, int(rng.integers(1, 3 * bands * grain + 2))  # often too few tiles for the bands
        want.append(S._tiles_for_bands.__wrapped__(tuple(per[i, :bands].tolist()), int(tiles[i]), grain))
    alloc, valid = S._tiles_of_bands(per, count, tiles, grain)
    got = [tuple(alloc[i, : count[i]].tolist()) if valid[i] else () for i in range(400)]
    assert got == want
    assert 50 < sum(map(bool, want)) < 350  # both allocations and refusals


def test_band_cuts_of_every_band_count_at_once_are_the_greedy_cuts():
    rng = np.random.default_rng(2)
    for _ in range(30):
        counts = rng.integers(0, int(rng.choice([2, 5, 400])), int(rng.integers(1, 200))) * (rng.random() < 0.9)
        counts[int(rng.integers(0, counts.size))] += 1  # at least one block
        k_end = int(rng.integers(1, 130))
        per, width, count, widest = S._band_table(counts.astype(np.int64).tobytes(), k_end)
        for sk in range(1, k_end + 1):
            bounds, blocks, wide = S.band_boundaries(counts, sk)
            assert tuple(per[sk - 1, : count[sk - 1]]) == blocks and not per[sk - 1, count[sk - 1] :].any()
            assert tuple(width[sk - 1, : count[sk - 1]]) == tuple(np.diff(bounds)) and widest[sk - 1] == wide


def test_validate_draws_each_static_layout_once_and_keeps_the_row_order(tmp_path, monkeypatch):
    from tilesim.models.linear import measured, timing

    drawn = []
    draw = timing.benchmark_layout  # validate times the benchmark's own pattern (issue 40)
    monkeypatch.setattr(timing, "benchmark_layout", lambda *a: drawn.append(a) or draw(*a))
    timing._layout.cache_clear()
    head = "workload,case,machine,method,precision,m,k,n,density,block,measured_tflops,source\n"
    rows = [f"sparse-matmul,c{i}_{d},bow,static,fp16,256,256,{n},1/{d},16,1.0,test\n"
            for i, n in enumerate((64, 128)) for d in (2, 4, 8, 16, 32)]  # fmt: skip
    path = tmp_path / "cases.csv"
    path.write_text(head + "".join(rows))
    got = measured.validate_sparse(path)
    assert len(drawn) == 5  # five matrices, each batch of one after another (the layout cache keeps 4)
    assert [r["case"] for r in got] == [r.split(",")[1] for r in rows]
    alone = [measured.validate_sparse(_one(tmp_path, head, r))[0]["predicted"] for r in rows]
    assert [r["predicted"] for r in got] == alone


def _one(tmp_path, head: str, row: str):
    path = tmp_path / "one.csv"
    path.write_text(head + row)
    return path
