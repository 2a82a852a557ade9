"""The 3×3 Gaussian-blur stencil of Louw & McIntosh-Smith (low-level Poplar) on 1-16 GC2 IPUs.

``partition`` (the authors' split over IPUs, tiles, workers) → ``geometry`` (per-tile halo
traffic and copies) → ``costs`` (codelet and copy cycles) → ``workload`` (BSP program, memory
ledger, timing) ; ``kernels`` / ``reference`` blur for real; ``cli`` is ``tilesim stencil``.
Measured cases: ``cases/`` (copied from calibration/multi-ipu with its README).
"""
