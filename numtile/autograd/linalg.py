"""Gradient rules of the matrix product (transposed operands included, through GEMM flags),
the general solve, the inverse, the determinants, QR, eigh/eigvalsh and svdvals."""

from __future__ import annotations

from numtile.autograd.elementwise import unbroadcast
from numtile.autograd.rules import gradient_rule
from numtile.autograd.tape import Function
from numtile.tiletensor.elementwise import add, divide, multiply, negative, subtract
from numtile.tiletensor.linalg import SlogdetResult, det, inv, matmul, slogdet, solve
from numtile.tiletensor.linalg.cholesky import solve_triangular
from numtile.tiletensor.linalg.qr import QRResult, eye, qr, triu
from numtile.tiletensor.linalg.spectral import EighResult, eigh, svd
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


# --- QR and the symmetric eigenproblem (issue 14) ---------------------------------------------
# Each output is its own Function over the same factorisation (the tape has one output per
# node); the gradients are linear in the output gradients, so a's gradient is their sum.
#   qr (reduced, m >= n), M = R gR^T - gQ^T Q:  da = (gQ + Q copyltu(M)) R^-T,
#     copyltu(M) = tril(M) + tril(M, -1)^T  (Walter & Lehmann; Liao et al. 2019)
#   eigh, a = V diag(w) V^T:  da = V (diag(gw) + skew(V^T gV) / E) V^T, E[i, j] = w[j] - w[i]
#     (E's diagonal 1), skew(X) = (X - X^T) / 2: PyTorch's formula, degenerate w give infs
#   svdvals:  da = U diag(g) Vh


def _copyltu(m):
    """tril(m) + tril(m, -1)^T: m's lower triangle mirrored above the diagonal."""
    return add(subtract(m, triu(m, 1)), triu(matrix_transpose(m), 1))


def _times_r_inverse_transposed(b, r):
    """b @ r^-T for an upper triangular r (a triangular solve, no inverse)."""
    return matrix_transpose(solve_triangular(r, matrix_transpose(b), lower=False))


class QRQ(Function):
    @staticmethod
    def forward(ctx, a, results):
        q, r = qr(a, mode="reduced")
        results.append(r)
        ctx.save_for_backward(q, r)
        return q

    @staticmethod
    def backward(ctx, g):
        q, r = ctx.saved
        m = negative(matmul(g, q, transpose_a=True))
        return _times_r_inverse_transposed(add(g, matmul(q, _copyltu(m))), r)


class QRR(Function):
    @staticmethod
    def forward(ctx, a, factors):
        q, r = factors
        ctx.save_for_backward(q, r)
        return r

    @staticmethod
    def backward(ctx, g):
        q, r = ctx.saved
        m = matmul(r, g, transpose_b=True)
        return _times_r_inverse_transposed(matmul(q, _copyltu(m)), r)


@gradient_rule("qr")
def _qr(x, /, *, mode="reduced"):
    if mode != "reduced" or x.ndim != 2 or x.shape[0] < x.shape[1]:
        raise ValueError(
            "the gradient of numtile.linalg.qr needs mode='reduced' and a 2-d matrix with at "
            f"least as many rows as columns (got mode={mode!r}, shape {x.shape})"
        )
    results = []
    q = QRQ.apply(x, results)
    r = QRR.apply(x, factors=(q.detach(), results[0]))
    return QRResult(q, r)


def _columns_scaled(v, w):
    """v @ diag(w)."""
    return multiply(v, reshape(w, (1, w.shape[0])))


class EigenValues(Function):
    @staticmethod
    def forward(ctx, a, results):
        w, v = eigh(a)
        results.append(v)
        ctx.save_for_backward(v)
        return w

    @staticmethod
    def backward(ctx, g):
        (v,) = ctx.saved
        return matmul(_columns_scaled(v, g), v, transpose_b=True)


class EigenVectors(Function):
    @staticmethod
    def forward(ctx, a, factors):
        w, v = factors
        ctx.save_for_backward(w, v)
        return v

    @staticmethod
    def backward(ctx, g):
        w, v = ctx.saved
        n = w.shape[0]
        vtg = matmul(v, g, transpose_a=True)
        skew = multiply(subtract(vtg, matrix_transpose(vtg)), 0.5)
        gaps = subtract(reshape(w, (1, n)), reshape(w, (n, 1)))  # E[i, j] = w[j] - w[i]
        gaps = add(gaps, eye(n, n, gaps.tile_shape, gaps.dtype))
        return matmul(v, matmul(divide(skew, gaps), v, transpose_b=True))


@gradient_rule("eigh")
def _eigh(x, /):
    vectors = []
    w = EigenValues.apply(x, vectors)
    v = EigenVectors.apply(x, factors=(w.detach(), vectors[0]))
    return EighResult(w, v)


@gradient_rule("eigvalsh")
def _eigvalsh(x, /):
    return EigenValues.apply(x, [])


class SingularValues(Function):
    @staticmethod
    def forward(ctx, a):
        u, s, vh = svd(a, full_matrices=False)
        ctx.save_for_backward(u, vh)
        return s

    @staticmethod
    def backward(ctx, g):
        u, vh = ctx.saved
        return matmul(_columns_scaled(u, g), vh)


@gradient_rule("svdvals")
def _svdvals(x, /):
    return SingularValues.apply(x)
