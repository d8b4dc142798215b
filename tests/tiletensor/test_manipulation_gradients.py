"""Gradients of the array API's manipulation functions (numtile/autograd/manipulation.py) against
torch.autograd: concat, stack, unstack, flip, roll, tril, triu, and the composites (tile, repeat,
moveaxis, broadcast_arrays, meshgrid), over tilings that divide nothing."""

import numpy as np
import pytest
import torch

import numtile as nt

RNG = np.random.default_rng(0)
A, B = RNG.standard_normal((4, 5)), RNG.standard_normal((4, 3))

CASES = {
    "concat axis 1": (lambda x, y: nt.concat([x, y], axis=1), lambda x, y: torch.cat([x, y], 1)),
    "concat flattened": (
        lambda x, y: nt.concat([x, y], axis=None),
        lambda x, y: torch.cat([x.flatten(), y.flatten()]),
    ),
    "concat axis 0": (
        lambda x, y: nt.concat([x, nt.ones((1, 5), tile_shape=(1, 4)), x * 2], axis=0),
        lambda x, y: torch.cat([x, torch.ones(1, 5), x * 2], 0),
    ),
    "stack": (lambda x, y: nt.stack([x, x * 2], axis=2), lambda x, y: torch.stack([x, x * 2], 2)),
    "unstack": (
        lambda x, y: nt.unstack(x, axis=1)[2] * 3 + nt.unstack(x, axis=1)[0],
        lambda x, y: torch.unbind(x, 1)[2] * 3 + torch.unbind(x, 1)[0],
    ),
    "flip": (lambda x, y: nt.flip(x, axis=1), lambda x, y: torch.flip(x, (1,))),
    "flip all": (lambda x, y: nt.flip(x), lambda x, y: torch.flip(x, (0, 1))),
    "roll axes": (
        lambda x, y: nt.roll(x, (1, -3), axis=(0, 1)),
        lambda x, y: torch.roll(x, (1, -3), (0, 1)),
    ),
    "roll flattened": (lambda x, y: nt.roll(x, 7), lambda x, y: torch.roll(x, 7)),
    "tril": (lambda x, y: nt.tril(x, k=1), lambda x, y: torch.tril(x, 1)),
    "triu": (lambda x, y: nt.triu(x, k=-1), lambda x, y: torch.triu(x, -1)),
    "tile": (lambda x, y: nt.tile(x, (2, 1, 3)), lambda x, y: torch.tile(x, (2, 1, 3))),
    "repeat": (
        lambda x, y: nt.repeat(x, 3, axis=0),
        lambda x, y: torch.repeat_interleave(x, 3, 0),
    ),
    "repeat counts": (
        lambda x, y: nt.repeat(x, nt.asarray([2, 0, 1, 3, 1]), axis=1),
        lambda x, y: torch.repeat_interleave(x, torch.tensor([2, 0, 1, 3, 1]), 1),
    ),
    "repeat counts flattened": (
        lambda x, y: nt.repeat(x, [1, 2] * 10),
        lambda x, y: torch.repeat_interleave(x.flatten(), torch.tensor([1, 2] * 10)),
    ),
    "moveaxis": (lambda x, y: nt.moveaxis(x, 0, 1), lambda x, y: torch.movedim(x, 0, 1)),
    "broadcast_arrays": (
        lambda x, y: nt.broadcast_arrays(x, nt.ones((2, 1, 1)))[0],
        lambda x, y: torch.broadcast_tensors(x, torch.ones(2, 1, 1))[0],
    ),
    "meshgrid": (
        lambda x, y: nt.meshgrid(nt.reshape(x, (-1,)), nt.reshape(y, (-1,)))[1],
        lambda x, y: torch.meshgrid(x.flatten(), y.flatten(), indexing="xy")[1],
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradient_matches_torch(name):
    ours, theirs = CASES[name]
    x = nt.from_numpy(A, tile_shape=(3, 2)).requires_grad_()
    y = nt.from_numpy(B, tile_shape=(1, 2)).requires_grad_()
    tx, ty = (torch.tensor(v, requires_grad=True) for v in (A, B))
    out, expected = ours(x, y), theirs(tx, ty)
    weights = RNG.standard_normal(tuple(expected.shape))
    nt.sum(out * nt.from_numpy(weights, tile_shape=out.tile_shape)).backward()
    (expected * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(out.detach().to_numpy(), expected.detach().numpy(), rtol=1e-12)
    for tensor, reference in ((x, tx), (y, ty)):
        if reference.grad is None:
            assert tensor.grad is None
        else:
            np.testing.assert_allclose(tensor.grad.to_numpy(), reference.grad.numpy(), rtol=1e-12)


def test_creation_functions_are_constants():
    x = nt.from_numpy(A).requires_grad_()
    for out in (nt.zeros_like(x), nt.ones_like(x), nt.full_like(x, 2.0), nt.empty_like(x)):
        assert not out.requires_grad
