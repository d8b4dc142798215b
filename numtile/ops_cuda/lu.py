"""CUDA kernels of the tiled LU factorisation: ``getrf`` of a panel and ``laswp`` (twins of
``numtile.ops_cpu.lu``, same signatures plus ``stream``).

``getrf`` is the unblocked right-looking algorithm in one block (a fallback for the
simulator and small panels; a real GPU would call cuSOLVER's getrf): for each column, one
thread finds the pivot (the first largest magnitude, as LAPACK's idamax), then the block
interchanges the two rows, scales the column below the diagonal and updates the trailing
matrix. ``laswp`` gives one thread to each column, which applies the interchanges in order.
"""

from __future__ import annotations

from typing import Any

from numba import cuda, int32

from numtile.ops_cuda.launch import block, check_argument, grid

__all__ = ["getrf", "laswp"]


@cuda.jit
def _getrf_kernel(a, pivots, info):
    m = a.shape[0]
    n = a.shape[1]
    tid = cuda.threadIdx.x
    threads = cuda.blockDim.x
    shared = cuda.shared.array(2, int32)  # [0]: the pivot row, [1]: info
    if tid == 0:
        shared[1] = 0
    cuda.syncthreads()
    steps = m if m < n else n
    for j in range(steps):
        if tid == 0:
            best = j
            largest = abs(a[j, j])
            for i in range(j + 1, m):
                if abs(a[i, j]) > largest:
                    best = i
                    largest = abs(a[i, j])
            shared[0] = best
            pivots[j] = best
            if a[best, j] == 0 and shared[1] == 0:
                shared[1] = j + 1
        cuda.syncthreads()
        p = shared[0]
        if p != j:
            for c in range(tid, n, threads):
                value = a[j, c]
                a[j, c] = a[p, c]
                a[p, c] = value
        cuda.syncthreads()
        diagonal = a[j, j]
        if diagonal != 0:  # a zero pivot leaves its column unscaled, as LAPACK does
            for i in range(j + 1 + tid, m, threads):
                a[i, j] = a[i, j] / diagonal
        cuda.syncthreads()
        width = n - j - 1
        for index in range(tid, width * (m - j - 1), threads):
            i = j + 1 + index // width
            c = j + 1 + index % width
            a[i, c] -= a[i, j] * a[j, c]
        cuda.syncthreads()
    if tid == 0:
        info[0] = shared[1]


def getrf(a: Any, pivots: Any, info: Any, *, stream: Any = 0) -> None:
    """LU with partial pivoting of a in place; pivots[:min(m, n)] and info[0] as on CPU."""
    m, n = a.shape
    check_argument(pivots.size >= min(m, n) and info.size >= 1, "getrf: pivots or info too short")
    _getrf_kernel[1, block(), stream](a, pivots, info)


@cuda.jit
def _laswp_kernel(a, pivots):
    for c in range(cuda.grid(1), a.shape[1], cuda.gridsize(1)):
        for i in range(pivots.size):
            p = pivots[i]
            if p != i:
                value = a[i, c]
                a[i, c] = a[p, c]
                a[p, c] = value


def laswp(a: Any, pivots: Any, *, stream: Any = 0) -> None:
    """Interchange rows i and pivots[i] of a, for i = 0, 1, ... in order."""
    if a.shape[1] == 0 or pivots.size == 0:
        return
    _laswp_kernel[grid(a.shape[1]), block(), stream](a, pivots)
