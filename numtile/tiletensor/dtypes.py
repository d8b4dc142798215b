"""The dtypes a TileTensor can hold, their promotion rules and the array API's dtype functions.

Promotion is the array API's table (2023.12) where it is defined: within booleans, signed
integers, unsigned integers, and real/complex floating types, the result is the smallest type
that holds both. Where the standard leaves it undefined numtile follows NumPy 2 and says so:
``int64`` with ``uint64`` is ``float64``, an integer array with a floating array is the
floating type wide enough for the integer (``int8`` with ``float32`` is ``float32``, ``int32``
with ``float32`` is ``float64``), and a boolean array with a numeric one is the numeric type.
Python scalars are weak: ``x + 1`` keeps ``x``'s dtype, ``int_array + 1.5`` is ``float64``.

``bfloat16`` (``ml_dtypes.bfloat16``, so NumPy arrays of it convert both ways) promotes as
PyTorch's: with ``float32`` or ``float64`` it is that type, with ``float16`` it is ``float32``
(neither holds the other), with booleans, integer arrays and Python scalars it stays
``bfloat16``, with complex it is the complex type (``complex64`` for a Python complex).
``isdtype(nt.bfloat16, "real floating")`` is true. Its tiles hold the 16 bits of each value;
kernels widen them to float32 (exact), compute in float32 and round back to nearest-even.

ml_dtypes is imported on first use of bfloat16, not with numtile: its import alone takes about
1.2 s (NumPy registers its ufunc loops for each of its dtypes). So ``bfloat16`` here and
``nt.bfloat16`` are looked up when first read (PEP 562: ``bfloat16_dtype()``), and the tests
of a dtype (``is_bfloat16``, ``is_narrow_floating``, ``check_dtype``) never import it: before
ml_dtypes is imported, no array, tensor or dtype can be bfloat16.

``float16`` (IEEE half, outside the array API standard, for GPUs and checkpoints that need
it) is held the same way, through float32, and promotes as NumPy's (which PyTorch's matches
between floats): with ``float32`` it is ``float32``, with ``bfloat16`` ``float32``, with
``int8``/``uint8`` arrays and Python scalars it stays ``float16``.

>>> import numtile as nt
>>> nt.result_type(nt.int8, nt.uint8), nt.result_type(nt.int64, nt.uint64)
(dtype('int16'), dtype('float64'))
"""

from __future__ import annotations

import builtins
import functools
import sys

import numpy as np

bool_ = np.dtype(np.bool_)
int8 = np.dtype(np.int8)
int16 = np.dtype(np.int16)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
uint8 = np.dtype(np.uint8)
uint16 = np.dtype(np.uint16)
uint32 = np.dtype(np.uint32)
uint64 = np.dtype(np.uint64)
float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
complex64 = np.dtype(np.complex64)
complex128 = np.dtype(np.complex128)
float16 = np.dtype(np.float16)

SIGNED = (int8, int16, int32, int64)
UNSIGNED = (uint8, uint16, uint32, uint64)
REAL_FLOATING = (float32, float64)
COMPLEX_FLOATING = (complex64, complex128)
# the array API's dtypes (what __array_namespace_info__ lists); a tensor also holds bfloat16
# and float16 (``is_narrow_floating``)
STANDARD = (bool_, *SIGNED, *UNSIGNED, *REAL_FLOATING, *COMPLEX_FLOATING)

# isdtype's kinds (array API 2023.12), as the names of their dtypes (bfloat16's among them,
# so that naming a kind imports nothing)
KINDS = {
    "bool": ("bool",),
    "signed integer": ("int8", "int16", "int32", "int64"),
    "unsigned integer": ("uint8", "uint16", "uint32", "uint64"),
    "real floating": ("float32", "float64", "bfloat16", "float16"),
    "complex floating": ("complex64", "complex128"),
}
KINDS["integral"] = KINDS["signed integer"] + KINDS["unsigned integer"]
KINDS["numeric"] = KINDS["integral"] + KINDS["real floating"] + KINDS["complex floating"]


@functools.cache
def bfloat16_dtype() -> np.dtype:
    """The bfloat16 dtype (``ml_dtypes.bfloat16``), importing ml_dtypes on the first call.

    >>> bfloat16_dtype().name, bfloat16_dtype().itemsize
    ('bfloat16', 2)
    """
    import ml_dtypes

    return np.dtype(ml_dtypes.bfloat16)


def __getattr__(name: str):
    """``dtypes.bfloat16``: ``bfloat16_dtype()``, read when asked for (PEP 562)."""
    if name == "bfloat16":
        return bfloat16_dtype()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def is_bfloat16(dtype) -> bool:
    """Whether ``dtype`` (a dtype, or anything NumPy compares with one) is bfloat16; never
    imports ml_dtypes, as nothing can be bfloat16 before it is imported.

    >>> import numtile as nt
    >>> is_bfloat16(nt.float32), is_bfloat16(nt.bfloat16)
    (False, True)
    """
    return "ml_dtypes" in sys.modules and dtype == bfloat16_dtype()


def is_narrow_floating(dtype) -> bool:
    """Whether ``dtype`` is a float held as 16-bit patterns that kernels widen to float32,
    bfloat16 or float16 (NumPy's kind of bfloat16 is "V")."""
    return dtype == float16 or is_bfloat16(dtype)


def as_dtype(value) -> np.dtype:
    """``np.dtype(value)``, where the name ``"bfloat16"`` is bfloat16 (NumPy knows it only once
    ml_dtypes is imported)."""
    if isinstance(value, str) and value == "bfloat16":
        return bfloat16_dtype()
    return np.dtype(value)


def is_floating(dtype) -> bool:
    """Whether ``dtype`` is a real floating dtype, ``bfloat16`` and ``float16`` included
    (bfloat16's NumPy kind is "V", so ``dtype.kind == "f"`` misses it).

    >>> import numtile as nt
    >>> is_floating(nt.bfloat16), is_floating(nt.float64), is_floating(nt.int8)
    (True, True, False)
    """
    dtype = as_dtype(dtype)
    return dtype.kind == "f" or is_narrow_floating(dtype)


def is_inexact(dtype) -> bool:
    """Whether ``dtype`` is a real or complex floating dtype (``bfloat16`` included)."""
    return is_floating(dtype) or as_dtype(dtype).kind == "c"


def check_dtype(dtype) -> np.dtype:
    """Return ``dtype`` as a native-byte-order NumPy dtype, or raise ``TypeError`` if numtile
    cannot hold it (``">f8"``, big-endian float64, is float64: tiles are in native order)."""
    if dtype is builtins.bool:
        return bool_
    try:
        dt = as_dtype(dtype)
    except TypeError:
        raise TypeError(f"{dtype!r} is not a dtype") from None
    if not dt.isnative:
        dt = dt.newbyteorder("=")
    if dt not in STANDARD and not is_narrow_floating(dt):
        names = ", ".join(d.name for d in STANDARD) + ", bfloat16, float16"
        raise TypeError(f"unsupported dtype {dt.name}; numtile tensors hold {names} (use astype)")
    return dt


def _dtype_of(value) -> np.dtype:
    """The dtype of a tensor or array, or ``value`` read as a dtype."""
    if isinstance(value, (type, np.dtype, str)):
        return check_dtype(value)
    return check_dtype(getattr(value, "dtype", value))


def _operand_dtype(operand):
    """The dtype of a tensor or dtype; a Python scalar stays itself (weak in promotion)."""
    if isinstance(operand, (builtins.bool, int, float, complex)):
        return operand
    return _dtype_of(operand)


def result_type(*operands) -> np.dtype:
    """The dtype of an op on ``operands`` (tensors, dtypes, or Python scalars, which are weak).

    >>> import numtile as nt
    >>> nt.result_type(nt.float32, 1.0), nt.result_type(nt.uint8, nt.int8, nt.float32)
    (dtype('float32'), dtype('float32'))
    """
    if not operands:
        raise ValueError("result_type needs at least one tensor or dtype")
    values = [_operand_dtype(operand) for operand in operands]
    if all(not isinstance(value, np.dtype) for value in values):
        raise ValueError("result_type needs at least one tensor or dtype, not only scalars")
    if any(map(is_bfloat16, values)):
        return _bfloat16_result(values)
    return check_dtype(np.result_type(*values))


def _bfloat16_result(values) -> np.dtype:
    """result_type of operands one of which is bfloat16 (PyTorch's rules, see the module)."""
    if any(isinstance(v, np.dtype) and not is_bfloat16(v) and is_inexact(v) for v in values):
        # another float: bfloat16 ranks as float32 (so float16 with it is float32 too)
        stand_in = [float32 if isinstance(v, np.dtype) and is_bfloat16(v) else v for v in values]
        return check_dtype(np.result_type(*stand_in))
    if any(isinstance(v, complex) for v in values):
        return complex64
    return bfloat16_dtype()


def can_cast(from_, to, /) -> bool:
    """Whether the standard's promotion rules allow casting ``from_`` (a dtype or tensor) to
    ``to``: ``to`` is the promoted type of the pair. Casts across kinds (bool to a number, an
    integer to a float) are False, as the standard's table has no such pair (NumPy: True).

    >>> import numtile as nt
    >>> nt.can_cast(nt.int8, nt.int64), nt.can_cast(nt.float64, nt.int64)
    (True, False)
    """
    if isinstance(from_, (builtins.bool, int, float, complex)):
        raise TypeError(
            f"can_cast takes a dtype or an array, not the Python scalar {from_!r} "
            "(its dtype depends on what it meets: see result_type)"
        )
    if from_ is None or to is None:  # np.dtype(None) would be float64
        raise TypeError(f"can_cast takes dtypes or arrays, got {from_!r} and {to!r}")
    from_, to = _dtype_of(from_), check_dtype(to)
    if is_bfloat16(from_) or is_bfloat16(to):
        # exact: booleans and 8-bit integers to bfloat16; bfloat16 to itself and wider floats
        if is_bfloat16(to):
            return builtins.bool(from_ in (bool_, int8, uint8) or is_bfloat16(from_))
        return builtins.bool(to in (float32, float64, complex64, complex128))
    if from_ == to:
        return True
    # the standard's rule: ``to`` is what the promotion table gives for the pair; its table
    # has no pair across bool / integers / floating types, so those casts are False (NumPy's
    # "safe" casting says True for bool -> int64 or int64 -> float64)
    groups = ("b", "iu", "fc")
    if not any(from_.kind in group and to.kind in group for group in groups):
        return False
    return builtins.bool(np.result_type(from_, to) == to)


def isdtype(dtype, kind) -> bool:
    """Whether ``dtype`` is of ``kind``: a dtype, a kind name of the array API ("bool",
    "signed integer", "unsigned integer", "integral", "real floating", "complex floating",
    "numeric"), or a tuple of them.

    >>> import numtile as nt
    >>> nt.isdtype(nt.int8, "integral"), nt.isdtype(nt.float32, ("bool", nt.float64))
    (True, False)
    """
    if dtype is None:  # np.dtype(None) would be float64
        raise TypeError("isdtype takes a dtype, got None")
    dtype = check_dtype(dtype)
    if isinstance(kind, tuple):
        return any(isdtype(dtype, k) for k in kind)
    if isinstance(kind, str):
        if kind not in KINDS:
            raise ValueError(f"unknown dtype kind {kind!r}; expected one of {sorted(KINDS)}")
        return dtype.name in KINDS[kind]
    return dtype == check_dtype(kind)


class finfo:  # noqa: N801  (the array API name)
    """Machine limits of a floating dtype (array API ``finfo``): bits, eps, max, min,
    smallest_normal, dtype; a complex dtype reports its real component's.

    >>> import numtile as nt
    >>> nt.finfo(nt.float32).bits, nt.finfo(nt.complex128).dtype
    (32, dtype('float64'))
    """

    def __init__(self, type, /):  # noqa: A002
        dtype = _dtype_of(type)
        if not is_inexact(dtype):
            raise ValueError(f"finfo needs a floating dtype, got {dtype.name} (use iinfo)")
        if is_bfloat16(dtype):
            import ml_dtypes  # (imported already: dtype is bfloat16)

            info = ml_dtypes.finfo(dtype)
        else:
            info = np.finfo(dtype)
        self.dtype = np.dtype(info.dtype)
        self.bits = int(info.bits)
        self.eps = float(info.eps)
        self.max = float(info.max)
        self.min = float(info.min)
        self.smallest_normal = float(info.smallest_normal)

    def __repr__(self) -> str:
        return f"finfo(dtype={self.dtype.name}, bits={self.bits}, eps={self.eps})"


class iinfo:  # noqa: N801  (the array API name)
    """Machine limits of an integer dtype (array API ``iinfo``): bits, max, min, dtype.

    >>> import numtile as nt
    >>> nt.iinfo(nt.uint8).max, nt.iinfo(nt.int16).min
    (255, -32768)
    """

    def __init__(self, type, /):  # noqa: A002
        dtype = _dtype_of(type)
        if dtype.kind not in "iu":
            raise ValueError(f"iinfo needs an integer dtype, got {dtype.name} (use finfo)")
        info = np.iinfo(dtype)
        self.dtype = dtype
        self.bits = int(info.bits)
        self.max = int(info.max)
        self.min = int(info.min)

    def __repr__(self) -> str:
        return f"iinfo(dtype={self.dtype.name}, min={self.min}, max={self.max})"
