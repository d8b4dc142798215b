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

from llvmlite import binding as llvm
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

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


# -- from compiled kernels: the same routine, called by a symbol bound at run time -----------
# (as ``kernel_blas`` binds BLAS: the compiled code names no process-specific address, so
# ``cache=True`` kernels calling it serve every process; ``bind()`` must run before one runs)
_SYMBOL = "numtile_mkl_gemm_bf16bf16f32"


@functools.cache
def bind() -> bool:
    """Bind the symbol the compiled kernels call to oneMKL's ``cblas_gemm_bf16bf16f32``;
    False (nothing bound: such kernels must not run) where MKL has none."""
    function = library()
    if function is None:
        return False
    llvm.add_symbol(_SYMBOL, ctypes.cast(function, ctypes.c_void_p).value)
    return True


@intrinsic
def _call(typingctx, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    """cblas_gemm_bf16bf16f32(row-major, ...): a and b uint16 (bfloat16 bits) and c float32
    arrays of any layout, passed by their first element's address; the rest by value."""

    def codegen(context, builder, signature, values):
        i32, f32 = ir.IntType(32), ir.FloatType()
        ints = [context.cast(builder, v, t, types.int32) for v, t in zip(values, signature.args)]
        floats = {
            i: context.cast(builder, values[i], signature.args[i], types.float32) for i in (5, 10)
        }
        data = {
            i: builder.bitcast(
                context.make_array(signature.args[i])(context, builder, values[i]).data,
                cgutils.voidptr_t,
            )
            for i in (6, 8, 11)
        }
        flag = [
            builder.select(
                builder.icmp_signed("!=", ints[i], ir.Constant(i32, 0)),
                ir.Constant(i32, _TRANS),
                ir.Constant(i32, _NO_TRANS),
            )
            for i in (0, 1)
        ]
        arguments = [ir.Constant(i32, _ROW_MAJOR), flag[0], flag[1], ints[2], ints[3], ints[4]]
        arguments += [floats[5], data[6], ints[7], data[8], ints[9], floats[10], data[11]]
        arguments += [ints[12]]
        pointer = cgutils.voidptr_t
        function_type = ir.FunctionType(
            ir.VoidType(), [i32] * 6 + [f32, pointer, i32, pointer, i32, f32, pointer, i32]
        )
        function = cgutils.get_or_insert_function(builder.module, function_type, _SYMBOL)
        builder.call(function, arguments)
        return context.get_dummy_value()

    signature = types.void(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
    return signature, codegen


@njit(inline="always")
def _rows_apart(matrix):
    """The leading dimension of a 2-D view whose elements are contiguous within a row."""
    return max(matrix.strides[0] // matrix.itemsize, matrix.shape[1], 1)


@njit(nogil=True)
def gemm_bf16_compiled(a, b, c, trans_a, trans_b, alpha, beta):
    """``gemm_bf16_mkl`` for compiled kernels (``bind()`` first): a, b uint16 bfloat16 bits, c
    float32; each may be a column block of a larger row-major matrix (``x[:, j:j + w]``), as
    long as its elements are contiguous within a row."""
    m, n = c.shape
    k = a.shape[0] if trans_a else a.shape[1]
    assert (b.shape[1] if trans_b else b.shape[0]) == k, "gemm: shapes do not agree"
    assert a.strides[1] == 2 and b.strides[1] == 2 and c.strides[1] == 4, "gemm: strided rows"
    if m == 0 or n == 0:
        return
    if k == 0:  # no products: c = beta * c (c ignored when beta is 0, as BLAS does)
        for i in range(m):
            for j in range(n):
                c[i, j] = 0.0 if beta == 0 else beta * c[i, j]
        return
    _call(
        trans_a,
        trans_b,
        m,
        n,
        k,
        alpha,
        a,
        _rows_apart(a),
        b,
        _rows_apart(b),
        beta,
        c,
        _rows_apart(c),
    )


__all__ = ["available", "bind", "gemm_bf16_compiled", "gemm_bf16_mkl", "leading", "library"]
