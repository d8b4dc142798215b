"""AdamW and SGD against torch.optim, schedule and clipping."""

import math

import numpy as np
import pytest
import torch

import numtile as nt
from numtile.autograd import tape
from numtile.autograd.tape import Later
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


@pytest.mark.parametrize("mode", ["fp32", "bf16-mixed", "bf16-mixed, host limit"])
@pytest.mark.parametrize("make", [
    lambda params: optim.AdamW(params, lr=1e-2, weight_decay=0.1),
    lambda params: optim.SGD(params, lr=0.1),  # linear in the gradient: a partial one shows
], ids=["adamw", "sgd"])  # fmt: skip
def test_step_in_backward_matches_backward_then_step_on_gpt2(mode, make, monkeypatch):
    """GPT-2 (tied embedding): updates made during the backward equal backward(); step();
    zero_grad() over three steps, and leave no gradient; under a host memory limit (bf16
    logits computed again in the backward) the head's weight gradient is left to the end of
    the backward (``tape.Later``), after the embedding's. (Adam turns the last-bit differences
    of gradient sums, which vary from run to run, into ~1e-6 differences of near-zero
    entries: hence its absolute tolerance.)"""
    from numtile.nn import loss as loss_module
    from tests.nn.test_gpt2 import TILINGS, _batch, _pair

    mode, limited = mode.split(", ")[0], mode.endswith("limit")
    monkeypatch.setattr(loss_module, "host_memory_limited", lambda: limited)
    deferred = []
    monkeypatch.setattr(loss_module, "Later", lambda compute: deferred.append(1) or Later(compute))
    models = [_pair("float32", TILINGS[1])[0] for _ in range(2)]
    opts = []
    for model in models:
        model.set_precision(mode)
        opts.append(make(model.parameters()))
    for step in range(3):
        idx, targets = _batch(step)
        reference, fused = (model(idx, targets)[1] for model in models)
        reference.backward()
        opts[0].step()
        opts[0].zero_grad()
        opts[1].step_in_backward(fused)
    assert opts[1].step_count == 3
    for (name, p), q in zip(models[0].named_parameters(), models[1].parameters()):
        assert q.grad is None, name
        np.testing.assert_allclose(q.to_numpy(), p.to_numpy(), rtol=1e-5, atol=2e-5, err_msg=name)
        if isinstance(opts[0], optim.SGD):
            np.testing.assert_allclose(q.to_numpy(), p.to_numpy(), rtol=1e-5, atol=1e-7)
    assert len(deferred) == (3 if limited else 0)  # once a step, in the fused runs only


def test_step_in_backward_updates_each_parameter_once_its_gradient_is_complete():
    """y = w2 * (w1 * x): w2's gradient is complete after the outer product's rule, before
    w1's exists, so w2 is updated then; a parameter the loss does not reach keeps and uses
    the gradient it had, as step() would; the updates are SGD's."""

    x = nt.from_numpy(np.arange(1.0, 5.0), tile_shape=(2,))
    w1, w2, w3 = (
        nt.from_numpy(np.full(4, v), tile_shape=(2,)).requires_grad_() for v in (2.0, 3.0, 4.0)
    )
    w3.grad = nt.from_numpy(np.ones(4), tile_shape=(2,))
    seen = []
    opt = optim.SGD([w1, w2, w3], lr=0.1)
    update = opt._update

    def record(p, group):
        seen.append((p is w2, w1.grad is None))
        update(p, group)

    opt._update = record
    opt.step_in_backward((w2 * (w1 * x)).sum())
    assert seen[:2] == [(True, True), (False, False)]  # w2 first, while w1 had no gradient
    np.testing.assert_allclose(w1.to_numpy(), 2 - 0.1 * 3 * np.arange(1.0, 5.0))
    np.testing.assert_allclose(w2.to_numpy(), 3 - 0.1 * 2 * np.arange(1.0, 5.0))
    np.testing.assert_allclose(w3.to_numpy(), np.full(4, 3.9))
    assert w1.grad is None and w2.grad is None and w3.grad is None
    with pytest.raises(RuntimeError, match="does not require grad"):
        opt.step_in_backward(nt.ones(()))
    assert opt.step_count == 1
    calls = []
    y = (w1 * w1).sum()
    tape.backward(y, on_leaf_done=calls.append)  # the hook alone: gradients stay
    assert calls == [w1] and w1.grad is not None
