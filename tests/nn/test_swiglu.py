"""The fused SwiGLU (``nn.functional.swiglu``, LLaMA's gated activation) against PyTorch's
``silu(gate) * up`` and against numtile's unfused ops: forward and both gradients, float32 and
bfloat16, tiles that do not divide the shape."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch

import numtile as nt
from numtile.nn import functional as F
from numtile.ops_cpu.nn import swiglu_apply, swiglu_backward
from numtile.tiletensor.elementwise import multiply, silu

SHAPE, TILE = (3, 37, 20), (2, 16, 8)
BF16 = ml_dtypes.bfloat16


def _operands(dtype, seed=0):
    rng = np.random.default_rng(seed)
    # gates spread wide enough to reach both tails of the sigmoid, and exactly 0
    gate = (rng.standard_normal(SHAPE) * 6).astype(np.float32)
    gate[0, 0, :4] = [0.0, -0.0, 95.0, -95.0]
    up, grad = (rng.standard_normal(SHAPE).astype(np.float32) for _ in range(2))
    return [a.astype(dtype) for a in (gate, up, grad)]


def _torch_reference(gate, up, grad):
    """silu(gate) * up and its gradients in float64 on the operands' values."""
    leaves = [torch.tensor(a.astype(np.float64), requires_grad=True) for a in (gate, up)]
    out = torch.nn.functional.silu(leaves[0]) * leaves[1]
    out.backward(torch.tensor(grad.astype(np.float64)))
    return out.detach().numpy(), leaves[0].grad.numpy(), leaves[1].grad.numpy()


def _run(gate, up, grad):
    leaves = [nt.from_numpy(a, tile_shape=TILE).requires_grad_() for a in (gate, up)]
    out = F.swiglu(*leaves)
    out.backward(nt.from_numpy(grad, tile_shape=TILE))
    assert out.dtype == gate.dtype and leaves[0].grad.dtype == gate.dtype
    return [t.to_numpy().astype(np.float64) for t in (out, leaves[0].grad, leaves[1].grad)]


def test_float32_matches_torch():
    gate, up, grad = _operands(np.float32)
    for ours, ref in zip(_run(gate, up, grad), _torch_reference(gate, up, grad)):
        np.testing.assert_allclose(ours, ref, rtol=3e-6, atol=1e-6)


def test_bfloat16_rounds_once():
    """Each result is the float64 value rounded to bfloat16 (within one float32 ulp of the
    sigmoid's fast exponential before that rounding): within half a bfloat16 ulp (at most
    2^-8 relative) of the exact value, and mostly the correctly rounded value itself."""
    gate, up, grad = _operands(BF16)
    for ours, ref in zip(_run(gate, up, grad), _torch_reference(gate, up, grad)):
        bound = np.abs(ref) * 2.0**-8 + 1e-30
        assert (np.abs(ours - ref) <= bound).all()
        nearest = ref.astype(np.float32).astype(BF16).astype(np.float64)
        assert (ours == nearest).mean() > 0.99  # mostly exactly the correctly rounded value


def test_float32_equals_unfused_ops_bit_for_bit():
    gate, up, grad = _operands(np.float32, seed=1)
    fused = _run(gate, up, grad)
    leaves = [nt.from_numpy(a, tile_shape=TILE).requires_grad_() for a in (gate, up)]
    out = multiply(silu(leaves[0]), leaves[1])
    out.backward(nt.from_numpy(grad, tile_shape=TILE))
    unfused = [t.to_numpy().astype(np.float64) for t in (out, leaves[0].grad, leaves[1].grad)]
    for a, b in zip(fused, unfused):
        np.testing.assert_array_equal(a, b)


def test_kernels_on_bfloat16_bits_special_values():
    """NaN propagates, infinite gates saturate the sigmoid; the bits kernels equal the float32
    kernels' results rounded (to one bfloat16 ulp) on ordinary values."""
    gate = np.array([np.nan, np.inf, -np.inf, 0.5, -3.0, 100.0], np.float32).astype(BF16)
    up = np.array([1.0, 2.0, 3.0, -1.5, 2.0, 1.0], np.float32).astype(BF16)
    out = np.empty(6, np.uint16)
    swiglu_apply(gate.view(np.uint16), up.view(np.uint16), out)
    got = out.view(BF16).astype(np.float64)
    assert np.isnan(got[0]) and got[1] == np.inf and np.isnan(got[2])  # -inf * 0 * 3
    wide = np.empty(6, np.float32)
    swiglu_apply(gate.astype(np.float32), up.astype(np.float32), wide)
    np.testing.assert_allclose(got[3:], wide[3:].astype(BF16).astype(np.float64), rtol=2**-8)
    grads = [np.empty(6, np.uint16) for _ in range(2)]
    swiglu_backward(gate.view(np.uint16), up.view(np.uint16), up.view(np.uint16), *grads)
    assert np.isnan(grads[0].view(BF16).astype(np.float32)[0])


def test_operands_must_agree():
    gate = nt.ones((4, 3), tile_shape=(2, 3))
    with pytest.raises(ValueError, match="one shape and one dtype"):
        F.swiglu(gate, nt.ones((4, 2), tile_shape=(2, 2)))
    with pytest.raises(ValueError, match="one shape and one dtype"):
        F.swiglu(gate, gate.astype(nt.bfloat16))
