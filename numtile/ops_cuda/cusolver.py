"""getrf, potrf, geqrt and gemqrt through cuSOLVER on a real GPU, the ``@cuda.jit`` twins
(``lu``, ``factorizations``, ``qr``) elsewhere: these are the launchers ``numtile.ops_cuda``
exports, with the twins' signatures.

The library is called where the tile's dtype is float32/64 or complex64/128 and its layout is
C- or F-contiguous (``libraries.solver_path()`` says whether CuPy's cuSOLVER is there), and a
small kernel then gives the result the CPU kernel's contract:

* potrf: a row-major lower triangle is a column-major upper one, so ``potrf(UPPER)`` runs on
  the tile itself (a = U^T conj(U) = L L^H with L = U^T, as the CPU twin's LAPACK call). The
  kernel after it copies devInfo into ``info[0]``, fails a NaN pivot (info = its column, as
  the CPU twin: cuSOLVER, like OpenBLAS, may let it through) and zeroes the upper triangle.
* getrf: LU of a^T is not LU of a, so a row-major tile is transposed into a workspace (cuBLAS
  geam), factored and transposed back (an F-contiguous one is factored where it is). The
  kernel after it makes cuSOLVER's 1-based int32 pivots 0-based, in the caller's integer
  dtype, and copies devInfo (the first exactly zero pivot's column, or 0) into ``info[0]``.
* geqrt: geqrf on the (transposed) tile gives R, the reflectors and tau, as LAPACK's geqrt
  does; no cuSOLVER routine forms the compact-WY factors T (LAPACK's larft), so they are built
  in LAPACK's blocked layout from cuBLAS pieces: one gemm per block of nb reflectors gives
  V^H V over the rows under the block, and a kernel (a thread block per block of reflectors)
  adds the rows inside it and runs larft's recurrence T[:j, j] = -tau_j T[:j, :j] S[:j, j].
* gemqrt: ormqr/unmqr with the taus read off T's diagonal and the reflectors transposed into
  a workspace. A real c is multiplied from the right on its own buffer, with no copy (row-major
  c is column-major c^T, and (Q^T c)^T = c^T Q); a complex c is transposed into a workspace
  (c^T conj(Q) is no unmqr call).

devInfo is read on the host by nobody: only potrf's and getrf's contracts need it, and the
kernels above move it into the caller's ``info``. tpqrt and tpmqrt (the triangle-on-top QR
steps) have no cuSOLVER routine and stay ``@cuda.jit``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import cuda

from numtile.ops_cuda import factorizations, libraries, lu, qr
from numtile.ops_cuda.launch import MAX_BLOCKS, block, check_argument, grid
from numtile.ops_cuda.libraries import FLOATS, buffer_size, on_stream, pointer, usable, workspace

__all__ = ["gemqrt", "geqrt", "getrf", "potrf"]


@cuda.jit
def _potrf_finish(a, status, info):
    # info[0] = devInfo, or the first NaN pivot's column; zeros above the diagonal
    n = a.shape[0]
    start = cuda.grid(1)
    if start == 0:
        failed = status[0]
        if failed == 0:
            for j in range(n):
                if math.isnan(a[j, j].real):
                    failed = j + 1
                    break
        info[0] = failed
    for index in range(start, n * n, cuda.gridsize(1)):
        i = index // n
        column = index % n
        if column > i:
            a[i, column] = 0


@cuda.jit
def _getrf_finish(ipiv, status, pivots, info):
    # pivots = ipiv - 1 (0-based, the caller's dtype), info[0] = devInfo
    start = cuda.grid(1)
    for i in range(start, ipiv.size, cuda.gridsize(1)):
        pivots[i] = ipiv[i] - 1
    if start == 0:
        info[0] = status[0]


@cuda.jit
def _block_factors(a, tau, gram, t, nb):
    # LAPACK's T (larft) of geqrf's reflectors, one thread block per block of nb reflectors:
    # S[i, j] = v_i^H v_j for i < j in the block, from gram[b, j, i] (cuBLAS's product of the
    # block's columns below it) plus the rows inside the block, where v_i is 1 on row i and 0
    # above it; then T's columns by larft's recurrence, in place in row j of t (t[j, i] is
    # LAPACK's T(i, j)), tau on the diagonal. Rows of t past the k reflectors are zero.
    k = tau.size
    m = a.shape[0]
    tid = cuda.threadIdx.x
    threads = cuda.blockDim.x
    columns = t.shape[1]
    if cuda.blockIdx.x == 0:
        for index in range(tid, (t.shape[0] - k) * columns, threads):
            t[k + index // columns, index % columns] = 0
    for b in range(cuda.blockIdx.x, (k + nb - 1) // nb, cuda.gridDim.x):
        start = b * nb
        width = nb if k - start > nb else k - start  # (min does not compile for a GPU)
        below = start + width < m  # cuBLAS wrote gram[b] (rows under the block)
        for index in range(tid, width * columns, threads):
            t[start + index // columns, index % columns] = 0
        cuda.syncthreads()
        for index in range(tid, width * width, threads):
            j = index // width
            i = index % width
            if i == j:
                t[start + j, j] = tau[start + j]
            elif i < j:
                total = a[start + j, start + i].conjugate()  # v_j is 1 on row j
                if below:
                    total += gram[b, j, i]
                for r in range(start + j + 1, start + width):
                    total += a[r, start + i].conjugate() * a[r, start + j]
                t[start + j, i] = total
        cuda.syncthreads()
        if tid == 0:
            for jj in range(1, width):
                qr.triangular_times(t, start, start + jj, jj, t[start + jj, jj])
        cuda.syncthreads()


@cuda.jit
def _taus(t, tau, nb):
    # tau[j] = t[j, j % nb]: each reflector's tau, on the diagonal of its block of T
    for j in range(cuda.grid(1), tau.size, cuda.gridsize(1)):
        tau[j] = t[j, j % nb]


def potrf(a: Any, info: Any, *, stream: Any = 0) -> None:
    """Cholesky a = L @ L.T (L @ L^H for complex a) in place (L below, zeros above); LAPACK's
    info goes to info[0]."""
    n = a.shape[0]
    check_argument(a.ndim == 2 and a.shape[1] == n, "potrf: a must be square")
    check_argument(info.size >= 1, "potrf: info must hold one integer")
    cp = usable(a)
    if cp is None or n == 0 or not a.is_c_contiguous():
        factorizations.potrf(a, info, stream=stream)
        return
    dtype = np.dtype(a.dtype)
    name = FLOATS[dtype] + "potrf"
    status = workspace(stream, "info", np.int32, 1)
    with on_stream(cp, stream) as session:
        upper = session.blas.CUBLAS_FILL_MODE_UPPER
        lwork = buffer_size(session, name, upper, n, pointer(a), n, key=(n,))
        work = workspace(stream, "work", dtype, lwork)
        getattr(session.lapack, name)(
            session.solver, upper, n, pointer(a), n, pointer(work), lwork, pointer(status)
        )
    _potrf_finish[grid(n * n), block(), stream](a, status, info)


def _column_major(session, a, stream) -> tuple[int, bool]:
    """The address of a (m, n) column-major copy of the tile a, leading dimension m: a itself
    when it is F-contiguous, else a workspace it is transposed into (True: copy it back)."""
    if a.is_f_contiguous() and not a.is_c_contiguous():
        return pointer(a), False
    m, n = a.shape
    matrix = workspace(stream, "matrix", a.dtype, m * n)
    libraries.transpose(session, a.dtype, pointer(a), n, pointer(matrix), m, n)
    return pointer(matrix), True


def _copy_back(session, a, matrix: int) -> None:
    """The inverse of ``_column_major``'s copy: the tile a (m, n) = the column-major matrix."""
    m, n = a.shape
    libraries.transpose(session, a.dtype, matrix, m, pointer(a), n, m)


def getrf(a: Any, pivots: Any, info: Any, *, stream: Any = 0) -> None:
    """LU with partial pivoting of a in place; pivots[:min(m, n)] and info[0] as on CPU."""
    m, n = a.shape
    check_argument(pivots.size >= min(m, n) and info.size >= 1, "getrf: pivots or info too short")
    cp = usable(a)
    k = min(m, n)
    if cp is None or k == 0:
        lu.getrf(a, pivots, info, stream=stream)
        return
    dtype = np.dtype(a.dtype)
    name = FLOATS[dtype] + "getrf"
    ipiv, status = workspace(stream, "pivots", np.int32, k), workspace(stream, "info", np.int32, 1)
    with on_stream(cp, stream) as session:
        matrix, copied = _column_major(session, a, stream)
        lwork = buffer_size(session, name, m, n, matrix, m, key=(m, n))
        work = workspace(stream, "work", dtype, lwork)
        getattr(session.lapack, name)(
            session.solver, m, n, matrix, m, pointer(work), pointer(ipiv), pointer(status)
        )
        if copied:
            _copy_back(session, a, matrix)
    _getrf_finish[grid(k), block(), stream](ipiv, status, pivots, info)


def _gram_blocks(session, dtype, matrix: int, m: int, k: int, nb: int, gram) -> None:
    """gram[b] = V_b^H V_b over the rows under block b of nb reflectors (cuBLAS gemm on the
    column-major factored matrix, leading dimension m; column-major nb x nb results)."""
    blas = session.blas
    adjoint = blas.CUBLAS_OP_C if dtype.kind == "c" else blas.CUBLAS_OP_T
    scalars = np.array([1, 0], dtype)  # read by cuBLAS at the call (host pointer mode)
    one, zero = scalars.ctypes.data, scalars.ctypes.data + dtype.itemsize
    gemm = getattr(blas, FLOATS[dtype] + "gemm")
    for b, start in enumerate(range(0, k, nb)):
        width = min(nb, k - start)
        rows = m - start - width
        if rows <= 0:
            continue
        block = matrix + (start + width + start * m) * dtype.itemsize  # (start + width, start)
        result = pointer(gram) + b * nb * nb * dtype.itemsize
        gemm(session.handle, adjoint, blas.CUBLAS_OP_N, width, width, rows, one, block, m,
             block, m, zero, result, nb)  # fmt: skip


def geqrt(a: Any, t: Any, *, stream: Any = 0) -> None:
    """QR of the tile a in place (R above, reflectors below); t gets the block factors."""
    m, n = a.shape
    check_argument(t.shape[0] == n and t.shape[1] >= 1, "geqrt: t must be (columns, ib)")
    k = min(m, n)
    cp = usable(a, t)
    if cp is None or k == 0:
        qr.geqrt(a, t, stream=stream)
        return
    dtype = np.dtype(a.dtype)
    name = FLOATS[dtype] + "geqrf"
    nb = max(1, min(t.shape[1], k))
    blocks = (k + nb - 1) // nb
    tau, status = workspace(stream, "tau", dtype, k), workspace(stream, "info", np.int32, 1)
    gram = workspace(stream, "gram", dtype, blocks * nb * nb)
    with on_stream(cp, stream) as session:
        matrix, copied = _column_major(session, a, stream)
        lwork = buffer_size(session, name, m, n, matrix, m, key=(m, n))
        work = workspace(stream, "work", dtype, lwork)
        getattr(session.lapack, name)(
            session.solver, m, n, matrix, m, pointer(tau), pointer(work), lwork, pointer(status)
        )
        _gram_blocks(session, dtype, matrix, m, k, nb, gram)
        if copied:
            _copy_back(session, a, matrix)
    gram = gram.reshape((blocks, nb, nb))  # gram[b, j, i]: block b's column-major (i, j)
    _block_factors[min(blocks, MAX_BLOCKS), block(), stream](a, tau, gram, t, nb)


def gemqrt(v: Any, t: Any, c: Any, transpose: bool, *, stream: Any = 0) -> None:
    """c = Q^H c (``transpose``; Q^T for real tiles) or Q c, Q from ``geqrt(v, t)``."""
    m, n = c.shape
    check_argument(v.shape[0] == m and t.shape[0] == v.shape[1], "gemqrt: shapes do not agree")
    k = min(v.shape)
    if k == 0 or n == 0:
        return
    cp = usable(v, t, c)
    if cp is None or not c.is_c_contiguous():
        qr.gemqrt(v, t, c, transpose, stream=stream)
        return
    dtype = np.dtype(c.dtype)
    complex_tiles = dtype.kind == "c"
    name = FLOATS[dtype] + ("unmqr" if complex_tiles else "ormqr")
    tau, status = workspace(stream, "tau", dtype, k), workspace(stream, "info", np.int32, 1)
    _taus[grid(k), block(), stream](t, tau, min(t.shape[1], k))
    with on_stream(cp, stream) as session:
        blas = session.blas
        if v.is_f_contiguous() and not v.is_c_contiguous():
            reflectors = pointer(v)
        else:  # the first k columns of v, column-major (m, k)
            reflectors = pointer(workspace(stream, "reflectors", dtype, m * k))
            libraries.transpose(session, dtype, pointer(v), v.shape[1], reflectors, m, k)
        if complex_tiles:  # Q^H c or Q c on a column-major copy of c, from the left
            side, rows, columns, ld = blas.CUBLAS_SIDE_LEFT, m, n, m
            target, copied = _column_major(session, c, stream)
            operation = blas.CUBLAS_OP_C if transpose else blas.CUBLAS_OP_N
        else:  # (Q^T c)^T = c^T Q and (Q c)^T = c^T Q^T on c's own buffer c^T (n, m)
            side, rows, columns, ld = blas.CUBLAS_SIDE_RIGHT, n, m, n
            target, copied = pointer(c), False
            operation = blas.CUBLAS_OP_N if transpose else blas.CUBLAS_OP_T
        flags = (side, operation, rows, columns, k)
        lwork = buffer_size(
            session, name, *flags, reflectors, m, pointer(tau), target, ld, key=(*flags, m)
        )
        work = workspace(stream, "work", dtype, lwork)
        getattr(session.lapack, name)(
            session.solver, *flags, reflectors, m, pointer(tau), target, ld, pointer(work),
            lwork, pointer(status),
        )  # fmt: skip
        if copied:
            _copy_back(session, c, target)
