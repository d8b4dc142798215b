"""oneMKL's runtime library (``libmkl_rt``) through ctypes, shared by every numtile path that
calls MKL: the bf16 GEMM (``mkl_bf16``) and any other MKL routine a kernel module binds.

MKL comes from the optional ``mkl`` wheel (``pip install numtile[mkl]``) or the loader's
search path. It is switched to its sequential threading layer once, before any routine is
called: one thread per runtime worker (the runtime's rule for BLAS), and no OpenMP runtime
needed. Where MKL is not found ``library()`` is None and callers keep their own kernels.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.metadata

SEQUENTIAL = 1  # MKL_THREADING_SEQUENTIAL


def _candidates() -> list[str]:
    """Paths of libmkl_rt: the ``mkl`` wheel's own file, then the loader's search path."""
    paths = []
    try:
        for file in importlib.metadata.files("mkl") or ():
            if file.name.startswith("libmkl_rt.so"):
                paths.append(str(file.locate()))
    except importlib.metadata.PackageNotFoundError:
        pass
    return paths + ["libmkl_rt.so.3", "libmkl_rt.so.2", "libmkl_rt.so"]


@functools.cache
def library() -> ctypes.CDLL | None:
    """oneMKL's ``libmkl_rt`` with the sequential threading layer, or None where not found."""
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
            lib.MKL_Set_Threading_Layer(ctypes.c_int(SEQUENTIAL))
        except (OSError, AttributeError):
            continue
        return lib
    return None


__all__ = ["SEQUENTIAL", "library"]
