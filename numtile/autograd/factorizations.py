"""Gradient rules of the factorisations: ``slogdet``, ``cholesky``, ``qr`` (reduced),
``eigh``/``eigvalsh`` and ``svdvals``, for real and complex matrices (``svd`` and ``pinv`` are
in ``spectral.py``).

Complex inputs follow PyTorch's convention (conjugate Wirtinger derivatives: the gradient of
a real loss L is dL/dRe(a) + i dL/dIm(a)), and every formula is PyTorch's
(``FunctionsManual.cpp``); on real matrices the conjugate transposes ``^H`` are transposes.
Each output is its own ``Function`` over the same factorisation (the tape has one output per
node); the gradients are linear in the output gradients, so a's gradient is their sum.

- slogdet, (sign, l):  da = (g_l + i Im(g_sign conj(sign))) a^-H; the sign of a real matrix
  has no gradient (Giles, "An extended collection of matrix derivative results").
- cholesky, a = L L^H (Murray, "Differentiation of the Cholesky decomposition", 2016):
  X = tril(L^H g),  P = (X + tril(X, -1)^H) / 2,  da = L^-H P L^-1.
- qr (reduced, m >= n), M = gR R^H - Q^H gQ (Walter & Lehmann; Liao et al. 2019):
  da = (gQ + Q sym(M)) R^-H,  sym(M) = triu(M, 1) + triu(M, 1)^H + Re(diag(M)).
- eigh, a = V diag(w) V^H:  da = V (diag(gw) + skew(V^H gV) / E) V^H, E[i, j] = w[j] - w[i]
  (its diagonal 1), skew(X) = (X - X^H) / 2. Degenerate w give infs. Complex eigenvectors
  are defined up to a phase per column: only losses that do not depend on the phases
  (|V|, V diag(c) V^H, ...) have a gradient, and this rule does not check that the loss is
  one (PyTorch does, reading V^H gV).
- svdvals:  da = U diag(g) Vh.
"""

from __future__ import annotations

from numtile.autograd.linalg import adjoint, per_matrix_scalar
from numtile.autograd.rules import gradient_rule
from numtile.autograd.tape import Function
from numtile.tiletensor import elementwise
from numtile.tiletensor.elementwise import add, divide, multiply, negative, subtract
from numtile.tiletensor.linalg import (
    SlogdetResult,
    cholesky,
    inv,
    matmul,
    slogdet,
    solve_triangular,
)
from numtile.tiletensor.linalg.batched import per_matrix
from numtile.tiletensor.linalg.qr import QRResult, eye, qr, triu
from numtile.tiletensor.linalg.spectral import EighResult, eigh, svd
from numtile.tiletensor.manipulation import reshape
from numtile.tiletensor.structured import tril


def adjoint_product(a, b):
    """a^H b, through GEMM flags (no copy of a)."""
    return matmul(a, b, transpose_a=True, conjugate_a=True)


def product_adjoint(a, b):
    """a b^H, through GEMM flags (no copy of b)."""
    return matmul(a, b, transpose_b=True, conjugate_b=True)


# --- slogdet ---------------------------------------------------------------------------------


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
        return multiply(per_matrix_scalar(g), adjoint(inv(a))), None


class DeterminantSign(Function):
    """The sign (a phase, e^{i arg det}) of a complex matrix's determinant."""

    @staticmethod
    def forward(ctx, a, sign):
        ctx.save_for_backward(a, sign)
        return sign

    @staticmethod
    def backward(ctx, g):
        a, sign = ctx.saved
        turn = elementwise.imag(multiply(g, elementwise.conj(sign)))  # Im(g conj(sign))
        return multiply(per_matrix_scalar(multiply(turn, 1j)), adjoint(inv(a)))


@gradient_rule("slogdet")
def _slogdet(x, /):
    signs = []
    logabs = LogAbsDet.apply(x, signs)
    sign = signs[0]
    if x.dtype.kind == "c":
        sign = DeterminantSign.apply(x, sign=sign)
    return SlogdetResult(sign, logabs)


# --- Cholesky --------------------------------------------------------------------------------


def _cholesky_gradient(factor, g):
    """da of one 2-d factor L = cholesky(a) and the gradient g of L."""
    x = tril(adjoint_product(factor, g))
    p = multiply(add(x, adjoint(tril(x, k=-1))), 0.5)
    m = solve_triangular(factor, adjoint(p), trans=2)  # L^-H P^H = (P L^-1)^H
    return solve_triangular(factor, adjoint(m), trans=2)  # L^-H P L^-1


class Cholesky(Function):
    @staticmethod
    def forward(ctx, x):
        factor = cholesky(x)
        ctx.save_for_backward(factor)
        return factor

    @staticmethod
    def backward(ctx, g):
        (factor,) = ctx.saved
        if factor.ndim > 2:
            return per_matrix(_cholesky_gradient, factor, g)
        return _cholesky_gradient(factor, g)


@gradient_rule("cholesky")
def _cholesky(x, /, *, upper: bool = False):
    factor = Cholesky.apply(x)
    return adjoint(factor) if upper else factor


# --- QR --------------------------------------------------------------------------------------


def _hermitian_part(m):
    """triu(m, 1) + triu(m, 1)^H + Re(diag(m)): the Hermitian matrix m's upper triangle
    determines, with a real diagonal (R's diagonal is real)."""
    above = triu(m, 1)
    diagonal = subtract(triu(m), above)
    if m.dtype.kind == "c":
        diagonal = elementwise.real(diagonal)
    return add(add(above, adjoint(above)), diagonal)


def _times_r_inverse_adjoint(b, r):
    """b @ r^-H for an upper triangular r (a triangular solve, no inverse)."""
    return adjoint(solve_triangular(r, adjoint(b), lower=False))


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
        m = negative(adjoint_product(q, g))
        return _times_r_inverse_adjoint(add(g, matmul(q, _hermitian_part(m))), r)


class QRR(Function):
    @staticmethod
    def forward(ctx, a, factors):
        q, r = factors
        ctx.save_for_backward(q, r)
        return r

    @staticmethod
    def backward(ctx, g):
        q, r = ctx.saved
        m = product_adjoint(g, r)
        return _times_r_inverse_adjoint(matmul(q, _hermitian_part(m)), r)


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


# --- the Hermitian eigenproblem and singular values ------------------------------------------


def as_row(v):
    """(..., k) -> (..., 1, k): multiplying by it scales the columns of a (..., r, k) matrix
    (``v @ diag(w)`` for matrices and stacks)."""
    return reshape(v, v.shape[:-1] + (1, v.shape[-1]))


def as_column(v):
    """(..., k) -> (..., k, 1): multiplying by it scales the rows of a (..., k, c) matrix."""
    return reshape(v, v.shape + (1,))


def value_gaps(w):
    """E[..., i, j] = w[j] - w[i] with ones on the diagonal: the divisor of the eigenvector
    (and singular vector, on squared values) gradients."""
    n = w.shape[-1]
    gaps = subtract(as_row(w), as_column(w))
    return add(gaps, eye(n, n, gaps.tile_shape[-2:], gaps.dtype))


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
        return product_adjoint(multiply(v, as_row(g)), v)


class EigenVectors(Function):
    @staticmethod
    def forward(ctx, a, factors):
        w, v = factors
        ctx.save_for_backward(w, v)
        return v

    @staticmethod
    def backward(ctx, g):
        w, v = ctx.saved
        vhg = adjoint_product(v, g)
        skew = multiply(subtract(vhg, adjoint(vhg)), 0.5)
        return matmul(v, product_adjoint(divide(skew, value_gaps(w)), v))


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
        return matmul(multiply(u, as_row(g)), vh)


@gradient_rule("svdvals")
def _svdvals(x, /):
    return SingularValues.apply(x)
