"""Gradient rules of the elementwise ops: arithmetic with broadcasting, unary math, casts.

Complex inputs follow PyTorch's convention: a gradient is the conjugate Wirtinger derivative
of a real loss (``dL/dx + i dL/dy`` for z = x + iy), so a holomorphic f passes back
``g * conj(f'(z))``, and a real input given a complex gradient keeps its real part (tape.py)."""

from __future__ import annotations

import numbers

import numpy as np

from numtile.autograd.rules import gradient_rule
from numtile.autograd.tape import Function
from numtile.tiletensor import elementwise
from numtile.tiletensor.creation import zeros_like
from numtile.tiletensor.dtypes import is_floating
from numtile.tiletensor.manipulation import reshape, retile
from numtile.tiletensor.reduction import sum as tensor_sum
from numtile.tiletensor.tensor import TileTensor


def _is_tensor(value) -> bool:
    return isinstance(value, TileTensor)


def conj(value):
    """The complex conjugate of a tensor or scalar; a real one as it is (no copy)."""
    if _is_tensor(value):
        return elementwise.conj(value) if value.dtype.kind == "c" else value
    return value.conjugate() if isinstance(value, complex) else value


def layout_of(value):
    """What ``unbroadcast`` needs of an operand: its layout, or None for a scalar."""
    return value.layout if _is_tensor(value) else None


def unbroadcast(grad: TileTensor, like) -> TileTensor | None:
    """``grad`` summed over the axes broadcasting added or stretched, back to the shape and
    tiles of ``like`` (a tensor or a layout); None when ``like`` is a scalar or None."""
    if like is None or isinstance(like, numbers.Number):
        return None
    shape = like.shape
    lead = grad.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + a for a, s in enumerate(shape) if s == 1 and grad.shape[lead + a] != 1
    )
    if axes:
        grad = tensor_sum(grad, axis=axes, keepdims=True)
    if grad.shape != shape:
        grad = reshape(grad, shape)
    if grad.tile_shape != like.tile_shape:
        grad = retile(grad, like.tile_shape)
    return grad


class _Binary(Function):
    """Base of the binary rules: keeps both operands for the backward."""

    @classmethod
    def rule(cls, x, y):
        return cls.apply(x, y)


class Add(_Binary):
    @staticmethod
    def forward(ctx, x, y):
        ctx.layouts = (layout_of(x), layout_of(y))  # not the tensors: their tiles can go
        return elementwise.add(x, y)

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.layouts
        return unbroadcast(g, x), unbroadcast(g, y)


class Subtract(_Binary):
    @staticmethod
    def forward(ctx, x, y):
        ctx.layouts = (layout_of(x), layout_of(y))
        return elementwise.subtract(x, y)

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.layouts
        return unbroadcast(g, x), (unbroadcast(elementwise.negative(g), y) if y else None)


class Multiply(_Binary):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return elementwise.multiply(x, y)

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved
        gx = unbroadcast(elementwise.multiply(g, conj(y)), x) if _is_tensor(x) else None
        gy = unbroadcast(elementwise.multiply(g, conj(x)), y) if _is_tensor(y) else None
        return gx, gy


class Divide(_Binary):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return elementwise.divide(x, y)

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved
        gx = unbroadcast(elementwise.divide(g, conj(y)), x) if _is_tensor(x) else None
        gy = None
        if _is_tensor(y):
            gy = elementwise.negative(
                elementwise.divide(
                    elementwise.multiply(g, conj(x)), conj(elementwise.multiply(y, y))
                )
            )
            gy = unbroadcast(gy, y)
        return gx, gy


class _Extremum(_Binary):
    """maximum / minimum: the gradient goes to the operand picked, half to each on a tie
    (as PyTorch does)."""

    @classmethod
    def forward(cls, ctx, x, y):
        ctx.save_for_backward(x, y)
        ctx.pick = cls.pick
        return cls.plain(x, y)

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved
        picked = elementwise.astype(ctx.pick(x, y), g.dtype)
        tied = elementwise.astype(elementwise.equal(x, y), g.dtype)
        share_x = elementwise.add(picked, elementwise.multiply(tied, 0.5))
        gx = unbroadcast(elementwise.multiply(g, share_x), x) if _is_tensor(x) else None
        gy = (
            unbroadcast(elementwise.multiply(g, elementwise.subtract(1.0, share_x)), y)
            if _is_tensor(y)
            else None
        )
        return gx, gy


class Maximum(_Extremum):
    pick = staticmethod(elementwise.greater)
    plain = staticmethod(elementwise.maximum)


class Minimum(_Extremum):
    pick = staticmethod(elementwise.less)
    plain = staticmethod(elementwise.minimum)


class PowerScalar(Function):
    @staticmethod
    def forward(ctx, x, exponent):
        ctx.save_for_backward(x)
        ctx.exponent = exponent
        return elementwise.pow(x, exponent)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved
        p = ctx.exponent
        derivative = elementwise.multiply(elementwise.pow(x, p - 1), p)
        return elementwise.multiply(g, conj(derivative)), None


class Power(_Binary):
    """x ** y with a tensor exponent: d/dx = y x^(y-1), d/dy = x^y log(x)."""

    @staticmethod
    def forward(ctx, x, y):
        out = elementwise.pow(x, y)
        ctx.save_for_backward(x, y, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x, y, out = ctx.saved
        gx = gy = None
        if _is_tensor(x):
            derivative = elementwise.multiply(y, elementwise.pow(x, elementwise.subtract(y, 1)))
            gx = unbroadcast(elementwise.multiply(g, conj(derivative)), x)
        if _is_tensor(y):
            log_x = elementwise.log(x) if _is_tensor(x) else np.log(x).item()
            gy = unbroadcast(elementwise.multiply(g, conj(elementwise.multiply(out, log_x))), y)
        return gx, gy


for _name, _function in (
    ("add", Add),
    ("subtract", Subtract),
    ("multiply", Multiply),
    ("divide", Divide),
    ("maximum", Maximum),
    ("minimum", Minimum),
):
    gradient_rule(_name)(_function.rule)


@gradient_rule("power")
def _power(x, y):
    if _is_tensor(x) and isinstance(y, numbers.Number):
        return PowerScalar.apply(x, y)
    return Power.apply(x, y)


class Negative(Function):
    @staticmethod
    def forward(ctx, x):
        return elementwise.negative(x)

    @staticmethod
    def backward(ctx, g):
        return (elementwise.negative(g),)


gradient_rule("negative")(Negative.apply)


def _float(x: TileTensor) -> TileTensor:
    return x if is_floating(x.dtype) or x.dtype.kind == "c" else elementwise.astype(x, np.float64)


# f'(x) from the input x and the output y of the fused-backward ops that take complex inputs
# (their backward kernels are real only)
COMPLEX_DERIVATIVES = {
    "exp": lambda x, y: y,
    "log": lambda x, y: elementwise.reciprocal(x),
    "sqrt": lambda x, y: elementwise.divide(0.5, y),
    "tanh": lambda x, y: elementwise.subtract(1.0, elementwise.square(y)),
}


def _kernel_rule(name: str) -> type[Function]:
    """The rule of a unary op whose derivative has a fused kernel (``unary_backward``)."""
    plain = getattr(elementwise, name)

    def forward(ctx, x):
        x = _float(x)
        y = plain(x)
        ctx.save_for_backward(x, y if x.dtype.kind == "c" else None)
        return y

    def backward(ctx, g):
        x, y = ctx.saved
        if x.dtype.kind == "c":
            return (elementwise.multiply(g, conj(COMPLEX_DERIVATIVES[name](x, y))),)
        return (elementwise.unary_backward(x, g, name),)

    return type(
        name.title().replace("_", ""),
        (Function,),
        {"forward": staticmethod(forward), "backward": staticmethod(backward)},
    )


# f'(x) from the input x and the output y, for the unary ops without a backward kernel
DERIVATIVES = {
    "sin": lambda x, y: elementwise.cos(x),
    "cos": lambda x, y: elementwise.negative(elementwise.sin(x)),
    "abs": lambda x, y: elementwise.sign(x),
    "square": lambda x, y: elementwise.multiply(x, 2.0),
    "expm1": lambda x, y: elementwise.add(y, 1.0),
    "log1p": lambda x, y: elementwise.reciprocal(elementwise.add(x, 1.0)),
    "reciprocal": lambda x, y: elementwise.negative(elementwise.square(y)),
}


def composed_rule(name: str, plain=None, derivative=None) -> type[Function]:
    """The rule of a unary op whose derivative is a product of tiled ops (``DERIVATIVES``,
    or ``derivative(x, y)`` of the op ``plain``); holomorphic on complex inputs but ``abs``,
    whose "derivative" sign(z) = z / |z| is already the gradient factor PyTorch gives."""
    plain = plain or getattr(elementwise, name)
    derivative = derivative or DERIVATIVES[name]

    def forward(ctx, x):
        x = _float(x)
        y = plain(x)
        ctx.save_for_backward(x, y)
        return y

    def backward(ctx, g):
        x, y = ctx.saved
        factor = derivative(x, y)
        return (elementwise.multiply(factor if name == "abs" else conj(factor), g),)

    return type(
        name.title().replace("_", ""),
        (Function,),
        {"forward": staticmethod(forward), "backward": staticmethod(backward)},
    )


UNARY_FUNCTIONS = {name: _kernel_rule(name) for name in elementwise.FUSED_BACKWARD}
UNARY_FUNCTIONS.update({name: composed_rule(name) for name in DERIVATIVES})
for _name, _function in UNARY_FUNCTIONS.items():
    gradient_rule(_name)(_function.apply)


class AsType(Function):
    @staticmethod
    def forward(ctx, x, dtype):
        ctx.dtype = x.dtype
        return elementwise.astype(x, dtype)

    @staticmethod
    def backward(ctx, g):
        if g.dtype.kind == "c" and ctx.dtype.kind != "c":
            g = elementwise.real(g)  # real -> complex: the real part flows back
        return (elementwise.astype(g, ctx.dtype),)


@gradient_rule("astype")
def _astype(x, dtype, /, *, copy=True, device=None):
    if is_floating(dtype) or np.dtype(dtype).kind == "c":
        return AsType.apply(x, dtype)
    # integers and booleans carry no gradient
    return elementwise.astype(x.detach(), dtype, copy=copy, device=device)


class Real(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.dtype = x.dtype
        return elementwise.real(x)

    @staticmethod
    def backward(ctx, g):
        return (elementwise.astype(g, ctx.dtype),)


class Imag(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.dtype = x.dtype
        return elementwise.imag(x)

    @staticmethod
    def backward(ctx, g):
        if ctx.dtype.kind != "c":  # zeros whatever x is
            return (zeros_like(g),)
        return (elementwise.multiply(elementwise.astype(g, ctx.dtype), 1j),)


class Conj(Function):
    @staticmethod
    def forward(ctx, x):
        return elementwise.conj(x)

    @staticmethod
    def backward(ctx, g):
        return (conj(g),)


gradient_rule("real")(Real.apply)
gradient_rule("imag")(Imag.apply)
gradient_rule("conj")(Conj.apply)
