"""tilesim: a discrete-event simulator of tile-distributed manycore processors."""

from tilesim.errors import ConfigError, MappingError, SramOverflowError, TileSimError

__version__ = "0.1.0"

__all__ = ["ConfigError", "MappingError", "SramOverflowError", "TileSimError", "__version__"]
