"""CUDA kernels of the tiled factorisations: potrf, trsm and syrk on row-major tiles (twins of
``numtile.ops_cpu.factorizations``).

``potrf`` runs in one block, column by column; ``trsm`` gives one thread to each independent
right-hand side; ``syrk`` (and ``herk``, its Hermitian twin for complex tiles) is the tiled
GEMM kernel restricted to the lower triangle.

Deviation from the CPU twin: ``potrf(a, info, *, stream=0)`` takes a 1-element integer device
array and writes LAPACK's info into ``info[0]`` (0, or the order of the first leading minor
that is not positive definite) instead of returning it: a launcher cannot return a device
value without synchronising. Shape mismatches raise ``AssertionError`` with the CPU twin's
messages, on the host, before anything is launched.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import cuda, int32

from numtile.ops_cuda.launch import block, check_argument, grid
from numtile.ops_cuda.matmul import as_stack, launch_tiled_gemm

__all__ = ["herk", "potrf", "syrk", "trsm"]


# ---------------------------------------------------------------------------------------------
# potrf


@cuda.jit
def _potrf_kernel(a, info):
    # One block, right-looking: for each column j, take the square root of the (already
    # updated) diagonal, scale the column below it, then update the trailing lower triangle.
    # Only elements on or below the diagonal are read. On failure a[j, j] keeps the
    # non-positive pivot, as LAPACK's potf2 leaves it. Complex tiles (a = L L^H): the pivot is
    # the diagonal's real part (LAPACK ignores its imaginary part) and the update conjugates.
    n = a.shape[0]
    tid = cuda.threadIdx.x
    threads = cuda.blockDim.x
    failed = cuda.shared.array(1, int32)
    if tid == 0:
        failed[0] = 0
    cuda.syncthreads()
    for j in range(n):
        if tid == 0:
            pivot = a[j, j].real
            if not pivot > 0:  # a NaN pivot fails too, as in LAPACK and the CPU twin
                failed[0] = j + 1
            else:
                a[j, j] = math.sqrt(pivot)
        cuda.syncthreads()
        if failed[0] != 0:
            break  # every thread sees the same flag: the break is uniform
        diagonal = a[j, j]
        for i in range(j + 1 + tid, n, threads):
            a[i, j] = a[i, j] / diagonal
        cuda.syncthreads()
        width = n - j - 1
        for index in range(tid, width * width, threads):
            i = j + 1 + index // width
            col = j + 1 + index % width
            if col <= i:
                a[i, col] -= a[i, j] * a[col, j].conjugate()
        cuda.syncthreads()
    for index in range(tid, n * n, threads):
        i = index // n
        col = index % n
        if col > i:
            a[i, col] = 0
    if tid == 0:
        info[0] = failed[0]


def potrf(a: Any, info: Any, *, stream: Any = 0) -> None:
    """Cholesky a = L @ L.T (L @ L^H for complex a) in place (L below, zeros above); LAPACK's
    info goes to info[0]."""
    n = a.shape[0]
    check_argument(a.ndim == 2 and a.shape[1] == n, "potrf: a must be square")
    check_argument(info.size >= 1, "potrf: info must hold one integer")
    _potrf_kernel[1, block(), stream](a, info)


# ---------------------------------------------------------------------------------------------
# trsm


@cuda.jit
def _trsm_kernel(a, b, left, lower, trans_a, unit_diagonal, alpha):
    # Each right-hand side is independent: a column of b when left, a row when right. Both
    # reduce to solving M x = alpha * v, with M = op(a) (left) or op(a).T (right); M[i, p] is
    # a[p, i] when transposed, else a[i, p], and is lower triangular (forward substitution)
    # when exactly one of lower / transposed holds. Only the triangle of a that is meant is
    # read, and its diagonal only when not unit_diagonal. trans_a == 2 (complex tiles, an
    # integer flag): op(a) = a^H, every coefficient conjugated.
    m = b.shape[0]
    n = b.shape[1]
    order = m if left else n
    count = n if left else m
    conjugate = trans_a == 2
    transposed = (trans_a != 0) != (not left)
    forward = lower != transposed
    for v in range(cuda.grid(1), count, cuda.gridsize(1)):
        if alpha == 0:  # as BLAS: b = 0, a not read
            for i in range(order):
                if left:
                    b[i, v] = 0
                else:
                    b[v, i] = 0
            continue
        for step in range(order):
            i = step if forward else order - 1 - step
            total = alpha * (b[i, v] if left else b[v, i])
            start = 0 if forward else i + 1
            stop = i if forward else order
            for p in range(start, stop):
                coefficient = a[p, i] if transposed else a[i, p]
                if conjugate:
                    coefficient = coefficient.conjugate()
                total -= coefficient * (b[p, v] if left else b[v, p])
            if not unit_diagonal:
                total = total / (a[i, i].conjugate() if conjugate else a[i, i])
            if left:
                b[i, v] = total
            else:
                b[v, i] = total


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
    count = n if left else m
    if m == 0 or n == 0:
        return
    _trsm_kernel[grid(count), block(), stream](
        a,
        b,
        bool(left),
        bool(lower),
        int(trans_a) if np.dtype(b.dtype).kind == "c" else bool(trans_a),
        bool(unit_diagonal),
        np.dtype(b.dtype).type(alpha),
    )


# ---------------------------------------------------------------------------------------------
# syrk


def syrk(
    a: Any,
    c: Any,
    trans_a: bool,
    alpha: float,
    beta: float,
    *,
    stream: Any = 0,
) -> None:
    """c = alpha * op(a) @ op(a).T + beta * c on the lower triangle of c only (upper untouched)."""
    n = c.shape[0]
    check_argument(
        a.ndim == 2 and c.ndim == 2 and c.shape[1] == n and a.shape[1 if trans_a else 0] == n,
        "syrk: shapes do not agree",
    )
    a3 = as_stack(a)
    # op(a) @ op(a).T is gemm of a with itself, the second operand with the opposite flag
    launch_tiled_gemm(a3, a3, as_stack(c), trans_a, not trans_a, alpha, beta, True, stream)


def herk(
    a: Any,
    c: Any,
    trans_a: bool,
    alpha: float,
    beta: float,
    *,
    stream: Any = 0,
) -> None:
    """c = alpha * op(a) @ op(a)^H + beta * c on c's lower triangle (op(a) = a^H when trans_a),
    for complex tiles; c is not read when beta == 0."""
    n = c.shape[0]
    check_argument(
        a.ndim == 2 and c.ndim == 2 and c.shape[1] == n and a.shape[1 if trans_a else 0] == n,
        "herk: shapes do not agree",
    )
    a3 = as_stack(a)
    # op(a) @ op(a)^H is gemm of a with itself, one operand conjugate-transposed (flag 2)
    flags = (2, 0) if trans_a else (0, 2)
    launch_tiled_gemm(a3, a3, as_stack(c), *flags, alpha, beta, True, stream)
