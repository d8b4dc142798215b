"""Gradients of the vector and matrix norms of complex input against torch.autograd (PyTorch's
convention: the conjugate Wirtinger derivative, g * sgn(z) * d|z|-norm, zero where z is 0), on
complex128 with tiles that divide nothing, stacks, axis tuples and keepdims; complex64 too."""

import numpy as np
import pytest
import torch

import numtile as nt

RTOL, ATOL = 1e-9, 1e-11


def _complex(shape, seed, dtype=np.complex128):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def _compare(ours_of, theirs_of, a, tile, rtol=RTOL, atol=ATOL):
    """Weight the norm by one random real tensor, backpropagate through both graphs and
    compare the norms and the gradients (dtype, tiling and values)."""
    x = nt.from_numpy(a, tile_shape=tile).requires_grad_()
    t = torch.tensor(a, requires_grad=True)
    out, ref = ours_of(x), theirs_of(t)
    assert out.dtype == ref.detach().numpy().dtype
    np.testing.assert_allclose(out.to_numpy(), ref.detach().numpy(), rtol=rtol, atol=atol)
    weights = np.random.default_rng(7).standard_normal(ref.shape).astype(out.dtype)
    w = nt.from_numpy(weights, tile_shape=out.tile_shape) if weights.ndim else float(weights)
    nt.sum(out * w).backward()
    (ref * torch.tensor(weights)).sum().backward()
    assert x.grad.dtype == a.dtype and x.grad.tile_shape == x.tile_shape
    expected = np.zeros_like(a) if t.grad is None else t.grad.numpy()  # (ord 0: torch has none)
    np.testing.assert_allclose(x.grad.to_numpy(), expected, rtol=rtol, atol=atol)


@pytest.mark.parametrize("order", [2, 1, np.inf, -np.inf, 3, 0.5, -1.5, 0])
@pytest.mark.parametrize(
    "axis, keepdims", [(None, False), (-1, True), ((0, 2), False), ((-1, -2), True)]
)
def test_vector_norm(order, axis, keepdims):
    _compare(
        lambda x: nt.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=order),
        lambda t: torch.linalg.vector_norm(t, ord=order, dim=axis, keepdim=keepdims),
        _complex((3, 4, 5), seed=1),
        (2, 3, 2),
    )


@pytest.mark.parametrize("order", [2, 1, np.inf, 3])
def test_vector_norm_at_zeros_and_of_a_zero_vector(order):
    a = _complex((4, 5), seed=2)
    a[0] = 0  # a zero vector: a zero norm, a zero gradient
    a[1:, ::2] = 0  # zeros beside nonzeros: sgn(0) = 0
    a[2, 1] = a[2, 1].real  # a real entry, and ties for inf
    a[3, 1], a[3, 3] = 2 + 1j, 1 - 2j
    a[3, 4] = -2j
    _compare(
        lambda x: nt.linalg.vector_norm(x, axis=1, ord=order),
        lambda t: torch.linalg.vector_norm(t, ord=order, dim=1),
        a,
        (3, 2),
    )


def test_vector_norm_of_complex64_has_a_complex64_gradient():
    _compare(
        lambda x: nt.linalg.vector_norm(x, axis=(0, 1)),
        lambda t: torch.linalg.vector_norm(t, dim=(0, 1)),
        _complex((3, 5, 2), seed=3, dtype=np.complex64),
        (2, 2, 1),
        rtol=1e-5,
        atol=1e-6,
    )


@pytest.mark.parametrize("order", ["fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf])
@pytest.mark.parametrize("shape, tile", [((2, 4, 5), (1, 3, 2)), ((3, 3, 2), (2, 3, 2))])
def test_matrix_norm(order, shape, tile):
    _compare(
        lambda x: nt.linalg.matrix_norm(x, ord=order),
        lambda t: torch.linalg.matrix_norm(t, ord=order),
        _complex(shape, seed=4),
        tile,
    )


def test_matrix_norm_keepdims():
    _compare(
        lambda x: nt.linalg.matrix_norm(x, ord="nuc", keepdims=True),
        lambda t: torch.linalg.matrix_norm(t, ord="nuc", keepdim=True),
        _complex((2, 3, 4), seed=5),
        (1, 2, 3),
    )
