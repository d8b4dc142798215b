"""Tiled linear algebra: matmul, Cholesky, LU, triangular and general solves, inverse,
determinants, norms, QR and the spectral functions."""

from numtile.tiletensor.linalg.cholesky import cholesky, solve_triangular
from numtile.tiletensor.linalg.lu import SlogdetResult, det, inv, slogdet, solve
from numtile.tiletensor.linalg.matmul import matmul
from numtile.tiletensor.linalg.norms import matrix_norm
from numtile.tiletensor.linalg.qr import QRResult, qr

__all__ = [
    "QRResult",
    "SlogdetResult",
    "cholesky",
    "det",
    "inv",
    "matmul",
    "matrix_norm",
    "qr",
    "slogdet",
    "solve",
    "solve_triangular",
]
