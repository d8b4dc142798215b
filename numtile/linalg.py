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
from numtile.tiletensor.linalg.qr import qr
from numtile.tiletensor.linalg.spectral import (
    eigh,
    eigvalsh,
    matrix_rank,
    pinv,
    svd,
    svdvals,
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
    # QR and the spectral functions (issue 14)
    "eigh",
    "eigvalsh",
    "matrix_rank",
    "pinv",
    "qr",
    "svd",
    "svdvals",
]
