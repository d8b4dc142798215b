"""Flash-style tiled attention against PyTorch's scaled_dot_product_attention."""

import numpy as np
import pytest
import torch

import numtile as nt
from numtile.nn.attention import causal_self_attention


def _torch_attention(qkv: torch.Tensor, n_head: int, causal: bool) -> torch.Tensor:
    B, T, C3 = qkv.shape
    C = C3 // 3
    q, k, v = qkv.split(C, dim=2)
    q, k, v = (t.view(B, T, n_head, C // n_head).transpose(1, 2) for t in (q, k, v))
    y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return y.transpose(1, 2).reshape(B, T, C)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize(
    "tile, head_tile", [((1, 4, 6), 2), ((2, 5, 3), 1), ((2, 11, 12), 4), ((1, 3, 3), 1)]
)
def test_attention_forward_and_backward_match_torch(causal, tile, head_tile):
    B, T, n_head, D = 2, 11, 4, 3
    rng = np.random.default_rng(0)
    data = rng.standard_normal((B, T, 3 * n_head * D))
    qkv = nt.from_numpy(data, tile_shape=tile).requires_grad_()
    ref_in = torch.tensor(data, requires_grad=True)
    out = causal_self_attention(qkv, n_head, head_tile, causal)
    ref = _torch_attention(ref_in, n_head, causal)
    np.testing.assert_allclose(out.to_numpy(), ref.detach().numpy(), rtol=1e-10, atol=1e-12)
    weights = rng.standard_normal(ref.shape)
    (out * nt.from_numpy(weights, tile_shape=out.tile_shape)).sum().backward()
    (ref * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(qkv.grad.to_numpy(), ref_in.grad.numpy(), rtol=1e-9, atol=1e-11)
    assert qkv.grad.tile_shape == qkv.tile_shape


def test_attention_float32_and_errors():
    data = np.random.default_rng(1).standard_normal((1, 9, 24)).astype(np.float32)
    out = causal_self_attention(nt.from_numpy(data, tile_shape=(1, 4, 4)), n_head=2)
    ref = _torch_attention(torch.tensor(data), 2, True)
    np.testing.assert_allclose(out.to_numpy(), ref.numpy(), rtol=2e-5, atol=2e-6)
    with pytest.raises(ValueError, match="divisible"):
        causal_self_attention(nt.ones((1, 2, 24)), n_head=5)
    with pytest.raises(ValueError, match="multiple of head_tile"):
        causal_self_attention(nt.ones((1, 2, 24)), n_head=2, head_tile=4)
    with pytest.raises(ValueError, match="3C"):
        causal_self_attention(nt.ones((2, 25)), n_head=1)
