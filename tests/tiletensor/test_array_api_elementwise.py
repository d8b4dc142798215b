"""The element-wise functions of issue 13's second slice (acos..trunc, atan2, copysign, hypot,
logaddexp, logical_xor, clip, positive) against ``array_api_strict``: hypothesis differential
tests over dtype x shape x tile shape (special values drawn too), the standard's special-case
tables for real floats (exp and log included: their kernels are the vectorised ones of
``ops_cpu.fastmath``), through oneMKL's VML and through numtile's own kernels (``math_path``),
and gradients against PyTorch autograd in float64."""

import warnings

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import numtile as nt
from tests.tiletensor.test_array_api_hypothesis import (
    SETTINGS,
    SHAPES,
    assert_same,
    promotable_pair,
    retiled,
    strict,
    xps,
    xs,
)

UNARY = ["acos", "acosh", "asin", "asinh", "atan", "atanh", "cosh", "sinh", "tan"]
UNARY += ["log2", "log10", "trunc", "round", "positive"]
EXACT = {"trunc", "round", "positive"}


@pytest.mark.parametrize("name", UNARY)
@SETTINGS
@given(data=st.data())
def test_unary_functions(name, data):
    dtypes = xps.floating_dtypes() if name not in EXACT else xps.real_dtypes()
    x = data.draw(retiled(data.draw(xps.arrays(dtypes, SHAPES))), label="x")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = getattr(xs, name)(strict(x))
    assert_same(getattr(nt, name)(x), expected, exact=name in EXACT)


@pytest.mark.parametrize("name", ["atan2", "copysign", "hypot", "logaddexp", "logical_xor"])
@SETTINGS
@given(data=st.data())
def test_binary_functions(name, data):
    dtypes = xps.boolean_dtypes() if name == "logical_xor" else xps.floating_dtypes()
    x, y = data.draw(promotable_pair(dtypes), label="x, y")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = getattr(xs, name)(strict(x), strict(y))
    assert_same(getattr(nt, name)(x, y), expected, exact=name == "copysign")


@SETTINGS
@given(data=st.data())
def test_clip(data):
    dtype = data.draw(xps.real_dtypes(), label="dtype")
    x = data.draw(retiled(data.draw(xps.arrays(dtype, SHAPES))), label="x")
    bounds = {}
    for side in ("min", "max"):
        kind = data.draw(st.sampled_from(["none", "scalar", "tensor"]), label=side)
        if kind == "scalar":
            bounds[side] = data.draw(xps.from_dtype(dtype), label=f"{side} value")
        elif kind == "tensor":
            # a shape that broadcasts to x's (the result keeps x's shape): trailing axes of x,
            # some of them 1 (``broadcastable_shapes`` also gives shapes that would grow x)
            ndim = data.draw(st.integers(0, x.ndim), label=f"{side} ndim")
            ones = data.draw(st.lists(st.booleans(), min_size=ndim, max_size=ndim), label="ones")
            shape = tuple(1 if one else n for one, n in zip(ones, x.shape[x.ndim - ndim :]))
            bounds[side] = data.draw(retiled(data.draw(xps.arrays(dtype, shape))))
    if "min" in bounds and "max" in bounds:
        low, high = (
            np.asarray(b.to_numpy() if isinstance(b, nt.TileTensor) else b) for b in bounds.values()
        )
        if np.any(low > high):
            return  # implementation-defined
    theirs = {k: strict(v) if isinstance(v, nt.TileTensor) else v for k, v in bounds.items()}
    expected = xs.clip(strict(x), **theirs)
    assert_same(nt.clip(x, **bounds), expected, exact=True, signed_zeros=False)


def test_clip_keeps_the_dtype_and_ignores_integer_bounds_out_of_range():
    x = nt.asarray(np.array([0, 100, 255], np.uint8), tile_shape=(2,))
    out = nt.clip(x, min=-5, max=1000)
    assert out.dtype == nt.uint8
    np.testing.assert_array_equal(out.to_numpy(), [0, 100, 255])
    np.testing.assert_array_equal(nt.clip(x, max=50).to_numpy(), [0, 50, 50])


def test_trunc_and_round_of_integers_keep_their_dtype():
    x = nt.arange(-3, 4, dtype=nt.int16, tile_shape=3)
    for function in (nt.trunc, nt.round):
        assert function(x).dtype == nt.int16
        np.testing.assert_array_equal(function(x).to_numpy(), np.arange(-3, 4))


# --- the standard's special cases of real floats -----------------------------------------------

F32, F64 = np.finfo(np.float32), np.finfo(np.float64)
# every special value of the tables, with values on both sides of the domains' edges, the
# overflow thresholds of exp/cosh/sinh and subnormals
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 2.0]
SPECIAL += [0.999, -0.999, 1.001, 88.5, 89.0, -103.0, -104.5, 709.5, 710.0, -745.0, -746.0]
SPECIAL += [710.4, 711.0, 1e-30, 1e30, -1e30, 1e300, 3.0e-39, 1e-310, 5e-324, 4503599627370497.5]
NAMES = ["exp", "log", "sqrt", "expm1", "log1p", "sin", "cos", "tanh", "floor", "ceil"] + UNARY


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", NAMES)
def test_special_cases_of_real_floats(name, dtype, math_path):
    with np.errstate(all="ignore"):
        values = np.array(SPECIAL, dtype)
    x = nt.asarray(values, tile_shape=(7,))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = np.asarray(getattr(xs, name)(xs.asarray(values)))
    actual = getattr(nt, name)(x).to_numpy()
    special = ~np.isfinite(expected) | (expected == 0)
    # infinities, NaNs and signed zeros exactly where the standard puts them (a NaN's sign
    # is left open)
    np.testing.assert_array_equal(actual[special], expected[special])
    signed = special & ~np.isnan(expected)
    np.testing.assert_array_equal(np.signbit(actual[signed]), np.signbit(expected[signed]))
    if name == "tanh" and dtype == np.float32:
        return  # the float32 rational approximation is a few ulp off
    rtol = 4 * np.finfo(dtype).eps
    np.testing.assert_allclose(actual[~special], expected[~special], rtol=rtol)


BINARY_SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 3.5, -1e-300]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["atan2", "copysign", "hypot", "logaddexp", "pow"])
def test_special_cases_of_binary_functions(name, dtype, math_path):
    a, b = (np.array(v, dtype) for v in np.meshgrid(BINARY_SPECIAL, BINARY_SPECIAL))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = np.asarray(getattr(xs, name)(xs.asarray(a), xs.asarray(b)))
    x, y = (nt.asarray(v, tile_shape=(4, 5)) for v in (a, b))  # dense tiles: VML takes them
    actual = getattr(nt, name)(x, y).to_numpy()
    np.testing.assert_allclose(actual, expected, rtol=4 * np.finfo(dtype).eps, equal_nan=True)
    number = ~np.isnan(expected)
    np.testing.assert_array_equal(np.signbit(actual[number]), np.signbit(expected[number]))


# --- gradients against PyTorch ------------------------------------------------------------------

TORCH_UNARY = {
    "acos": (torch.acos, -0.9, 0.9),
    "asin": (torch.asin, -0.9, 0.9),
    "atan": (torch.atan, -3.0, 3.0),
    "acosh": (torch.acosh, 1.1, 4.0),
    "asinh": (torch.asinh, -3.0, 3.0),
    "atanh": (torch.atanh, -0.9, 0.9),
    "cosh": (torch.cosh, -3.0, 3.0),
    "sinh": (torch.sinh, -3.0, 3.0),
    "tan": (torch.tan, -1.2, 1.2),
    "log2": (torch.log2, 0.1, 4.0),
    "log10": (torch.log10, 0.1, 4.0),
}


def _pair(data, tile):
    tensor = nt.from_numpy(data, tile_shape=tile).requires_grad_()
    return tensor, torch.tensor(data, requires_grad=True)


def _backward_both(ours, theirs, seed=1):
    np.testing.assert_allclose(ours.to_numpy(), theirs.detach().numpy(), rtol=1e-10, atol=1e-12)
    weights = np.random.default_rng(seed).standard_normal(theirs.shape)
    nt.sum(ours * nt.from_numpy(weights, tile_shape=ours.tile_shape)).backward()
    (theirs * torch.tensor(weights)).sum().backward()


def _same_grad(ours, theirs):
    assert ours.grad is not None and ours.grad.tile_shape == ours.tile_shape
    np.testing.assert_allclose(ours.grad.to_numpy(), theirs.grad.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", sorted(TORCH_UNARY))
def test_unary_gradients_match_torch(name):
    function, low, high = TORCH_UNARY[name]
    x, tx = _pair(np.random.default_rng(0).uniform(low, high, (5, 7)), (2, 3))
    _backward_both(getattr(nt, name)(x), function(tx))
    _same_grad(x, tx)


TORCH_BINARY = {
    "atan2": torch.atan2,
    "hypot": torch.hypot,
    "logaddexp": torch.logaddexp,
    "copysign": torch.copysign,
}


@pytest.mark.parametrize("name", sorted(TORCH_BINARY))
def test_binary_gradients_match_torch(name):
    rng = np.random.default_rng(2)
    x, tx = _pair(rng.uniform(-2.0, 2.0, (5, 7)), (2, 3))
    y, ty = _pair(rng.uniform(-2.0, 2.0, (1, 7)), (1, 4))  # broadcast along axis 0
    _backward_both(getattr(nt, name)(x, y), TORCH_BINARY[name](tx, ty))
    _same_grad(x, tx)
    if name != "copysign":  # torch gives copysign's second operand a zero gradient
        _same_grad(y, ty)


def test_clip_gradient_matches_torch():
    rng = np.random.default_rng(3)
    x, tx = _pair(rng.uniform(-2.0, 2.0, (5, 7)), (3, 3))
    _backward_both(nt.clip(x, min=-0.5, max=1.0), torch.clamp(tx, min=-0.5, max=1.0))
    _same_grad(x, tx)
    high = rng.uniform(0.0, 1.0, (7,))
    x, tx = _pair(rng.uniform(-2.0, 2.0, (5, 7)), (3, 3))
    ours = nt.clip(x, max=nt.from_numpy(high, tile_shape=(3,)))
    _backward_both(ours, torch.clamp(tx, max=torch.tensor(high)))
    _same_grad(x, tx)
