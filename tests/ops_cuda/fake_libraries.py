"""A stand-in for CuPy's cuBLAS and cuSOLVER, for testing the library paths without a GPU.

Each library function works on the column-major matrices that its pointers designate in the
simulator's host memory, through SciPy's BLAS and LAPACK wrappers (cuSOLVER's getrf pivots
1-based, as cuSOLVER writes them), so the launchers' marshalling (transposes, leading
dimensions, flags, pivot base, devInfo, workspace sizes) is checked against the CPU kernels.
Every call must come inside a CuPy stream context whose stream was also set on the handle it
uses; ``calls`` records (function, stream). The enumerations have values of their own (not
cuBLAS's), so that one constant taken for another shows.
"""

from __future__ import annotations

import ctypes
import types

import numpy as np
import scipy.linalg.blas as scipy_blas
import scipy.linalg.lapack as scipy_lapack

DTYPES = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}
BLAS_HANDLE, SOLVER_HANDLE = 4242, 4343


def column_major(pointer, rows, cols, ld, dtype):
    """The rows x cols column-major matrix at `pointer` with leading dimension ld (a view)."""
    assert ld >= max(1, rows), (ld, rows)
    itemsize = np.dtype(dtype).itemsize
    nbytes = max(0, (cols - 1) * ld + rows) * itemsize
    buffer = (ctypes.c_char * nbytes).from_address(pointer)
    return np.ndarray((rows, cols), dtype, buffer=buffer, strides=(itemsize, ld * itemsize))


def vector(pointer, count, dtype):
    """The ``count`` elements of ``dtype`` at ``pointer`` (a view)."""
    return column_major(pointer, count, 1, max(1, count), dtype)[:, 0]


def scalar(pointer, dtype):
    return vector(pointer, 1, dtype)[0]


class Stream:
    """CuPy's stream objects: entering one makes it current."""

    def __init__(self, fake, pointer):
        self.fake, self.ptr = fake, pointer

    def __enter__(self):
        self.fake.current = self.ptr
        return self

    def __exit__(self, *exc):
        self.fake.current = None


class FakeLibraries:
    """Just enough of ``cupy`` for ``numtile.ops_cuda.libraries`` and its callers."""

    OP_N, OP_T, OP_C = 30, 31, 32
    LOWER, UPPER = 40, 41
    SIDE_LEFT, SIDE_RIGHT = 50, 51
    NON_UNIT, UNIT = 60, 61

    def __init__(self, herk: bool = True, workspaces=None):
        self.calls: list[tuple[str, int]] = []
        self.queries: list[str] = []
        self.current = None
        self.bound: dict[int, int] = {}  # handle -> the stream set on it
        self.workspaces = workspaces  # where workspaces live: a dict of device arrays
        self.sizes: dict[str, int] = {}  # what each _bufferSize query answered
        blas = types.SimpleNamespace(
            CUBLAS_OP_N=self.OP_N,
            CUBLAS_OP_T=self.OP_T,
            CUBLAS_OP_C=self.OP_C,
            CUBLAS_FILL_MODE_LOWER=self.LOWER,
            CUBLAS_FILL_MODE_UPPER=self.UPPER,
            CUBLAS_SIDE_LEFT=self.SIDE_LEFT,
            CUBLAS_SIDE_RIGHT=self.SIDE_RIGHT,
            CUBLAS_DIAG_NON_UNIT=self.NON_UNIT,
            CUBLAS_DIAG_UNIT=self.UNIT,
            CUBLAS_POINTER_MODE_HOST=70,
            setStream=self._set_stream,
            setPointerMode=self._set_pointer_mode,
        )
        lapack = types.SimpleNamespace(setStream=self._set_stream)
        for prefix, dtype in DTYPES.items():
            for name in ("gemm", "geam", "trsm", "syrk") + (
                ("herk",) if herk and prefix in "cz" else ()
            ):
                setattr(blas, prefix + name, self._wrap(prefix + name, BLAS_HANDLE, dtype))
            apply = "unmqr" if prefix in "cz" else "ormqr"
            for name in ("potrf", "getrf", "geqrf", apply):
                setattr(lapack, prefix + name, self._wrap(prefix + name, SOLVER_HANDLE, dtype))
                query = self._query(prefix + name)
                setattr(lapack, prefix + name + "_bufferSize", query)
        self.cuda = types.SimpleNamespace(
            Stream=types.SimpleNamespace(null=Stream(self, 0)),
            ExternalStream=lambda pointer: Stream(self, pointer),
            cublas=blas,
            cusolver=lapack,
            device=types.SimpleNamespace(
                get_cublas_handle=lambda: BLAS_HANDLE, get_cusolver_handle=lambda: SOLVER_HANDLE
            ),
        )

    # -- handles and queries

    def _set_stream(self, handle, stream):
        assert handle in (BLAS_HANDLE, SOLVER_HANDLE)
        self.bound[handle] = stream

    def _set_pointer_mode(self, handle, mode):
        assert handle == BLAS_HANDLE and mode == 70

    def _enter(self, name, handle):
        assert self.current is not None, f"{name}: no current stream"
        assert self.bound.get(handle) == self.current, f"{name}: handle not on the stream"
        self.calls.append((name, self.current))

    def _query(self, name):
        def query(handle, *arguments):
            self._enter(name + "_bufferSize", handle)
            self.queries.append(name)
            self.sizes[name] = _size(arguments)
            return self.sizes[name]

        return query

    def _check_work(self, name, work, lwork, dtype, queried):
        """lwork is at least what the query answers for these arguments (``queried``), and
        the workspace is one the launchers keep, with room for lwork elements."""
        size = _size(queried)
        assert lwork >= size, f"{_prefix(dtype)}{name}: lwork {lwork} < {size}"
        if self.workspaces is None:
            return
        end = work + lwork * np.dtype(dtype).itemsize
        for buffer in self.workspaces.values():
            start = buffer._ary.ctypes.data
            if start <= work and end <= start + buffer._ary.nbytes:
                return
        raise AssertionError(f"workspace at {work:#x} has no room for {lwork} elements")

    def _wrap(self, name, handle, dtype):
        implementation = getattr(self, "_" + name[1:])

        def call(handle_given, *arguments):
            assert handle_given == handle, name
            self._enter(name, handle)
            implementation(dtype, *arguments)

        return call

    # -- cuBLAS

    def _operation(self, flag, matrix):
        return {self.OP_N: matrix, self.OP_T: matrix.T, self.OP_C: matrix.conj().T}[flag]

    def _gemm(self, dtype, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
        op_a = self._operation(
            ta, column_major(a, *((m, k) if ta == self.OP_N else (k, m)), lda, dtype)
        )
        op_b = self._operation(
            tb, column_major(b, *((k, n) if tb == self.OP_N else (n, k)), ldb, dtype)
        )
        target = column_major(c, m, n, ldc, dtype)
        alpha, beta = scalar(alpha, dtype), scalar(beta, dtype)
        product = alpha * (op_a @ op_b)
        target[...] = product if beta == 0 else product + beta * target

    def _geam(self, dtype, ta, tb, m, n, alpha, a, lda, beta, b, ldb, c, ldc):
        assert ta != self.OP_N, "geam is used to transpose"
        source = self._operation(ta, column_major(a, n, m, lda, dtype))
        alpha, beta = scalar(alpha, dtype), scalar(beta, dtype)
        assert beta == 0 and tb == self.OP_N and b == c and ldb == ldc
        column_major(c, m, n, ldc, dtype)[...] = alpha * source

    def _trsm(self, dtype, side, uplo, trans, diag, m, n, alpha, a, lda, b, ldb):
        order = m if side == self.SIDE_LEFT else n
        flags = {self.OP_N: 0, self.OP_T: 1, self.OP_C: 2}
        target = column_major(b, m, n, ldb, dtype)
        target[...] = getattr(scipy_blas, _prefix(dtype) + "trsm")(
            scalar(alpha, dtype),
            column_major(a, order, order, lda, dtype),
            target.copy(),
            side=int(side == self.SIDE_RIGHT),
            lower=int(uplo == self.LOWER),
            trans_a=flags[trans],
            diag=int(diag == self.UNIT),
        )

    def _rank_k(self, name, dtype, uplo, trans, n, k, alpha, a, lda, beta, c, ldc, real):
        shape = (n, k) if trans == self.OP_N else (k, n)
        target = column_major(c, n, n, ldc, dtype)
        scalars = np.dtype(dtype).type(0).real.dtype if real else dtype
        target[...] = getattr(scipy_blas, _prefix(dtype) + name)(
            scalar(alpha, scalars),
            column_major(a, *shape, lda, dtype),
            beta=scalar(beta, scalars),
            c=target.copy(),
            trans={self.OP_N: 0, self.OP_T: 1, self.OP_C: 2}[trans],
            lower=int(uplo == self.LOWER),
        )

    def _syrk(self, dtype, *arguments):
        self._rank_k("syrk", dtype, *arguments, real=False)

    def _herk(self, dtype, *arguments):
        self._rank_k("herk", dtype, *arguments, real=True)

    # -- cuSOLVER

    def _potrf(self, dtype, uplo, n, a, lda, work, lwork, info):
        self._check_work("potrf", work, lwork, dtype, (uplo, n, a, lda))
        matrix = column_major(a, n, n, lda, dtype)
        factor, status = getattr(scipy_lapack, _prefix(dtype) + "potrf")(
            matrix, lower=int(uplo == self.LOWER), clean=0
        )
        matrix[...] = factor
        vector(info, 1, np.int32)[0] = status

    def _getrf(self, dtype, m, n, a, lda, work, ipiv, info):
        self._check_work("getrf", work, _size((m, n, a, lda)), dtype, (m, n, a, lda))
        matrix = column_major(a, m, n, lda, dtype)
        factor, pivots, status = getattr(scipy_lapack, _prefix(dtype) + "getrf")(matrix)
        matrix[...] = factor
        vector(ipiv, min(m, n), np.int32)[:] = pivots[: min(m, n)] + 1  # 1-based, as cuSOLVER
        vector(info, 1, np.int32)[0] = status

    def _geqrf(self, dtype, m, n, a, lda, tau, work, lwork, info):
        self._check_work("geqrf", work, lwork, dtype, (m, n, a, lda))
        matrix = column_major(a, m, n, lda, dtype)
        factor, taus, _, status = getattr(scipy_lapack, _prefix(dtype) + "geqrf")(matrix)
        matrix[...] = factor
        vector(tau, min(m, n), dtype)[:] = taus
        vector(info, 1, np.int32)[0] = status

    def _apply(self, dtype, side, trans, m, n, k, a, lda, tau, c, ldc, work, lwork, info):
        kind = "unmqr" if np.dtype(dtype).kind == "c" else "ormqr"
        self._check_work(kind, work, lwork, dtype, (side, trans, m, n, k, a, lda, tau, c, ldc))
        left = side == self.SIDE_LEFT
        target = column_major(c, m, n, ldc, dtype)
        result, _, status = getattr(scipy_lapack, _prefix(dtype) + kind)(
            b"L" if left else b"R",
            {self.OP_N: b"N", self.OP_T: b"T", self.OP_C: b"C"}[trans],
            column_major(a, m if left else n, k, lda, dtype),
            vector(tau, k, dtype),
            target.copy(),
            64 * (m + n),
        )
        target[...] = result
        vector(info, 1, np.int32)[0] = status

    _ormqr = _unmqr = _apply


def _size(arguments) -> int:
    """The fake workspace size of a query: grows with every size and flag it is given."""
    return 7 + sum(x for x in arguments if isinstance(x, int) and x < 1000)


def _prefix(dtype) -> str:
    return {np.dtype(v): k for k, v in DTYPES.items()}[np.dtype(dtype)]
