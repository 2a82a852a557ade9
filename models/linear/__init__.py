"""Linear layers for the butterfly-on-IPU study (Shekofteh, Alles & Fröning).

* :mod:`tilesim.models.linear.layers` — dense, low-rank, circulant, fastfood, butterfly, pixelfly, CSR
  sparse layers (forward/backward, assembled dense matrix) and the skewed-shape matmul;
* :mod:`tilesim.models.linear.shl` — the single-hidden-layer CIFAR-10 model with Table 4's exact counts;
* :mod:`tilesim.models.linear.planner` — matmul tile planner (parallel and serial splits, availableMemoryProportion,
  partials type, ``explain_plan``), BSP :class:`Phase` records, memory overheads;
* :mod:`tilesim.models.linear.blocksparse` — static block-sparse x dense matmul planned by non-zero blocks (PopSparse);
* :mod:`tilesim.models.linear.schedules` — layers as sequences of phases for the timing layer;
* :mod:`tilesim.models.linear.steps` — backward passes, fastfood, circulant, element-wise phases, SGD update;
* :mod:`tilesim.models.linear.lowering` — op-by-op (PopTorch) lowering of the reference PyTorch code,
  PopLibs vertex costs;
* :mod:`tilesim.models.linear.timing` — schedules -> BSP program (engine) + SRAM ledger; layer and SHL steps;
* :mod:`tilesim.models.linear.cli` — ``tilesim shl | layer | exchange-bench``;
* :mod:`tilesim.models.linear.kernels` — the Numba kernels (the only module importing numba).
"""

from tilesim.running.lazy import lazy_exports

# loaded on first use (tilesim.running.lazy): importing the package alone imports neither Numba nor networkx
__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "tilesim.models.linear.blocksparse": (
            "BlockSparsePlan",
            "plan_block_sparse",
        ),
        "tilesim.models.linear.layers": (
            "BlockSparseLinear",
            "ButterflyLinear",
            "CirculantLinear",
            "CsrLinear",
            "DenseLinear",
            "FastfoodLinear",
            "LowRankLinear",
            "PixelflyLinear",
            "matmul",
            "pixelfly_layout",
            "random_block_layout",
            "random_csr",
            "skewed_shape",
        ),
        "tilesim.models.linear.phases": (
            "OverheadConstants",
            "Phase",
            "SuperstepCosts",
            "overhead_breakdown",
            "overhead_bytes_per_tile",
        ),
        "tilesim.models.linear.planner": (
            "MatmulPlan",
            "PlanTarget",
            "explain_plan",
            "plan_matmul",
        ),
        "tilesim.models.linear.schedules": (
            "LayerSchedule",
            "butterfly_schedule",
            "dense_schedule",
            "lowrank_schedule",
            "pixelfly_schedule",
        ),
        "tilesim.models.linear.shl": (
            "PIXELFLY_SHL",
            "SHL_METHODS",
            "TABLE4_PARAMS",
            "SHLModel",
            "compression_ratio",
            "shl_model",
        ),
    },
)
