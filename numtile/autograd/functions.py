"""Differentiable tiled ops: each is a ``Function`` next to its gradient rule.

The plain tiled ops (``numtile.tiletensor``) run when no input requires a gradient; the
public API and the TileTensor operators call the wrappers at the bottom of this module.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from numtile import opcodes
from numtile.autograd.tape import Context, Function, needs_grad
from numtile.runtime import Access, Codelet, get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor import elementwise as ew
from numtile.tiletensor import linalg as la
from numtile.tiletensor import manipulation as mp
from numtile.tiletensor import reduction as rd
from numtile.tiletensor.tensor import TileTensor

R, ACC = Access.R, Access.ACCUMULATE


def _is_tensor(value) -> bool:
    return isinstance(value, TileTensor)


def unbroadcast(grad: TileTensor, shape: tuple[int, ...], tile_shape) -> TileTensor:
    """Sum ``grad`` over the axes that broadcasting added or stretched, back to ``shape``."""
    lead = grad.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + a for a, s in enumerate(shape) if s == 1 and grad.shape[lead + a] != 1
    )
    if axes:
        grad = rd.sum(grad, axis=axes, keepdims=True)
    if grad.shape != shape:
        grad = mp.reshape(grad, shape)
    if tile_shape is not None and grad.tile_shape != tile_shape:
        grad = mp.retile(grad, tile_shape)
    return grad


def _tiles(value):
    return value.tile_shape if _is_tensor(value) else None


def _shape(value):
    return value.shape if _is_tensor(value) else None


def accumulate_grad(leaf: TileTensor, grad: TileTensor) -> None:
    """``leaf.grad += grad`` tile by tile (commutative accumulate tasks), or set it."""
    if grad.shape != leaf.shape:
        raise ValueError(f"gradient of shape {grad.shape} for a tensor of shape {leaf.shape}")
    if grad.dtype != leaf.dtype:
        grad = ew.astype(grad, leaf.dtype)
    if grad.tile_shape != leaf.tile_shape:
        grad = mp.retile(grad, leaf.tile_shape)
    if leaf.grad is None:
        leaf.grad = grad
        return
    runtime = get_runtime()
    one = leaf.dtype.type(1)
    for src, dst in zip(grad.handles, leaf.grad.handles):
        runtime.submit(AXPY, [(src, R), (dst, ACC)], (one,))


def _axpy(ops, x, y, alpha):
    ops.axpy(alpha, x.reshape(-1), y.reshape(-1))


AXPY = Codelet("axpy", kernel=_axpy, flops=lambda x, y, alpha: 2.0 * math.prod(y))


class Add(Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.shapes = (_shape(x), _tiles(x), _shape(y), _tiles(y))
        return ew.add(x, y)

    @staticmethod
    def backward(ctx, g):
        sx, tx, sy, ty = ctx.shapes
        return (
            unbroadcast(g, sx, tx) if sx is not None else None,
            unbroadcast(g, sy, ty) if sy is not None else None,
        )


class Subtract(Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.shapes = (_shape(x), _tiles(x), _shape(y), _tiles(y))
        return ew.subtract(x, y)

    @staticmethod
    def backward(ctx, g):
        sx, tx, sy, ty = ctx.shapes
        return (
            unbroadcast(g, sx, tx) if sx is not None else None,
            unbroadcast(ew.negative(g), sy, ty) if sy is not None else None,
        )


class Multiply(Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return ew.multiply(x, y)

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved
        gx = unbroadcast(ew.multiply(g, y), x.shape, x.tile_shape) if _is_tensor(x) else None
        gy = unbroadcast(ew.multiply(g, x), y.shape, y.tile_shape) if _is_tensor(y) else None
        return gx, gy


class Divide(Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return ew.divide(x, y)

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved
        gx = unbroadcast(ew.divide(g, y), x.shape, x.tile_shape) if _is_tensor(x) else None
        gy = None
        if _is_tensor(y):
            gy = ew.negative(ew.divide(ew.multiply(g, x), ew.multiply(y, y)))
            gy = unbroadcast(gy, y.shape, y.tile_shape)
        return gx, gy


class PowerScalar(Function):
    @staticmethod
    def forward(ctx, x, exponent):
        ctx.save_for_backward(x)
        ctx.exponent = exponent
        return ew.pow(x, exponent)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved
        p = ctx.exponent
        return ew.multiply(g, ew.multiply(ew.pow(x, p - 1), p)), None


class Negative(Function):
    @staticmethod
    def forward(ctx, x):
        return ew.negative(x)

    @staticmethod
    def backward(ctx, g):
        return (ew.negative(g),)


def _unary_backward(x: TileTensor, g: TileTensor, name: str) -> TileTensor:
    """Tiled ``g * f'(x)`` through the fused backward kernel of unary op ``name``."""
    if g.tile_shape != x.tile_shape:
        g = mp.retile(g, x.tile_shape)
    if g.dtype != x.dtype:
        g = ew.astype(g, x.dtype)
    out = TileTensor(x.layout, x.dtype)
    op = opcodes.UNARY_BACKWARD_OPS[name]
    runtime = get_runtime()
    for xs, gs, dst in zip(x.handles, g.handles, out.handles):
        runtime.submit(codelets.unary_backward, [(xs, R), (gs, R), (dst, Access.W)], (op,))
    return out


def _make_unary_function(name: str) -> type[Function]:
    plain = getattr(ew, name)

    def forward(ctx, x):
        if x.dtype.kind != "f":
            x = ew.astype(x, np.float64)
        ctx.save_for_backward(x)
        return plain(x)

    def backward(ctx, g):
        (x,) = ctx.saved
        return (_unary_backward(x, g, name),)

    return type(
        name.title().replace("_", ""),
        (Function,),
        {"forward": staticmethod(forward), "backward": staticmethod(backward)},
    )


UNARY_FUNCTIONS = {
    name: _make_unary_function(name)
    for name in ("exp", "log", "sqrt", "tanh", "relu", "gelu_tanh", "silu", "sigmoid")
}


class MatMul(Function):
    @staticmethod
    def forward(ctx, x, y, transpose_a=False, transpose_b=False):
        if x.ndim < 2 or y.ndim < 2:
            raise ValueError(
                "matmul with gradients needs operands of at least 2 axes; reshape "
                f"vectors first (got shapes {x.shape} and {y.shape})"
            )
        ctx.save_for_backward(x, y)
        ctx.flags = (transpose_a, transpose_b)
        return la.matmul(x, y, transpose_a=transpose_a, transpose_b=transpose_b)

    @staticmethod
    def backward(ctx, g):
        # C = op(A) op(B): dA = g op(B)^T (transposed back if A was), dB likewise; the
        # transposes are GEMM flags, never copies
        x, y = ctx.saved
        ta, tb = ctx.flags
        gx = gy = None
        if x.requires_grad:
            if ta:  # dA = op(B) g^T
                gx = la.matmul(y, g, transpose_a=tb, transpose_b=True)
            else:  # dA = g op(B)^T
                gx = la.matmul(g, y, transpose_b=not tb)
            gx = unbroadcast(gx, x.shape, x.tile_shape)
        if y.requires_grad:
            if tb:  # dB = g^T op(A)
                gy = la.matmul(g, x, transpose_a=True, transpose_b=ta)
            else:  # dB = op(A)^T g
                gy = la.matmul(x, g, transpose_a=not ta)
            gy = unbroadcast(gy, y.shape, y.tile_shape)
        return gx, gy


class Sum(Function):
    @staticmethod
    def forward(ctx, x, axis=None, keepdims=False):
        ctx.shape, ctx.tile_shape = x.shape, x.tile_shape
        ctx.axes = rd._normalize_axes(axis, x.ndim)
        return rd.sum(x, axis=axis, keepdims=keepdims)

    @staticmethod
    def backward(ctx, g):
        kept = tuple(1 if a in ctx.axes else s for a, s in enumerate(ctx.shape))
        g = mp.reshape(g, kept)
        return (mp.broadcast_to(g, ctx.shape, ctx.tile_shape),)


class Reshape(Function):
    @staticmethod
    def forward(ctx, x, shape):
        ctx.shape, ctx.tile_shape = x.shape, x.tile_shape
        return mp.reshape(x, shape)

    @staticmethod
    def backward(ctx, g):
        g = mp.reshape(g, ctx.shape)
        return (g if g.tile_shape == ctx.tile_shape else mp.retile(g, ctx.tile_shape),)


class PermuteDims(Function):
    @staticmethod
    def forward(ctx, x, axes):
        ctx.axes = tuple(a % x.ndim for a in axes)
        return mp.permute_dims(x, axes)

    @staticmethod
    def backward(ctx, g):
        inverse = tuple(int(i) for i in np.argsort(ctx.axes))
        return (mp.permute_dims(g, inverse),)


class AsType(Function):
    @staticmethod
    def forward(ctx, x, dtype):
        ctx.dtype = x.dtype
        return ew.astype(x, dtype)

    @staticmethod
    def backward(ctx, g):
        return (ew.astype(g, ctx.dtype),)


# -- public wrappers: record only when some input requires a gradient -------------------------


def _binary(function: type[Function], plain):
    def op(x, y):
        return function.apply(x, y) if needs_grad(x, y) else plain(x, y)

    op.__name__ = plain.__name__
    op.__doc__ = plain.__doc__
    return op


add = _binary(Add, ew.add)
subtract = _binary(Subtract, ew.subtract)
multiply = _binary(Multiply, ew.multiply)
divide = _binary(Divide, ew.divide)


def matmul(x1, x2, *, transpose_a: bool = False, transpose_b: bool = False):
    """Matrix product (differentiable); ``transpose_a/b`` read an operand transposed."""
    if needs_grad(x1, x2):
        return MatMul.apply(x1, x2, transpose_a=transpose_a, transpose_b=transpose_b)
    return la.matmul(x1, x2, transpose_a=transpose_a, transpose_b=transpose_b)


def power(x, y):
    """Elementwise power; differentiable for a tensor raised to a Python scalar."""
    if needs_grad(x, y):
        if _is_tensor(x) and isinstance(y, numbers.Number):
            return PowerScalar.apply(x, y)
        raise NotImplementedError("gradients of pow are implemented for tensor ** scalar only")
    return ew.pow(x, y)


pow = power  # noqa: A001  (the array API name)


def negative(x):
    return Negative.apply(x) if needs_grad(x) else ew.negative(x)


def _unary(name: str):
    plain = getattr(ew, name)
    function = UNARY_FUNCTIONS[name]

    def op(x):
        return function.apply(x) if needs_grad(x) else plain(x)

    op.__name__ = name
    op.__doc__ = plain.__doc__
    return op


exp = _unary("exp")
log = _unary("log")
sqrt = _unary("sqrt")
tanh = _unary("tanh")
relu = _unary("relu")
gelu_tanh = _unary("gelu_tanh")
silu = _unary("silu")
sigmoid = _unary("sigmoid")


def sum(x, /, *, axis=None, dtype=None, keepdims=False):  # noqa: A001
    """Sum over ``axis`` (differentiable)."""
    if needs_grad(x):
        if dtype is not None and np.dtype(dtype) != x.dtype:
            x = astype(x, dtype)
        return Sum.apply(x, axis=axis, keepdims=keepdims)
    return rd.sum(x, axis=axis, dtype=dtype, keepdims=keepdims)


def mean(x, /, *, axis=None, keepdims=False):
    """Arithmetic mean over ``axis`` (differentiable)."""
    if needs_grad(x):
        count = math.prod(x.shape[a] for a in rd._normalize_axes(axis, x.ndim))
        return multiply(sum(x, axis=axis, keepdims=keepdims), 1.0 / count)
    return rd.mean(x, axis=axis, keepdims=keepdims)


def reshape(x, shape, *, copy=None):
    """Reshape where the tiling allows (differentiable)."""
    return Reshape.apply(x, shape) if needs_grad(x) else mp.reshape(x, shape, copy=copy)


def permute_dims(x, axes):
    """Permute axes (differentiable)."""
    return PermuteDims.apply(x, tuple(axes)) if needs_grad(x) else mp.permute_dims(x, axes)


def matrix_transpose(x):
    """Swap the last two axes (differentiable)."""
    if not needs_grad(x):
        return mp.matrix_transpose(x)
    axes = list(range(x.ndim))
    axes[-2], axes[-1] = axes[-1], axes[-2]
    return permute_dims(x, axes)


def transpose(x, axes=None):
    """Reverse or permute the axes (differentiable)."""
    return permute_dims(x, tuple(range(x.ndim))[::-1] if axes is None else axes)


def astype(x, dtype, copy=True):
    """Convert the dtype (differentiable between float dtypes)."""
    if needs_grad(x) and np.dtype(dtype).kind == "f":
        return AsType.apply(x, dtype)
    return ew.astype(x, dtype, copy)


__all__ = [
    "Context",
    "accumulate_grad",
    "add",
    "astype",
    "divide",
    "exp",
    "gelu_tanh",
    "log",
    "matmul",
    "matrix_transpose",
    "mean",
    "multiply",
    "negative",
    "permute_dims",
    "pow",
    "relu",
    "reshape",
    "sigmoid",
    "silu",
    "sqrt",
    "subtract",
    "sum",
    "tanh",
    "transpose",
    "unbroadcast",
]
