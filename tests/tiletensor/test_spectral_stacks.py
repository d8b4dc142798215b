"""Tests for the spectral functions on stacks of matrices (numtile/tiletensor/linalg/spectral.py
through batched.spectral): one batched LAPACK task per tile when a tile holds whole matrices,
the 2-d path per matrix otherwise, against NumPy; the failing member named; the gradients of
eigh and svdvals of a stack against torch."""

import numpy as np
import pytest
import torch

import numtile as nt

# whole matrices per tile (batched tasks), matrices split over tiles (2-d path per matrix),
# wide matrices, and an empty stack
STACKS = [
    ((2, 3, 5, 4), (1, 2, 5, 4)),
    ((3, 6, 6), (2, 4, 4)),
    ((2, 4, 9), (1, 4, 9)),
    ((2, 0, 3, 3), (1, 1, 3, 3)),
]


@pytest.mark.parametrize("shape, tiles", STACKS)
def test_spectral_functions_of_a_stack_match_numpy(shape, tiles):
    a = np.random.default_rng(0).standard_normal(shape)
    x = nt.from_numpy(a, tile_shape=tiles)
    expected = np.linalg.svd(a, compute_uv=False)
    np.testing.assert_allclose(nt.linalg.svdvals(x).to_numpy(), expected, atol=1e-12)
    for full_matrices in (True, False):
        u, s, vh = (t.to_numpy() for t in nt.linalg.svd(x, full_matrices=full_matrices))
        eu, _, evh = np.linalg.svd(a, full_matrices=full_matrices)
        assert (u.shape, vh.shape) == (eu.shape, evh.shape)
        k = s.shape[-1]
        np.testing.assert_allclose((u[..., :k] * s[..., None, :]) @ vh[..., :k, :], a, atol=1e-12)
    np.testing.assert_allclose(nt.linalg.pinv(x).to_numpy(), np.linalg.pinv(a), atol=1e-10)
    np.testing.assert_array_equal(nt.linalg.matrix_rank(x).to_numpy(), np.linalg.matrix_rank(a))
    for order in (2, -2, "nuc"):
        norm = nt.linalg.matrix_norm(x, ord=order)
        expected = np.linalg.norm(a, ord=order, axis=(-2, -1))
        np.testing.assert_allclose(norm.to_numpy(), expected, atol=1e-12)
        assert nt.linalg.matrix_norm(x, ord=order, keepdims=True).shape == shape[:-2] + (1, 1)
    if shape[-1] == shape[-2]:
        symmetric = a + np.swapaxes(a, -1, -2)
        y = nt.from_numpy(symmetric, tile_shape=tiles)
        values = nt.linalg.eigvalsh(y).to_numpy()
        np.testing.assert_allclose(values, np.linalg.eigvalsh(symmetric), atol=1e-12)
        w, v = (t.to_numpy() for t in nt.linalg.eigh(y))
        rebuilt = (v * w[..., None, :]) @ np.swapaxes(v, -1, -2)
        np.testing.assert_allclose(rebuilt, symmetric, atol=1e-12)


def test_matrix_rank_of_a_stack_with_rtol_per_matrix():
    a = np.stack([np.diag([1.0, 0.5, 0.1]), np.diag([1.0, 0.5, 0.1])])
    rtol = np.array([0.2, 0.05])
    x = nt.from_numpy(a, tile_shape=(1, 3, 3))
    rank = nt.linalg.matrix_rank(x, rtol=nt.from_numpy(rtol)).to_numpy()
    np.testing.assert_array_equal(rank, np.linalg.matrix_rank(a, rtol=rtol))
    assert rank.tolist() == [2, 3]


def test_a_non_finite_member_of_a_stack_is_named():
    a = np.stack([np.eye(3)] * 3)
    a[2, 0, 1] = np.inf
    values = nt.linalg.svdvals(nt.from_numpy(a, tile_shape=(2, 3, 3)))
    with pytest.raises(np.linalg.LinAlgError, match=r"matrix \(2,\) of the stack of shape"):
        values.to_numpy()


def test_gradients_of_eigh_and_svdvals_of_a_stack_match_torch():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((2, 4, 4))
    a = a + np.swapaxes(a, -1, -2)
    weight = rng.standard_normal((2, 4))
    for name in ("eigvalsh", "svdvals"):
        x = nt.from_numpy(a, tile_shape=(1, 4, 4)).requires_grad_()
        nt.sum(getattr(nt.linalg, name)(x) * nt.from_numpy(weight)).backward()
        t = torch.tensor(a, requires_grad=True)
        (getattr(torch.linalg, name)(t) * torch.tensor(weight)).sum().backward()
        np.testing.assert_allclose(x.grad.to_numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-10)
