"""Tiled linear algebra: matmul, Cholesky, LU, triangular and general solves, inverse,
determinants, norms."""

from numtile.tiletensor.linalg.cholesky import cholesky, solve_triangular
from numtile.tiletensor.linalg.lu import SlogdetResult, det, inv, slogdet, solve
from numtile.tiletensor.linalg.matmul import matmul
from numtile.tiletensor.linalg.norms import matrix_norm
from numtile.tiletensor.linalg.products import (
    cross,
    diagonal,
    matrix_power,
    outer,
    tensordot,
    trace,
    vecdot,
)

__all__ = [
    "SlogdetResult",
    "cholesky",
    "det",
    "inv",
    "matmul",
    "matrix_norm",
    "slogdet",
    "solve",
    "solve_triangular",
    # products and diagonals (issue 14, item 4)
    "cross",
    "diagonal",
    "matrix_power",
    "outer",
    "tensordot",
    "trace",
    "vecdot",
]
