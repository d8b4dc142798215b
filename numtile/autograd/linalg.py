"""Gradient rule of the matrix product (transposed operands included, through GEMM flags)."""

from __future__ import annotations

from numtile.autograd.elementwise import unbroadcast
from numtile.autograd.rules import gradient_rule
from numtile.autograd.tape import Function
from numtile.tiletensor.linalg import matmul


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
        return matmul(x, y, transpose_a=transpose_a, transpose_b=transpose_b)

    @staticmethod
    def backward(ctx, g):
        # C = op(A) op(B): dA = g op(B)^T (transposed back if A was), dB likewise; the
        # transposes are GEMM flags, never copies
        x, y = ctx.saved
        ta, tb = ctx.flags
        gx = gy = None
        if x.requires_grad:
            if ta:  # dA = op(B) g^T
                gx = matmul(y, g, transpose_a=tb, transpose_b=True)
            else:  # dA = g op(B)^T
                gx = matmul(g, y, transpose_b=not tb)
            gx = unbroadcast(gx, x)
        if y.requires_grad:
            if tb:  # dB = g^T op(A)
                gy = matmul(g, x, transpose_a=True, transpose_b=ta)
            else:  # dB = op(A)^T g
                gy = matmul(x, g, transpose_a=not ta)
            gy = unbroadcast(gy, y)
        return gx, gy


@gradient_rule("matmul")
def _matmul(x1, x2, *, transpose_a: bool = False, transpose_b: bool = False):
    return MatMul.apply(x1, x2, transpose_a=transpose_a, transpose_b=transpose_b)
