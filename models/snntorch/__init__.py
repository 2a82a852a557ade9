"""snnTorch's IPU build as a second implementation of SNN training on the same chip.

* :mod:`tilesim.models.snntorch.call` — one ``poptorch_model(data, labels)`` call: the network, the input as the
  host sends it, the named assumptions; :func:`~tilesim.models.snntorch.call.snntorch_step` builds the timed
  step ``run`` and ``validate`` both use;
* :mod:`tilesim.models.snntorch.ops` — the ops of one training call, counted from snnTorch's source;
* :mod:`tilesim.models.snntorch.mechanisms` — what PopART does around them (outlining, the copies around each
  subgraph call, ``MergeDuplicateOps``), each a switchable named assumption;
* :mod:`tilesim.models.snntorch.step` — the call lowered op by op with the project's PopTorch lowering
  (:mod:`tilesim.models.linear.lowering`) and timed; its SRAM;
* :mod:`tilesim.models.snntorch.train` — the dense network trained for real in NumPy;
* :mod:`tilesim.models.snntorch.run` — ``tilesim run --implementation snntorch`` as a library;
* :mod:`tilesim.models.snntorch.measured` — the held-out measured calls (``tilesim validate``);
* :mod:`tilesim.models.snntorch.gap` — every setting of the assumptions against those calls (a report);
* :mod:`tilesim.models.snntorch.cli` — printing and writing the run folder.
"""
