"""CUDA kernels of the tiled Householder QR: ``geqrt``, ``gemqrt``, ``tpqrt``, ``tpmqrt``,
``triu_copy`` and ``eye_fill`` (twins of ``numtile.ops_cpu.qr``, same signatures plus
``stream``).

The factorisations are unblocked Householder QR in one block (a fallback for the simulator
and small tiles; a real GPU would call cuSOLVER's geqrf/ormqr): for each column one thread
forms the reflector as LAPACK's ``larfg`` does (beta = -sign(Re alpha) * norm, real; tau =
(beta - alpha) / beta), then one thread per trailing column applies H^H = I - conj(tau) v v^H.
The block factors T are then built in LAPACK's blocked layout (``nb`` columns per block,
``larft``'s recurrence T[:j, j] = -tau_j T[:j, :j] (V[:, :j]^H v_j)), so a tile factored on
one backend can be applied on the other. The apply kernels use only T's diagonal (each
reflector's tau) and apply the reflectors one by one, one thread per column: Q^H c as
H_1^H .. H_k^H with conj(tau), Q c as H_k .. H_1 with tau. The same kernels serve real and
complex tiles (float32/64, complex64/128): the conjugates are identities on real values.
"""

from __future__ import annotations

import math
from typing import Any

from numba import cuda

from numtile.ops_cuda.launch import block, check_argument, grid

__all__ = ["eye_fill", "gemqrt", "geqrt", "tpmqrt", "tpqrt", "triu_copy"]


@cuda.jit(device=True)
def _smaller(x, y):  # the builtin min does not compile for a real GPU here
    return x if x < y else y


@cuda.jit(device=True)
def _conj(x):
    return x.conjugate()


@cuda.jit(device=True)
def _abs2(x):
    """|x|^2 in x's real type."""
    return x.real * x.real + x.imag * x.imag


@cuda.jit(device=True)
def _reflector(alpha, norm_squared):
    """(beta, tau, scale) of LAPACK's larfg for alpha and ||x||^2 (scale multiplies x), in
    alpha's type; beta is real."""
    if norm_squared == 0 and alpha.imag == 0:
        return alpha, alpha * 0, alpha * 0 + 1
    norm = math.sqrt(_abs2(alpha) + norm_squared)
    if alpha.real >= 0:
        norm = -norm
    beta = alpha * 0 + norm
    return beta, (beta - alpha) / beta, 1 / (alpha - beta)


@cuda.jit(device=True)
def triangular_times(t, start, j, jj, tau):
    """Row j of the factor tile holds z = V[:, block's first jj]^T v_j: make it T's column,
    -tau * T[:jj, :jj] z (in place: row ii only reads z[l] for l >= ii)."""
    for ii in range(jj):
        total = t[j, ii] * 0
        for ll in range(ii, jj):
            total += t[start + ll, ii] * t[j, ll]
        t[j, ii] = -tau * total


@cuda.jit(device=True)
def _geqrt_factors(a, t, k, nb):
    """T's off-diagonal entries of geqrt's reflectors (unit diagonal, below it in a)."""
    tid = cuda.threadIdx.x
    threads = cuda.blockDim.x
    for start in range(0, k, nb):
        for jj in range(1, _smaller(nb, k - start)):
            j = start + jj
            for ii in range(tid, jj, threads):
                i = start + ii
                total = _conj(a[j, i])  # conj(v_i[j]) * v_j[j], v_j[j] = 1
                for r in range(j + 1, a.shape[0]):
                    total += _conj(a[r, i]) * a[r, j]
                t[j, ii] = total
            cuda.syncthreads()
            if tid == 0:
                triangular_times(t, start, j, jj, t[j, jj])
            cuda.syncthreads()


@cuda.jit(device=True)
def _reflect(v, j, first, last, tau, top, tail, column):
    """Apply the reflector I - tau [1; v[first:last, j]] [1; v[first:last, j]]^H to the column
    [top[j, column]; tail[first:last, column]] (its unit entry meets row j of ``top``)."""
    w = top[j, column]
    for r in range(first, last):
        w += _conj(v[r, j]) * tail[r, column]
    w *= tau
    top[j, column] -= w
    for r in range(first, last):
        tail[r, column] -= w * v[r, j]


@cuda.jit
def _geqrt_kernel(a, t, nb):
    m = a.shape[0]
    n = a.shape[1]
    k = _smaller(m, n)
    tid = cuda.threadIdx.x
    threads = cuda.blockDim.x
    for index in range(tid, t.shape[0] * t.shape[1], threads):
        t[index // t.shape[1], index % t.shape[1]] = 0
    cuda.syncthreads()
    for j in range(k):
        if tid == 0:
            norm_squared = a[0, 0].real * 0
            for r in range(j + 1, m):
                norm_squared += _abs2(a[r, j])
            beta, tau, scale = _reflector(a[j, j], norm_squared)
            a[j, j] = beta
            for r in range(j + 1, m):
                a[r, j] *= scale
            t[j, j % nb] = tau
        cuda.syncthreads()
        tau = _conj(t[j, j % nb])  # H^H
        for c in range(j + 1 + tid, n, threads):
            _reflect(a, j, j + 1, m, tau, a, a, c)
        cuda.syncthreads()
    _geqrt_factors(a, t, k, nb)


def geqrt(a: Any, t: Any, *, stream: Any = 0) -> None:
    """QR of the tile a in place (R above, reflectors below); t gets the block factors."""
    m, n = a.shape
    check_argument(t.shape[0] == n and t.shape[1] >= 1, "geqrt: t must be (columns, ib)")
    nb = max(1, min(t.shape[1], m, n))
    _geqrt_kernel[1, block(), stream](a, t, nb)


@cuda.jit
def _gemqrt_kernel(v, t, c, transpose, nb):
    m = c.shape[0]
    k = _smaller(v.shape[0], v.shape[1])
    for column in range(cuda.grid(1), c.shape[1], cuda.gridsize(1)):
        for step in range(k):
            j = step if transpose else k - 1 - step
            tau = _conj(t[j, j % nb]) if transpose else t[j, j % nb]
            _reflect(v, j, j + 1, m, tau, c, c, column)


def gemqrt(v: Any, t: Any, c: Any, transpose: bool, *, stream: Any = 0) -> None:
    """c = Q^H c (``transpose``; Q^T for real tiles) or Q c, Q from ``geqrt(v, t)``."""
    m, n = c.shape
    check_argument(v.shape[0] == m and t.shape[0] == v.shape[1], "gemqrt: shapes do not agree")
    k = min(v.shape)
    if k == 0 or n == 0:
        return
    nb = min(t.shape[1], k)
    _gemqrt_kernel[grid(n), block(), stream](v, t, c, bool(transpose), nb)


@cuda.jit(device=True)
def _used_rows(rows, trapezoid, j):
    """Rows of column j of the bottom tile a tpqrt reflector touches (LAPACK's P)."""
    return rows - trapezoid + _smaller(trapezoid, j + 1)


@cuda.jit
def _tpqrt_kernel(a, b, t, rows, trapezoid, nb):
    n = a.shape[1]
    tid = cuda.threadIdx.x
    threads = cuda.blockDim.x
    for index in range(tid, t.shape[0] * t.shape[1], threads):
        t[index // t.shape[1], index % t.shape[1]] = 0
    cuda.syncthreads()
    if rows == 0:
        return
    for j in range(n):
        used = _used_rows(rows, trapezoid, j)
        if tid == 0:
            norm_squared = a[0, 0].real * 0
            for r in range(used):
                norm_squared += _abs2(b[r, j])
            beta, tau, scale = _reflector(a[j, j], norm_squared)
            a[j, j] = beta
            for r in range(used):
                b[r, j] *= scale
            t[j, j % nb] = tau
        cuda.syncthreads()
        tau = _conj(t[j, j % nb])  # H^H
        for c in range(j + 1 + tid, n, threads):
            _reflect(b, j, 0, used, tau, a, b, c)
        cuda.syncthreads()
    # T from the reflectors' bottom parts (column i: rows 0.._used_rows(i) - 1 of b; their
    # top parts are distinct unit vectors, orthogonal to each other)
    for start in range(0, n, nb):
        for jj in range(1, _smaller(nb, n - start)):
            j = start + jj
            for ii in range(tid, jj, threads):
                i = start + ii
                total = b[0, 0] * 0
                for r in range(_used_rows(rows, trapezoid, i)):
                    total += _conj(b[r, i]) * b[r, j]
                t[j, ii] = total
            cuda.syncthreads()
            if tid == 0:
                triangular_times(t, start, j, jj, t[j, jj])
            cuda.syncthreads()


def _bottom_rows(rows: int, k: int, triangular: bool) -> tuple[int, int]:
    if triangular:
        used = min(rows, k)
        return used, used
    return rows, 0


def tpqrt(a: Any, b: Any, t: Any, triangular: bool, *, stream: Any = 0) -> None:
    """QR of [R; B] (R: a's top upper triangle, B: b, its upper trapezoid if triangular)."""
    n = a.shape[1]
    check_argument(
        a.shape[0] >= n and b.shape[1] == n and t.shape[0] == n, "tpqrt: shapes do not agree"
    )
    rows, trapezoid = _bottom_rows(b.shape[0], n, bool(triangular))
    nb = max(1, min(t.shape[1], n))
    _tpqrt_kernel[1, block(), stream](a, b, t, rows, trapezoid, nb)


@cuda.jit
def _tpmqrt_kernel(v, t, a, b, transpose, rows, trapezoid, nb):
    k = v.shape[1]
    for column in range(cuda.grid(1), a.shape[1], cuda.gridsize(1)):
        for step in range(k):
            j = step if transpose else k - 1 - step
            tau = _conj(t[j, j % nb]) if transpose else t[j, j % nb]
            _reflect(v, j, 0, _used_rows(rows, trapezoid, j), tau, a, b, column)


def tpmqrt(
    v: Any, t: Any, a: Any, b: Any, transpose: bool, triangular: bool, *, stream: Any = 0
) -> None:
    """[a_top; b_top] = Q^H [...] (``transpose``; Q^T for real tiles) or Q [...], Q from
    ``tpqrt(., v, t)``."""
    k = v.shape[1]
    n = a.shape[1]
    check_argument(
        a.shape[0] >= k and b.shape[1] == n and b.shape[0] == v.shape[0],
        "tpmqrt: shapes do not agree",
    )
    check_argument(t.shape[0] == k, "tpmqrt: t does not match v")
    rows, trapezoid = _bottom_rows(v.shape[0], k, bool(triangular))
    if k == 0 or n == 0 or rows == 0:
        return
    nb = min(t.shape[1], k)
    _tpmqrt_kernel[grid(n), block(), stream](v, t, a, b, bool(transpose), rows, trapezoid, nb)


@cuda.jit
def _triu_copy_kernel(source, out, diagonal):
    columns = out.shape[1]
    for index in range(cuda.grid(1), out.shape[0] * columns, cuda.gridsize(1)):
        r, c = index // columns, index % columns
        out[r, c] = source[r, c] if c - r >= diagonal else 0


def triu_copy(source: Any, out: Any, diagonal: int, *, stream: Any = 0) -> None:
    """out = numpy.triu(source[:rows, :columns], diagonal) for out's rows and columns."""
    rows, columns = out.shape
    check_argument(
        source.shape[0] >= rows and source.shape[1] >= columns, "triu_copy: source too small"
    )
    if rows * columns:
        _triu_copy_kernel[grid(rows * columns), block(), stream](source, out, diagonal)


@cuda.jit
def _eye_fill_kernel(out, diagonal):
    columns = out.shape[1]
    for index in range(cuda.grid(1), out.shape[0] * columns, cuda.gridsize(1)):
        r, c = index // columns, index % columns
        out[r, c] = 1 if c - r == diagonal else 0


def eye_fill(out: Any, diagonal: int, *, stream: Any = 0) -> None:
    """out = numpy.eye(rows, columns, diagonal)."""
    if out.size:
        _eye_fill_kernel[grid(out.size), block(), stream](out, diagonal)
