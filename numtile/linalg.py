"""``numtile.linalg``: tiled linear algebra (array API ``linalg`` names)."""

from numtile.tiletensor.linalg import (  # products and diagonals (issue 14, item 4)
    cholesky,
    cross,
    det,
    diagonal,
    inv,
    matmul,
    matrix_norm,
    matrix_power,
    outer,
    slogdet,
    solve,
    solve_triangular,
    tensordot,
    trace,
    vecdot,
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
    # products and diagonals (issue 14, item 4)
    "cross",
    "diagonal",
    "matrix_power",
    "outer",
    "tensordot",
    "trace",
    "vecdot",
    # QR and the spectral functions (issue 14)
    "eigh",
    "eigvalsh",
    "matrix_rank",
    "pinv",
    "qr",
    "svd",
    "svdvals",
]
