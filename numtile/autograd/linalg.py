"""Gradient rules of the matrix product (transposed operands included, through GEMM flags),
the general solve, the inverse, the determinant, the cross product, diagonals and vector
norms (the factorisations are in ``factorizations.py`` and ``spectral.py``; the other
products of ``numtile.linalg`` are composites, see ``rules.py``)."""

from __future__ import annotations

import numpy as np

from numtile.autograd.elementwise import unbroadcast
from numtile.autograd.rules import gradient_rule
from numtile.autograd.tape import Function
from numtile.tiletensor import elementwise
from numtile.tiletensor.creation import zeros_like
from numtile.tiletensor.dtypes import float32, is_bfloat16
from numtile.tiletensor.elementwise import multiply, negative
from numtile.tiletensor.linalg import cross, det, diagonal, inv, matmul, solve
from numtile.tiletensor.linalg.products import diagonal_scatter
from numtile.tiletensor.logic import where
from numtile.tiletensor.manipulation import matrix_transpose, reshape
from numtile.tiletensor.reduction import normalize_axes, require_inexact, vector_norm
from numtile.tiletensor.reduction import sum as tensor_sum


class MatMul(Function):
    @staticmethod
    def forward(
        ctx,
        x,
        y,
        transpose_a=False,
        transpose_b=False,
        out_dtype=None,
        conjugate_a=False,
        conjugate_b=False,
    ):
        if x.ndim < 2 or y.ndim < 2:
            raise ValueError(
                "matmul with gradients needs operands of at least 2 axes; reshape "
                f"vectors first (got shapes {x.shape} and {y.shape})"
            )
        if conjugate_a or conjugate_b:
            raise NotImplementedError(
                "matmul: gradients through conjugate_a/conjugate_b are not implemented; "
                "conjugate with nt.conj first"
            )
        ctx.save_for_backward(x, y)
        ctx.flags = (transpose_a, transpose_b)
        return matmul(x, y, transpose_a=transpose_a, transpose_b=transpose_b, out_dtype=out_dtype)

    @staticmethod
    def backward(ctx, g):
        # C = op(A) op(B): dA = g op(B)^T (transposed back if A was), dB likewise; the
        # transposes are GEMM flags, never copies. Complex operands (PyTorch's convention,
        # conjugate Wirtinger): the same with the other operand conjugated, dA = g op(B)^H,
        # which BLAS reads as 'C' where the formula transposes it
        x, y = ctx.saved
        ta, tb = ctx.flags
        gx = gy = None
        if x.requires_grad:
            if ta:  # dA = conj(op(B)) g^T
                gx = matmul(y, g, transpose_a=tb, transpose_b=True, conjugate_a=True)
            else:  # dA = g op(B)^H
                gx = matmul(g, y, transpose_b=not tb, conjugate_b=True)
            gx = unbroadcast(gx, x)
        if y.requires_grad:
            if tb:  # dB = g^T conj(op(A))
                gy = matmul(g, x, transpose_a=True, transpose_b=ta, conjugate_b=True)
            else:  # dB = op(A)^H g
                gy = matmul(x, g, transpose_a=not ta, conjugate_a=True)
            gy = unbroadcast(gy, y)
        return _operand_dtype(gx, x), _operand_dtype(gy, y)


def _operand_dtype(g, x):
    """A float32 gradient of a bfloat16 operand (out_dtype) in the operand's dtype; a complex
    gradient of a real operand stays complex (the tape keeps its real part)."""
    if g is None or g.dtype == x.dtype or g.dtype.kind == "c":
        return g
    return g.astype(x.dtype)


@gradient_rule("matmul")
def _matmul(x1, x2, **flags):  # transpose_a/_b, out_dtype, conjugate_a/_b: matmul's keywords
    return MatMul.apply(x1, x2, **flags)


# --- solve, inverse, determinants ------------------------------------------------------------
# The standard formulas (Giles, "An extended collection of matrix derivative results"):
#   x = a^-1 b:          db = a^-T g,  da = -db x^T
#   y = a^-1:            da = -y^T g y^T
#   d = det(a): da = g d a^-T  (slogdet: factorizations.py)
# A singular a fails its gradient (through inv/solve) with LinAlgError, where PyTorch would
# fall back to an SVD. Complex a (PyTorch's convention): the transposes are conjugate
# transposes and d's factor is conj(d): db = a^-H g, da = -db x^H; da = -y^H g y^H;
# da = g conj(d) a^-H.


def adjoint(a):
    """The (conjugate, for complex a) transpose of the last two axes."""
    a_t = matrix_transpose(a)
    return elementwise.conj(a_t) if a.dtype.kind == "c" else a_t


def per_matrix_scalar(g):
    """A gradient of one value per matrix, (...,) -> (..., 1, 1), to scale a stack."""
    return reshape(g, g.shape + (1, 1))


def _outer(u, v):
    """u v^T of two tensors of the same rank: 1-d vectors or 2-d matrices."""
    if u.ndim == 1:
        u, v = reshape(u, (u.shape[0], 1)), reshape(v, (v.shape[0], 1))
    return matmul(u, v, transpose_b=True, conjugate_b=True)  # u v^H for complex v


class Solve(Function):
    @staticmethod
    def forward(ctx, a, b, assume_a="gen"):
        x = solve(a, b, assume_a=assume_a)
        ctx.save_for_backward(a, b, x)
        ctx.assume_a = assume_a
        return x

    @staticmethod
    def backward(ctx, g):
        a, b, x = ctx.saved
        gb = solve(adjoint(a), g, assume_a=ctx.assume_a)
        ga = unbroadcast(negative(_outer(gb, x)), a) if a.requires_grad else None
        return ga, unbroadcast(gb, b)


class Inverse(Function):
    @staticmethod
    def forward(ctx, a):
        y = inv(a)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved
        inner = matmul(g, y, transpose_b=True, conjugate_b=True)
        return negative(matmul(y, inner, transpose_a=True, conjugate_a=True))


class Determinant(Function):
    @staticmethod
    def forward(ctx, a):
        d = det(a)
        ctx.save_for_backward(a, d)
        return d

    @staticmethod
    def backward(ctx, g):
        a, d = ctx.saved
        scale = multiply(g, elementwise.conj(d) if d.dtype.kind == "c" else d)
        return multiply(per_matrix_scalar(scale), adjoint(inv(a)))


@gradient_rule("solve")
def _solve(a, b, /, *, assume_a="gen"):
    if b.ndim == 1 and a.ndim > 2:  # one vector for a stack: solve it as an (M, 1) matrix
        x = Solve.apply(a, reshape(b, (b.shape[0], 1)), assume_a=assume_a)
        return reshape(x, x.shape[:-1])
    return Solve.apply(a, b, assume_a=assume_a)


@gradient_rule("inv")
def _inv(x, /):
    return Inverse.apply(x)


@gradient_rule("det")
def _det(x, /):
    return Determinant.apply(x)


# --- cross product, diagonals ----------------------------------------------------------------


class Cross(Function):
    @staticmethod
    def forward(ctx, x1, x2, axis=-1):
        ctx.save_for_backward(x1, x2)
        ctx.axis = axis
        return cross(x1, x2, axis=axis)

    @staticmethod
    def backward(ctx, g):
        # <g, x1 x x2> = <x2 x g, x1> = <g x x1, x2>
        x1, x2 = ctx.saved
        g1 = unbroadcast(cross(x2, g, axis=ctx.axis), x1) if x1.requires_grad else None
        g2 = unbroadcast(cross(g, x1, axis=ctx.axis), x2) if x2.requires_grad else None
        return g1, g2


@gradient_rule("cross")
def _cross(x1, x2, /, *, axis: int = -1):
    return Cross.apply(x1, x2, axis=axis)


class Diagonal(Function):
    @staticmethod
    def forward(ctx, x, offset=0):
        ctx.layout, ctx.offset = x.layout, offset
        return diagonal(x, offset=offset)

    @staticmethod
    def backward(ctx, g):
        return diagonal_scatter(g, ctx.layout, ctx.offset)


@gradient_rule("diagonal")
def _diagonal(x, /, *, offset: int = 0):
    return Diagonal.apply(x, offset=offset)


# --- vector norms ----------------------------------------------------------------------------
#   ord 2: g x / |x|;  ord 1: g sign(x);  inf / -inf: g sign(x) shared evenly among the
#   elements of largest / smallest magnitude (as PyTorch);  p: g sign(x) |x|^(p-1) / |x|_p^(p-1);
#   ord 0 (a count) has a zero gradient. Zero norms give zero gradients. Complex x: the norm
#   of |x|, recorded as abs then the real norm, so the chain rule through abs's complex rule
#   multiplies by sgn(x) = x / |x| (0 at 0): PyTorch's convention (conjugate Wirtinger).


class VectorNorm(Function):
    @staticmethod
    def forward(ctx, x, axis=None, keepdims=False, ord=2):
        norm = vector_norm(x, axis=axis, keepdims=keepdims, ord=ord)
        ctx.save_for_backward(x, norm)
        ctx.axes, ctx.ord = normalize_axes(axis, x.ndim), ord
        return norm

    @staticmethod
    def backward(ctx, g):
        x, norm = ctx.saved
        kept = tuple(1 if a in ctx.axes else s for a, s in enumerate(x.shape))
        norm, g = reshape(norm, kept), reshape(g, kept)
        order = ctx.ord
        if order == 0:
            return zeros_like(x)
        if order == 1:
            return multiply(g, elementwise.sign(x))
        if order in (np.inf, -np.inf):
            magnitude = elementwise.abs(x)
            extreme = elementwise.astype(elementwise.equal(magnitude, norm), x.dtype)
            count = tensor_sum(extreme, axis=ctx.axes, keepdims=True)
            return multiply(multiply(elementwise.sign(x), extreme), g / count)
        if order == 2:
            scaled = x / norm
        else:
            powered = elementwise.abs(x) ** (order - 1)
            scaled = multiply(elementwise.sign(x), powered) / norm ** (order - 1)
        return multiply(g, where(norm == 0, 0.0, scaled))


@gradient_rule("vector_norm")
def _vector_norm(x, /, *, axis=None, keepdims: bool = False, ord=2):
    if is_bfloat16(x.dtype):  # the float32 norm rounded once; astype carries the gradient
        norm = _vector_norm(elementwise.astype(x, float32), axis=axis, keepdims=keepdims, ord=ord)
        return elementwise.astype(norm, x.dtype)
    require_inexact(x, "vector_norm")
    if x.dtype.kind == "c":
        x = elementwise.abs(x)
    return VectorNorm.apply(x, axis=axis, keepdims=keepdims, ord=ord)
