"""Gradient rule of ``where``: the gradient flows to the branch each element was taken from."""

from __future__ import annotations

from numtile.autograd.elementwise import layout_of, unbroadcast
from numtile.autograd.rules import gradient_rule
from numtile.autograd.tape import Function
from numtile.tiletensor import logic
from numtile.tiletensor.tensor import TileTensor


class Where(Function):
    @staticmethod
    def forward(ctx, x1, x2, condition):
        ctx.condition = condition
        ctx.layouts = (layout_of(x1), layout_of(x2))
        return logic.where(condition, x1, x2)

    @staticmethod
    def backward(ctx, g):
        first, second = ctx.layouts
        zero = g.dtype.type(0)
        g1 = unbroadcast(logic.where(ctx.condition, g, zero), first) if first else None
        g2 = unbroadcast(logic.where(ctx.condition, zero, g), second) if second else None
        return g1, g2


@gradient_rule("where")
def _where(condition, x1, x2):
    if isinstance(condition, TileTensor):
        condition = condition.detach()  # a mask: never differentiated
    return Where.apply(x1, x2, condition)
