"""Tiled linear algebra: matmul, Cholesky, LU, triangular and general solves, inverse,
determinants, norms, QR and the spectral functions."""

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
from numtile.tiletensor.linalg.qr import QRResult, qr
from numtile.tiletensor.linalg.spectral import (
    EighResult,
    SVDResult,
    eigh,
    eigvalsh,
    matrix_rank,
    pinv,
    svd,
    svdvals,
)

__all__ = [
    "EighResult",
    "QRResult",
    "SVDResult",
    "SlogdetResult",
    "cholesky",
    "det",
    "eigh",
    "eigvalsh",
    "inv",
    "matmul",
    "matrix_norm",
    "matrix_rank",
    "pinv",
    "qr",
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
    "svd",
    "svdvals",
]
