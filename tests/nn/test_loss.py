"""Tiled cross-entropy against torch.nn.functional.cross_entropy."""

import numpy as np
import pytest
import torch

import numtile as nt
from numtile.nn.loss import cross_entropy


@pytest.mark.parametrize("tile", [(1, 3, 17), (2, 5, 50), (2, 2, 7)])
@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-10), (np.float32, 2e-5)])
def test_cross_entropy_matches_torch(tile, dtype, rtol):
    rng = np.random.default_rng(0)
    logits_np = (rng.standard_normal((2, 5, 50)) * 4).astype(dtype)
    targets = rng.integers(0, 50, (2, 5))
    targets[0, 1] = -1  # ignored position
    logits = nt.from_numpy(logits_np, tile_shape=tile).requires_grad_()
    ref_in = torch.tensor(logits_np, requires_grad=True)
    loss = cross_entropy(logits, targets)
    ref = torch.nn.functional.cross_entropy(
        ref_in.reshape(-1, 50), torch.tensor(targets).reshape(-1), ignore_index=-1
    )
    assert loss.dtype == np.dtype(dtype) and loss.shape == ()
    np.testing.assert_allclose(loss.item(), ref.item(), rtol=rtol)
    (loss * 3.0).backward()
    (ref * 3.0).backward()
    np.testing.assert_allclose(logits.grad.to_numpy(), ref_in.grad.numpy(), rtol=rtol, atol=1e-7)


def test_cross_entropy_rejects_bad_targets():
    logits = nt.zeros((2, 4))
    with pytest.raises(ValueError, match=r"\[0, 4\)"):
        cross_entropy(logits, np.array([1, 4]))
    with pytest.raises(ValueError, match="shape"):
        cross_entropy(logits, np.array([1, 2, 3]))
    with pytest.raises(ValueError, match="ignored"):
        cross_entropy(logits, np.array([-1, -1]))
    with pytest.raises(TypeError, match="integers"):
        cross_entropy(logits, np.array([0.5, 1.0]))
