"""snnTorch's IPU build as a second implementation of SNN training on the same chip.

* :mod:`tilesim.models.snntorch.ops` — the ops of one training call, counted from snnTorch's source;
* :mod:`tilesim.models.snntorch.step` — the call lowered op by op with the project's PopTorch lowering
  (:mod:`tilesim.models.linear.lowering`) and timed; its SRAM;
* :mod:`tilesim.models.snntorch.train` — the dense network trained for real in NumPy;
* :mod:`tilesim.models.snntorch.run` — ``tilesim run --implementation snntorch`` as a library;
* :mod:`tilesim.models.snntorch.measured` — the held-out measured calls (``tilesim validate``);
* :mod:`tilesim.models.snntorch.cli` — printing and writing the run folder.
"""
