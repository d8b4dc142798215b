"""The gradient rules added for issue 8 against PyTorch autograd (float64, several tilings)."""

import numpy as np
import pytest
import torch

import numtile as nt
from numtile.nn import functional as F

RTOL = 1e-10
SHAPE = (5, 7)
TILINGS = [(5, 7), (2, 3), (4, 4), (1, 7)]  # whole, leftovers on both axes, rows


def _pair(data, tile):
    return (
        nt.from_numpy(data, tile_shape=tile).requires_grad_(),
        torch.tensor(data, requires_grad=True),
    )


def _backward(out, ref, seed=1):
    """Backpropagate a random weighting of the outputs through both graphs."""
    np.testing.assert_allclose(out.to_numpy(), ref.detach().numpy(), rtol=RTOL, atol=1e-12)
    weights = np.random.default_rng(seed).standard_normal(ref.shape)
    w = nt.from_numpy(weights, tile_shape=out.tile_shape) if weights.ndim else float(weights)
    (out * w).sum().backward()
    (ref * torch.tensor(weights)).sum().backward()


def _check(ours, theirs):
    assert ours.grad is not None, "no gradient reached the input"
    assert ours.grad.tile_shape == ours.tile_shape
    np.testing.assert_allclose(ours.grad.to_numpy(), theirs.grad.numpy(), rtol=RTOL, atol=1e-12)


UNARY = {
    "sin": torch.sin,
    "cos": torch.cos,
    "abs": torch.abs,
    "square": torch.square,
    "expm1": torch.expm1,
    "log1p": torch.log1p,
    "reciprocal": torch.reciprocal,
    "sigmoid": torch.sigmoid,
    "negative": torch.negative,
}


@pytest.mark.parametrize("tile", TILINGS)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_rules(name, tile):
    low = 0.2 if name in ("log1p", "reciprocal") else -2.0
    data = np.random.default_rng(0).uniform(low, 2.0, SHAPE)
    x, tx = _pair(data, tile)
    _backward(getattr(nt, name)(x), UNARY[name](tx))
    _check(x, tx)


def _ties(seed):
    """Values on a coarse grid, so that maxima and operands tie often."""
    return np.random.default_rng(seed).integers(-2, 3, SHAPE).astype(np.float64)


@pytest.mark.parametrize("x_tile, y_tile", [((2, 3), (2, 3)), ((2, 3), (4, 4)), ((5, 7), (1, 2))])
@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_maximum_minimum_split_ties_like_torch(name, x_tile, y_tile):
    x, tx = _pair(_ties(2), x_tile)
    y, ty = _pair(_ties(3), y_tile)
    assert (x.to_numpy() == y.to_numpy()).any()  # the test exercises ties
    _backward(getattr(nt, name)(x, y), getattr(torch, name)(tx, ty))
    _check(x, tx)
    _check(y, ty)


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_maximum_minimum_with_broadcasting_and_scalars(name):
    x, tx = _pair(_ties(4), (2, 3))
    row = _ties(5)[0]
    y, ty = _pair(row, (4,))
    _backward(getattr(nt, name)(x, y), getattr(torch, name)(tx, ty))
    _check(x, tx)
    _check(y, ty)
    x2, tx2 = _pair(_ties(6), (3, 3))
    _backward(getattr(nt, name)(x2, 0.0), getattr(torch, name)(tx2, torch.tensor(0.0)))
    _check(x2, tx2)


@pytest.mark.parametrize("tile", TILINGS)
@pytest.mark.parametrize("axis, keepdims", [(None, False), (0, False), (1, True), ((0, 1), True)])
@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min_reductions_share_ties_like_amax(name, axis, keepdims, tile):
    x, tx = _pair(_ties(7), tile)
    reference = torch.amax if name == "max" else torch.amin
    dims = tuple(range(2)) if axis is None else axis
    _backward(getattr(nt, name)(x, axis=axis, keepdims=keepdims), reference(tx, dims, keepdims))
    _check(x, tx)


def test_method_forms_of_max_and_min():
    x, tx = _pair(_ties(8), (2, 3))
    _backward(x.max(axis=1) + x.min(axis=1), tx.amax(1) + tx.amin(1))
    _check(x, tx)


def test_power_with_tensor_exponents():
    base = np.random.default_rng(9).uniform(0.5, 2.0, SHAPE)
    x, tx = _pair(base, (2, 3))
    y, ty = _pair(np.random.default_rng(10).uniform(-1.0, 2.0, SHAPE), (4, 4))
    _backward(x**y, tx**ty)
    _check(x, tx)
    _check(y, ty)
    z, tz = _pair(np.random.default_rng(11).uniform(-1.0, 1.0, (7,)), (3,))
    _backward(2.0**z, 2.0**tz)
    _check(z, tz)


def test_retile_broadcast_expand_squeeze_and_transpose():
    data = np.random.default_rng(12).standard_normal((3, 1, 4))
    x, tx = _pair(data, (2, 1, 3))
    y = nt.squeeze(nt.broadcast_to(x, (2, 3, 5, 4)).retile((1, 2, 2, 3)), ())
    out = nt.transpose(nt.expand_dims(nt.sum(y, axis=0), 0))
    ref = torch.broadcast_to(tx, (2, 3, 5, 4)).sum(0).unsqueeze(0).permute(3, 2, 1, 0)
    _backward(out, ref)
    _check(x, tx)


@pytest.mark.parametrize("tile", [(5, 7), (2, 3), (5, 2), (1, 7)])
@pytest.mark.parametrize("axis", [-1, 0])
def test_softmax_matches_torch(axis, tile):
    x, tx = _pair(np.random.default_rng(13).standard_normal(SHAPE) * 3, tile)
    out = F.softmax(x, axis=axis)
    assert out.tile_shape == x.tile_shape
    _backward(out, torch.softmax(tx, dim=axis))
    _check(x, tx)


@pytest.mark.parametrize("scale", [3.0, 1e3])
@pytest.mark.parametrize("tile", [(5, 7), (2, 3), (4, 4)])
@pytest.mark.parametrize("axis", [-1, 0])
def test_log_softmax_matches_torch_even_for_huge_logits(axis, tile, scale):
    x, tx = _pair(np.random.default_rng(14).standard_normal(SHAPE) * scale, tile)
    out = F.log_softmax(x, axis=axis)
    assert np.isfinite(out.to_numpy()).all()
    _backward(out, torch.log_softmax(tx, dim=axis))
    _check(x, tx)


def test_softmax_of_huge_logits_and_float32():
    data = np.random.default_rng(15).standard_normal((3, 6)) * 1e3
    x = nt.from_numpy(data.astype(np.float32), tile_shape=(2, 4))
    expected = torch.softmax(torch.tensor(data, dtype=torch.float32), dim=1).numpy()
    np.testing.assert_allclose(F.softmax(x).to_numpy(), expected, rtol=1e-5, atol=1e-6)
    assert F.softmax(x).dtype == np.float32


def test_softmax_rejects_bad_axes_and_operands():
    with pytest.raises(ValueError, match="axis 2"):
        F.softmax(nt.ones((2, 3)), axis=2)
    with pytest.raises(TypeError, match="TileTensor"):
        F.log_softmax(np.ones(3))


def test_identity_ops_keep_the_input_node():
    """A rule whose forward returns its input (reshape to the same shape) must not overwrite the
    input's node: the gradient still reaches the leaf through both ops."""
    x, tx = _pair(np.random.default_rng(16).standard_normal((4, 3)), (2, 2))
    y = nt.exp(x)
    z = nt.reshape(y, (4, 3)).retile((2, 2)) * 2.0
    _backward(z, torch.exp(tx) * 2.0)
    _check(x, tx)


@pytest.mark.parametrize("tile", [(5, 7), (2, 3)])
def test_astype_between_floats_and_to_integers(tile):
    data = np.random.default_rng(17).standard_normal(SHAPE)
    x, tx = _pair(data, tile)
    narrow = x.astype("float32")
    assert narrow.requires_grad and narrow.dtype == np.float32
    out = nt.exp(narrow).astype("float64") + x
    ref = torch.exp(tx.to(torch.float32)).to(torch.float64) + tx
    np.testing.assert_allclose(out.to_numpy(), ref.detach().numpy(), rtol=1e-6)
    out.sum().backward()
    ref.sum().backward()
    np.testing.assert_allclose(x.grad.to_numpy(), tx.grad.numpy(), rtol=1e-6)
    assert not x.astype("int64").requires_grad  # integers carry no gradient
