"""oneMKL's ``cblas_gemm_bf16bf16f32`` through ctypes: the CPU's bf16 GEMM where the CPU has
AVX512-BF16 or AMX-BF16 and the optional ``mkl`` wheel is installed (``pip install
numtile[mkl]``).

Why oneMKL rather than oneDNN: one flat CBLAS call per tile, with row-major layout and
transposes as flags exactly like the float32 sgemm path, no primitive descriptors to build
and cache per shape; ctypes releases the GIL during the call, so runtime workers run it in
parallel. MKL is loaded with its sequential threading layer: one thread per worker (the
runtime's rule for BLAS), and no OpenMP runtime needed. Measured on an AMD EPYC with AVX2
only, MKL's bf16 GEMM runs (it converts internally) at about the speed of float32 sgemm, no
faster than the exact widen-and-sgemm fallback, so numtile uses it only where the CPU has
bf16 units. MKL itself is loaded by ``mkl_lib``.
"""

from __future__ import annotations

import ctypes
import functools

from numtile.ops_cpu import mkl_lib

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112


@functools.cache
def library():
    """``cblas_gemm_bf16bf16f32`` of oneMKL (sequential), or None where MKL is not found."""
    lib = mkl_lib.library()
    function = getattr(lib, "cblas_gemm_bf16bf16f32", None) if lib is not None else None
    if function is None:
        return None
    integer, pointer = ctypes.c_int, ctypes.c_void_p  # MKL_INT: 32-bit (LP64 interface)
    function.restype = None
    function.argtypes = [integer] * 6 + [ctypes.c_float, pointer, integer, pointer, integer]
    function.argtypes += [ctypes.c_float, pointer, integer]
    return function


def leading(matrix) -> int:
    """The leading dimension of a row-major matrix view (its rows may be strided, its
    elements not)."""
    rows, columns = matrix.shape
    assert columns <= 1 or matrix.strides[1] == matrix.itemsize, "gemm: strided columns"
    return max(matrix.strides[0] // matrix.itemsize if rows > 1 else columns, columns, 1)


def gemm_bf16_mkl(a, b, c, trans_a, trans_b, alpha, beta) -> None:
    """c (float32) = alpha * op(a) @ op(b) + beta * c for bf16 a, b given as uint16 bits,
    through oneMKL (``library()`` must not be None). Each matrix is row-major with contiguous
    rows; the rows may be a block of a larger matrix (a leading dimension)."""
    m, n = c.shape
    k = a.shape[0] if trans_a else a.shape[1]
    assert (b.shape[1] if trans_b else b.shape[0]) == k, "gemm: shapes do not agree"
    if m == 0 or n == 0:
        return
    if k == 0:
        c[...] = 0.0 if beta == 0 else beta * c
        return
    library()(
        _ROW_MAJOR,
        _TRANS if trans_a else _NO_TRANS,
        _TRANS if trans_b else _NO_TRANS,
        m,
        n,
        k,
        float(alpha),
        a.ctypes.data,
        leading(a),
        b.ctypes.data,
        leading(b),
        float(beta),
        c.ctypes.data,
        leading(c),
    )


def available() -> bool:
    """True where oneMKL's bf16 GEMM can be called."""
    return library() is not None


__all__ = ["available", "gemm_bf16_mkl", "leading", "library"]
