"""Calling BLAS/LAPACK from nopython code: the binding the CPU BLAS/LAPACK kernels share.

The kernels call Fortran BLAS/LAPACK straight from compiled code, so they release the GIL and
several worker threads run them truly in parallel; BLAS itself runs one thread per worker.

Fortran BLAS is column-major, and the buffer of a row-major matrix read column-major is its
transpose. Rather than copying, each kernel swaps operands and flips lower/upper and
left/right, so every tile stays a plain C-contiguous NumPy array.

The library is chosen once per process, at import (``NUMTILE_BLAS``, ``config.
kernel_blas_setting``): oneMKL where it loads (``mkl_blas``: LP64, sequential), else the one
SciPy's wheel links, through ``scipy.linalg.cython_blas``/``cython_lapack`` (with the PyPI
wheels SciPy's own LP64 OpenBLAS, a separate library from NumPy's ILP64 one).
``kernel_blas_library()`` names it. The compiled kernels name each routine by a symbol that
is bound to the chosen library's address at import, so cached kernels serve either library.
"""

import ctypes
import os

import numpy as np
from llvmlite import binding as llvm
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.extending import get_cython_function_address, intrinsic, overload

from numtile.config import kernel_blas_setting
from numtile.ops_cpu import mkl_blas

# every routine a kernel calls, with the dtype prefixes it is linked for (herk is syrk's
# Hermitian twin; orgqr is c/zungqr for complex, linked under one name for one kernel)
_BLAS = {"gemm": "sdcz", "gemv": "sdcz", "syrk": "sdcz", "trsm": "sdcz", "herk": "cz"}
_LAPACK = {
    "getrf": "sdcz",
    "potrf": "sdcz",
    "geqrt": "sdcz",
    "tpqrt": "sdcz",
    "gemqrt": "sdcz",
    "tpmqrt": "sdcz",
    "orgqr": "sdcz",
    "trtri": "sd",
}
_PREFIXES = {types.float32: "s", types.float64: "d", types.complex64: "c", types.complex128: "z"}
# routines whose floating scalars are real whatever the matrices' dtype (herk's alpha, beta)
_REAL_SCALARS = frozenset({"herk"})
_REAL_OF = {
    types.float32: types.float32,
    types.float64: types.float64,
    types.complex64: types.float32,
    types.complex128: types.float64,
}

# Fortran CHARACTER flags, passed as uint8 so that `call` hands them over as one byte.
NO = np.uint8(ord("N"))
TRANSPOSE = np.uint8(ord("T"))
CONJUGATE_TRANSPOSE = np.uint8(ord("C"))
LEFT = np.uint8(ord("L"))
RIGHT = np.uint8(ord("R"))
LOWER = np.uint8(ord("L"))
UPPER = np.uint8(ord("U"))
UNIT = np.uint8(ord("U"))


def _symbol(routine: str) -> str:
    """Name under which the LLVM linker finds `routine` (``dgemm``) of the chosen library."""
    return f"numtile_blas_{routine}"


def _library_routine(prefix: str, name: str) -> str:
    """The library's name of the kernels' routine `name` for `prefix`."""
    return prefix + ("ungqr" if name == "orgqr" and prefix in "cz" else name)


def _scipy_address(prefix: str, name: str) -> int:
    module = "cython_blas" if name in _BLAS else "cython_lapack"
    return get_cython_function_address(f"scipy.linalg.{module}", _library_routine(prefix, name))


def _bind_routines() -> str:
    """Link every routine of _BLAS and _LAPACK by name to the library chosen for this process
    (``"mkl"`` or ``"scipy"``, returned)."""
    # A named symbol, unlike a function pointer, keeps no process-specific address in the
    # compiled code, so `cache=True` works; binding it again at import relinks it.
    setting = kernel_blas_setting()
    mkl = None if setting == "scipy" else mkl_blas.library()
    if setting == "mkl" and mkl is None:
        raise ImportError(
            "NUMTILE_BLAS=mkl, but oneMKL's libmkl_rt was not found, or was already set up "
            "with another interface or threading layer (pip install mkl, or unset NUMTILE_BLAS)"
        )
    for table in (_BLAS, _LAPACK):
        for name, prefixes in table.items():
            for prefix in prefixes:
                if mkl is not None:
                    address = mkl_blas.address(mkl, _library_routine(prefix, name))
                else:
                    address = _scipy_address(prefix, name)
                llvm.add_symbol(_symbol(prefix + name), address)
    return "scipy" if mkl is None else "mkl"


LIBRARY = _bind_routines()


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


def _library_of(libc, address: int) -> str | None:
    info = _DlInfo()
    if not libc.dladdr(ctypes.c_void_p(address), ctypes.byref(info)) or not info.dli_fname:
        return None
    return info.dli_fname.decode()


def kernel_blas_library() -> str | None:
    """Path of the shared library whose ``dgemm`` the kernels call (None where dladdr cannot
    tell), to find it in ``threadpoolctl.threadpool_info()``.

    >>> "blas" in (kernel_blas_library() or "blas").lower() or LIBRARY == "mkl"
    True
    """
    try:
        libc = ctypes.CDLL(None)
        if LIBRARY == "mkl":
            return _library_of(libc, mkl_blas.address(mkl_blas.library(), "dgemm"))
        wrapper = _library_of(libc, _scipy_address("d", "gemm"))
        if wrapper is None:
            return None
        # cython_blas's dgemm is a wrapper: the BLAS symbol it calls, searched from its library
        # through the libraries it links (the names of scipy-openblas, then of plain BLAS)
        linked = ctypes.CDLL(wrapper)
        for name in ("scipy_dgemm_", "dgemm_", "dgemm"):
            function = getattr(linked, name, None)
            if function is not None:
                return _library_of(libc, ctypes.cast(function, ctypes.c_void_p).value)
    except (OSError, AttributeError):
        pass
    return None


def kernel_blas_description() -> str:
    """One line naming the kernels' BLAS/LAPACK, for ``numtile info``."""
    path = kernel_blas_library()
    where = os.path.realpath(path) if path else "path unknown"
    if LIBRARY == "mkl":
        name = f"oneMKL {mkl_blas.version(mkl_blas.library())} (LP64, sequential)"
    else:
        name = "scipy's (scipy.linalg.cython_blas/cython_lapack)"
    return f"{name}: {where} (NUMTILE_BLAS={kernel_blas_setting()})"


@intrinsic
def call(typingctx, name, like, *arguments):
    """Call the kernels' BLAS/LAPACK `<s|d|c|z><name>` for like's dtype, each argument by reference.

    Arrays (of like's dtype, or int32 ones such as pivot indices) pass their data pointer;
    uint8 scalars a Fortran CHARACTER; other integers an INTEGER (int32); real and complex
    scalars a number of like's dtype (of its real counterpart for herk's alpha and beta).
    Scalars are spilled to the calling kernel's stack. Returns the last argument's value
    after the call: LAPACK's INFO.
    """
    if not isinstance(name, types.StringLiteral):
        return None
    if not isinstance(like, types.Array) or like.dtype not in _PREFIXES:
        raise TypingError(f"BLAS kernels take float32/64 or complex64/128 arrays, got {like}")
    for argument in arguments:
        if isinstance(argument, types.Array):
            if argument.dtype not in (like.dtype, types.int32) or argument.layout != "C":
                raise TypingError(
                    f"expected a C-contiguous {like.dtype} or int32 array, got {argument}"
                )
        elif not isinstance(argument, (types.Integer, types.Float, types.Complex)):
            raise TypingError(f"cannot pass {argument} to BLAS")
    symbol = _symbol(_PREFIXES[like.dtype] + name.literal_value)
    scalar = _REAL_OF[like.dtype] if name.literal_value in _REAL_SCALARS else like.dtype

    def storage_type(argument):
        if argument == types.uint8:
            return types.uint8
        return types.int32 if isinstance(argument, types.Integer) else scalar

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
def leading(matrix):
    """Leading dimension of a row-major matrix read column-major (at least 1, as BLAS asks)."""
    return max(1, matrix.shape[1])


@njit(inline="always")
def operation(trans):
    """BLAS's op flag for a kernel's trans argument: False 'N', True 'T', 2 'C' (the conjugate
    transpose; the same as 'T' for real matrices)."""
    if trans == 2:
        return CONJUGATE_TRANSPOSE
    return TRANSPOSE if trans else NO


def adjoint(like):
    """LAPACK's TRANS flag for Q^H: 'C' for complex arrays, 'T' for real ones (the real
    routines such as dgemqrt accept only 'T')."""
    raise NotImplementedError


@overload(adjoint)
def _adjoint_overload(like):
    flag = CONJUGATE_TRANSPOSE if isinstance(like.dtype, types.Complex) else TRANSPOSE
    return lambda like: flag
