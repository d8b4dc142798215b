"""Precision modes on GPUs: the fallback warning of GPUs older than sm_80 (their compute
capability faked), and the bf16 flash-attention codelets on the CUDA backend (simulator)
against the CPU ones."""

import types
import warnings

import ml_dtypes
import numpy as np
import pytest

import numtile as nt
import numtile.nn  # noqa: F401 (nt.nn)
from numtile.backends import StreamOps
from numtile.ops_cuda import available
from numtile.tiletensor import codelets
from numtile.tiletensor.precision import PrecisionFallbackWarning, gpu_fallback

BF16 = ml_dtypes.bfloat16


def _gpu(name, capability):
    return types.SimpleNamespace(
        name=name, device=types.SimpleNamespace(compute_capability=capability)
    )


def test_gpus_older_than_sm80_warn_naming_the_fallback(monkeypatch):
    layer = nt.nn.Linear(4, 2, tile=(4, 2))
    runtime = nt.get_runtime()
    gpus = [None, _gpu("cuda0", (7, 5)), _gpu("cuda1", (8, 6))]
    monkeypatch.setattr(runtime, "nodes", gpus)  # a Turing and an Ampere GPU
    monkeypatch.setattr("numtile.tiletensor.precision._WARNED", set())
    with pytest.warns(PrecisionFallbackWarning) as said:
        layer.set_precision("tf32")  # no task runs while the nodes are faked
    gpu = [str(w.message) for w in said if "cuda0" in str(w.message)]
    assert len(gpu) == 1 and "cuda1" not in gpu[0]
    assert "cuda0 (sm_75) is older than sm_80 and has no TF32 tensor cores" in gpu[0]
    assert "round their float32 inputs to TF32" in gpu[0] and "float32 GEMM" in gpu[0]
    with warnings.catch_warnings():  # said once per mode
        warnings.simplefilter("error", PrecisionFallbackWarning)
        layer.set_precision("tf32")
    message = gpu_fallback("bf16-mixed", [("cuda0", (7, 0)), ("cuda1", (6, 1))])
    assert message.startswith("cuda0 (sm_70), cuda1 (sm_61) are older than sm_80")
    assert "widen bfloat16 to float32" in message
    assert gpu_fallback("tf32", [("cuda1", (8, 0))]) is None
    assert gpu_fallback("fp32", [("cuda0", (7, 5))]) is None


def _attention(backend_ops, to_device, to_host, q, k, v, dout):
    """out, lse, dq, dk, dv of one (query tile, key tile) block through the four codelets."""
    T, width = q.shape[1], q.shape[2]
    heads = 2
    stats = (1, T, heads)
    m, l_sum = np.full(stats, -np.inf), np.zeros(stats)
    acc, out, lse = np.zeros(q.shape, np.float32), np.zeros(q.shape, BF16), np.zeros(stats)
    delta = np.zeros(stats)
    grads = [np.zeros(q.shape, np.float32) for _ in range(3)]
    t = [to_device(a) for a in (q, k, v, dout, m, l_sum, acc, out, lse, delta, *grads)]
    q_, k_, v_, dout_, m_, l_, acc_, out_, lse_, delta_, dq_, dk_, dv_ = t
    scale = 1.0 / np.sqrt(width // heads)
    run = lambda codelet, *args: codelet.implementation(backend_ops[0])(backend_ops[1], *args)  # noqa: E731
    run(codelets.nn.attention_forward, q_, k_, v_, m_, l_, acc_, heads, scale, 0, 0, True)
    run(codelets.nn.attention_finalize, acc_, m_, l_, out_, lse_, heads)
    run(codelets.nn.attention_delta, dout_, out_, delta_, heads)
    run(
        codelets.nn.attention_backward,
        q_,
        k_,
        v_,
        dout_,
        lse_,
        delta_,
        dq_,
        dk_,
        dv_,
        heads,
        scale,
        0,
        0,
        True,
    )
    return [to_host(a) for a in (out_, lse_, dq_, dk_, dv_)]


@pytest.mark.skipif(not available(), reason="needs a GPU or the CUDA simulator")
def test_bf16_flash_attention_codelets_on_cuda_match_the_cpu(monkeypatch):
    from numba import cuda

    from numtile import ops_cpu
    from numtile.tiletensor.codelets import nn as nn_codelets

    # the CPU's float32 kernels (CPUs without bf16 units): the CUDA ones compute the same way
    monkeypatch.setattr(nn_codelets, "cpu_has_bf16_gemm", lambda: False)

    rng = np.random.default_rng(5)
    q, k, v, dout = (rng.standard_normal((1, 3, 4)).astype(BF16) for _ in range(4))
    cpu = _attention(("cpu", ops_cpu), np.copy, np.asarray, q, k, v, dout)
    stream = cuda.stream()
    gpu = _attention(
        ("cuda", StreamOps(stream)), cuda.to_device, lambda a: a.copy_to_host(), q, k, v, dout
    )
    assert gpu[0].dtype == BF16
    np.testing.assert_array_equal(gpu[0].view(np.uint16), cpu[0].view(np.uint16))  # out
    for name, got, want in zip(("lse", "dq", "dk", "dv"), gpu[1:], cpu[1:]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.skipif(not available(), reason="needs a GPU or the CUDA simulator")
def test_bf16_linear_codelets_on_cuda_match_the_cpu():
    from numba import cuda

    from numtile import ops_cpu

    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((5, 3)).astype(BF16), rng.standard_normal((4, 3)).astype(BF16)
    partial, bias = rng.standard_normal((5, 4)).astype(np.float32), np.arange(4, dtype=np.float32)
    results = []
    for kind, ops, to_device, to_host in (
        ("cpu", ops_cpu, np.copy, np.asarray),
        ("cuda", StreamOps(cuda.stream()), cuda.to_device, lambda t: t.copy_to_host()),
    ):
        out, grad = np.zeros((5, 4), BF16), np.zeros((3, 4), np.float32)
        t = [to_device(x) for x in (a, b, partial, bias, out, grad)]
        # out = round(partial + bias + a @ b^T); grad = a^T @ (a @ b^T rounded) in float32
        codelets.nn.linear_bf16_out.implementation(kind)(
            ops, t[0], t[1], t[2], t[3], t[4], False, True, True, True
        )
        codelets.nn.linear_bf16.implementation(kind)(ops, t[0], t[4], t[5], True, False, 0.0)
        results.append([to_host(x) for x in (t[4], t[5])])
    (out_cpu, grad_cpu), (out_gpu, grad_gpu) = results
    exact = partial + bias + a.astype(np.float32) @ b.astype(np.float32).T
    np.testing.assert_allclose(
        out_cpu.astype(np.float32), exact.astype(BF16).astype(np.float32), rtol=2**-8
    )
    np.testing.assert_array_equal(out_gpu.view(np.uint16), out_cpu.view(np.uint16))
    np.testing.assert_allclose(grad_gpu, grad_cpu, rtol=1e-5, atol=1e-6)
