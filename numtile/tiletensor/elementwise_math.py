"""The rest of the array API's element-wise functions: inverse and hyperbolic trigonometry,
log2/log10, trunc/round, positive, the float functions of two arguments (atan2, copysign,
hypot, logaddexp), logical_xor and clip.

Special values (NaN, infinities, signed zeros) are those the standard lists: the kernels follow
C99, as NumPy does. Integer inputs of the float functions are promoted to float64; ``trunc``
and ``round`` of integers return a copy in the same dtype, as the standard says.
"""

from __future__ import annotations

import numbers

import numpy as np

from numtile.tiletensor.dispatch import dispatched
from numtile.tiletensor.elementwise import make_binary, make_unary, maximum, minimum
from numtile.tiletensor.elementwise_core import astype, refuse_bool, refuse_complex, unary_op
from numtile.tiletensor.tensor import TileTensor

# the standard's constants
e, inf, nan, pi = np.e, np.inf, np.nan, np.pi

acos = make_unary("acos")
acosh = make_unary("acosh")
asin = make_unary("asin")
asinh = make_unary("asinh")
atan = make_unary("atan")
atanh = make_unary("atanh")
cosh = make_unary("cosh")
sinh = make_unary("sinh")
tan = make_unary("tan")
log2 = make_unary("log2")
log10 = make_unary("log10")
atan2 = make_binary("atan2")
copysign = make_binary("copysign")
hypot = make_binary("hypot")
logaddexp = make_binary("logaddexp")
logical_xor = make_binary("logical_xor", "compare")


def _rounding(x, name: str) -> TileTensor:
    if not isinstance(x, TileTensor):
        raise TypeError(f"{name} expects a TileTensor, got {type(x).__name__}")
    if x.dtype.kind == "c" and name == "round":  # each part rounded half to even
        return unary_op(x, name)
    refuse_complex(x, name)
    if x.dtype.kind in "biu":  # integers are already whole: a copy, in their dtype
        return astype(x, x.dtype)
    return unary_op(x, name)


@dispatched
def trunc(x: TileTensor, /) -> TileTensor:
    """Each element rounded toward zero (integers: a copy in their dtype).

    >>> import numtile as nt
    >>> nt.trunc(nt.asarray([-1.5, 2.7])).to_numpy().tolist()
    [-1.0, 2.0]
    """
    return _rounding(x, "trunc")


@dispatched
def round(x: TileTensor, /) -> TileTensor:  # noqa: A001  (the array API name)
    """Each element rounded to the nearest integer, halves to even (integers: a copy).

    >>> import numtile as nt
    >>> nt.round(nt.asarray([0.5, 1.5, -2.5])).to_numpy().tolist()
    [0.0, 2.0, -2.0]
    """
    return _rounding(x, "round")


@dispatched
def positive(x: TileTensor, /) -> TileTensor:
    """``+x``: a copy of ``x``.

    >>> import numtile as nt
    >>> nt.positive(nt.asarray([-1, 2])).to_numpy().tolist()
    [-1, 2]
    """
    if not isinstance(x, TileTensor):
        raise TypeError(f"positive expects a TileTensor, got {type(x).__name__}")
    refuse_bool(x, "positive")
    return astype(x, x.dtype)


def _bound(value, dtype: np.dtype):
    """A clip bound as ``maximum``/``minimum`` take it: an integer scalar beyond an integer
    dtype's range clamped to it (it clips nothing), anything else as given."""
    if dtype.kind in "iu" and isinstance(value, numbers.Integral) and not isinstance(value, bool):
        info = np.iinfo(dtype)
        return dtype.type(info.min if value < info.min else info.max if value > info.max else value)
    return value


@dispatched
def clip(x: TileTensor, /, min=None, max=None) -> TileTensor:  # noqa: A002  (array API names)
    """Each element of ``x`` clamped to ``[min, max]`` (scalars or tensors that broadcast to
    ``x``; None for no bound), in ``x``'s dtype. A NaN in ``x`` or in a bound gives NaN; where
    ``min > max`` the result is ``max``.

    >>> import numtile as nt
    >>> nt.clip(nt.asarray([-2.0, 0.5, 3.0]), min=-1.0, max=1.0).to_numpy().tolist()
    [-1.0, 0.5, 1.0]
    """
    if not isinstance(x, TileTensor):
        raise TypeError(f"clip expects a TileTensor, got {type(x).__name__}")
    refuse_complex(x, "clip")
    out = x
    if min is not None:
        out = maximum(out, _bound(min, x.dtype))
    if max is not None:
        out = minimum(out, _bound(max, x.dtype))
    if out is x:
        return astype(x, x.dtype)
    if out.shape != x.shape:
        raise ValueError(f"clip: bounds of shape {out.shape} do not broadcast to x's {x.shape}")
    return out if out.dtype == x.dtype else astype(out, x.dtype)
