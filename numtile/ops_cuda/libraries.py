"""CuPy's cuSOLVER and cuBLAS on a tile kernel's stream: the handles bound to the stream, the
workspaces kept per stream, the cached ``_bufferSize`` queries, and a transposing copy.

``matmul`` calls cuBLAS's gemm on its own; ``cusolver`` (factorisations) and ``level3``
(trsm, syrk, herk) go through ``on_stream``. Every call runs inside CuPy's stream context and
sets the stream on both handles as well (CuPy's wrappers also do so from the context), so
the library work is ordered with the worker's kernels and copies on that stream.

Workspaces: one device buffer per stream, role (``"work"``, ``"matrix"``, ``"pivots"``, ...)
and dtype, allocated on first use and replaced by a larger one only when a call needs more.
Calls on one stream run in order on the GPU, so the next call may reuse what the previous
one wrote. They live outside the runtime's memory manager (a few tiles' worth per GPU).
"""

from __future__ import annotations

import contextlib
import functools
import types
from collections.abc import Iterator
from typing import Any

import numpy as np
from numba import cuda

from numtile.ops_cuda import matmul

__all__ = [
    "FLOATS",
    "buffer_size",
    "library",
    "on_stream",
    "pointer",
    "solver_path",
    "transpose",
    "usable",
    "workspace",
]

# cuBLAS/cuSOLVER's prefix for each dtype they take (s/d/c/z)
FLOATS = {
    np.dtype(np.float32): "s",
    np.dtype(np.float64): "d",
    np.dtype(np.complex64): "c",
    np.dtype(np.complex128): "z",
}

_WORKSPACES: dict[tuple[int, str, str], Any] = {}
_SIZES: dict[tuple, int] = {}


@functools.cache
def library() -> Any:
    """The ``cupy`` module where cuBLAS and cuSOLVER can be used (a real GPU, CuPy with both
    libraries), else None."""
    cp = matmul._cupy()
    if cp is None:
        return None
    try:
        cp.cuda.cusolver  # noqa: B018  (lazy in CuPy: needs libcusolver, as cublas does)
        cp.cuda.device.get_cusolver_handle  # noqa: B018
    except Exception:  # CuPy without its cuSOLVER
        return None
    return cp


def solver_path() -> str:
    """``"cusolver"`` if getrf, potrf, geqrt and gemqrt send float/complex tiles to cuSOLVER
    (and trsm, syrk to cuBLAS) here, else ``"fallback"`` (the ``@cuda.jit`` kernels)."""
    return "fallback" if library() is None else "cusolver"


def usable(*arrays) -> Any:
    """CuPy where the libraries apply to these device arrays (one float/complex dtype, each
    C- or F-contiguous), else None."""
    cp = library()
    if cp is None:
        return None
    dtype = np.dtype(arrays[0].dtype)
    if dtype not in FLOATS:
        return None
    for x in arrays:
        if np.dtype(x.dtype) != dtype or not (x.is_c_contiguous() or x.is_f_contiguous()):
            return None
    return cp


def pointer(x: Any) -> int:
    """Address of a device array's first element."""
    return matmul._device_pointer(x)


@contextlib.contextmanager
def on_stream(cp: Any, stream: Any) -> Iterator[types.SimpleNamespace]:
    """The libraries with their handles bound to ``stream``: ``.lapack`` (cuSOLVER's module),
    ``.blas`` (cuBLAS's), ``.solver`` and ``.handle`` (their handles), ``.stream``."""
    stream_pointer = matmul._stream_pointer(stream)
    with matmul._cupy_stream(cp, stream):
        lapack, blas = cp.cuda.cusolver, cp.cuda.cublas
        solver = cp.cuda.device.get_cusolver_handle()
        handle = cp.cuda.device.get_cublas_handle()
        lapack.setStream(solver, stream_pointer)
        blas.setStream(handle, stream_pointer)
        blas.setPointerMode(handle, blas.CUBLAS_POINTER_MODE_HOST)
        yield types.SimpleNamespace(
            lapack=lapack, blas=blas, solver=solver, handle=handle, stream=stream
        )


def workspace(stream: Any, role: str, dtype: Any, count: int) -> Any:
    """A 1-D device array of ``count`` (at least 1) elements of ``dtype`` for ``role`` on
    ``stream``, reused from the previous call on that stream where it is large enough."""
    count = max(1, int(count))
    dtype = np.dtype(dtype)
    key = (matmul._stream_pointer(stream), role, dtype.str)
    buffer = _WORKSPACES.get(key)
    if buffer is None or buffer.size < count:
        buffer = cuda.device_array(count, dtype, stream=stream)
        _WORKSPACES[key] = buffer
    return buffer[:count]


def buffer_size(session: types.SimpleNamespace, name: str, *arguments, key: tuple) -> int:
    """cuSOLVER's ``<name>_bufferSize(handle, *arguments)``, asked once per name and ``key``
    (the call's sizes and flags: the answer does not depend on the pointers)."""
    cached = _SIZES.get((name, key))
    if cached is None:
        query = getattr(session.lapack, name + "_bufferSize")
        cached = _SIZES[(name, key)] = int(query(session.solver, *arguments))
    return cached


def transpose(session, dtype, source: int, source_ld: int, target: int, rows, columns) -> None:
    """target = source^T through cuBLAS's geam: target is (rows, columns) column-major with
    leading dimension rows, source (columns, rows) with leading dimension ``source_ld``. A
    row-major (m, n) tile is column-major (n, m) with leading dimension n."""
    dtype = np.dtype(dtype)
    scalars = np.array([1, 0], dtype)  # read by cuBLAS at the call (host pointer mode)
    one, zero = scalars.ctypes.data, scalars.ctypes.data + dtype.itemsize
    blas = session.blas
    ld = max(1, rows)
    # beta = 0: B is not read; it is the target itself, as geam allows with OP_N and ldb = ldc
    getattr(blas, FLOATS[dtype] + "geam")(
        session.handle, blas.CUBLAS_OP_T, blas.CUBLAS_OP_N, rows, columns, one, source,
        max(1, source_ld), zero, target, ld, target, ld,
    )  # fmt: skip
