"""Gradient rules of the matrix product (transposed operands included, through GEMM flags),
the general solve, the inverse and the determinants."""

from __future__ import annotations

from numtile.autograd.elementwise import unbroadcast
from numtile.autograd.rules import gradient_rule
from numtile.autograd.tape import Function
from numtile.tiletensor.elementwise import multiply, negative
from numtile.tiletensor.linalg import SlogdetResult, det, inv, matmul, slogdet, solve
from numtile.tiletensor.manipulation import matrix_transpose, reshape


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


# --- solve, inverse, determinants ------------------------------------------------------------
# The standard formulas (Giles, "An extended collection of matrix derivative results"):
#   x = a^-1 b:          db = a^-T g,  da = -db x^T
#   y = a^-1:            da = -y^T g y^T
#   (sign, l) = slogdet: da = g_l a^-T;  d = det(a): da = g d a^-T
# A singular a fails its gradient (through inv/solve) with LinAlgError, where PyTorch would
# fall back to an SVD.


def _outer(u, v):
    """u v^T of two tensors of the same rank: 1-d vectors or 2-d matrices."""
    if u.ndim == 1:
        u, v = reshape(u, (u.shape[0], 1)), reshape(v, (v.shape[0], 1))
    return matmul(u, v, transpose_b=True)


class Solve(Function):
    @staticmethod
    def forward(ctx, a, b, assume_a="gen"):
        x = solve(a, b, assume_a=assume_a)
        ctx.save_for_backward(a, x)
        ctx.assume_a = assume_a
        return x

    @staticmethod
    def backward(ctx, g):
        a, x = ctx.saved
        gb = solve(matrix_transpose(a), g, assume_a=ctx.assume_a)
        ga = negative(_outer(gb, x)) if a.requires_grad else None
        return ga, gb


class Inverse(Function):
    @staticmethod
    def forward(ctx, a):
        y = inv(a)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved
        return negative(matmul(y, matmul(g, y, transpose_b=True), transpose_a=True))


class LogAbsDet(Function):
    @staticmethod
    def forward(ctx, a, signs):
        sign, logabs = slogdet(a)
        signs.append(sign)
        ctx.save_for_backward(a)
        return logabs

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved
        return multiply(g, matrix_transpose(inv(a))), None


class Determinant(Function):
    @staticmethod
    def forward(ctx, a):
        d = det(a)
        ctx.save_for_backward(a, d)
        return d

    @staticmethod
    def backward(ctx, g):
        a, d = ctx.saved
        return multiply(multiply(g, d), matrix_transpose(inv(a)))


@gradient_rule("solve")
def _solve(a, b, /, *, assume_a="gen"):
    return Solve.apply(a, b, assume_a=assume_a)


@gradient_rule("inv")
def _inv(x, /):
    return Inverse.apply(x)


@gradient_rule("slogdet")
def _slogdet(x, /):
    signs = []
    logabs = LogAbsDet.apply(x, signs)
    return SlogdetResult(signs[0], logabs)


@gradient_rule("det")
def _det(x, /):
    return Determinant.apply(x)
