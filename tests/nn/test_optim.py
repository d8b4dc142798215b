"""AdamW and SGD against torch.optim, schedule and clipping."""

import math

import numpy as np
import pytest
import torch

import numtile as nt
from numtile.nn import optim


def _problem(seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((5, 7)), rng.standard_normal((5, 7))


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_adamw_matches_torch_over_steps(weight_decay):
    w0, target = _problem(0)
    w = nt.from_numpy(w0, tile_shape=(2, 3)).requires_grad_()
    tw = torch.tensor(w0, requires_grad=True)
    opt = optim.AdamW([w], lr=0.05, betas=(0.8, 0.95), eps=1e-6, weight_decay=weight_decay)
    topt = torch.optim.AdamW([tw], lr=0.05, betas=(0.8, 0.95), eps=1e-6, weight_decay=weight_decay)
    t = nt.from_numpy(target, tile_shape=(2, 3))
    for _ in range(5):
        opt.zero_grad()
        topt.zero_grad()
        ((w - t) * (w - t)).sum().backward()
        ((tw - torch.tensor(target)) ** 2).sum().backward()
        opt.step()
        topt.step()
        np.testing.assert_allclose(w.to_numpy(), tw.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_sgd_matches_torch():
    w0, target = _problem(1)
    w = nt.from_numpy(w0, tile_shape=(3, 3)).requires_grad_()
    tw = torch.tensor(w0, requires_grad=True)
    opt, topt = optim.SGD([w], lr=0.1), torch.optim.SGD([tw], lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        topt.zero_grad()
        (w * w).sum().backward()
        (tw * tw).sum().backward()
        opt.step()
        topt.step()
    np.testing.assert_allclose(w.to_numpy(), tw.detach().numpy(), rtol=1e-12)


def test_clip_grad_norm_matches_torch():
    w0, _ = _problem(2)
    w = nt.from_numpy(w0, tile_shape=(2, 2)).requires_grad_()
    tw = torch.tensor(w0, requires_grad=True)
    (w * w * 3.0).sum().backward()
    (tw * tw * 3.0).sum().backward()
    norm = optim.clip_grad_norm([w], 1.0)
    ref = torch.nn.utils.clip_grad_norm_([tw], 1.0)
    assert math.isclose(norm, float(ref), rel_tol=1e-10)
    np.testing.assert_allclose(w.grad.to_numpy(), tw.grad.numpy(), rtol=1e-6)


def test_schedule_and_bad_hyperparameters():
    assert optim.cosine_schedule(0, lr=1.0, warmup=10, total=100) == pytest.approx(0.1)
    assert optim.cosine_schedule(10, lr=1.0, warmup=10, total=100) == pytest.approx(1.0)
    assert optim.cosine_schedule(100, lr=1.0, warmup=10, total=100, min_lr=0.1) == 0.1
    w = nt.ones((2,)).requires_grad_()
    with pytest.raises(ValueError, match="betas"):
        optim.AdamW([w], betas=(1.0, 0.9))
    with pytest.raises(ValueError, match="lr"):
        optim.AdamW([w], lr=-1.0)
    with pytest.raises(TypeError, match="require gradients"):
        optim.AdamW([nt.ones((2,))])
