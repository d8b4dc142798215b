"""``numtile.linalg``: tiled linear algebra (array API ``linalg`` names)."""

from numtile.tiletensor.linalg import (
    cholesky,
    matmul,
    matrix_norm,
    solve,
    solve_triangular,
)
from numtile.tiletensor.manipulation import matrix_transpose
from numtile.tiletensor.reduction import vector_norm

__all__ = [
    "cholesky",
    "matmul",
    "matrix_norm",
    "matrix_transpose",
    "solve",
    "solve_triangular",
    "vector_norm",
]
