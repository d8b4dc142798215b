"""trsm, syrk and herk through cuBLAS on a real GPU, the ``@cuda.jit`` twins
(``factorizations``) elsewhere: the launchers ``numtile.ops_cuda`` exports.

The calls are the CPU twins' BLAS calls: column-major cuBLAS reads a row-major tile as its
transpose, so trsm solves the transposed system (the other side, the other triangle, the
operation kept: (a^H)^T = conj(a) is the buffer's conjugate transpose), and syrk/herk update
the buffer's upper triangle (the tile's lower one) with the opposite operation. Tiles go to
cuBLAS when they are C-contiguous and of one float/complex dtype; herk needs CuPy's
``cherk``/``zherk``, which CuPy's cuBLAS module lacks (it has syrk, not herk), so it stays
on the twin where they are missing. An empty inner dimension (syrk's c = beta * c) is left
to the twin, as ``gemm`` does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from numtile.ops_cuda import factorizations, matmul
from numtile.ops_cuda.launch import check_argument
from numtile.ops_cuda.libraries import FLOATS, on_stream, pointer, usable

__all__ = ["herk", "syrk", "trsm"]


def _contiguous(cp: Any, *arrays) -> Any:
    """cp where every array is C-contiguous, else None."""
    return cp if cp is not None and all(x.is_c_contiguous() for x in arrays) else None


def trsm(
    a: Any,
    b: Any,
    left: bool,
    lower: bool,
    trans_a: bool,
    unit_diagonal: bool,
    alpha: float,
    *,
    stream: Any = 0,
) -> None:
    """Solve in place in b: op(a) @ x = alpha * b when left, else x @ op(a) = alpha * b;
    op(a) = a.T when trans_a is True, a^H when it is 2."""
    m, n = b.shape
    order = m if left else n
    check_argument(a.shape[0] == order and a.shape[1] == order, "trsm: a does not match b")
    if m == 0 or n == 0:
        return
    cp = _contiguous(usable(a, b), a, b)
    if cp is None:
        factorizations.trsm(a, b, left, lower, trans_a, unit_diagonal, alpha, stream=stream)
        return
    dtype = np.dtype(b.dtype)
    scalar = np.array([alpha], dtype)  # read by cuBLAS at the call (host pointer mode)
    with on_stream(cp, stream) as session:
        blas = session.blas
        getattr(blas, FLOATS[dtype] + "trsm")(
            session.handle,
            blas.CUBLAS_SIDE_RIGHT if left else blas.CUBLAS_SIDE_LEFT,
            blas.CUBLAS_FILL_MODE_UPPER if lower else blas.CUBLAS_FILL_MODE_LOWER,
            matmul._cublas_operation(blas, trans_a, dtype),
            blas.CUBLAS_DIAG_UNIT if unit_diagonal else blas.CUBLAS_DIAG_NON_UNIT,
            n,
            m,
            scalar.ctypes.data,
            pointer(a),
            max(1, order),
            pointer(b),
            max(1, n),
        )


def _rank_k(name: str, a, c, trans_a, alpha, beta, scalar_dtype, stream) -> bool:
    """c = alpha op(a) op(a)^T (^H for herk) + beta c on c's lower triangle through cuBLAS's
    ``<prefix><name>``; False where cuBLAS does not apply."""
    cp = _contiguous(usable(a, c), a, c)
    n = c.shape[0]
    k = a.shape[0] if trans_a else a.shape[1]
    if cp is None or k == 0:
        return False
    if n == 0:
        return True
    dtype = np.dtype(c.dtype)
    function = getattr(cp.cuda.cublas, FLOATS[dtype] + name, None)
    if function is None:
        return False
    scalars = np.array([alpha, beta], scalar_dtype)  # herk's are real, syrk's of c's dtype
    with on_stream(cp, stream) as session:
        blas = session.blas
        # column-major the buffer of a is a^T: op(a) op(a)^T needs the opposite operation
        other = blas.CUBLAS_OP_C if name == "herk" else blas.CUBLAS_OP_T
        function(
            session.handle,
            blas.CUBLAS_FILL_MODE_UPPER,
            blas.CUBLAS_OP_N if trans_a else other,
            n,
            k,
            scalars.ctypes.data,
            pointer(a),
            max(1, a.shape[1]),
            scalars.ctypes.data + scalars.itemsize,
            pointer(c),
            max(1, n),
        )
    return True


def _check_rank_k(name: str, a, c, trans_a) -> None:
    n = c.shape[0]
    check_argument(
        a.ndim == 2 and c.ndim == 2 and c.shape[1] == n and a.shape[1 if trans_a else 0] == n,
        f"{name}: shapes do not agree",
    )


def syrk(a: Any, c: Any, trans_a: bool, alpha: float, beta: float, *, stream: Any = 0) -> None:
    """c = alpha * op(a) @ op(a).T + beta * c on the lower triangle of c only (upper untouched)."""
    _check_rank_k("syrk", a, c, trans_a)
    if not _rank_k("syrk", a, c, trans_a, alpha, beta, c.dtype, stream):
        factorizations.syrk(a, c, trans_a, alpha, beta, stream=stream)


def herk(a: Any, c: Any, trans_a: bool, alpha: float, beta: float, *, stream: Any = 0) -> None:
    """c = alpha * op(a) @ op(a)^H + beta * c on c's lower triangle (op(a) = a^H when trans_a),
    for complex tiles; c is not read when beta == 0."""
    _check_rank_k("herk", a, c, trans_a)
    real = np.empty(0, c.dtype).real.dtype
    if not _rank_k("herk", a, c, trans_a, alpha, beta, real, stream):
        factorizations.herk(a, c, trans_a, alpha, beta, stream=stream)
