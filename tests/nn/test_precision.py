"""Precision modes: bf16/TF32 rounding against ml_dtypes and frexp, the GEMMs of each mode on
both backends, GPT-2 and LLaMA against transformers (under torch.autocast for bf16-mixed),
and the hardware fallback warnings."""

import warnings

import ml_dtypes
import numpy as np
import pytest
import torch

import numtile as nt
from numtile import ops_cpu
from numtile.tiletensor.precision import (
    PrecisionFallbackWarning,
    cpu_fallback,
    cpu_has_bf16_gemm,
    gemm_rounding,
    using_precision,
)
from tests.nn import test_gpt2, test_llama

SPECIAL = np.array(
    [
        0.0,
        -0.0,
        1.0,
        1 + 2.0**-8,
        1 + 3 * 2.0**-8,
        1 + 2.0**-11,
        -3.75e-39,
        3.4e38,
        np.inf,
        -np.inf,
        np.nan,
        1e-45,
    ],
    dtype=np.float32,
)


def _tf32(x):
    """TF32 rounding (10 mantissa bits, ties to even) through frexp: an independent reference."""
    mantissa, exponent = np.frexp(x.astype(np.float64))
    with np.errstate(invalid="ignore"):
        rounded = np.ldexp(np.round(mantissa * 2.0**11) / 2.0**11, exponent)
    return np.where(np.isfinite(x), rounded, x).astype(np.float32)


def _values(seed=0, n=(5, 7)):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * 10.0 ** rng.integers(-5, 5, n)).astype(np.float32)
    x.reshape(-1)[: SPECIAL.size] = SPECIAL[: x.size]
    return x


def test_round_mantissa_is_bfloat16_and_tf32(backend):
    x = _values()
    bf16, tf32 = np.empty_like(x), np.empty_like(x)
    backend.run("round_mantissa", x, bf16, 7, exact=True)
    backend.run("round_mantissa", x, tf32, 10, exact=True)
    expected = x.astype(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_array_equal(bf16, expected)
    normal = np.abs(x) >= np.finfo(np.float32).tiny  # frexp's subnormals differ by design
    np.testing.assert_array_equal(tf32[normal], _tf32(x)[normal])


def test_gemm_kernels_round_inputs_and_output(backend):
    rng = np.random.default_rng(1)
    a, b = (
        rng.standard_normal((6, 5)).astype(np.float32),
        rng.standard_normal((4, 5)).astype(np.float32),
    )
    bf = lambda v: v.astype(ml_dtypes.bfloat16).astype(np.float32)  # noqa: E731
    c = np.full((6, 4), 0.5, np.float32)
    backend.run("gemm_rounded", bf(a) * np.float32(1 + 2.0**-10), b, c, False, True, 2.0, 1.0, 7, 7)
    expected = bf(2.0 * (bf(a) @ bf(b).T) + 0.5)
    np.testing.assert_allclose(c, expected, rtol=2**-7)
    b = rng.standard_normal((4, 6)).astype(ml_dtypes.bfloat16)
    wide = np.zeros((5, 4), np.float32)
    bits = [x.astype(ml_dtypes.bfloat16).view(np.uint16) for x in (a, b)]
    backend.run("gemm_bf16", *bits, wide, True, True, 1.0, 0.0)
    np.testing.assert_allclose(wide, bf(a).T @ bf(b).T, rtol=1e-5, atol=1e-6)


def _round_torch(x, bits):
    """torch float32 ``x`` with mantissas rounded to ``bits`` bits (ties to even), in torch."""
    if bits >= 23:
        return x
    shift = 23 - bits
    u = x.contiguous().view(torch.int32)
    rounded = (u + ((1 << (shift - 1)) - 1) + ((u >> shift) & 1)) & ~((1 << shift) - 1)
    return rounded.view(torch.float32)


class _RoundedMatmul(torch.autograd.Function):
    """x @ w with both inputs rounded to ``in_bits`` and the product to ``out_bits``; its
    backward GEMMs round the same way (as numtile's linear does)."""

    @staticmethod
    def forward(ctx, x, w, in_bits, out_bits):
        ctx.save_for_backward(x, w)
        ctx.bits = in_bits, out_bits
        return _rounded_mm(x, w, in_bits, out_bits)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        in_bits, out_bits = ctx.bits
        x2, g2 = x.reshape(-1, x.shape[-1]), g.reshape(-1, g.shape[-1])
        gx = _rounded_mm(g, w.T, in_bits, out_bits)
        gw = _rounded_mm(x2.T, g2, in_bits, out_bits)
        return gx, gw, None, None


def _rounded_mm(x, w, in_bits, out_bits):
    return _round_torch(torch.matmul(_round_torch(x, in_bits), _round_torch(w, in_bits)), out_bits)


class _RoundedGemms(torch.overrides.TorchFunctionMode):
    """transformers' float32 model with every Linear/Conv1D GEMM rounded as a precision mode
    rounds it (forward and backward): the reference of fp32-fast-bf16 and tf32."""

    def __init__(self, in_bits, out_bits):
        super().__init__()
        self.bits = in_bits, out_bits

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.nn.functional.linear:
            x, w, *rest = args
            bias = rest[0] if rest else kwargs.get("bias")
            out = _RoundedMatmul.apply(x, w.T, *self.bits)
            return out if bias is None else out + bias
        if func is torch.addmm:  # GPT-2's Conv1D: bias + x @ W
            bias, x, w = args
            return bias + _RoundedMatmul.apply(x, w, *self.bits)
        return func(*args, **kwargs)


def _gpt2():
    ours, hf = test_gpt2._pair("float32", test_gpt2.TILINGS[1])
    return ours, hf, test_gpt2._batch()


def _llama():
    ours, hf = test_llama._pair("float32", *test_llama.CASES["mqa-ragged"])
    return ours, hf, test_llama._batch()


def _rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


def _errors(model, mode, reference):
    """Relative errors of (logits, loss, worst gradient) of ``model`` run in ``mode`` against
    transformers run under the ``reference`` context."""
    ours, hf, (idx, targets) = model()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrecisionFallbackWarning)
        ours.set_precision(mode)
    logits, loss = ours(idx, targets)
    loss.backward()
    with reference:
        ref_logits = hf(torch.tensor(idx)).logits.float()
        ref_loss = torch.nn.functional.cross_entropy(
            ref_logits.reshape(-1, ref_logits.shape[-1]), torch.tensor(targets).reshape(-1)
        )
    ref_loss.backward()
    with torch.no_grad():  # transformers in plain float32: how far the mode is from it
        plain = _rel(logits.to_numpy(), hf(torch.tensor(idx)).logits.numpy())
    grads = {name: p.grad.float().numpy() for name, p in hf.named_parameters()}
    # a tied lm_head's gradient is the embedding's (transformers lists the weight once)
    worst = max(
        _rel(p.grad.to_numpy(), grads[name]) for name, p in ours.named_parameters() if name in grads
    )
    return (
        _rel(logits.to_numpy(), ref_logits.detach().numpy()),
        abs(loss.item() - ref_loss.item()) / ref_loss.item(),
        worst,
        plain,
    )


@pytest.mark.parametrize(
    "model, mode", [(_gpt2, "fp32-fast-bf16"), (_llama, "tf32")], ids=["gpt2-bf16", "llama-tf32"]
)
def test_fast_modes_match_transformers_with_rounded_gemms(model, mode):
    logits, loss, grads, plain = _errors(model, mode, _RoundedGemms(*gemm_rounding(mode)))
    assert logits < 1e-5 and loss < 1e-5 and grads < 1e-3, (logits, loss, grads)
    assert plain > 10 * logits  # the rounding matters: plain float32 is further away


@pytest.mark.parametrize("model", [_gpt2, _llama], ids=["gpt2", "llama"])
def test_bf16_mixed_matches_transformers_under_autocast(model):
    autocast = torch.autocast("cpu", dtype=torch.bfloat16)
    logits, loss, grads, _ = _errors(model, "bf16-mixed", autocast)
    assert logits < 1e-2 and loss < 1e-3 and grads < 3e-2, (logits, loss, grads)


def test_bad_mode_and_fallback_warnings(monkeypatch):
    layer = nt.nn.Linear(4, 2, tile=(4, 2))
    with pytest.raises(ValueError, match="fp32, bf16-mixed, fp32-fast-bf16, tf32; got 'bf16'"):
        layer.set_precision("bf16")
    with pytest.raises(ValueError, match="precision must be one of"):
        with nt.nn.precision("fp16"):
            pass
    monkeypatch.setattr("numtile.tiletensor.precision._WARNED", set())
    with pytest.warns(PrecisionFallbackWarning, match="TF32 is a GPU tensor-core format"):
        layer.set_precision("tf32")
    with warnings.catch_warnings():  # said once per process and mode
        warnings.simplefilter("error")
        layer.set_precision("tf32")
    monkeypatch.setattr("numtile.tiletensor.precision.cpu_features", lambda: frozenset())
    assert "widens its bfloat16 inputs to float32" in cpu_fallback("bf16-mixed")
    monkeypatch.setattr("numtile.tiletensor.precision.cpu_features", lambda: {"avx512bf16"})
    assert cpu_fallback("bf16-mixed") is None and cpu_fallback("fp32") is None
    with using_precision("bf16-mixed"):
        assert gemm_rounding() == (7, 7)
    assert gemm_rounding() == (23, 23)


def test_bf16_matmul_is_the_exact_float32_product_rounded_once():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((2, 7, 9)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((9, 5)).astype(ml_dtypes.bfloat16)
    ta = nt.from_numpy(a, tile_shape=(1, 4, 4)).requires_grad_()
    tb = nt.from_numpy(b, tile_shape=(4, 3)).requires_grad_()
    exact = a.astype(np.float32) @ b.astype(np.float32)
    wide = nt.matmul(ta, tb, out_dtype=np.float32)
    assert wide.dtype == np.float32
    np.testing.assert_allclose(wide.to_numpy(), exact, rtol=1e-6, atol=1e-6)
    product = ta @ tb
    assert product.dtype == nt.bfloat16
    np.testing.assert_array_equal(product.to_numpy(), exact.astype(ml_dtypes.bfloat16))
    wide.sum().backward()
    assert ta.grad.dtype == nt.bfloat16  # gradients in the operands' dtype
    expected = np.ones((2, 7, 5), np.float32) @ b.astype(np.float32).T
    np.testing.assert_array_equal(ta.grad.to_numpy(), expected.astype(ml_dtypes.bfloat16))
    with pytest.raises(ValueError, match="out_dtype float32 needs bfloat16 operands"):
        nt.matmul(nt.ones((2, 2)), nt.ones((2, 2)), out_dtype=np.float32)


@pytest.mark.skipif(not ops_cpu.mkl_bf16_available(), reason="the mkl wheel is not installed")
def test_mkl_bf16_gemm_matches_the_fallback():
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal(s).astype(ml_dtypes.bfloat16) for s in ((6, 5), (4, 6)))
    bits = [x.view(np.uint16) for x in (a, b)]
    ours, mkl = np.full((5, 4), 1.0, np.float32), np.full((5, 4), 1.0, np.float32)
    ops_cpu.gemm_bf16(*bits, ours, True, True, 0.5, 2.0)
    ops_cpu.gemm_bf16_mkl(*bits, mkl, True, True, 0.5, 2.0)
    np.testing.assert_allclose(mkl, ours, rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(
    not (ops_cpu.onednn_bf16_available() and cpu_has_bf16_gemm()),
    reason="the onednn wheel is missing, or this CPU has no bf16 units (oneDNN: unimplemented)",
)
@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
def test_onednn_bf16_gemm_and_linear_match_the_fallback(trans_a, trans_b):
    rng = np.random.default_rng(5)
    shapes = ((6, 5) if trans_a else (5, 6), (4, 6) if trans_b else (6, 4))
    a, b = (rng.standard_normal(s).astype(ml_dtypes.bfloat16).view(np.uint16) for s in shapes)
    start = rng.standard_normal((5, 4)).astype(np.float32)
    ours, onednn = start.copy(), start.copy()
    ops_cpu.gemm_bf16(a, b, ours, trans_a, trans_b, 0.5, 2.0)
    ops_cpu.gemm_bf16_onednn(a, b, onednn, trans_a, trans_b, 0.5, 2.0)
    np.testing.assert_allclose(onednn, ours, rtol=1e-5, atol=1e-6)
    # a view's rows (a leading dimension) and the bfloat16 output with the bias, rounded once
    exact = np.zeros((5, 4), np.float32)
    ops_cpu.gemm_bf16(a, b, exact, trans_a, trans_b, 1.0, 0.0)
    wide = np.zeros((5, 9), np.float32)
    ops_cpu.gemm_bf16_onednn(a, b, wide[:, 2:6], trans_a, trans_b, 1.0, 0.0)
    np.testing.assert_allclose(wide[:, 2:6], exact, rtol=1e-6, atol=1e-6)
    assert not wide[:, :2].any() and not wide[:, 6:].any()
    bias = rng.standard_normal(4).astype(np.float32)
    for with_bias in (bias, None):
        out = np.zeros((5, 4), np.uint16)
        ops_cpu.linear_bf16_onednn(a, b, with_bias, out, trans_a, trans_b)
        expected = exact + (bias if with_bias is not None else 0)
        np.testing.assert_array_equal(out, expected.astype(ml_dtypes.bfloat16).view(np.uint16))
    # no inner products: the bias alone, rounded
    out = np.zeros((5, 4), np.uint16)
    empty = np.zeros((0, 5) if trans_a else (5, 0), np.uint16)
    ops_cpu.linear_bf16_onednn(
        empty, b[:0] if not trans_b else b[:, :0], bias, out, trans_a, trans_b
    )
    np.testing.assert_array_equal(
        out, np.broadcast_to(bias, (5, 4)).astype(ml_dtypes.bfloat16).view(np.uint16)
    )


@pytest.mark.skipif(
    not (ops_cpu.onednn_bf16_available() and cpu_has_bf16_gemm()),
    reason="the onednn wheel is missing, or this CPU has no bf16 units (oneDNN: unimplemented)",
)
def test_onednn_loads_once_when_workers_start_together():
    """Two workers' first GEMMs at once: one engine (a primitive of one engine fails on
    another's stream, as it did when each thread loaded the library)."""
    import threading

    from numtile.ops_cpu import onednn_bf16

    onednn_bf16._load.cache_clear()
    start, found = threading.Barrier(8), []

    def first_call():
        start.wait()
        found.append(onednn_bf16.library())
        a = np.full((8, 8), 0x3F80, np.uint16)  # bfloat16 ones
        c = np.zeros((8, 8), np.float32)
        onednn_bf16.gemm_bf16_onednn(a, a, c, False, False, 1.0, 0.0)
        found.append(float(c[0, 0]))

    threads = [threading.Thread(target=first_call) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    libraries = [x for x in found if not isinstance(x, float)]
    assert len(libraries) == 8 and all(x is libraries[0] for x in libraries)
    assert [x for x in found if isinstance(x, float)] == [8.0] * 8


def test_bf16_gemm_goes_to_the_library_measured_faster_for_its_inner_dimension(monkeypatch):
    """With oneDNN and oneMKL both installed, GEMMs under 1024 inner products run on oneDNN
    (and a bfloat16 output is fused there), the others on oneMKL."""
    from types import SimpleNamespace

    from numtile.tiletensor import precision

    calls = []
    ops = SimpleNamespace(
        onednn_bf16_available=lambda: True,
        mkl_bf16_available=lambda: True,
        gemm_bf16_onednn=lambda *args: calls.append("oneDNN"),
        gemm_bf16_mkl=lambda *args: calls.append("oneMKL"),
        linear_bf16_onednn="fused",
        gemm_bf16="widen",
    )
    monkeypatch.setattr(precision, "cpu_has_bf16_gemm", lambda: True)
    assert precision.bf16_gemm_library(ops) == "oneDNN + oneMKL"
    gemm = precision.bf16_gemm(ops)
    for inner, trans_a in ((1023, False), (1024, False), (768, True), (4096, True)):
        a = np.empty((inner, 8) if trans_a else (8, inner), np.uint16)
        gemm(a, None, None, trans_a, False, 1.0, 0.0)
    assert calls == ["oneDNN", "oneMKL", "oneDNN", "oneMKL"]
    assert precision.fused_bf16_linear(ops, 768) == "fused"
    assert precision.fused_bf16_linear(ops, 1024) is None
    ops.mkl_bf16_available = lambda: False  # oneDNN alone takes every size
    assert precision.bf16_gemm(ops) is ops.gemm_bf16_onednn
    assert precision.fused_bf16_linear(ops, 4096) == "fused"
    monkeypatch.setattr(precision, "cpu_has_bf16_gemm", lambda: False)
    assert precision.bf16_gemm(ops) == "widen" and precision.fused_bf16_linear(ops, 8) is None


def _bf16_attention_pair(tile_shape=(1, 3, 2), seq=7):
    """(output, gradient) of bfloat16 and of float32 flash attention on the same bf16 data."""
    from numtile.tiletensor.fused.attention import attention_backward, attention_forward

    rng = np.random.default_rng(4)
    qkv = rng.standard_normal((1, seq, 12)).astype(ml_dtypes.bfloat16)
    dout = rng.standard_normal((1, seq, 4)).astype(ml_dtypes.bfloat16)
    results = {}
    for dtype in (ml_dtypes.bfloat16, np.float32):
        x = nt.from_numpy(qkv.astype(dtype), tile_shape=tile_shape)
        out, x, lse = attention_forward(x, n_head=2, head_tile=1)
        g = nt.from_numpy(dout.astype(dtype), tile_shape=tile_shape)
        results[np.dtype(dtype).name] = (out, attention_backward(x, out, lse, g, 2, 1))
    return results["bfloat16"], results["float32"]


@pytest.mark.parametrize("tile_shape", [(1, 3, 2), (1, 7, 2)], ids=["3 tiles", "one tile"])
def test_bf16_flash_attention_is_the_float32_one_rounded_once(monkeypatch, tile_shape):
    """Without bf16 units (forced here) bfloat16 attention runs the float32 kernels on exact
    float32 copies: its output is the float32 one rounded once. With one sequence tile the
    gradient tiles are bfloat16, written once by their only task (from float32 scratch)."""
    from numtile.tiletensor.codelets import nn as nn_codelets

    monkeypatch.setattr(nn_codelets, "cpu_has_bf16_gemm", lambda: False)
    (out16, grad16), (out32, grad32) = _bf16_attention_pair(tile_shape)
    assert out16.dtype == grad16.dtype == nt.bfloat16
    rounded = out32.to_numpy().astype(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_allclose(out16.to_numpy().astype(np.float32), rounded, rtol=2**-8)
    # the backward reads the bf16 output (as torch's does): bf16-sized differences, relative
    # to the gradient's norm where small elements cancel
    assert _rel(grad16.to_numpy().astype(np.float32), grad32.to_numpy()) < 2**-7


@pytest.mark.skipif(
    not (cpu_has_bf16_gemm() and ops_cpu.nn.bf16_attention_ready()),
    reason="needs a CPU with bf16 units and oneMKL's bf16 GEMM",
)
@pytest.mark.parametrize("tile_shape, seq", [((1, 3, 2), 7), ((1, 16, 2), 40), ((1, 7, 2), 7)])
def test_bf16_flash_attention_on_bf16_units(tile_shape, seq):
    """On bf16 units the products take bfloat16 P and dS (FlashAttention-2's rounding): the
    output and gradients stay within bfloat16 error of the float32 kernels' on the same data,
    for several key blocks per query block and one (one sequence tile: bfloat16 gradient tiles
    written once, rounded in the kernel)."""
    (out16, grad16), (out32, grad32) = _bf16_attention_pair(tile_shape, seq)
    assert out16.dtype == grad16.dtype == nt.bfloat16
    assert _rel(out16.to_numpy().astype(np.float32), out32.to_numpy()) < 2**-7
    assert _rel(grad16.to_numpy().astype(np.float32), grad32.to_numpy()) < 2**-6
