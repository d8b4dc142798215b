"""Gradients of Cholesky, the products and diagonals of numtile.linalg, the norms, and of the
stacked solve/inv/det/slogdet, against torch.autograd (float64, tiles that divide nothing)."""

import numpy as np
import pytest
import torch

import numtile as nt

RTOL, ATOL = 1e-9, 1e-10


def _pair(data, tile):
    return (
        nt.from_numpy(data, tile_shape=tile).requires_grad_(),
        torch.tensor(data, requires_grad=True),
    )


def _random(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape)


def _backward(out, ref, seed=99):
    """Compare the outputs, then backpropagate one random weighting through both graphs."""
    np.testing.assert_allclose(out.to_numpy(), ref.detach().numpy(), rtol=RTOL, atol=ATOL)
    weights = _random(ref.shape, seed)
    w = nt.from_numpy(weights, tile_shape=out.tile_shape) if weights.ndim else float(weights)
    nt.sum(out * w).backward()
    (ref * torch.tensor(weights)).sum().backward()


def _check(*pairs):
    for ours, theirs in pairs:
        assert ours.grad is not None and ours.grad.tile_shape == ours.tile_shape
        np.testing.assert_allclose(ours.grad.to_numpy(), theirs.grad.numpy(), rtol=RTOL, atol=ATOL)


def _spd(shape, seed):
    x = _random(shape, seed)
    return x @ np.swapaxes(x, -1, -2) + shape[-1] * np.eye(shape[-1])


@pytest.mark.parametrize(
    "shape, tile",
    [((7, 7), (3, 3)), ((7, 7), (7, 7)), ((2, 5, 5), (1, 5, 5)), ((2, 5, 5), (1, 2, 2))],
)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky(shape, tile, upper):
    x, tx = _pair(_spd(shape, 1), tile)
    _backward(nt.linalg.cholesky(x, upper=upper), torch.linalg.cholesky(tx, upper=upper))
    _check((x, tx))


def test_cross_with_broadcasting():
    a, ta = _pair(_random((4, 3), 2), (3, 2))
    b, tb = _pair(_random((2, 1, 3), 3), (1, 1, 2))
    _backward(nt.linalg.cross(a, b), torch.linalg.cross(ta[None], tb))  # torch: equal ranks
    _check((a, ta), (b, tb))


@pytest.mark.parametrize("offset", [0, 2, -3])
def test_diagonal_and_trace(offset):
    x, tx = _pair(_random((2, 5, 6), 4), (1, 2, 4))
    _backward(nt.linalg.diagonal(x, offset=offset), torch.diagonal(tx, offset, -2, -1))
    _check((x, tx))
    y, ty = _pair(_random((5, 6), 5), (4, 4))
    _backward(nt.linalg.trace(y, offset=offset), torch.diagonal(ty, offset).sum())
    _check((y, ty))


def test_outer_and_vecdot():
    u, tu = _pair(_random((5,), 6), (2,))
    v, tv = _pair(_random((4,), 7), (3,))
    _backward(nt.linalg.outer(u, v), torch.outer(tu, tv))
    _check((u, tu), (v, tv))
    a, ta = _pair(_random((3, 1, 4), 8), (2, 1, 3))
    b, tb = _pair(_random((2, 4), 9), (1, 2))
    _backward(nt.linalg.vecdot(a, b), torch.linalg.vecdot(ta, tb))
    _check((a, ta), (b, tb))


@pytest.mark.parametrize("axes", [1, ([0, 2], [1, 0])])
def test_tensordot(axes):
    a, ta = _pair(_random((3, 4, 5), 10), (2, 3, 2))
    b, tb = _pair(_random((5, 3, 2) if axes == 1 else (5, 3, 2), 11), (2, 2, 1))
    _backward(nt.linalg.tensordot(a, b, axes=axes), torch.tensordot(ta, tb, dims=axes))
    _check((a, ta), (b, tb))


@pytest.mark.parametrize("n", [1, 3, 4, -2])
def test_matrix_power(n):
    data = _random((2, 4, 4), 12) / 2 + np.eye(4)
    x, tx = _pair(data, (1, 3, 3))
    _backward(nt.linalg.matrix_power(x, n), torch.linalg.matrix_power(tx, n))
    _check((x, tx))


@pytest.mark.parametrize("order", [2, 1, np.inf, -np.inf, 3, 0.5, 0])
@pytest.mark.parametrize("axis, keepdims", [(None, False), (-1, True), ((0, 2), False)])
def test_vector_norm(order, axis, keepdims):
    x, tx = _pair(_random((3, 4, 5), 13), (2, 3, 2))
    out = nt.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=order)
    _backward(out, torch.linalg.vector_norm(tx, ord=order, dim=axis, keepdim=keepdims))
    if order == 0:  # a count: torch records no gradient at all
        np.testing.assert_array_equal(x.grad.to_numpy(), np.zeros(x.shape))
        return
    _check((x, tx))


def test_vector_norm_of_zeros_has_a_zero_gradient():
    x = nt.zeros((3, 2), tile_shape=(2, 2)).requires_grad_()
    nt.sum(nt.linalg.vector_norm(x, axis=0)).backward()
    np.testing.assert_array_equal(x.grad.to_numpy(), np.zeros((3, 2)))


@pytest.mark.parametrize("order", ["fro", 1, -1, np.inf, -np.inf, 2, -2, "nuc"])
def test_matrix_norm(order):  # (2, -2, 'nuc' cut the graph silently before: plain svdvals)
    x, tx = _pair(_random((2, 4, 5), 14), (1, 3, 2))
    _backward(nt.linalg.matrix_norm(x, ord=order), torch.linalg.matrix_norm(tx, ord=order))
    _check((x, tx))


@pytest.mark.parametrize("tile", [(2, 4, 4), (1, 3, 3)])
@pytest.mark.parametrize("b_shape", [(4,), (3, 4, 2), (4, 2)])
def test_solve_of_a_stack(tile, b_shape):
    a, ta = _pair(_random((3, 4, 4), 15) + 3 * np.eye(4), tile)
    b, tb = _pair(_random(b_shape, 16), (2,) * len(b_shape))
    expected = torch.linalg.solve(ta, tb if len(b_shape) > 1 else tb[:, None])
    if len(b_shape) == 1:  # torch reads a vector b as a stack of vectors; the standard not
        expected = expected[..., 0]
    _backward(nt.linalg.solve(a, b), expected)
    _check((a, ta), (b, tb))


@pytest.mark.parametrize("tile", [(2, 4, 4), (1, 3, 3)])
def test_inv_det_slogdet_of_a_stack(tile):
    data = _random((3, 4, 4), 17) + 3 * np.eye(4)
    for ours, theirs in (
        (nt.linalg.inv, torch.linalg.inv),
        (nt.linalg.det, torch.linalg.det),
        (lambda t: nt.linalg.slogdet(t).logabsdet, lambda t: torch.linalg.slogdet(t)[1]),
    ):
        x, tx = _pair(data, tile)
        _backward(ours(x), theirs(tx))
        _check((x, tx))
