"""Gradient rules of ``svd`` (U, S and Vh) and ``pinv``, for matrices and stacks of them.

svd, x = U diag(S) Vh (reduced: U (m, k), Vh (k, n), k = min(m, n)), PyTorch's formula
(``svd_backward``; Townsend, "Differentiating the singular value decomposition", 2016), for
real and complex x (PyTorch's convention; ``^H`` is the transpose on real matrices):

    J = (skew(U^H gU) diag(S) + diag(S) skew(Vh gVh^H)) / E + diag(gS)
        + i diag(Im(diag(U^H gU))) diag(S)^-1   (complex x only),
    E[i, j] = S[j]^2 - S[i]^2 (its diagonal 1), skew(X) = X - X^H,
    dx = U J Vh, plus (gU - U U^H gU) diag(S)^-1 Vh when m > n,
              plus U diag(S)^-1 (gVh - gVh Vh^H Vh) when m < n.

Complex singular vectors are defined up to a phase per pair (U D, D^H Vh for a unitary
diagonal D): only losses that do not depend on it (U diag(c) Vh, |U|, ...) have a gradient,
and, unlike PyTorch, this rule does not check that the loss is one.

As in PyTorch, the gradient through U or Vh is finite only for distinct singular values
(repeated ones divide by a zero of E and give infs or NaNs), and the last formula assumes a
full-rank x when it is not square; the gradient through S alone (``svdvals``) is always
defined. With ``full_matrices=True`` the columns of U and rows of Vh past k are not unique and
their gradients are ignored (PyTorch does the same). Each output is its own ``Function`` (the
tape has one output per node); the gradient is linear in (gU, gS, gVh), so x's gradient is
the sum of the three contributions.

pinv, P = pinv(x), for a gradient G of P (Golub & Pereyra 1973; PyTorch's ``pinv_backward``),
valid where the rank is locally constant:

    dx = -P^H G P^H + (I - x P) G^H P P^H + P^H P G^H (I - P x)

(for real x, ^H is the transpose).
"""

from __future__ import annotations

from numtile.autograd.factorizations import (
    SingularValues,
    adjoint_product,
    as_column,
    as_row,
    product_adjoint,
    value_gaps,
)
from numtile.autograd.linalg import adjoint
from numtile.autograd.rules import gradient_rule
from numtile.autograd.tape import Function
from numtile.tiletensor import elementwise
from numtile.tiletensor.elementwise import add, divide, multiply, negative, subtract
from numtile.tiletensor.linalg.matmul import matmul
from numtile.tiletensor.linalg.qr import eye
from numtile.tiletensor.linalg.spectral import SVDResult, pinv, svd
from numtile.tiletensor.manipulation import basic_getitem


def _skew(a):
    return subtract(a, adjoint(a))


def _phase_term(uhg, s):
    """i Im(diag(U^H gU)) / S as a diagonal matrix: the part of a complex U's gradient that
    moves its phases (zero for real x)."""
    k = s.shape[-1]
    diagonal = multiply(elementwise.imag(uhg), eye(k, k, uhg.tile_shape[-2:], s.dtype))
    return multiply(divide(diagonal, as_row(s)), 1j)


def _gaps(s):
    """E[..., i, j] = s[j]^2 - s[i]^2, with ones on the diagonal."""
    return value_gaps(multiply(s, s))


def _reduced(u, vh, k: int):
    """U's first k columns and Vh's first k rows (the reduced factors of a full SVD)."""
    if u.shape[-1] != k:
        u = basic_getitem(u, (Ellipsis, slice(None), slice(0, k)))
    if vh.shape[-2] != k:
        vh = basic_getitem(vh, (Ellipsis, slice(0, k), slice(None)))
    return u, vh


class SingularValuesOfSVD(SingularValues):
    """S of a full ``svd``: ``svdvals``' backward, from the reduced factors."""

    @staticmethod
    def forward(ctx, a, results, full_matrices=True):
        u, s, vh = svd(a, full_matrices=full_matrices)
        results += [u, vh]
        ctx.save_for_backward(*_reduced(u, vh, s.shape[-1]))
        return s


class LeftSingularVectors(Function):
    @staticmethod
    def forward(ctx, a, factors):
        u, s, vh = factors
        ctx.save_for_backward(*_reduced(u, vh, s.shape[-1]), s)
        return u

    @staticmethod
    def backward(ctx, g):
        u, vh, s = ctx.saved
        g, _ = _reduced(g, vh, s.shape[-1])
        uhg = adjoint_product(u, g)
        inner = divide(multiply(_skew(uhg), as_row(s)), _gaps(s))
        if u.dtype.kind == "c":
            inner = add(inner, _phase_term(uhg, s))
        if u.shape[-2] > vh.shape[-1]:  # m > n: the part of gU outside U's span
            scaled = divide(g, as_row(s))
            outside = subtract(scaled, matmul(u, adjoint_product(u, scaled)))
            return matmul(add(matmul(u, inner), outside), vh)
        return matmul(u, matmul(inner, vh))


class RightSingularVectors(Function):
    @staticmethod
    def forward(ctx, a, factors):
        u, s, vh = factors
        ctx.save_for_backward(*_reduced(u, vh, s.shape[-1]), s)
        return vh

    @staticmethod
    def backward(ctx, g):
        u, vh, s = ctx.saved
        _, g = _reduced(u, g, s.shape[-1])
        inner = divide(multiply(as_column(s), _skew(product_adjoint(vh, g))), _gaps(s))
        if u.shape[-2] < vh.shape[-1]:  # m < n: the part of gVh outside Vh's row span
            scaled = divide(g, as_column(s))
            outside = subtract(scaled, matmul(product_adjoint(scaled, vh), vh))
            return matmul(u, add(matmul(inner, vh), outside))
        return matmul(u, matmul(inner, vh))


@gradient_rule("svd")
def _svd(x, /, *, full_matrices: bool = True):
    results = []
    s = SingularValuesOfSVD.apply(x, results, full_matrices=full_matrices)
    u, vh = results
    factors = (u, s.detach(), vh)
    u = LeftSingularVectors.apply(x, factors=factors)
    vh = RightSingularVectors.apply(x, factors=factors)
    return SVDResult(u, s, vh)


class PseudoInverse(Function):
    @staticmethod
    def forward(ctx, a, rtol=None):
        p = pinv(a, rtol=rtol)
        ctx.save_for_backward(a, p)
        return p

    @staticmethod
    def backward(ctx, g):
        a, p = ctx.saved
        first = negative(adjoint_product(p, product_adjoint(g, p)))
        left = adjoint_product(g, product_adjoint(p, p))  # G^H P P^H
        left = subtract(left, matmul(a, matmul(p, left)))  # (I - x P) G^H P P^H
        right = product_adjoint(adjoint_product(p, p), g)  # P^H P G^H
        right = subtract(right, matmul(matmul(right, p), a))  # P^H P G^H (I - P x)
        return add(first, add(left, right))


@gradient_rule("pinv")
def _pinv(x, /, *, rtol=None):
    return PseudoInverse.apply(x, rtol=rtol)
