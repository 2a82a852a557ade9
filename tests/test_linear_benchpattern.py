"""The PopSparse benchmark's own sparsity pattern: libstdc++'s std::shuffle over minstd_rand0 (issue 40)."""

import shutil
import subprocess

import numpy as np
import pytest

from tilesim.errors import ConfigError
from tilesim.models.linear.benchpattern import bench_block_count, bench_shuffle, benchmark_layout, minstd_state
from tilesim.models.linear.shuffle_kernel import shuffle_minstd, uniform_below

# minstd_rand0(123): x <- 16807 x mod (2^31 - 1), counted by hand
DRAWS = (123 * 16807, 2067261 * 16807 % 2147483647, 384717275 * 16807 % 2147483647)


def test_minstd_draws_counted_by_hand():
    assert DRAWS == (2067261, 384717275, 2017463455)
    assert minstd_state(123) == 123 and minstd_state(0) == 1 and minstd_state(2147483647) == 1
    # d{0, 1}: scaling = (2^31 - 3) // 2 = 1073741822; the first draw 2067261 - 1 is below it: 0
    assert uniform_below(123, 1) == (0, 2067261)
    # d{0, 3}: scaling = 536870911; 2017463455 - 1 = 3 x 536870911 + 406850721: 3
    assert uniform_below(384717275, 3) == (3, 2017463455)
    # d{0, 1} rejects a draw at or past 2 x 1073741822 = 2^31 - 4: from the state s with 16807 s = -1 mod M the
    # engine gives 2^31 - 2 (draw 2^31 - 3, rejected), then 16807 (2^31 - 2) mod M = M - 16807 (draw M - 16808: 1)
    s = -pow(16807, -1, 2147483647) % 2147483647
    assert uniform_below(s, 1) == ((2147483647 - 16808) // 1073741822, 2147483647 - 16807) == (1, 2147466840)


def test_pair_path_shuffle_traced_by_hand():
    # 4 ids (4 x 4 / 2 < 2^31 - 3: the pair path). Even: ids[1] <-> ids[d{0, 1} = 0] -> 1 0 2 3; then one draw
    # d{0, 3 x 4 - 1} (scaling 178956970): 384717274 // 178956970 = 2 -> ids[2] <-> ids[2 // 4 = 0] -> 2 0 1 3,
    # ids[3] <-> ids[2 % 4 = 2] -> 2 0 3 1 (what g++ 12's libstdc++ prints for this shuffle)
    ids = np.arange(4, dtype=np.uint32)
    assert shuffle_minstd(ids, 123) == DRAWS[1]
    assert ids.tolist() == [2, 0, 3, 1]
    assert bench_shuffle(4).tolist() == [2, 0, 3, 1]


def _simple_path(n: int, state: int) -> list[int]:
    ids = list(range(n))
    for i in range(1, n):
        j, state = uniform_below(state, i)
        ids[i], ids[j] = ids[j], ids[i]
    return ids


def test_simple_path_above_46340_ids_one_draw_per_id():
    # (2^31 - 3) // 46341 = 46340 < 46341: one draw per id; by hand its first draws are d{0, 1} = 0, d{0, 2} = 0
    # (384717274 // 715827881), d{0, 3} = 3: ids 2 0 1 3 after i = 3
    assert [uniform_below(s, i)[0] for s, i in ((123, 1), (DRAWS[0], 2), (DRAWS[1], 3))] == [0, 0, 3]
    assert bench_shuffle(46341).tolist() == _simple_path(46341, 123)
    # at 46340 ids it is still the pair path, which draws half as often and so differs
    assert bench_shuffle(46340).tolist() != _simple_path(46340, 123)


def test_block_count_is_a_float32_product():
    # createProblem: ceil(float density * unsigned blocks) in float; 1/7 of 21 blocks is 3.0000002 in float32
    assert bench_block_count(21, 1 / 7) == 4 and bench_block_count(4096, 1 / 16) == 256
    lay = benchmark_layout(48, 112, 16, 1 / 7)
    assert lay.shape == (3, 7) and lay.sum() == 4
    with pytest.raises(ConfigError, match="multiple of block"):
        benchmark_layout(40, 48, 16, 1 / 8)


CXX = r"""
#include <algorithm>
#include <cmath>
#include <iostream>
#include <numeric>
#include <random>
#include <string>
#include <vector>
int main(int argc, char** argv) {  // createProblem's pattern, as ipu/matmul_bench.cpp draws it
    unsigned rowBlocks = std::stoul(argv[1]), columnBlocks = std::stoul(argv[2]);
    float density = std::stof(argv[3]);
    std::default_random_engine generator(123u);
    auto denseBlocks = rowBlocks * columnBlocks;
    auto nonzeroBlocks = static_cast<unsigned>(std::ceil(density * denseBlocks));
    std::vector<unsigned> ids(denseBlocks);
    std::iota(ids.begin(), ids.end(), 0u);
    std::shuffle(ids.begin(), ids.end(), generator);
    for (unsigned i = 0; i < nonzeroBlocks; ++i)
        std::cout << ids[i] / columnBlocks << ' ' << ids[i] % columnBlocks << '\n';
}
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ to build libstdc++'s own shuffle")
def test_layout_is_what_libstdcxx_draws(tmp_path):
    src, exe = tmp_path / "pattern.cpp", tmp_path / "pattern"
    src.write_text(CXX)
    subprocess.run(["g++", "-O2", "-std=c++17", "-o", str(exe), str(src)], check=True)
    # pair path (1024², block 16; an odd count), simple path (1024², block 4; 2048², block 1), a float32 count
    for m, k, block, density in ((1024, 1024, 16, 1 / 8), (48, 80, 16, 1 / 3), (1024, 1024, 4, 1 / 16),
                                 (2048, 2048, 1, 1 / 32), (48, 112, 16, 1 / 7)):  # fmt: skip
        out = subprocess.run([str(exe), str(m // block), str(k // block), repr(density)], capture_output=True,
                             text=True, check=True).stdout  # fmt: skip
        rc = np.array(out.split(), dtype=np.int64).reshape(-1, 2)
        want = np.zeros((m // block, k // block), dtype=bool)
        want[rc[:, 0], rc[:, 1]] = True
        assert len(rc) == bench_block_count((m // block) * (k // block), density)
        assert np.array_equal(benchmark_layout(m, k, block, density), want), (m, k, block, density)
