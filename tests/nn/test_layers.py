"""Layers against their PyTorch counterparts, forward and backward."""

import numpy as np
import pytest
import torch

import numtile as nt
from numtile import nn


def _weights_to_torch(layer: nn.Linear) -> torch.nn.Linear:
    ref = torch.nn.Linear(layer.in_features, layer.out_features, dtype=torch.float64)
    w = layer.weight.to_numpy()
    with torch.no_grad():
        ref.weight.copy_(torch.tensor(w.T if layer.weight_layout == "in_out" else w))
        ref.bias.copy_(torch.tensor(layer.bias.to_numpy()))
    return ref


@pytest.mark.parametrize("layout", ["in_out", "out_in"])
@pytest.mark.parametrize("tile", [(3, 2), (7, 5), (2, 4)])
def test_linear_matches_torch(layout, tile):
    layer = nn.Linear(7, 5, weight_layout=layout, tile=tile, dtype="float64", seed=1)
    layer.bias = nn.parameter(nt.random.normal(size=(5,), seed=2, tile_shape=(tile[1],)))
    ref = _weights_to_torch(layer)
    x_np = np.random.default_rng(0).standard_normal((2, 6, 7))
    x = nt.from_numpy(x_np, tile_shape=(1, 4, tile[0])).requires_grad_()
    tx = torch.tensor(x_np, requires_grad=True)
    y, ty = layer(x), ref(tx)
    np.testing.assert_allclose(y.to_numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    weights = np.random.default_rng(3).standard_normal(y.shape)
    (y * nt.from_numpy(weights, tile_shape=y.tile_shape)).sum().backward()
    (ty * torch.tensor(weights)).sum().backward()
    grad_w = layer.weight.grad.to_numpy()
    expected_w = ref.weight.grad.numpy()
    np.testing.assert_allclose(grad_w.T if layout == "in_out" else grad_w, expected_w, rtol=1e-10)
    np.testing.assert_allclose(layer.bias.grad.to_numpy(), ref.bias.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(x.grad.to_numpy(), tx.grad.numpy(), rtol=1e-10)


def test_mlp_matches_torch_gelu_tanh_block():
    mlp = nn.MLP(6, 24, tile=(4, 10), dtype="float64", seed=3)
    fc, proj = _weights_to_torch(mlp.c_fc), _weights_to_torch(mlp.c_proj)
    x_np = np.random.default_rng(4).standard_normal((5, 6))
    x = nt.from_numpy(x_np, tile_shape=(2, 4))
    tx = torch.tensor(x_np)
    y = mlp(x)
    ty = proj(torch.nn.functional.gelu(fc(tx), approximate="tanh"))
    np.testing.assert_allclose(y.to_numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-12)
    y.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(
        mlp.c_fc.weight.grad.to_numpy().T, fc.weight.grad.numpy(), rtol=1e-9, atol=1e-12
    )


def test_module_names_state_dict_and_errors():
    mlp = nn.MLP(4, 8, tile=(2, 4))
    names = [name for name, _ in mlp.named_parameters()]
    assert names == ["c_fc.weight", "c_fc.bias", "c_proj.weight", "c_proj.bias"]
    assert mlp.num_parameters() == 4 * 8 + 8 + 8 * 4 + 4
    state = {k: v.to_numpy() * 0 + 1 for k, v in mlp.state_dict().items()}
    mlp.load_state_dict(state)
    assert float(mlp.c_fc.weight.to_numpy().sum()) == 32
    assert mlp.c_fc.weight.tile_shape == (2, 4) and mlp.c_fc.weight.requires_grad
    with pytest.raises(ValueError, match="missing"):
        mlp.load_state_dict({"c_fc.weight": state["c_fc.weight"]})
    bad = dict(state, **{"c_fc.bias": np.zeros(3)})
    with pytest.raises(ValueError, match="c_fc.bias.*\\(3,\\).*\\(8,\\)"):
        mlp.load_state_dict(bad)
    with pytest.raises(ValueError, match="features"):
        mlp(nt.ones((2, 5)))
    mlp.eval()
    assert not mlp.training and not mlp.c_fc.training
    mlp.zero_grad()
    assert all(p.grad is None for p in mlp.parameters())
