"""Collective operations between chips (all_reduce, all_gather, reduce_scatter, all_to_all) on
lines and rings of chips, as Tenstorrent's CCL runs them over Ethernet: the data movement as
paths over the machine's chip links (:mod:`tilesim.models.collective.algorithms`, with a NumPy executor
that checks the paths compute the collective), timed by the core's engine through the workload
seam (:mod:`tilesim.models.collective.workload`), checked against measured runs
(:mod:`tilesim.models.collective.measured`)."""
