"""Elementwise ops on TileTensors: unary math, binary arithmetic with broadcasting, comparisons,
bitwise ops, in-place operators (the engine they share is ``elementwise_core``)."""

from __future__ import annotations

import numpy as np

from numtile import opcodes
from numtile.runtime import Access, get_runtime
from numtile.tiletensor import codelets, dispatch
from numtile.tiletensor.creation import fill_tiles
from numtile.tiletensor.dispatch import dispatched
from numtile.tiletensor.dtypes import bool_
from numtile.tiletensor.elementwise_core import (  # noqa: F401  (astype... are used from here)
    astype,
    binary_op,
    copy_into,
    real_dtype,
    refuse_bool,
    refuse_complex,
    unary_op,
)
from numtile.tiletensor.manipulation import retile
from numtile.tiletensor.tensor import TileTensor

R, W = Access.R, Access.W


def make_unary(name: str, float_only: bool = True):
    def function(x: TileTensor) -> TileTensor:
        return unary_op(x, name, float_only)

    function.__name__ = name
    function.__qualname__ = name
    function.__doc__ = (
        f"Elementwise ``{name}`` of a tensor, tile by tile.\n\n"
        f"    >>> import numtile as nt\n"
        f"    >>> nt.{name}(nt.ones((2, 2))).shape\n"
        f"    (2, 2)\n"
    )
    return dispatched(function)


negative = make_unary("negative", float_only=False)
abs = make_unary("abs", float_only=False)  # noqa: A001  (array API name)
exp = make_unary("exp")
log = make_unary("log")
sqrt = make_unary("sqrt")
tanh = make_unary("tanh")
sin = make_unary("sin")
cos = make_unary("cos")
expm1 = make_unary("expm1")
log1p = make_unary("log1p")


def _make_rounding(name: str):
    def function(x: TileTensor) -> TileTensor:
        if isinstance(x, TileTensor) and x.dtype.kind in "biu":
            return astype(x, x.dtype)  # integers are already whole: a copy, in their dtype
        return unary_op(x, name)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = (
        f"Elementwise ``{name}``, tile by tile; integers give a copy in their own dtype.\n\n"
        f"    >>> import numtile as nt\n"
        f"    >>> str(nt.{name}(nt.asarray([1, 2])).dtype)\n"
        f"    'int64'\n"
    )
    return dispatched(function)


floor = _make_rounding("floor")
ceil = _make_rounding("ceil")
sign = make_unary("sign", float_only=False)
square = make_unary("square", float_only=False)
reciprocal = make_unary("reciprocal")
relu = make_unary("relu")
gelu_tanh = make_unary("gelu_tanh")
silu = make_unary("silu")
sigmoid = make_unary("sigmoid")


@dispatched
def conj(x: TileTensor, /) -> TileTensor:
    """The complex conjugate of each element (a copy of a real tensor).

    >>> import numtile as nt
    >>> nt.conj(nt.asarray([1 + 2j])).to_numpy().tolist()
    [(1-2j)]
    """
    return unary_op(x, "conj") if x.dtype.kind == "c" else astype(x, x.dtype)


@dispatched
def real(x: TileTensor, /) -> TileTensor:
    """The real part of each element, in the real dtype of ``x``'s components.

    >>> import numtile as nt
    >>> nt.real(nt.asarray([1 + 2j])).to_numpy().tolist()
    [1.0]
    """
    return unary_op(x, "real") if x.dtype.kind == "c" else astype(x, x.dtype)


@dispatched
def imag(x: TileTensor, /) -> TileTensor:
    """The imaginary part of each element (zeros for a real tensor).

    >>> import numtile as nt
    >>> nt.imag(nt.asarray([1 + 2j])).to_numpy().tolist()
    [2.0]
    """
    if x.dtype.kind == "c":
        return unary_op(x, "imag")
    return fill_tiles(TileTensor(x.layout, x.dtype), 0)


@dispatched(name="inplace", public="TileTensor's in-place operators (x += y ...)")
def inplace(x: TileTensor, name: str, other) -> TileTensor:
    """``x = name(x, other)`` written into x's own tiles (``x += y`` runs ``inplace(x, "add",
    y)``): tasks that read and write x's tiles, ordered after every earlier task on them.

    >>> import numtile as nt
    >>> x = nt.ones((3,)); x += 2; x.to_numpy().tolist()
    [3.0, 3.0, 3.0]
    """
    if name == "matmul":  # x @= y: the product, written into x's tiles if it keeps their shape
        product = dispatch.call("matmul", x, other)
        if product.dtype != x.dtype:
            raise TypeError(
                f"in-place matmul would change the dtype of a {x.dtype.name} tensor to "
                f"{product.dtype.name} (the array API forbids it; use the out-of-place form)"
            )
        if product.shape != x.shape:
            raise ValueError(
                f"in-place matmul: the product's shape {product.shape} is not the tensor's "
                f"{x.shape}"
            )
        copy_into(x, product)
        return x
    family = "bitwise" if name in opcodes.BITWISE_OPS else "binary"
    return binary_op(x, other, name, family, out=x)


def make_binary(name: str, family: str = "binary"):
    def function(x, y, /) -> TileTensor:
        return binary_op(x, y, name, family)

    function.__name__ = name
    function.__qualname__ = name
    example = (
        "nt.ones((2, 3)), nt.ones((3,))" if family != "bitwise" else "nt.arange(6).reshape(2, 3), 3"
    )
    function.__doc__ = (
        f"Elementwise ``{name}`` with NumPy broadcasting; either side may be a Python scalar.\n\n"
        f"    >>> import numtile as nt\n"
        f"    >>> nt.{name}({example}).shape\n"
        f"    (2, 3)\n"
    )
    return dispatched(function)


add = make_binary("add")
subtract = make_binary("subtract")
multiply = make_binary("multiply")
divide = make_binary("divide")
maximum = make_binary("maximum")
minimum = make_binary("minimum")
power = make_binary("power")
pow = power  # noqa: A001  (the array API name)
floor_divide = make_binary("floor_divide")
remainder = make_binary("remainder")
equal = make_binary("equal", "compare")
not_equal = make_binary("not_equal", "compare")
less = make_binary("less", "compare")
less_equal = make_binary("less_equal", "compare")
greater = make_binary("greater", "compare")
greater_equal = make_binary("greater_equal", "compare")
logical_and = make_binary("logical_and", "compare")
logical_or = make_binary("logical_or", "compare")
bitwise_and = make_binary("bitwise_and", "bitwise")
bitwise_or = make_binary("bitwise_or", "bitwise")
bitwise_xor = make_binary("bitwise_xor", "bitwise")
bitwise_left_shift = make_binary("bitwise_left_shift", "bitwise")
bitwise_right_shift = make_binary("bitwise_right_shift", "bitwise")


@dispatched
def bitwise_invert(x: TileTensor, /) -> TileTensor:
    """``~x``: every bit flipped (``logical_not`` for booleans).

    >>> import numtile as nt
    >>> nt.bitwise_invert(nt.arange(3)).to_numpy().tolist()
    [-1, -2, -3]
    """
    if not isinstance(x, TileTensor):
        raise TypeError(f"bitwise_invert expects a TileTensor, got {type(x).__name__}")
    if x.dtype.kind not in "biu":
        raise TypeError(f"bitwise_invert needs integer or boolean tensors, got {x.dtype.name}")
    all_ones = True if x.dtype == bool_ else (-1 if x.dtype.kind == "i" else np.iinfo(x.dtype).max)
    return binary_op(x, x.dtype.type(all_ones), "bitwise_xor", "bitwise")


@dispatched
def logical_not(x: TileTensor, /) -> TileTensor:
    """``not x`` elementwise (any nonzero value is true).

    >>> import numtile as nt
    >>> nt.logical_not(nt.arange(3)).to_numpy().tolist()
    [True, False, False]
    """
    return binary_op(x, 0, "equal", "compare") if x.dtype != bool_ else bitwise_invert(x)


# unary ops whose derivative has a fused kernel (``unary_backward``)
FUSED_BACKWARD = tuple(codelets.elementwise.unary_backward)


def unary_backward(x: TileTensor, grad: TileTensor, name: str) -> TileTensor:
    """``grad * f'(x)`` for unary op ``name``, through its fused backward kernel.

    >>> import numtile as nt
    >>> unary_backward(nt.zeros((3,)), nt.ones((3,)), "exp").to_numpy().tolist()
    [1.0, 1.0, 1.0]
    """
    if grad.tile_shape != x.tile_shape:
        grad = retile(grad, x.tile_shape)
    if grad.dtype != x.dtype:
        grad = astype(grad, x.dtype)
    out = TileTensor(x.layout, x.dtype)
    codelet = codelets.elementwise.unary_backward[name]
    runtime = get_runtime()
    for xs, gs, dst in zip(x.handles, grad.handles, out.handles):
        runtime.submit(codelet, [(xs, R), (gs, R), (dst, W)])
    return out


def accumulate(target: TileTensor, x: TileTensor) -> None:
    """``target += x`` in place, tile by tile, with commutative accumulate tasks.

    ``x`` must have the layout and dtype of ``target`` (gradient sums use this).

    >>> import numtile as nt
    >>> total = nt.ones((3,)); accumulate(total, nt.ones((3,))); total.to_numpy().tolist()
    [2.0, 2.0, 2.0]
    """
    assert x.layout == target.layout and x.dtype == target.dtype
    runtime = get_runtime()
    one = target.dtype.type(1)
    for src, dst in zip(x.handles, target.handles):
        runtime.submit(codelets.elementwise.axpy, [(src, R), (dst, Access.ACCUMULATE)], (one,))
