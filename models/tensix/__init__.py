"""Dense matmul as Tenstorrent's TT-Metal library runs it on Tensix cores (2-D multicast matmul
over a grid of cores, 32x32 tiles, math fidelity, operands in L1 or DRAM): the plan per core
(:mod:`tilesim.models.tensix.matmul`), timed through the workload seam, checked against the measured
GEMM tables of Wormhole (fitted) and Blackhole (held out) (:mod:`tilesim.models.tensix.measured`)."""
