"""TileTensor: layout + one data handle per tile; tiled ops submit tasks.

The op modules are imported here so that the op table (``dispatch``) holds every op as
soon as TileTensor can be used.
"""

from numtile.tiletensor import (
    assignment,
    auto_fusion,
    creation,
    dispatch,
    elementwise,
    fused,
    fusion,
    indexing,
    interop,
    joining,
    linalg,
    manipulation,
    random,
    rearranging,
    redistribution,
    reduction,
    searching,
    sets,
    sorting,
    structured,
)
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.tensor import TileTensor

__all__ = [
    "assignment",
    "auto_fusion",
    "Layout",
    "TileTensor",
    "creation",
    "dispatch",
    "elementwise",
    "fused",
    "fusion",
    "interop",
    "joining",
    "indexing",
    "linalg",
    "manipulation",
    "random",
    "rearranging",
    "redistribution",
    "reduction",
    "structured",
    "searching",
    "sets",
    "sorting",
]
