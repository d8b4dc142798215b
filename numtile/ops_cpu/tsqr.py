"""The CPU kernel of TSQR's leaves: R of a row tile (LAPACK ``geqrf``) and, unless the tile's R
is well conditioned, its explicit Q (``orgqr``).

A leaf's Q only ever enters TSQR's result as Q_i F_i, F_i the leaf's (k, k) factor from the
tree. When R_i is well conditioned, Q_i = A_i R_i^-1 to within eps * cond(R_i), so Q_i F_i =
A_i (R_i^-1 F_i): one small triangular solve and the GEMM the leaf needs anyway, instead of
``orgqr`` (as many flops as ``geqrf``). The test is the Frobenius condition number
||R||_F ||R^-1||_F (an upper bound of the 2-norm one; R^-1 by ``trtri``, n^3 / 3 flops) against
the caller's limit; a leaf over it, or that is not square-topped (fewer rows than columns),
forms Q with ``orgqr`` as before.

>>> import numpy as np
>>> from numtile.ops_cpu import tsqr
>>> a = np.array([[3.0, 1.0], [4.0, 2.0], [0.0, 1.0]])
>>> q, r, flag = np.empty((3, 2)), np.empty((2, 2)), np.empty(1, np.int64)
>>> tsqr.qr_leaf(a, q, r, flag, 100.0)
>>> int(flag[0]), bool(np.allclose(a @ np.linalg.inv(r) @ r, a))  # well conditioned: no Q
(1, True)
>>> tsqr.qr_leaf(a, q, r, flag, 0.0)                              # Q formed
>>> int(flag[0]), bool(np.allclose(q @ r, a))
(0, True)
"""

import numpy as np
from numba import njit

from numtile.ops_cpu.kernel_blas import NO, UPPER, call
from numtile.ops_cpu.lu import transpose
from numtile.ops_cpu.qr import _geqrf


@njit(nogil=True, cache=True)
def _well_conditioned(major, n, limit):
    """Whether the R (n, n) on and above the diagonal of the column-major ``major`` has
    ||R||_F ||R^-1||_F <= limit."""
    triangle = np.zeros((n, n), major.dtype)  # column-major R
    for j in range(n):
        triangle[j, : j + 1] = major[j, : j + 1]
    norm = np.sqrt(np.sum(triangle * triangle))
    if call("trtri", triangle, UPPER, NO, n, triangle, n, 0) != 0:
        return False  # an exactly zero diagonal
    return norm * np.sqrt(np.sum(triangle * triangle)) <= limit


@njit(nogil=True, cache=True)
def qr_leaf(a, q, r, flag, limit):
    """a (m, n) = Q R: r (k, n) = R (k = min(m, n)); flag[0] = 1 when m >= n and R's
    Frobenius condition number is at most ``limit`` (q left alone: Q = a R^-1), else 0 and
    q[:, :k] = Q (geqrf + orgqr, as ``qr_explicit``)."""
    m, n = a.shape
    k = min(m, n)
    assert r.shape[0] == k and r.shape[1] == n, "qr_leaf: r must be (min(m, n), n)"
    assert q.shape[0] == m and q.shape[1] >= k, "qr_leaf: q too small"
    flag[0] = 0
    if k == 0:
        return
    major = np.empty((n, m), a.dtype)  # column-major a
    transpose(a, major)
    tau = np.empty(k, a.dtype)
    work = _geqrf(major, m, n, tau, r)
    if m >= n and limit > 0 and _well_conditioned(major, n, limit):
        flag[0] = 1
        return
    info = call("orgqr", major, m, k, k, major, m, tau, work, work.size, 0)
    assert info == 0, "qr_leaf: bad argument to orgqr"
    transpose(major[:k], q[:, :k])
