"""Gradient rules of the element-wise functions of ``tiletensor.elementwise_math``: inverse and
hyperbolic trigonometry, log2/log10 (derivatives as products of tiled ops) and the float
functions of two arguments (atan2, hypot, logaddexp, copysign)."""

from __future__ import annotations

import math

from numtile.autograd.elementwise import UNARY_FUNCTIONS, _Binary, _is_tensor, composed_rule
from numtile.autograd.elementwise import unbroadcast as _unbroadcast
from numtile.autograd.rules import gradient_rule
from numtile.tiletensor import elementwise as ew
from numtile.tiletensor import elementwise_math as em
from numtile.tiletensor.logic import signbit


def _one_minus_square(x):
    return ew.subtract(1.0, ew.square(x))


# f'(x) from the input x and the output y
DERIVATIVES = {
    "acos": lambda x, y: ew.negative(ew.reciprocal(ew.sqrt(_one_minus_square(x)))),
    "asin": lambda x, y: ew.reciprocal(ew.sqrt(_one_minus_square(x))),
    "atan": lambda x, y: ew.reciprocal(ew.add(ew.square(x), 1.0)),
    # 1 / sqrt(x - 1) sqrt(x + 1): the principal branch's derivative on complex x too
    "acosh": lambda x, y: ew.reciprocal(
        ew.multiply(ew.sqrt(ew.subtract(x, 1.0)), ew.sqrt(ew.add(x, 1.0)))
    ),
    "asinh": lambda x, y: ew.reciprocal(ew.sqrt(ew.add(ew.square(x), 1.0))),
    "atanh": lambda x, y: ew.reciprocal(_one_minus_square(x)),
    "cosh": lambda x, y: em.sinh(x),
    "sinh": lambda x, y: em.cosh(x),
    "tan": lambda x, y: ew.add(ew.square(y), 1.0),
    "log2": lambda x, y: ew.reciprocal(ew.multiply(x, math.log(2.0))),
    "log10": lambda x, y: ew.reciprocal(ew.multiply(x, math.log(10.0))),
}
for _name, _derivative in DERIVATIVES.items():
    UNARY_FUNCTIONS[_name] = composed_rule(_name, getattr(em, _name), _derivative)
    gradient_rule(_name)(UNARY_FUNCTIONS[_name].apply)


def _partials(name: str, x, y, out):
    """(d out / d x, d out / d y) of ``out = name(x, y)``."""
    if name == "atan2":  # atan2(x, y) = atan(x / y)
        denominator = ew.add(ew.square(x), ew.square(y))
        return ew.divide(y, denominator), ew.negative(ew.divide(x, denominator))
    if name == "hypot":
        return ew.divide(x, out), ew.divide(y, out)
    if name == "logaddexp":
        return ew.exp(ew.subtract(x, out)), ew.exp(ew.subtract(y, out))
    # copysign: |x| with y's sign, so d/dx is +-1 (1 where the sign of x is kept), d/dy is 0
    kept = ew.astype(ew.equal(signbit(x), signbit(out)), out.dtype)
    return ew.subtract(ew.multiply(kept, 2.0), 1.0), None


class BinaryMath(_Binary):
    """atan2, hypot, logaddexp, copysign of two operands (tensors or scalars)."""

    @staticmethod
    def forward(ctx, x, y, name):
        out = getattr(em, name)(x, y)
        ctx.save_for_backward(x, y, out)
        ctx.name = name
        return out

    @staticmethod
    def backward(ctx, g):
        x, y, out = ctx.saved
        dx, dy = _partials(ctx.name, x, y, out)
        gx = _unbroadcast(ew.multiply(g, dx), x) if _is_tensor(x) else None
        gy = _unbroadcast(ew.multiply(g, dy), y) if _is_tensor(y) and dy is not None else None
        return gx, gy, None


def _binary_rule(name: str):
    def rule(x, y):
        return BinaryMath.apply(x, y, name)

    return rule


for _name in ("atan2", "hypot", "logaddexp", "copysign"):
    gradient_rule(_name)(_binary_rule(_name))
