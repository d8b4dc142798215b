"""CUDA GEMM: gemm and gemm_batched on row-major tiles (twins of ``numtile.ops_cpu.matmul``).

GEMM takes one of two paths, chosen per call:

* cuBLAS through CuPy, on a real GPU where ``cupy`` imports: float32/float64/complex64/
  complex128 C-contiguous tiles of one dtype go straight to ``cublas<S|D|C|Z>gemm``
  (``...StridedBatched`` for stacks, with stride 0 for a broadcast operand) on the caller's
  stream, on the tiles' own memory. Column-major cuBLAS reads a row-major buffer as its
  transpose, so ``c.T = op(b).T @ op(a).T`` is computed with b first and the flags kept,
  exactly as the CPU twin calls OpenBLAS; a flag of 2 is the conjugate transpose (``OP_C``).
* a shared-memory tiled ``@cuda.jit`` kernel (square blocks of ``gemm_tile()`` threads a side,
  as ``configure()`` last set; one compiled kernel per dtype and tile edge), under the
  simulator, without CuPy, and for integer or mixed-dtype tiles. ``gemm_fallback`` forces it;
  ``gemm_path()`` says which path float tiles take here. Tiles are C-contiguous, as the CPU
  twin requires.

Shape mismatches raise ``AssertionError`` with the CPU twin's messages, on the host, before
anything is launched.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from numba import cuda

from numtile.cuda_driver import SIMULATOR
from numtile.ops_cuda.launch import MAX_BLOCKS, check_argument, gemm_tile

__all__ = [
    "gemm",
    "gemm_batched",
    "gemm_fallback",
    "gemm_batched_fallback",
    "gemm_path",
]

# blocks per grid dimension; every kernel loops over what a smaller grid leaves (the
# simulator keeps few blocks so that those loops are exercised and launches stay fast)
_GRID_LIMIT = MAX_BLOCKS if SIMULATOR else 65535
# cuBLAS's prefix for each dtype it multiplies (s/d/c/zgemm)
_CUBLAS_PREFIXES = {
    np.dtype(np.float32): "s",
    np.dtype(np.float64): "d",
    np.dtype(np.complex64): "c",
    np.dtype(np.complex128): "z",
}


# ---------------------------------------------------------------------------------------------
# tiled GEMM kernel (the fallback path; syrk too)


@functools.cache
def _gemm_kernel(dtype: np.dtype, tile: int):
    """The tiled GEMM kernel for tiles of ``dtype`` and ``tile`` x ``tile`` thread blocks: both
    are compile-time constants of the kernel (shared arrays take a fixed dtype and literal
    sizes), so each pair is a kernel of its own."""
    scalar = np.dtype(dtype).type
    # row length of the shared tiles: one spare column against bank conflicts
    padded = tile + 1

    @cuda.jit
    def gemm_tiles(a, b, c, trans_a, trans_b, alpha, beta, lower):
        # c[z] = alpha * op(a[z]) @ op(b[z]) + beta * c[z] on 3-D stacks (leading size 1 of a
        # or b broadcast); with lower, only elements on or below the diagonal are read/written.
        # Each block computes tile x tile outputs, thread (ty, tx) one of them; the grid loops
        # over batch (z), row tiles (y) and column tiles (x). Tiles of op(a) and op(b) are
        # staged through shared memory so that global loads are coalesced whatever the flags:
        # a transposed operand is read along its rows and stored transposed (the +1 padding
        # keeps those stores free of bank conflicts).
        tile_a = cuda.shared.array((tile, padded), scalar)
        tile_b = cuda.shared.array((tile, padded), scalar)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        batch = c.shape[0]
        m = c.shape[1]
        n = c.shape[2]
        k = a.shape[1] if trans_a else a.shape[2]
        if alpha == 0 and lower:
            k = 0  # as BLAS syrk: a is not read (gemm reads it, as OpenBLAS does)
        tiles_m = (m + tile - 1) // tile
        tiles_n = (n + tile - 1) // tile
        for z in range(cuda.blockIdx.z, batch, cuda.gridDim.z):
            za = 0 if a.shape[0] == 1 else z
            zb = 0 if b.shape[0] == 1 else z
            for tm in range(cuda.blockIdx.y, tiles_m, cuda.gridDim.y):
                for tn in range(cuda.blockIdx.x, tiles_n, cuda.gridDim.x):
                    if lower and tn > tm:
                        continue  # strictly above the diagonal: the whole block skips it
                    row0 = tm * tile
                    col0 = tn * tile
                    total = scalar(0)
                    for p0 in range(0, k, tile):
                        value = scalar(0)
                        if trans_a:  # op(a)[i, p] = a[p, i] (its conjugate when trans_a == 2)
                            i = row0 + tx
                            p = p0 + ty
                            if i < m and p < k:
                                value = a[za, p, i]
                                if trans_a == 2:
                                    value = value.conjugate()
                            tile_a[tx, ty] = value
                        else:
                            i = row0 + ty
                            p = p0 + tx
                            if i < m and p < k:
                                value = a[za, i, p]
                            tile_a[ty, tx] = value
                        value = scalar(0)
                        if trans_b:  # op(b)[p, j] = b[j, p] (its conjugate when trans_b == 2)
                            j = col0 + ty
                            p = p0 + tx
                            if j < n and p < k:
                                value = b[zb, j, p]
                                if trans_b == 2:
                                    value = value.conjugate()
                            tile_b[tx, ty] = value
                        else:
                            j = col0 + tx
                            p = p0 + ty
                            if j < n and p < k:
                                value = b[zb, p, j]
                            tile_b[ty, tx] = value
                        cuda.syncthreads()
                        for q in range(tile):
                            total += tile_a[ty, q] * tile_b[q, tx]
                        cuda.syncthreads()
                    i = row0 + ty
                    j = col0 + tx
                    if i < m and j < n and (j <= i or not lower):
                        if beta == 0:
                            c[z, i, j] = alpha * total  # c is not read: NaN in it stays out
                        else:
                            c[z, i, j] = alpha * total + beta * c[z, i, j]

    return gemm_tiles


def as_stack(x: Any) -> Any:
    """A 2-D device array as a (1, rows, cols) view (3-D ones unchanged)."""
    return x.reshape((1,) + tuple(x.shape)) if x.ndim == 2 else x


def launch_tiled_gemm(a, b, c, trans_a, trans_b, alpha, beta, lower, stream) -> None:
    """Launch the tiled kernel on 3-D stacks (only c's lower triangle with ``lower``, as syrk
    needs); alpha and beta are cast to c's dtype. A flag of 2 is the conjugate transpose: the
    complex kernels take the flags as integers (0, 1, 2), the real ones as booleans."""
    batch, m, n = c.shape
    if batch == 0 or m == 0 or n == 0:
        return
    dtype = np.dtype(c.dtype)
    flag = int if dtype.kind == "c" else bool
    tile = gemm_tile()
    blocks = (
        min(math.ceil(n / tile), _GRID_LIMIT),
        min(math.ceil(m / tile), _GRID_LIMIT),
        min(batch, _GRID_LIMIT),
    )
    _gemm_kernel(dtype, tile)[blocks, (tile, tile), stream](
        a,
        b,
        c,
        flag(trans_a),
        flag(trans_b),
        dtype.type(alpha),
        dtype.type(beta),
        bool(lower),
    )


def _gemm_inner(a, b, c, trans_a, trans_b) -> int:
    """k of c(m, n) = op(a)(m, k) @ op(b)(k, n) on the last two axes, checking the shapes."""
    # tuple(): the simulator's shapes reject negative indices
    shape_a, shape_b, shape_c = tuple(a.shape), tuple(b.shape), tuple(c.shape)
    m, k = (shape_a[-1], shape_a[-2]) if trans_a else (shape_a[-2], shape_a[-1])
    k_b, n = (shape_b[-1], shape_b[-2]) if trans_b else (shape_b[-2], shape_b[-1])
    check_argument(
        k == k_b and shape_c[-2] == m and shape_c[-1] == n,
        f"gemm: shapes do not agree ({a.shape}, {b.shape}, {c.shape})",
    )
    return k


def _check_matrices(a, b, c) -> None:
    check_argument(a.ndim == 2 and b.ndim == 2 and c.ndim == 2, "gemm: a, b and c must be 2-D")


def _check_stacks(a, b, c) -> None:
    check_argument(
        a.ndim == 3 and b.ndim == 3 and c.ndim == 3, "gemm_batched: a, b and c must be 3-D"
    )
    batch = c.shape[0]
    check_argument(
        a.shape[0] in (1, batch) and b.shape[0] in (1, batch), "gemm_batched: batch sizes"
    )


# ---------------------------------------------------------------------------------------------
# cuBLAS through CuPy


@functools.cache
def _cupy() -> Any:
    """The ``cupy`` module where cuBLAS can be used (a real GPU and CuPy), else None."""
    if SIMULATOR:
        return None
    try:
        import cupy

        # cupy.cuda.cublas is imported lazily and needs libcublas, which ``import cupy``
        # alone does not load: a CuPy without its cuBLAS must mean the fallback, not a
        # failure at the first gemm
        cupy.cuda.cublas  # noqa: B018
    except Exception:  # not installed, installed for another CUDA, or without cuBLAS
        return None
    return cupy


def gemm_path() -> str:
    """``"cublas"`` if ``gemm`` sends floating/complex tiles to cuBLAS here, else ``"fallback"``."""
    return "fallback" if _cupy() is None else "cublas"


def _device_pointer(x: Any) -> int:
    """Address of a device array's first element."""
    return int(x.__cuda_array_interface__["data"][0])


def _stream_pointer(stream: Any) -> int:
    """The raw CUstream of a numba stream (0: the default stream)."""
    if isinstance(stream, int):
        return stream
    if hasattr(type(stream), "__int__"):  # numba's Stream, whichever binding it runs on
        return int(stream)
    handle = getattr(stream, "handle", None)
    value = getattr(handle, "value", handle)  # ctypes c_void_p, or a cuda-python CUstream
    return int(value or 0)


def _cupy_stream(cp: Any, stream: Any) -> Any:
    """The CuPy stream object for a numba stream, to be made current with ``with``."""
    pointer = _stream_pointer(stream)
    return cp.cuda.Stream.null if pointer == 0 else cp.cuda.ExternalStream(pointer)


def _cublas_operation(lib: Any, trans, dtype: np.dtype) -> int:
    """cuBLAS's op for a flag: N, T, or C for 2 on complex tiles."""
    if trans == 2 and dtype.kind == "c":
        return lib.CUBLAS_OP_C
    return lib.CUBLAS_OP_T if trans else lib.CUBLAS_OP_N


def _cublas_gemm(a, b, c, trans_a, trans_b, alpha, beta, stream) -> bool:
    """Run gemm (2-D) or gemm_batched (3-D) through cuBLAS; False where it does not apply."""
    cp = _cupy()
    if cp is None:
        return False
    dtype = np.dtype(c.dtype)
    prefix = _CUBLAS_PREFIXES.get(dtype)
    if prefix is None:
        return False
    for x in (a, b, c):
        if np.dtype(x.dtype) != dtype or not x.is_c_contiguous():
            return False
    shape_a, shape_b, shape_c = tuple(a.shape), tuple(b.shape), tuple(c.shape)
    m, n = shape_c[-2], shape_c[-1]
    k = shape_a[-2] if trans_a else shape_a[-1]
    batch = shape_c[0] if c.ndim == 3 else 1
    if batch == 0 or m == 0 or n == 0:
        return True  # nothing to do
    if k == 0:
        return False  # c = beta * c: left to the kernel rather than to cuBLAS's edge cases
    lib = cp.cuda.cublas
    scalars = np.array([alpha, beta], dtype=dtype)  # read by cuBLAS at the call (host mode)
    alpha_pointer = scalars.ctypes.data
    beta_pointer = alpha_pointer + dtype.itemsize
    # column-major: c.T(n, m) = op(b).T(n, k) @ op(a).T(k, m), every buffer read transposed;
    # (x^H).T = conj(x) is the buffer's conjugate transpose, so a flag of 2 stays 'C'
    op_b, op_a = (_cublas_operation(lib, t, dtype) for t in (trans_b, trans_a))
    ld_a, ld_b, ld_c = max(1, shape_a[-1]), max(1, shape_b[-1]), max(1, n)
    with _cupy_stream(cp, stream):
        handle = cp.cuda.device.get_cublas_handle()
        lib.setPointerMode(handle, lib.CUBLAS_POINTER_MODE_HOST)
        leading = (handle, op_b, op_a, n, m, k, alpha_pointer)  # what both calls start with
        pointer_a, pointer_b, pointer_c = _device_pointer(a), _device_pointer(b), _device_pointer(c)
        if c.ndim == 2 or batch == 1:
            getattr(lib, prefix + "gemm")(
                *leading, pointer_b, ld_b, pointer_a, ld_a, beta_pointer, pointer_c, ld_c
            )
        else:
            stride_a = 0 if shape_a[0] == 1 else shape_a[1] * shape_a[2]
            stride_b = 0 if shape_b[0] == 1 else shape_b[1] * shape_b[2]
            getattr(lib, prefix + "gemmStridedBatched")(
                *leading,
                pointer_b,
                ld_b,
                stride_b,
                pointer_a,
                ld_a,
                stride_a,
                beta_pointer,
                pointer_c,
                ld_c,
                m * n,
                batch,
            )
    return True


# ---------------------------------------------------------------------------------------------
# public GEMM launchers


def _gemm(a, b, c, trans_a, trans_b, alpha, beta, stream, *, batched: bool, cublas: bool) -> None:
    """Check the shapes (3-D stacks when ``batched``, else matrices), then run through cuBLAS
    where ``cublas`` and it applies, else through the tiled kernel."""
    if batched:
        _check_stacks(a, b, c)
    else:
        _check_matrices(a, b, c)
    _gemm_inner(a, b, c, trans_a, trans_b)
    if cublas and _cublas_gemm(a, b, c, trans_a, trans_b, alpha, beta, stream):
        return
    if not batched:
        a, b, c = as_stack(a), as_stack(b), as_stack(c)
    launch_tiled_gemm(a, b, c, trans_a, trans_b, alpha, beta, False, stream)


def gemm(
    a: Any,
    b: Any,
    c: Any,
    trans_a: bool,
    trans_b: bool,
    alpha: float,
    beta: float,
    *,
    stream: Any = 0,
) -> None:
    """c = alpha * op(a) @ op(b) + beta * c in place (op(x) = x.T when trans_x is True, x^H when
    it is 2); c is not read when beta == 0."""
    _gemm(a, b, c, trans_a, trans_b, alpha, beta, stream, batched=False, cublas=True)


def gemm_fallback(
    a: Any,
    b: Any,
    c: Any,
    trans_a: bool,
    trans_b: bool,
    alpha: float,
    beta: float,
    *,
    stream: Any = 0,
) -> None:
    """``gemm`` through the tiled ``@cuda.jit`` kernel always, never cuBLAS."""
    _gemm(a, b, c, trans_a, trans_b, alpha, beta, stream, batched=False, cublas=False)


def gemm_batched(
    a: Any,
    b: Any,
    c: Any,
    trans_a: bool,
    trans_b: bool,
    alpha: float,
    beta: float,
    *,
    stream: Any = 0,
) -> None:
    """gemm on each matrix of 3-D stacks; a or b with leading size 1 is broadcast over the batch."""
    _gemm(a, b, c, trans_a, trans_b, alpha, beta, stream, batched=True, cublas=True)


def gemm_batched_fallback(
    a: Any,
    b: Any,
    c: Any,
    trans_a: bool,
    trans_b: bool,
    alpha: float,
    beta: float,
    *,
    stream: Any = 0,
) -> None:
    """``gemm_batched`` through the tiled ``@cuda.jit`` kernel always, never cuBLAS."""
    _gemm(a, b, c, trans_a, trans_b, alpha, beta, stream, batched=True, cublas=False)
