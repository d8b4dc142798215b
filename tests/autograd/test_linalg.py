"""Gradients of the general solve, the inverse and the determinants against torch.autograd."""

import numpy as np
import pytest
import torch

import numtile as nt

RTOL = 1e-9


def _pair(data, tile):
    return (
        nt.from_numpy(data, tile_shape=tile).requires_grad_(),
        torch.tensor(data, requires_grad=True),
    )


def _matrix(n=7, seed=0):
    return np.random.default_rng(seed).standard_normal((n, n)) + 2 * np.eye(n)


def _weighted_backward(out, ref, seed=1):
    """Backpropagate a random weighting of the outputs through both graphs."""
    np.testing.assert_allclose(out.to_numpy(), ref.detach().numpy(), rtol=RTOL, atol=1e-12)
    weights = np.random.default_rng(seed).standard_normal(ref.shape)
    w = nt.from_numpy(weights, tile_shape=out.tile_shape) if weights.ndim else float(weights)
    (out * w).sum().backward()
    (ref * torch.tensor(weights)).sum().backward()


def _check(ours, theirs):
    assert ours.grad is not None and ours.grad.tile_shape == ours.tile_shape
    np.testing.assert_allclose(ours.grad.to_numpy(), theirs.grad.numpy(), rtol=RTOL, atol=1e-10)


@pytest.mark.parametrize("tile", [(3, 3), (7, 7)])
@pytest.mark.parametrize("b_shape, b_tile", [((7,), (3,)), ((7, 2), (2, 2))])
@pytest.mark.parametrize("assume_a", ["gen", "pos"])
def test_solve(tile, b_shape, b_tile, assume_a):
    data = _matrix()
    if assume_a == "pos":
        data = data @ data.T
    a, ta = _pair(data, tile)
    b, tb = _pair(np.random.default_rng(2).standard_normal(b_shape), b_tile)
    _weighted_backward(nt.linalg.solve(a, b, assume_a=assume_a), torch.linalg.solve(ta, tb))
    _check(a, ta)
    _check(b, tb)


def test_solve_with_only_b_requiring_grad():
    a = nt.from_numpy(_matrix(), tile_shape=(3, 3))
    b, tb = _pair(np.ones((7, 2)), (3, 2))
    _weighted_backward(nt.linalg.solve(a, b), torch.linalg.solve(torch.tensor(_matrix()), tb))
    _check(b, tb)


@pytest.mark.parametrize("tile", [(3, 3), (2, 2)])
def test_inv(tile):
    a, ta = _pair(_matrix(seed=3), tile)
    _weighted_backward(nt.linalg.inv(a), torch.linalg.inv(ta))
    _check(a, ta)


@pytest.mark.parametrize("seed", [4, 5])
def test_det(seed):
    a, ta = _pair(_matrix(seed=seed), (3, 3))
    _weighted_backward(nt.linalg.det(a), torch.linalg.det(ta))
    _check(a, ta)


def test_slogdet_differentiates_log_abs_det_and_keeps_sign_constant():
    data = _matrix(seed=6)
    data[[0, 1]] = data[[1, 0]]  # a negative determinant
    a, ta = _pair(data, (3, 3))
    sign, logabs = nt.linalg.slogdet(a)
    expected_sign, expected_log = torch.linalg.slogdet(ta)
    assert sign.item() == expected_sign.item() == -1.0 and not sign.requires_grad
    _weighted_backward(logabs, expected_log)
    _check(a, ta)
