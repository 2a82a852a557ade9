"""The Tensix network-on-chip as a data-movement kernel sees it: per-message issue, injection,
multicast path and completion costs (:mod:`tilesim.models.noc.model`, the API the tt-metal stack
calls), TT-Metal's rectangle rule for multicasts, and the check against Tenstorrent's own
data-movement measurements (:mod:`tilesim.models.noc.measured`: ``tilesim validate`` /
``tilesim calibrate`` on ``workload = noc`` rows)."""
