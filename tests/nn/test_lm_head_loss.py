"""The LM head and its loss as one node (``linear_cross_entropy``): the same values and
gradients as ``linear`` followed by ``cross_entropy``, in every precision mode, and against
PyTorch; the tied embedding's backward adding into the gradient the head gave first."""

import warnings

import numpy as np
import pytest
import torch

import numtile as nt
from numtile.nn import functional
from numtile.nn.loss import cross_entropy, linear_cross_entropy

B, T, C, V = 2, 5, 6, 13


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((B, T, C)).astype(np.float32)
    w = (rng.standard_normal((V, C)) * 0.3).astype(np.float32)
    y = rng.integers(0, V, (B, T))
    y[0, 1] = -1  # ignored
    return x, w, y


def _run(fused, mode, x0, w0, y, x_tile, w_tile, x_grad=True, w_grad=True):
    x = nt.from_numpy(x0, tile_shape=x_tile).requires_grad_(x_grad)
    w = nt.from_numpy(w0, tile_shape=w_tile).requires_grad_(w_grad)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a mode the CPU lacks falls back, warning
        with nt.nn.precision(mode):
            if fused:
                logits, loss = linear_cross_entropy(x, w, y)
            else:
                logits = functional.linear(x, w, transposed=True)
                loss = cross_entropy(logits, y)
    logits_np = logits.to_numpy()
    del logits  # as the training loop does: the backward frees them column by column
    (loss * 2.0).backward()
    grads = [t.grad.to_numpy() if t.grad is not None else None for t in (x, w)]
    return loss.item(), logits_np, grads


@pytest.mark.parametrize("mode", ["fp32", "bf16-mixed", "fp32-fast-bf16", "tf32"])
@pytest.mark.parametrize(
    "x_tile, w_tile", [((1, 2, 4), (4, 4)), ((2, 5, 6), (13, 6)), ((1, 1, 1), (1, 1))]
)
def test_fused_head_equals_linear_then_loss(mode, x_tile, w_tile):
    x0, w0, y = _inputs()
    ref = _run(False, mode, x0, w0, y, x_tile, w_tile)
    got = _run(True, mode, x0, w0, y, x_tile, w_tile)
    # the same GEMMs in the same order: equal but for BLAS's own rounding on first calls
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-6)
    np.testing.assert_allclose(got[1].astype(np.float32), ref[1].astype(np.float32), rtol=1e-6)
    for a, b in zip(got[2], ref[2]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("x_grad, w_grad", [(True, False), (False, True)])
def test_fused_head_gives_only_the_gradients_asked(x_grad, w_grad):
    x0, w0, y = _inputs(1)
    x_tile, w_tile = (1, 3, 4), (5, 4)
    got = _run(True, "bf16-mixed", x0, w0, y, x_tile, w_tile, x_grad, w_grad)[2]
    ref = _run(False, "bf16-mixed", x0, w0, y, x_tile, w_tile)[2]
    assert (got[0] is not None) == x_grad and (got[1] is not None) == w_grad
    for a, b in zip(got, ref):
        if a is not None:  # the loss's row sums fold tiles in any order: bf16 roundings
            assert np.abs(a - b).max() <= 1e-2 * np.abs(b).max()


def test_fused_head_matches_torch_and_logits_are_not_differentiable():
    x0, w0, y = _inputs(2)
    loss, logits, (gx, gw) = _run(True, "fp32", x0, w0, y, (1, 3, 4), (4, 4))
    xt, wt = torch.tensor(x0, requires_grad=True), torch.tensor(w0, requires_grad=True)
    lt = xt @ wt.T
    ref = torch.nn.functional.cross_entropy(
        lt.reshape(-1, V), torch.tensor(y).reshape(-1), ignore_index=-1
    )
    (ref * 2.0).backward()
    np.testing.assert_allclose(loss, ref.item(), rtol=1e-6)
    np.testing.assert_allclose(logits, lt.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gx, xt.grad.numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(gw, wt.grad.numpy(), rtol=1e-5, atol=1e-7)
    x = nt.from_numpy(x0).requires_grad_()
    logits, _ = linear_cross_entropy(x, nt.from_numpy(w0), y)
    assert not logits.requires_grad
    with pytest.raises(RuntimeError, match="does not require grad"):
        logits.sum().backward()


def test_fused_head_rejects_bad_input():
    x, w = nt.zeros((2, 3)), nt.zeros((5, 4))
    with pytest.raises(ValueError, match="3 features"):
        linear_cross_entropy(x, w, [1, 2])
    with pytest.raises(ValueError, match=r"\[0, 5\)"):
        linear_cross_entropy(x, nt.zeros((5, 3)), [1, 5])


@pytest.mark.parametrize("steps", [1, 2])
def test_tied_embedding_adds_into_the_heads_gradient(steps):
    """GPT-2's tied table: the head's gradient arrives first and the embedding's backward
    scatters into it (no table-sized temporary); over ``steps`` backward calls (gradient
    accumulation), as PyTorch sums them."""
    rng = np.random.default_rng(3)
    w0 = rng.standard_normal((V, C)).astype(np.float32)
    ids, y = rng.integers(0, V, (B, T)), rng.integers(0, V, (B, T))
    w = nt.from_numpy(w0, tile_shape=(4, 4)).requires_grad_()
    wt = torch.tensor(w0, requires_grad=True)
    for _ in range(steps):
        x = functional.embedding(nt.from_numpy(ids, tile_shape=(1, 3)), w)
        linear_cross_entropy(x, w, y)[1].backward()
        ref = torch.nn.functional.cross_entropy(
            (wt[torch.tensor(ids)] @ wt.T).reshape(-1, V), torch.tensor(y).reshape(-1)
        )
        ref.backward()
    np.testing.assert_allclose(w.grad.to_numpy(), wt.grad.numpy(), rtol=1e-5, atol=1e-6)
