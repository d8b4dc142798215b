"""Tile kernels of the tiled factorisations: potrf (Cholesky of a tile) and the BLAS-3 updates
trsm and syrk, through the kernels' BLAS/LAPACK (``kernel_blas``) on row-major tiles.

Example (the tasks of a tiled right-looking Cholesky, on one 2 x 2 grid of tiles):

>>> import numpy as np
>>> from numtile.ops_cpu import factorizations
>>> x = np.random.default_rng(0).standard_normal((4, 4))
>>> spd = x @ x.T + 4 * np.eye(4)
>>> a00, a10, a11 = spd[:2, :2].copy(), spd[2:, :2].copy(), spd[2:, 2:].copy()
>>> factorizations.potrf(a00)                                      # L00
0
>>> factorizations.trsm(a00, a10, False, True, True, False, 1.0)   # L10 = A10 L00^-T
>>> factorizations.syrk(a10, a11, False, -1.0, 1.0)                # A11 -= L10 L10^T (lower part)
>>> factorizations.potrf(a11)                                      # L11
0
>>> bool(np.allclose(a11, np.linalg.cholesky(spd)[2:, 2:]))
True
"""

import numpy as np
from numba import njit

from numtile.ops_cpu.kernel_blas import (
    CONJUGATE_TRANSPOSE,
    LEFT,
    LOWER,
    NO,
    RIGHT,
    TRANSPOSE,
    UNIT,
    UPPER,
    call,
    leading,
    operation,
)


@njit(nogil=True, cache=True)
def potrf(a):
    """Cholesky a = L @ L.T (L @ L^H for complex a) in place: L in the lower triangle, zeros
    above it; reads only the lower triangle of a. Returns LAPACK's info: 0, or the order of
    the first leading minor that is not positive definite or whose pivot is NaN (a then holds
    a partial factor), whichever library runs it."""
    n = a.shape[0]
    assert a.shape[1] == n, "potrf: a must be square"
    # Row-major lower is column-major upper, and a = U^T U there means a = L L^T here (for a
    # Hermitian a the buffer is conj(a) = U^H U, so a = L L^H with L = U^T).
    info = call("potrf", a, UPPER, n, a, leading(a), 0)
    if info == 0:
        # a NaN pivot fails as in reference LAPACK and oneMKL; OpenBLAS lets it through
        for j in range(n):
            if np.isnan(a[j, j].real):
                info = j + 1
                break
    for i in range(n):
        a[i, i + 1 :] = 0
    return info


@njit(nogil=True, cache=True)
def trsm(a, b, left, lower, trans_a, unit_diagonal, alpha):
    """Solve in place in b: op(a) @ x = alpha * b when left, else x @ op(a) = alpha * b, for a
    triangular a (lower or upper, unit diagonal or not); op(a) = a.T when trans_a is True,
    the conjugate transpose a^H when it is 2."""
    m, n = b.shape
    order = m if left else n
    assert a.shape[0] == order and a.shape[1] == order, "trsm: a does not match b"
    # Column-major, the transposed system has the other side and the other triangle; the
    # operation stays ((a^H)^T = conj(a) is the buffer's conjugate transpose).
    call(
        "trsm",
        b,
        RIGHT if left else LEFT,
        UPPER if lower else LOWER,
        operation(trans_a),
        UNIT if unit_diagonal else NO,
        n,
        m,
        float(alpha),
        a,
        leading(a),
        b,
        leading(b),
    )


@njit(nogil=True, cache=True)
def syrk(a, c, trans_a, alpha, beta):
    """c = alpha * op(a) @ op(a).T + beta * c on the lower triangle of c only (the strictly
    upper part is neither read nor written); op(a) = a.T when trans_a; c ignored if beta == 0."""
    n = c.shape[0]
    k = a.shape[0] if trans_a else a.shape[1]
    assert c.shape[1] == n and a.shape[1 if trans_a else 0] == n, "syrk: shapes do not agree"
    # Column-major, a's buffer is a.T: op(a) @ op(a).T needs the opposite flag.
    call(
        "syrk",
        c,
        UPPER,
        NO if trans_a else TRANSPOSE,
        n,
        k,
        float(alpha),
        a,
        leading(a),
        float(beta),
        c,
        leading(c),
    )


@njit(nogil=True, cache=True)
def herk(a, c, trans_a, alpha, beta):
    """syrk's Hermitian twin for complex tiles: c = alpha * op(a) @ op(a)^H + beta * c on the
    lower triangle of c only, alpha and beta real; op(a) = a^H when trans_a."""
    n = c.shape[0]
    k = a.shape[0] if trans_a else a.shape[1]
    assert c.shape[1] == n and a.shape[1 if trans_a else 0] == n, "herk: shapes do not agree"
    # Column-major, c's buffer is c^T = conj(c): conj(op(a)) op(a)^T, the opposite operation
    call(
        "herk",
        c,
        UPPER,
        NO if trans_a else CONJUGATE_TRANSPOSE,
        n,
        k,
        float(alpha),
        a,
        leading(a),
        float(beta),
        c,
        leading(c),
    )
