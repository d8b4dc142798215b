"""TileTensor: layout + one data handle per tile; tiled ops submit tasks."""

from numtile.tiletensor.layout import Layout
from numtile.tiletensor.tensor import TileTensor

__all__ = ["Layout", "TileTensor"]
