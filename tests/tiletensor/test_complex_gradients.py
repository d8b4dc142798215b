"""Gradients through complex tensors against torch autograd: PyTorch's convention (the
conjugate Wirtinger derivative of a real loss, dL/dx + i dL/dy), for the element-wise
functions, arithmetic (complex with complex, real and scalar operands), sum, mean, indexing, abs,
real, imag and conj; the rules without a complex form refuse a complex operand (the complex
gradients of matmul, solve, inv and det are tested in tests/tiletensor/test_linalg_complex.py)."""

import numpy as np
import pytest

import numtile as nt

torch = pytest.importorskip("torch")

SHAPE, TILE = (3, 5), (2, 3)
RNG = np.random.default_rng(0)
Z = RNG.uniform(-0.8, 0.8, SHAPE) + 1j * RNG.uniform(-0.8, 0.8, SHAPE)
W = RNG.standard_normal(SHAPE) + 1j * RNG.standard_normal(SHAPE)  # the loss's weights
V = RNG.uniform(0.5, 1.5, SHAPE) + 1j * RNG.uniform(-1, 1, SHAPE)  # a second operand
R = RNG.standard_normal(SHAPE)  # a real operand

UNARY = [
    *("exp", "log", "sqrt", "tanh", "sin", "cos", "tan", "sinh", "cosh", "expm1", "log1p"),
    *("log2", "log10", "asin", "acos", "atan", "asinh", "acosh", "atanh", "square"),
    *("reciprocal", "negative", "conj", "abs", "real", "imag"),
]
TORCH_NAMES = {"conj": "conj_physical", "reciprocal": "reciprocal"}


def _torch_unary(name):
    if name == "log2":
        return lambda z: torch.log(z) / np.log(2.0)
    if name == "log10":
        return lambda z: torch.log(z) / np.log(10.0)
    if name in ("real", "imag"):
        return lambda z: getattr(z, name)
    return getattr(torch, TORCH_NAMES.get(name, name))


def _loss(values, weights, xp):
    """A real loss of any (real or complex) result: sum(real(values * weights))."""
    return xp.sum(xp.real(values * weights)) if xp is nt else (values * weights).real.sum()


def _gradients(build, *inputs):
    """(numtile's, torch's) gradients of every input of ``build(xp, *tensors)``'s loss."""
    ours = [nt.from_numpy(v, tile_shape=TILE).requires_grad_() for v in inputs]
    out = build(nt, *ours)
    weights = W[tuple(slice(0, n) for n in out.shape)]  # as many as the result has
    _loss(out, nt.from_numpy(weights, tile_shape=TILE), nt).backward()
    theirs = [torch.tensor(v, requires_grad=True) for v in inputs]
    _loss(build(torch, *theirs), torch.tensor(weights), torch).backward()
    return [t.grad.to_numpy() for t in ours], [t.grad.numpy() for t in theirs]


def _check(build, *inputs, name=""):
    ours, theirs = _gradients(build, *inputs)
    for mine, expected in zip(ours, theirs, strict=True):
        assert mine.dtype == expected.dtype, name
        np.testing.assert_allclose(mine, expected, rtol=1e-10, atol=1e-12, err_msg=name)


def test_element_wise_functions_match_torch():
    for name in UNARY:
        ours, theirs = getattr(nt, name), _torch_unary(name)
        _check(lambda xp, z: ours(z) if xp is nt else theirs(z), Z, name=name)  # noqa: B023


def test_arithmetic_matches_torch():
    _check(lambda xp, a, b: a * b, Z, V)
    _check(lambda xp, a, b: a / b, Z, V)
    _check(lambda xp, a, b: a - b * a + b, Z, V)
    _check(lambda xp, a, b: a * b, Z, R)  # the real operand keeps the real part
    _check(lambda xp, a, b: b / a, Z, R)
    _check(lambda xp, a: a**3 * (2 - 1j) / (0.5 + 2j) - 1j, Z)
    _check(lambda xp, a: xp.imag(a * (1 + 2j)) + xp.real(a * (3 - 1j)), R)  # complex between
    # two leaves given the same gradient tensor: accumulating into one leaves the other alone
    _check(lambda xp, a, b: a - b + b, R, R[::-1].copy())


def test_reductions_and_indexing_match_torch():
    _check(lambda xp, a: xp.sum(a, axis=0, keepdims=True) * a, Z)
    _check(lambda xp, a: xp.mean(a * a, axis=1, keepdims=True) + a, Z)
    _check(lambda xp, a: xp.abs(a[1:, ::2]) * a[:2, 1:4], Z)


def test_ops_without_a_complex_rule_refuse():
    z = nt.from_numpy(Z[:3, :3], tile_shape=(2, 2)).requires_grad_()
    with pytest.raises(nt.autograd.NoGradientError, match="prod has no gradient rule"):
        nt.prod(z)
    with pytest.raises(nt.autograd.NoGradientError, match="cross has no gradient rule for comp"):
        nt.linalg.cross(z, z)
