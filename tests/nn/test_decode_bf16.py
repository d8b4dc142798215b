"""Generation with a key/value cache in bf16-mixed: bfloat16 caches and attention output,
logits against the model's own bf16-mixed forward without a cache and against float32, and
the decode codelets on bfloat16 tiles on the CUDA backend (simulator) against the CPU."""

import warnings

import ml_dtypes
import numpy as np
import pytest

from numtile.backends import StreamOps
from numtile.nn.generation import KVCache, _forward, generate
from numtile.nn.gpt2 import GPT2, GPT2Config, Tiling
from numtile.nn.llama import Llama, LlamaConfig
from numtile.ops_cuda import available
from numtile.tiletensor import codelets
from numtile.tiletensor.precision import using_precision

BF16 = ml_dtypes.bfloat16
TILING = Tiling(batch=1, seq=3, embd=8, inner=16, head=1, vocab=20)  # nothing divides


def _model(architecture):
    if architecture == "gpt2":
        return GPT2(
            GPT2Config(vocab_size=37, n_positions=12, n_embd=12, n_layer=2, n_head=3), TILING
        )
    config = LlamaConfig(
        vocab_size=37,
        max_position_embeddings=12,
        hidden_size=16,
        intermediate_size=20,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    return Llama(config, TILING)


def _decoded_logits(model, ids, prompt_length):
    """Logits (steps, B, V) of each position from ``prompt_length - 1`` on, teacher-forced
    through the cache (prefill, then one token a step), and the cache."""
    cache = KVCache(model, ids.shape[0], ids.shape[1])
    logits = [_forward(model, ids[:, :prompt_length], cache)]
    for t in range(prompt_length, ids.shape[1]):
        logits.append(_forward(model, ids[:, t : t + 1], cache))
    return np.stack(logits), cache


@pytest.mark.parametrize("architecture", ["gpt2", "llama"])
def test_bf16_mixed_decode_runs_on_bfloat16_caches(architecture, monkeypatch):
    from numtile.tiletensor.codelets import nn as nn_codelets

    # the training forward's attention in float32 (as on CPUs without bf16 units), so that
    # it rounds as the decode kernel does; on bf16 units it rounds P to bfloat16 as well
    monkeypatch.setattr(nn_codelets, "cpu_has_bf16_gemm", lambda: False)
    model = _model(architecture)
    ids = np.random.default_rng(0).integers(0, 37, (2, 9))
    fp32, fp32_cache = _decoded_logits(model, ids, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # this CPU's bf16 fallback, said once
        model.set_precision("bf16-mixed")
    with using_precision("bf16-mixed"):
        bf16, cache = _decoded_logits(model, ids, 4)
        # the training forward on each whole prefix, no cache: the reference of the same mode
        full = np.stack([model(ids[:, : t + 1])[0].to_numpy()[:, -1] for t in range(3, 9)])
    assert fp32_cache.k[0].dtype == np.float32
    assert all(c.dtype == BF16 for c in cache.k + cache.v) and cache.state.out.dtype == BF16
    scale = np.abs(fp32).max()
    # equal here (both round once); a rounding flip would stay far below bf16's 2^-8
    np.testing.assert_allclose(bf16, full.astype(np.float64), atol=2**-10 * scale)
    np.testing.assert_allclose(bf16, fp32, atol=2e-2 * scale)
    assert np.abs(bf16 - fp32).max() > 1e-4 * scale  # the bf16 rounding is really there
    # generate() runs in the model's own mode (it set none of the caller's)
    out = generate(model, ids[:, :4], 5, temperature=0)
    assert out.shape == (2, 9)
    model.set_precision("fp32")


def _runner(kind, ops):
    return lambda codelet, *args: codelet.implementation(kind)(ops, *args)


@pytest.mark.skipif(not available(), reason="needs a GPU or the CUDA simulator")
def test_bf16_decode_codelets_on_cuda_match_the_cpu():
    from numba import cuda

    from numtile import ops_cpu

    rng = np.random.default_rng(3)
    B, L, heads, D = 1, 5, 2, 2
    q = rng.standard_normal((B, 1, heads * D)).astype(BF16)
    rows = rng.standard_normal((B, 3, heads * D)).astype(np.float32)
    results = []
    for kind, ops, to_device, to_host in (
        ("cpu", ops_cpu, np.copy, np.asarray),
        ("cuda", StreamOps(cuda.stream()), cuda.to_device, lambda t: t.copy_to_host()),
    ):
        k, v = np.zeros((B, L, heads * D), BF16), np.zeros((B, L, heads * D), BF16)
        m, l_sum = np.zeros((B, 1, heads)), np.zeros((B, 1, heads))
        acc, out = np.zeros((B, 1, heads * D)), np.zeros((B, 1, heads * D), BF16)
        t = [to_device(a) for a in (q, rows, rows.astype(BF16), k, v, m, l_sum, acc, out)]
        q_, rows_, rows16_, k_, v_, m_, l_, acc_, out_ = t
        run = _runner(kind, ops)
        run(codelets.decode.kv_cache_write, rows_, k_, 0, 1, 3)  # float32 rows, rounded
        run(codelets.decode.kv_cache_write, rows16_, v_, 0, 1, 3)  # bf16 rows, their bits
        run(codelets.decode.decode_attention, q_, k_, v_, m_, l_, acc_, heads, 0.5, 4, 1, True)
        run(codelets.decode.decode_finalize, acc_, l_, out_, heads)
        results.append([to_host(a) for a in (k_, v_, out_)])
    for got, want in zip(*results):
        np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    k, v, out = results[0]
    np.testing.assert_array_equal(k[:, 1:4].view(np.uint16), rows.astype(BF16).view(np.uint16))
    np.testing.assert_array_equal(v, k)
    q64, k64 = q.astype(np.float64).reshape(heads, D), k[0, :4].astype(np.float64)
    k64 = k64.reshape(4, heads, D)
    weights = np.exp(0.5 * np.einsum("hd,nhd->hn", q64, k64))
    weights /= weights.sum(axis=1, keepdims=True)
    expected = np.einsum("hn,nhd->hd", weights, k64).reshape(1, 1, heads * D)
    np.testing.assert_array_equal(
        out.view(np.uint16), expected.astype(np.float32).astype(BF16).view(np.uint16)
    )
