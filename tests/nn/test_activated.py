"""``activated.activated_linear``: in bf16-mixed, GPT-2's and LLaMA's MLPs keep the
activation's inputs but not its output for the backward, and the weight gradient's GEMM tasks
recompute the activation (``codelets.activated``). Outputs and gradients must equal the
unfused ops' bit for bit, on the CPU and on a CUDA worker (simulator); other precisions run
the unfused ops."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import numtile as nt
from numtile.backends import StreamOps
from numtile.nn import activated
from numtile.nn.activated import ActivatedLinearFunction, activated_linear
from numtile.nn.layers import MLP, GatedMLP
from numtile.ops_cuda import available
from numtile.runtime.codelet import REGISTRY
from numtile.tiletensor import codelets

BF16 = ml_dtypes.bfloat16
FUSED = {name: f"linear_bf16_weight_grad:{name}" for name in ("gelu_tanh", "swiglu")}

# (layer, activation): GPT-2's MLP (W (in, out), bias); LLaMA's (W (out, in)), with and
# without bias; tiles that divide neither the rows (9 in 4s), the features (8 in 3s) nor the
# inner width (14 in 5s)
LAYERS = {
    "gpt2": (lambda: MLP(8, 14, tile=(3, 5), seed=3), "gelu_tanh"),
    "llama": (lambda: GatedMLP(8, 14, tile=(3, 5), seed=4), "swiglu"),
    "llama-bias": (lambda: GatedMLP(8, 14, bias=True, tile=(3, 5), seed=5), "swiglu"),
}


def _run(mlp, x, mode, fused=True):
    """The MLP's output and the gradients of its input and parameters for sum(out**2) (with
    ``fused=False``: through the unfused ops), and the output's tape node as the forward left
    it (its function and what it saved)."""
    nt.wait_all()
    with pytest.MonkeyPatch.context() as patch, nt.nn.precision(mode):
        if not fused:
            patch.setattr(activated, "_fusable", lambda *args: False)
        leaf = nt.from_numpy(x, tile_shape=(2, 4, 3)).requires_grad_()
        out = mlp(leaf)
        node = (out._node.function, out._node.ctx.saved)
        wide = out.astype("float32")
        (wide * wide).sum().backward()
    results = {"out": out.to_numpy(), "x": leaf.grad.to_numpy()}
    results.update((name, p.grad.to_numpy()) for name, p in mlp.named_parameters())
    for p in mlp.parameters():
        p.grad = None
    return results, node


def _assert_same_bits(got, want):
    assert got.keys() == want.keys()
    for name, a in got.items():
        b = want[name]
        assert a.dtype == b.dtype and a.shape == b.shape, name
        if name.endswith("bias"):  # a float32 sum of partials in either path: order may vary
            np.testing.assert_allclose(a, b, rtol=1e-6, err_msg=name)
        else:
            np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8), err_msg=name)


def _calls(name):
    nt.wait_all()
    return REGISTRY[name].calls if name in REGISTRY else 0


@pytest.mark.parametrize("layer", LAYERS)
def test_bf16_mixed_equals_the_unfused_ops_bit_for_bit(layer):
    make, activation = LAYERS[layer]
    mlp = make()
    x = np.random.default_rng(0).standard_normal((3, 9, 8)).astype(np.float32)
    before = _calls(FUSED[activation])
    fused, (function, saved) = _run(mlp, x, "bf16-mixed")
    assert _calls(FUSED[activation]) > before  # the fused weight gradient ran
    assert fused["out"].dtype == BF16 and fused["x"].dtype == np.float32
    assert function is ActivatedLinearFunction
    # what the backward keeps: the activation's bfloat16 inputs and the float32 W, no more
    assert len(saved) == (2 if activation == "gelu_tanh" else 3)
    assert [t.dtype for t in saved] == [nt.bfloat16] * (len(saved) - 1) + [np.float32]
    assert saved[-1] is (mlp.c_proj if layer == "gpt2" else mlp.down_proj).weight
    unfused, (function, _) = _run(mlp, x, "bf16-mixed", fused=False)
    assert function is not ActivatedLinearFunction
    _assert_same_bits(fused, unfused)


def test_other_precisions_run_the_unfused_ops():
    mlp = LAYERS["gpt2"][0]()
    x = np.random.default_rng(1).standard_normal((3, 9, 8)).astype(np.float32)
    before = _calls(FUSED["gelu_tanh"])
    for mode in ("fp32", "fp32-fast-bf16"):
        plain, (function, _) = _run(mlp, x, mode)
        assert function is not ActivatedLinearFunction
        assert plain["out"].dtype == np.float32
    assert _calls(FUSED["gelu_tanh"]) == before


def test_errors():
    h, w = nt.zeros((4, 3)), nt.ones((3, 2))
    with pytest.raises(ValueError, match="'gelu_tanh' of one input or 'swiglu' of two"):
        activated_linear("relu", (h,), w)
    with pytest.raises(ValueError, match="'gelu_tanh' of one input or 'swiglu' of two"):
        activated_linear("swiglu", (h,), w)
    with nt.nn.precision("bf16-mixed"), pytest.raises(ValueError, match="has 2 features"):
        activated_linear("gelu_tanh", (nt.zeros((4, 2), dtype=nt.bfloat16),), w)


def _weight_grad_both_ways(kind, ops, to_device, activation, inputs, other, act_first):
    """C (5, 4) += op(A)^T B through the fused codelet, and through the forward's activation
    codelet and then ``linear_bf16``, on the device arrays of a backend."""
    run = lambda codelet, *args: codelet.implementation(kind)(ops, *args)  # noqa: E731
    inputs, other = [to_device(t) for t in inputs], to_device(other)
    act = to_device(np.zeros(inputs[0].shape, BF16))
    fused, unfused = (to_device(np.full((5, 4), 7.0, np.float32)) for _ in range(2))
    args = (True, False, 1.0)  # as a weight gradient's chain after its first task
    run(codelets.activated.weight_grad[activation], *inputs, other, fused, act_first, *args)
    if activation == "gelu_tanh":
        run(codelets.elementwise.unary["gelu_tanh"], inputs[0], act)
    else:
        run(codelets.nn.swiglu, *inputs, act)
    run(codelets.nn.linear_bf16, *((act, other) if act_first else (other, act)), unfused, *args)
    return fused, unfused


def _backends():
    from numtile import ops_cpu

    yield "cpu", ops_cpu, np.copy, np.asarray
    if available():
        from numba import cuda

        yield "cuda", StreamOps(cuda.stream()), cuda.to_device, lambda t: t.copy_to_host()


@pytest.mark.parametrize("act_first", [True, False], ids=["in-out", "out-in"])
@pytest.mark.parametrize("activation", ["gelu_tanh", "swiglu"])
def test_codelets_equal_activation_then_gemm_on_each_backend(activation, act_first):
    # W (in, out): C (5, 4) = act^T g, act (2, 3, 5); W (out, in): C = g^T act, act (2, 3, 4)
    rng = np.random.default_rng(7)
    act_features, other_features = (5, 4) if act_first else (4, 5)
    count = 1 if activation == "gelu_tanh" else 2
    inputs = [(3 * rng.standard_normal((2, 3, act_features))).astype(BF16) for _ in range(count)]
    other = rng.standard_normal((6, other_features)).astype(BF16)
    results = {}
    for kind, ops, to_device, to_host in _backends():
        fused, unfused = _weight_grad_both_ways(
            kind, ops, to_device, activation, inputs, other, act_first
        )
        fused, unfused = to_host(fused), to_host(unfused)
        np.testing.assert_array_equal(fused, unfused)  # the same bits on each backend
        results[kind] = fused
    wide = [t.astype(np.float32).reshape(6, act_features) for t in inputs]
    if activation == "gelu_tanh":
        act = 0.5 * wide[0] * (1 + np.tanh(0.7978845608 * (wide[0] + 0.044715 * wide[0] ** 3)))
    else:
        act = wide[0] / (1 + np.exp(-wide[0])) * wide[1]
    act = act.astype(BF16).astype(np.float32)
    g = other.astype(np.float32)
    want = 7.0 + (act.T @ g if act_first else g.T @ act)
    for kind, got in results.items():  # rounding of act(h) to bfloat16 may differ by an ulp
        np.testing.assert_allclose(got, want, rtol=2e-2, atol=5e-2, err_msg=kind)


@pytest.mark.skipif(not available(), reason="needs a GPU or the CUDA simulator")
@pytest.mark.parametrize("layer", ["gpt2", "llama"])
def test_on_a_cuda_worker_equals_the_unfused_ops_bit_for_bit(layer):
    make, activation = LAYERS[layer]
    x = np.random.default_rng(2).standard_normal((2, 5, 8)).astype(np.float32)
    nt.init(ncpu=1, ncuda=1, restrict="cuda", scheduler="eager")
    try:
        mlp = make()
        before = _calls(FUSED[activation])
        fused, _ = _run(mlp, x, "bf16-mixed")
        assert _calls(FUSED[activation]) > before
        unfused, _ = _run(mlp, x, "bf16-mixed", fused=False)
    finally:
        nt.init()
    _assert_same_bits(fused, unfused)
