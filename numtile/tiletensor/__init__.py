"""TileTensor: layout + one data handle per tile; tiled ops submit tasks.

The op modules are imported here so that the op table (``dispatch``) holds every op as
soon as TileTensor can be used.
"""

from numtile.tiletensor import (
    creation,
    dispatch,
    elementwise,
    fused,
    linalg,
    manipulation,
    random,
    redistribution,
    reduction,
)
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.tensor import TileTensor

__all__ = [
    "Layout",
    "TileTensor",
    "creation",
    "dispatch",
    "elementwise",
    "fused",
    "linalg",
    "manipulation",
    "random",
    "redistribution",
    "reduction",
]
