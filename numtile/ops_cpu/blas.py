"""BLAS/LAPACK tile kernels: gemm, gemm_batched, potrf, trsm and syrk on row-major tiles.

The kernels call scipy's OpenBLAS (``scipy.linalg.cython_blas`` and ``cython_lapack``)
straight from nopython code, so they release the GIL and several worker threads run them
truly in parallel; limit BLAS itself to one thread per worker with threadpoolctl.

Fortran BLAS is column-major, and the buffer of a row-major matrix read column-major is its
transpose. Rather than copying, each kernel swaps operands and flips lower/upper and
left/right, so every tile stays a plain C-contiguous NumPy array.

Example (the tasks of a tiled right-looking Cholesky, on one 2 x 2 grid of tiles):

>>> import numpy as np
>>> from numtile.ops_cpu import blas
>>> x = np.random.default_rng(0).standard_normal((4, 4))
>>> spd = x @ x.T + 4 * np.eye(4)
>>> a00, a10, a11 = spd[:2, :2].copy(), spd[2:, :2].copy(), spd[2:, 2:].copy()
>>> blas.potrf(a00)                                        # L00
0
>>> blas.trsm(a00, a10, False, True, True, False, 1.0)     # L10 = A10 L00^-T
>>> blas.syrk(a10, a11, False, -1.0, 1.0)                  # A11 -= L10 L10^T (lower part)
>>> blas.potrf(a11)                                        # L11
0
>>> bool(np.allclose(a11, np.linalg.cholesky(spd)[2:, 2:]))
True
"""

import numpy as np
from llvmlite import binding as llvm
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.extending import get_cython_function_address, intrinsic, overload
from numba.np.numpy_support import as_dtype

_ROUTINES = {"cython_blas": ("gemm", "syrk", "trsm"), "cython_lapack": ("potrf",)}
_PREFIXES = {types.float32: "s", types.float64: "d"}

# Fortran CHARACTER flags, passed as uint8 so that `_call` hands them over as one byte.
_NO = np.uint8(ord("N"))
_TRANSPOSE = np.uint8(ord("T"))
_LEFT = np.uint8(ord("L"))
_RIGHT = np.uint8(ord("R"))
_LOWER = np.uint8(ord("L"))
_UPPER = np.uint8(ord("U"))
_UNIT = np.uint8(ord("U"))


def _symbol(routine: str) -> str:
    """Name under which the LLVM linker finds scipy's `routine`."""
    return f"numtile_scipy_{routine}"


def _register_routines() -> None:
    """Make every routine in _ROUTINES linkable by name from compiled kernels."""
    # A named symbol, unlike a ctypes function pointer, keeps no process-specific address
    # in the compiled code, so `cache=True` works; re-registering at import relinks it.
    for module, names in _ROUTINES.items():
        for name in names:
            for prefix in _PREFIXES.values():
                address = get_cython_function_address(f"scipy.linalg.{module}", prefix + name)
                llvm.add_symbol(_symbol(prefix + name), address)


_register_routines()


@intrinsic
def _call(typingctx, name, like, *arguments):
    """Call scipy's BLAS/LAPACK `<s|d><name>` for like's dtype, every argument by reference.

    Arrays pass their data pointer; uint8 scalars a Fortran CHARACTER; other integers an
    INTEGER (int32); floats a real of like's dtype. Scalars are spilled to the calling
    kernel's stack. Returns the last argument's value after the call: LAPACK's INFO.
    """
    if not isinstance(name, types.StringLiteral):
        return None
    if not isinstance(like, types.Array) or like.dtype not in _PREFIXES:
        raise TypingError(f"BLAS kernels take float32 or float64 arrays, got {like}")
    for argument in arguments:
        if isinstance(argument, types.Array):
            if argument.dtype != like.dtype or argument.layout != "C":
                raise TypingError(f"expected a C-contiguous {like.dtype} array, got {argument}")
        elif not isinstance(argument, (types.Integer, types.Float)):
            raise TypingError(f"cannot pass {argument} to BLAS")
    symbol = _symbol(_PREFIXES[like.dtype] + name.literal_value)

    def storage_type(argument):
        if argument == types.uint8:
            return types.uint8
        return types.int32 if isinstance(argument, types.Integer) else like.dtype

    def codegen(context, builder, signature, values):
        pointers, slot = [], None
        for index, argument in enumerate(signature.args[2]):
            value = builder.extract_value(values[2], index)
            if isinstance(argument, types.Array):
                pointer = context.make_array(argument)(context, builder, value).data
            else:
                value = context.cast(builder, value, argument, storage_type(argument))
                pointer = slot = cgutils.alloca_once_value(builder, value)
            pointers.append(builder.bitcast(pointer, cgutils.voidptr_t))
        function_type = ir.FunctionType(ir.VoidType(), [cgutils.voidptr_t] * len(pointers))
        function = cgutils.get_or_insert_function(builder.module, function_type, symbol)
        builder.call(function, pointers)
        last = signature.args[2][-1]
        if isinstance(last, types.Array) or storage_type(last) != types.int32:
            return context.get_constant(types.int32, 0)
        return builder.load(slot)  # the last argument's slot

    return types.int32(name, like, types.StarArgTuple.from_types(arguments)), codegen


@njit(inline="always")
def _leading(matrix):
    """Leading dimension of a row-major matrix read column-major (at least 1, as BLAS asks)."""
    return max(1, matrix.shape[1])


@njit(inline="always")
def _gemm_shape(a, b, c, trans_a, trans_b):
    """(m, n, k) of c(m, n) = op(a)(m, k) @ op(b)(k, n), asserting the shapes agree."""
    m, k = (a.shape[1], a.shape[0]) if trans_a else (a.shape[0], a.shape[1])
    k_b, n = (b.shape[1], b.shape[0]) if trans_b else (b.shape[0], b.shape[1])
    assert k == k_b and c.shape[0] == m and c.shape[1] == n, "gemm: shapes do not agree"
    return m, n, k


def _gemm_matrix(a, b, c, trans_a, trans_b, alpha, beta):
    """c = alpha * op(a) @ op(b) + beta * c for one matrix (implementation chosen by dtype)."""
    raise NotImplementedError


@overload(_gemm_matrix)
def _gemm_matrix_overload(a, b, c, trans_a, trans_b, alpha, beta):
    if isinstance(c.dtype, types.Integer):
        scalar = as_dtype(c.dtype).type

        def gemm_loop(a, b, c, trans_a, trans_b, alpha, beta):
            # BLAS has no integer routines: a plain loop, correct rather than fast.
            m, n, k = _gemm_shape(a, b, c, trans_a, trans_b)
            alpha, beta = scalar(alpha), scalar(beta)
            for i in range(m):
                for j in range(n):
                    total = scalar(0)
                    for p in range(k):
                        left = a[p, i] if trans_a else a[i, p]
                        right = b[j, p] if trans_b else b[p, j]
                        total += left * right
                    c[i, j] = alpha * total + beta * c[i, j]

        return gemm_loop

    def gemm_blas(a, b, c, trans_a, trans_b, alpha, beta):
        m, n, k = _gemm_shape(a, b, c, trans_a, trans_b)
        # Column-major, c^T(n, m) = op(b)^T @ op(a)^T: b comes first, the flags stay.
        _call(
            "gemm",
            c,
            _TRANSPOSE if trans_b else _NO,
            _TRANSPOSE if trans_a else _NO,
            n,
            m,
            k,
            float(alpha),
            b,
            _leading(b),
            a,
            _leading(a),
            float(beta),
            c,
            _leading(c),
        )

    return gemm_blas


@njit(nogil=True, cache=True)
def gemm(a, b, c, trans_a, trans_b, alpha, beta):
    """c = alpha * op(a) @ op(b) + beta * c in place; op(x) = x.T when trans_x; c is ignored
    when beta == 0 (NaN in it stays out). float32/float64 through BLAS, integers through a
    plain loop with alpha and beta cast to c's dtype."""
    _gemm_matrix(a, b, c, trans_a, trans_b, alpha, beta)


@njit(nogil=True, cache=True)
def gemm_batched(a, b, c, trans_a, trans_b, alpha, beta):
    """gemm on each matrix of 3-D stacks: c[i] = alpha * op(a[i]) @ op(b[i]) + beta * c[i];
    a or b with leading size 1 is broadcast over the batch."""
    batch = c.shape[0]
    assert a.shape[0] in (1, batch) and b.shape[0] in (1, batch), "gemm_batched: batch sizes"
    for i in range(batch):
        a_i = a[0] if a.shape[0] == 1 else a[i]
        b_i = b[0] if b.shape[0] == 1 else b[i]
        _gemm_matrix(a_i, b_i, c[i], trans_a, trans_b, alpha, beta)


@njit(nogil=True, cache=True)
def potrf(a):
    """Cholesky a = L @ L.T in place: L in the lower triangle, zeros above it; reads only the
    lower triangle of a. Returns LAPACK's info: 0, or the order of the first leading minor
    that is not positive definite (a then holds a partial factor)."""
    n = a.shape[0]
    assert a.shape[1] == n, "potrf: a must be square"
    # Row-major lower is column-major upper, and a = U^T U there means a = L L^T here.
    info = _call("potrf", a, _UPPER, n, a, _leading(a), 0)
    for i in range(n):
        a[i, i + 1 :] = 0
    return info


@njit(nogil=True, cache=True)
def trsm(a, b, left, lower, trans_a, unit_diagonal, alpha):
    """Solve in place in b: op(a) @ x = alpha * b when left, else x @ op(a) = alpha * b, for a
    triangular a (lower or upper, unit diagonal or not); op(a) = a.T when trans_a."""
    m, n = b.shape
    order = m if left else n
    assert a.shape[0] == order and a.shape[1] == order, "trsm: a does not match b"
    # Column-major, the transposed system has the other side and the other triangle.
    _call(
        "trsm",
        b,
        _RIGHT if left else _LEFT,
        _UPPER if lower else _LOWER,
        _TRANSPOSE if trans_a else _NO,
        _UNIT if unit_diagonal else _NO,
        n,
        m,
        float(alpha),
        a,
        _leading(a),
        b,
        _leading(b),
    )


@njit(nogil=True, cache=True)
def syrk(a, c, trans_a, alpha, beta):
    """c = alpha * op(a) @ op(a).T + beta * c on the lower triangle of c only (the strictly
    upper part is neither read nor written); op(a) = a.T when trans_a; c ignored if beta == 0."""
    n = c.shape[0]
    k = a.shape[0] if trans_a else a.shape[1]
    assert c.shape[1] == n and a.shape[1 if trans_a else 0] == n, "syrk: shapes do not agree"
    # Column-major, a's buffer is a.T: op(a) @ op(a).T needs the opposite flag.
    _call(
        "syrk",
        c,
        _UPPER,
        _NO if trans_a else _TRANSPOSE,
        n,
        k,
        float(alpha),
        a,
        _leading(a),
        float(beta),
        c,
        _leading(c),
    )
