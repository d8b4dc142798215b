"""``numtile.linalg``: tiled linear algebra (array API ``linalg`` names)."""

from numtile.tiletensor.linalg import (
    cholesky,
    det,
    inv,
    matmul,
    matrix_norm,
    slogdet,
    solve,
    solve_triangular,
)
from numtile.tiletensor.manipulation import matrix_transpose
from numtile.tiletensor.reduction import vector_norm

__all__ = [
    "cholesky",
    "det",
    "inv",
    "matmul",
    "matrix_norm",
    "matrix_transpose",
    "slogdet",
    "solve",
    "solve_triangular",
    "vector_norm",
]
