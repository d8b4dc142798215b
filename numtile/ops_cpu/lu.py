"""Tile kernels of the tiled LU factorisation with partial pivoting: ``getrf`` of a panel (a
column of tiles stacked into one C-contiguous array) through scipy's LAPACK, and ``laswp``,
the row interchanges it chose, applied to other columns.

Pivots are 0-based and sequential, as LAPACK's ``ipiv`` less one: for i = 0, 1, ... in order,
row i was interchanged with row ``pivots[i]`` (>= i).

>>> import numpy as np
>>> from numtile.ops_cpu import lu
>>> a = np.array([[1.0, 2.0], [3.0, 4.0]])
>>> pivots, info = np.empty(2, np.int32), np.empty(1, np.int32)
>>> lu.getrf(a, pivots, info)
>>> pivots.tolist(), int(info[0]), a.tolist()     # P a = L U with L = [[1, 0], [1/3, 1]]
([1, 1], 0, [[3.0, 4.0], [0.3333333333333333, 0.6666666666666667]])
>>> b = np.array([[10.0], [20.0]])
>>> lu.laswp(b, pivots)
>>> b.ravel().tolist()
[20.0, 10.0]
"""

import numpy as np
from numba import njit

from numtile.ops_cpu.scipy_blas import call

TRANSPOSE_BLOCK = 16  # 16 x 16 blocks: a block's rows stay in L1 (the strides are powers of 2)


@njit(nogil=True, cache=True)
def transpose(source, target):
    """target = source.T, block by block (3x NumPy's copy of a transposed view on a panel)."""
    rows, columns = source.shape
    for i0 in range(0, rows, TRANSPOSE_BLOCK):
        i1 = min(i0 + TRANSPOSE_BLOCK, rows)
        for j0 in range(0, columns, TRANSPOSE_BLOCK):
            for j in range(j0, min(j0 + TRANSPOSE_BLOCK, columns)):
                for i in range(i0, i1):
                    target[j, i] = source[i, j]


@njit(nogil=True, cache=True)
def getrf(a, pivots, info):
    """LU with partial pivoting of the (m, n) matrix a in place (unit lower L below the
    diagonal, U on and above it); pivots[:min(m, n)] gets the row interchanges and info[0]
    LAPACK's info: 0, or the 1-based column of the first exactly zero pivot (the
    factorisation is completed all the same, as LAPACK does)."""
    m, n = a.shape
    k = min(m, n)
    assert pivots.size >= k and info.size >= 1, "getrf: pivots or info too short"
    info[0] = 0
    if k == 0:
        return
    # LAPACK reads column-major: the transpose's C buffer is a's Fortran buffer
    column_major = np.empty((n, m), a.dtype)
    transpose(a, column_major)
    ipiv = np.empty(k, np.int32)
    info[0] = call("getrf", column_major, m, n, column_major, max(1, m), ipiv, 0)
    transpose(column_major, a)
    for i in range(k):
        pivots[i] = ipiv[i] - 1


@njit(nogil=True, cache=True)
def laswp(a, pivots):
    """Interchange rows i and pivots[i] of a, for i = 0, 1, ..., pivots.size - 1 in order."""
    for i in range(pivots.size):
        p = pivots[i]
        assert i <= p < a.shape[0], "laswp: pivot out of range"
        if p != i:
            for c in range(a.shape[1]):
                a[i, c], a[p, c] = a[p, c], a[i, c]
