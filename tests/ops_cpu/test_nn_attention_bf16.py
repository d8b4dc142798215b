"""The bf16 flash-attention kernels (``ops_cpu.nn.attention_bf16``: products on the CPU's bf16
units through oneMKL, P and dS rounded to bfloat16) against the float32 kernels on the same
bfloat16 data, tile by tile as the runtime calls them: query and key tiles that divide
nothing, key blocks shuffled, grouped-query heads, causal and full; and their edge cases."""

import ml_dtypes
import numpy as np
import pytest

from numtile import ops_cpu
from numtile.tiletensor.precision import cpu_has_bf16_gemm
from tests.kernels import random, shuffled, spans

pytestmark = pytest.mark.skipif(
    not (cpu_has_bf16_gemm() and ops_cpu.nn.bf16_attention_ready()),
    reason="needs a CPU with bf16 units and oneMKL's bf16 GEMM",
)

T, TQ, TK, D = 37, 16, 11, 8
SCALE = 0.4


def _bf16(x):
    return x.astype(ml_dtypes.bfloat16)


def _inputs(n_heads, n_kv, magnitude=1.0):
    """bfloat16 q, dout (T, n_heads * D) and k, v (T, n_kv * D)."""
    q = _bf16(random((T, n_heads * D), np.float32, 1, std=magnitude))
    k, v = (_bf16(random((T, n_kv * D), np.float32, seed)) for seed in (2, 3))
    return q, k, v, _bf16(random((T, n_heads * D), np.float32, 4))


def _forward(q, k, v, n_heads, group, causal, bf16):
    """out, lse from the forward kernels over query tiles TQ and shuffled key tiles TK."""
    nn = ops_cpu.nn
    kernel = nn.attention_forward_block_bf16 if bf16 else nn.attention_forward_block
    q, k, v = ((x.view(np.uint16) if bf16 else x.astype(np.float32)) for x in (q, k, v))
    out, lse = np.empty(q.shape, np.float32), np.empty((T, n_heads))
    for start, stop in spans(T, TQ):
        m, l = np.full((stop - start, n_heads), -np.inf), np.zeros((stop - start, n_heads))
        acc = np.zeros((stop - start, q.shape[1]), np.float32)
        for k0, k1 in shuffled(spans(T, TK)):
            kernel(
                q[start:stop].copy(), k[k0:k1].copy(), v[k0:k1].copy(), m, l, acc, n_heads,
                SCALE, start, k0, causal, group,
            )  # fmt: skip
        nn.attention_forward_finalize(acc, m, l, out[start:stop], lse[start:stop], n_heads)
    return out, lse


def _backward(q, k, v, dout, out, lse, n_heads, group, causal, bf16):
    """dq, dk, dv (float32) from the backward kernels over every (query, key) tile pair."""
    nn = ops_cpu.nn
    delta = np.empty((T, n_heads))
    nn.attention_backward_delta(dout.astype(np.float32), out, delta, n_heads)
    kernel = nn.attention_backward_block_bf16 if bf16 else nn.attention_backward_block
    q, k, v, dout = ((x.view(np.uint16) if bf16 else x.astype(np.float32)) for x in (q, k, v, dout))
    grads = [np.zeros(x.shape, np.float32) for x in (q, k, v)]
    pairs = [(r, c) for r in spans(T, TQ) for c in spans(T, TK)]
    for (r0, r1), (c0, c1) in shuffled(pairs):
        dq, dk, dv = grads[0][r0:r1], grads[1][c0:c1], grads[2][c0:c1]
        tiles = [dq.copy(), dk.copy(), dv.copy()]
        kernel(
            q[r0:r1].copy(), k[c0:c1].copy(), v[c0:c1].copy(), dout[r0:r1].copy(),
            lse[r0:r1].copy(), delta[r0:r1].copy(), *tiles, n_heads, SCALE, r0, c0, causal,
            group,
        )  # fmt: skip
        dq[...], dk[...], dv[...] = tiles
    return grads


def _rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("n_heads, group", [(3, 1), (4, 2)], ids=["mha", "gqa"])
@pytest.mark.parametrize("magnitude", [1.0, 30.0], ids=["moderate", "large-scores"])
def test_bf16_kernels_match_the_float32_ones(causal, n_heads, group, magnitude):
    q, k, v, dout = _inputs(n_heads, n_heads // group, magnitude)
    out, lse = _forward(q, k, v, n_heads, group, causal, bf16=True)
    out32, lse32 = _forward(q, k, v, n_heads, group, causal, bf16=False)
    # P rounded to bfloat16 before P V: bfloat16-sized errors; lse from float32 statistics
    assert _rel(out, out32) < 2**-8
    np.testing.assert_allclose(lse, lse32, rtol=1e-6, atol=1e-6)
    grads = _backward(q, k, v, dout, out32, lse32, n_heads, group, causal, bf16=True)
    grads32 = _backward(q, k, v, dout, out32, lse32, n_heads, group, causal, bf16=False)
    for ours, reference in zip(grads, grads32):
        assert _rel(ours, reference) < 2**-7


def test_rows_that_see_nothing_stay_and_nan_propagates():
    q, k, v, _ = _inputs(2, 2)
    q, k, v = (x[:6].view(np.uint16).copy() for x in (q, k, v))
    m, l = random((6, 2), np.float64, 5) - 10, random((6, 2), np.float64, 6) ** 2
    acc = random((6, 2 * D), np.float32, 7)
    before = [x.copy() for x in (m, l, acc)]
    kernel = ops_cpu.nn.attention_forward_block_bf16
    kernel(q, k, v, m, l, acc, 2, SCALE, 10, 20, True)  # keys 20..25 all in the future
    for after, old in zip((m, l, acc), before):
        np.testing.assert_array_equal(after, old)
    kernel(q, k, v, m, l, acc, 2, SCALE, 10, 13, True)  # rows 0-2 see nothing
    for after, old in zip((m, l, acc), before):
        np.testing.assert_array_equal(after[:3], old[:3])
        assert np.all(after[3:] != old[3:])
    k[1, 0] = np.float32(np.nan).astype(ml_dtypes.bfloat16).view(np.uint16)  # head 0, key 1
    m, l = np.full((6, 2), -np.inf), np.zeros((6, 2))
    acc = np.zeros((6, 2 * D), np.float32)
    kernel(q, k, v, m, l, acc, 2, SCALE, 0, 0, False)
    assert np.isnan(acc[:, :D]).all() and np.isfinite(acc[:, D:]).all()


@pytest.mark.parametrize("n_heads, group", [(3, 1), (4, 2), (2, 4)], ids=["mha", "gqa", "part"])
def test_bfloat16_gradient_tiles_get_the_float32_sums_rounded_once(n_heads, group):
    """uint16 dq, dk, dv (a task that is their only contribution) receive the float32 sums the
    kernel adds into zeroed float32 tiles, rounded to bfloat16 once, dk and dv summed over the
    query heads of their group first (a tile of fewer query heads than a group: one)."""
    q, k, v, dout = _inputs(n_heads, max(1, n_heads // group))
    lse, delta = random((T, n_heads), np.float64, 8) + 3, random((T, n_heads), np.float64, 9)
    q, k, v, dout = (x.view(np.uint16) for x in (q, k, v, dout))
    kernel = ops_cpu.nn.attention_backward_block_bf16
    sums = [np.zeros(x.shape, np.float32) for x in (q, k, v)]
    kernel(q, k, v, dout, lse, delta, *sums, n_heads, SCALE, 0, 0, True, group)
    tiles = [np.zeros(x.shape, np.uint16) for x in (q, k, v)]
    kernel(q, k, v, dout, lse, delta, *tiles, n_heads, SCALE, 0, 0, True, group)
    for tile, total in zip(tiles, sums):
        assert np.abs(total).max() > 0
        np.testing.assert_array_equal(tile, total.astype(ml_dtypes.bfloat16).view(np.uint16))
