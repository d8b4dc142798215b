"""Tile kernels of the tiled Householder QR (PLASMA's geqrt / tsqrt / ttqrt / unmqr / tsmqr),
through LAPACK (``kernel_blas``: ``geqrt``, ``tpqrt``, ``gemqrt``, ``tpmqrt``), and two helpers
that build the results: ``triu_copy`` (R from the factored tiles) and ``eye_fill`` (Q's start);
``qr_explicit`` (``geqrf`` + ``orgqr``: R and the explicit Q of one tile) for TSQR.

Tiles are row-major; LAPACK reads column-major, so each kernel works on a transposed copy.
A tile's reflectors are stored as LAPACK leaves them: ``geqrt`` puts R on and above the
diagonal and the unit lower reflectors V below it; ``tpqrt`` puts R in the top tile and the
reflectors' lower parts into the bottom one (all of it for a square-on-top ``"TS"`` step, its
upper trapezoid for a triangle-on-triangle ``"TT"`` step, ``triangular=True``). The block
reflector factors T of one tile (LAPACK's compact WY form, blocked by ``nb`` columns) are a
``(columns, ib)`` tile ``t``: ``t[j, i]`` is LAPACK's ``T(i, j)``, ``nb = min(ib, k)`` for k
reflectors. Entries outside the ``nb x nb`` upper triangles are zero.

>>> import numpy as np
>>> from numtile.ops_cpu import qr
>>> a = np.array([[3.0, 1.0], [4.0, 2.0]])
>>> t = np.empty((2, 2))
>>> qr.geqrt(a, t)
>>> np.round(np.triu(a), 12).tolist()           # R, as numpy.linalg.qr's (same signs here)
[[-5.0, -2.2], [0.0, 0.4]]
>>> c = np.eye(2)
>>> qr.gemqrt(a, t, c, False)                    # Q = Q @ I
>>> np.round(c @ np.triu(a), 12).tolist()
[[3.0, 1.0], [4.0, 2.0]]
"""

import numpy as np
from numba import njit

from numtile.ops_cpu.kernel_blas import LEFT, NO, adjoint, call


@njit(nogil=True, cache=True)
def _clean(t, k, nb):
    """Zero what LAPACK leaves undefined in the factor tile: outside the nb x nb triangles."""
    for j in range(t.shape[0]):
        start = (j // nb) * nb if nb > 0 else 0
        for i in range(t.shape[1]):
            if j >= k or i > j - start or i >= nb:
                t[j, i] = 0


@njit(nogil=True, cache=True)
def geqrt(a, t):
    """QR of the (m, n) tile a in place: R on and above the diagonal, the reflectors below;
    t (n, ib) gets the block reflector factors. A column-major a is factored without a copy."""
    m, n = a.shape
    k = min(m, n)
    assert t.shape[0] == n and t.shape[1] >= 1, "geqrt: t must be (columns, ib)"
    nb = min(t.shape[1], k)
    if k > 0:
        major = np.ascontiguousarray(a.T)  # a.T itself when a is column-major
        work = np.empty(nb * n, a.dtype)
        info = call("geqrt", major, m, n, nb, major, max(1, m), t, t.shape[1], work, 0)
        assert info == 0, "geqrt: bad argument"
        if major.ctypes.data != a.ctypes.data:
            a[:, :] = major.T
    _clean(t, k, nb)


@njit(nogil=True, cache=True)
def gemqrt(v, t, c, transpose):
    """c = Q^T c (``transpose``; Q^H for complex tiles) or Q c, Q from ``geqrt(v, t)``; c has
    v's rows."""
    m, n = c.shape
    k = min(v.shape[0], v.shape[1])
    assert v.shape[0] == m and t.shape[0] == v.shape[1], "gemqrt: shapes do not agree"
    nb = min(t.shape[1], k)
    if k == 0 or n == 0:
        return
    v_major = np.ascontiguousarray(v.T)
    c_major = np.ascontiguousarray(c.T)
    work = np.empty(nb * n, c.dtype)
    flag = adjoint(c) if transpose else NO
    info = call(
        "gemqrt", c_major, LEFT, flag, m, n, k, nb, v_major, max(1, m), t, t.shape[1],
        c_major, max(1, m), work, 0,
    )  # fmt: skip
    assert info == 0, "gemqrt: bad argument"
    c[:, :] = c_major.T


@njit(inline="always")
def _bottom_rows(b_rows, k, triangular):
    """Rows of the bottom tile a tpqrt step uses, and how many of them form a trapezoid."""
    if triangular:
        rows = min(b_rows, k)
        return rows, rows
    return b_rows, 0


@njit(nogil=True, cache=True)
def tpqrt(a, b, t, triangular):
    """QR of [R; B]: R the upper triangle of a's top n rows, B the (m, n) tile b (only its
    upper trapezoid when ``triangular``). R is overwritten, the reflectors go into b."""
    n = a.shape[1]
    assert a.shape[0] >= n and b.shape[1] == n and t.shape[0] == n, "tpqrt: shapes do not agree"
    m, trapezoid = _bottom_rows(b.shape[0], n, triangular)
    nb = min(t.shape[1], n)
    if n > 0 and m > 0:
        a_major = np.ascontiguousarray(a.T)
        b_major = np.ascontiguousarray(b.T)
        work = np.empty(nb * n, a.dtype)
        info = call(
            "tpqrt", a_major, m, n, trapezoid, nb, a_major, max(1, a.shape[0]), b_major,
            max(1, b.shape[0]), t, t.shape[1], work, 0,
        )  # fmt: skip
        assert info == 0, "tpqrt: bad argument"
        a[:, :] = a_major.T
        b[:, :] = b_major.T
    else:  # no rows below: every reflector is the identity
        t[:, :] = 0
    _clean(t, n if m > 0 else 0, max(nb, 1))


@njit(nogil=True, cache=True)
def tpmqrt(v, t, a, b, transpose, triangular):
    """[a_top; b_top] = Q^T [...] (``transpose``; Q^H for complex tiles) or Q [...], Q from
    ``tpqrt(., v, t)``:
    a_top is a's first k rows (k = v's columns), b_top the rows of b that step used."""
    k = v.shape[1]
    n = a.shape[1]
    assert a.shape[0] >= k and b.shape[1] == n and b.shape[0] == v.shape[0], (
        "tpmqrt: shapes do not agree"
    )
    assert t.shape[0] == k, "tpmqrt: t does not match v"
    m, trapezoid = _bottom_rows(v.shape[0], k, triangular)
    nb = min(t.shape[1], k)
    if k == 0 or n == 0 or m == 0:
        return
    v_major = np.ascontiguousarray(v.T)
    a_major = np.ascontiguousarray(a.T)
    b_major = np.ascontiguousarray(b.T)
    work = np.empty(nb * n, a.dtype)
    flag = adjoint(a) if transpose else NO
    info = call(
        "tpmqrt", a_major, LEFT, flag, m, n, k, trapezoid, nb, v_major, max(1, v.shape[0]), t,
        t.shape[1], a_major, max(1, a.shape[0]), b_major, max(1, b.shape[0]), work, 0,
    )  # fmt: skip
    assert info == 0, "tpmqrt: bad argument"
    a[:, :] = a_major.T
    b[:, :] = b_major.T


@njit(nogil=True, cache=True)
def triu_copy(source, out, diagonal):
    """out = numpy.triu(source[:rows, :columns], diagonal) for out's rows and columns."""
    rows, columns = out.shape
    assert source.shape[0] >= rows and source.shape[1] >= columns, "triu_copy: source too small"
    for r in range(rows):
        for c in range(columns):
            out[r, c] = source[r, c] if c - r >= diagonal else 0


@njit(nogil=True, cache=True)
def eye_fill(out, diagonal):
    """out = numpy.eye(rows, columns, diagonal)."""
    rows, columns = out.shape
    for r in range(rows):
        for c in range(columns):
            out[r, c] = 1 if c - r == diagonal else 0


# geqrt's block width for geqrf's result: on 8192 x 1024 float64 here LAPACK's geqrt with 128
# wide blocks (recursive panels, rank-128 updates) runs at 37 GFLOP/s on one core, geqrf
# (ilaenv's 32) at 22
GEQRT_BLOCK = 128


@njit(nogil=True, cache=True)
def _geqrf(major, m, n, tau, r):
    """geqrf's result on the column-major ``major`` (m, n): R and the reflectors in place,
    tau; computed by geqrt in ``GEQRT_BLOCK``-wide blocks, whose T factors have tau on their
    diagonals. r (k, n) = R. Returns a workspace large enough for orgqr."""
    k = min(m, n)
    nb = max(1, min(GEQRT_BLOCK, k))
    factors = np.empty((max(k, 1), nb), major.dtype)  # column-major T (nb, k)
    work = np.empty(nb * max(n, 1), major.dtype)
    info = call("geqrt", major, m, n, nb, major, m, factors, nb, work, 0)
    assert info == 0, "qr_explicit: bad argument to geqrt"
    for j in range(k):
        tau[j] = factors[j, j % nb]
    query = np.empty(1, major.dtype)
    call("orgqr", major, m, k, k, major, m, tau, query, -1, 0)
    if query[0].real > work.size:  # LAPACK's optimal workspace (a complex number for c/z)
        work = np.empty(int(query[0].real), major.dtype)
    for i in range(k):
        for j in range(n):
            r[i, j] = major[j, i] if j >= i else 0
    return work


@njit(nogil=True, cache=True)
def qr_explicit(a, q, r, form_q):
    """a (m, n) = q[:, :k] @ r with k = min(m, n) (r: (k, n), upper trapezoidal), Q formed
    explicitly when ``form_q`` (LAPACK geqrf, then orgqr); a is left alone, q's columns past
    k too."""
    m, n = a.shape
    k = min(m, n)
    assert r.shape[0] == k and r.shape[1] == n, "qr_explicit: r must be (min(m, n), n)"
    assert not form_q or (q.shape[0] == m and q.shape[1] >= k), "qr_explicit: q too small"
    if k == 0:
        return
    major = np.ascontiguousarray(a.T)  # column-major a
    tau = np.empty(k, a.dtype)
    work = _geqrf(major, m, n, tau, r)
    if form_q:
        info = call("orgqr", major, m, k, k, major, m, tau, work, work.size, 0)
        assert info == 0, "qr_explicit: bad argument to orgqr"
        q[:, :k] = major[:k].T
