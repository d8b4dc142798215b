"""oneMKL's Fortran BLAS/LAPACK symbols for the tile kernels (``kernel_blas`` links them by
name when MKL is the kernels' library).

The kernels call ``<routine>_`` with every argument by reference, as Fortran does: MKL's LP64
interface takes 32-bit INTEGERs (the kernels' int32 scalars, pivots and INFO), and reads one
byte of a CHARACTER flag, so the hidden string lengths a Fortran caller appends are not
passed (a ``CHARACTER`` dummy of length 1 never reads its length). MKL is used with the
sequential threading layer that ``mkl_lib`` sets: one thread per call, the runtime's rule.
"""

from __future__ import annotations

import ctypes
import functools

from numtile.ops_cpu import mkl_lib

_LP64, _ILP64 = 0, 1  # MKL_INTERFACE_LP64 / MKL_INTERFACE_ILP64 (the GNU flag is bit 1)


@functools.cache
def library() -> ctypes.CDLL | None:
    """libmkl_rt when it can serve the kernels: found, LP64 and sequential; else None."""
    lib = mkl_lib.library()
    if lib is None:
        return None
    # each setter returns the layer in force: a process that called MKL before with another
    # interface or threading layer keeps it, and then the kernels keep scipy's library
    if lib.MKL_Set_Interface_Layer(ctypes.c_int(_LP64)) & _ILP64:
        return None
    if lib.MKL_Set_Threading_Layer(ctypes.c_int(mkl_lib.SEQUENTIAL)) != mkl_lib.SEQUENTIAL:
        return None
    return lib


def address(lib: ctypes.CDLL, routine: str) -> int:
    """Address of MKL's Fortran ``routine`` (``dgemm`` -> ``dgemm_``)."""
    return ctypes.cast(getattr(lib, routine + "_"), ctypes.c_void_p).value


def version(lib: ctypes.CDLL) -> str:
    """MKL's version, as ``2026.2``."""
    buffer = ctypes.create_string_buffer(256)
    lib.MKL_Get_Version_String(buffer, len(buffer))
    words = buffer.value.decode(errors="replace").split()
    return next((w for w in words if w[:1].isdigit() and "." in w), "?").split("-")[0]


__all__ = ["address", "library", "version"]
