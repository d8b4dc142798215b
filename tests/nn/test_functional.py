"""Fused linear, embedding and layer norm against PyTorch, forward and backward."""

import numpy as np
import pytest
import torch

import numtile as nt
from numtile.nn import functional as F


def _t(array, tile, grad=True):
    tensor = nt.from_numpy(array, tile_shape=tile)
    return tensor.requires_grad_() if grad else tensor


def _close(ours, ref, rtol=1e-10):
    np.testing.assert_allclose(ours.to_numpy(), ref.detach().numpy(), rtol=rtol, atol=1e-11)


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize(
    "x_tile, w_tile", [((1, 3, 4), (4, 3)), ((2, 5, 7), (7, 5)), ((1, 2, 3), (2, 2))]
)
def test_linear(transposed, x_tile, w_tile):
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((2, 5, 7))
    w_np = rng.standard_normal((5, 7) if transposed else (7, 5))
    b_np = rng.standard_normal(5)
    x, w = _t(x_np, x_tile), _t(w_np, w_tile[::-1] if transposed else w_tile)
    b = _t(b_np, (w_tile[1],))
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x_np, w_np, b_np))
    y = F.linear(x, w, b, transposed=transposed)
    ty = tx @ (tw.T if transposed else tw) + tb
    _close(y, ty)
    weights = rng.standard_normal(ty.shape)
    (y * nt.from_numpy(weights, tile_shape=y.tile_shape)).sum().backward()
    (ty * torch.tensor(weights)).sum().backward()
    for ours, ref in ((x, tx), (w, tw), (b, tb)):
        _close(ours.grad, ref.grad)


@pytest.mark.parametrize(
    "ids_tile, table_tile", [((1, 3), (4, 2)), ((2, 7), (11, 5)), ((2, 2), (3, 3))]
)
def test_embedding(ids_tile, table_tile):
    rng = np.random.default_rng(1)
    table_np = rng.standard_normal((11, 5))
    ids_np = rng.integers(0, 11, (2, 7))
    table = _t(table_np, table_tile)
    ids = nt.from_numpy(ids_np, tile_shape=ids_tile)
    ttable = torch.tensor(table_np, requires_grad=True)
    out = F.embedding(ids, table)
    ref = torch.nn.functional.embedding(torch.tensor(ids_np), ttable)
    _close(out, ref)
    weights = rng.standard_normal(ref.shape)
    (out * nt.from_numpy(weights, tile_shape=out.tile_shape)).sum().backward()
    (ref * torch.tensor(weights)).sum().backward()
    _close(table.grad, ttable.grad)


@pytest.mark.parametrize(
    "x_tile, g_tile", [((1, 3, 4), (4,)), ((2, 5, 10), (10,)), ((2, 2, 3), (7,))]
)
def test_layer_norm(x_tile, g_tile):
    rng = np.random.default_rng(2)
    x_np = rng.standard_normal((2, 5, 10)) * 3 + 1
    g_np, b_np = rng.standard_normal(10), rng.standard_normal(10)
    x, g, b = _t(x_np, x_tile), _t(g_np, g_tile), _t(b_np, g_tile)
    tx, tg, tb = (torch.tensor(a, requires_grad=True) for a in (x_np, g_np, b_np))
    y = F.layer_norm(x, g, b, 1e-5)
    ty = torch.nn.functional.layer_norm(tx, (10,), tg, tb, 1e-5)
    _close(y, ty, rtol=1e-9)
    weights = rng.standard_normal(ty.shape)
    (y * nt.from_numpy(weights, tile_shape=y.tile_shape)).sum().backward()
    (ty * torch.tensor(weights)).sum().backward()
    for ours, ref in ((x, tx), (g, tg), (b, tb)):
        _close(ours.grad, ref.grad, rtol=1e-8)


def test_bad_inputs():
    with pytest.raises(ValueError, match="features"):
        F.linear(nt.ones((2, 3)), nt.ones((4, 2)))
    with pytest.raises(TypeError, match="int64"):
        F.embedding(nt.ones((2,)), nt.ones((4, 2)))
    with pytest.raises(ValueError, match="gamma"):
        F.layer_norm(nt.ones((2, 3)), nt.ones((4,)), nt.ones((4,)))
