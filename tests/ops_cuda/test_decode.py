"""numtile.ops_cuda.nn's decode kernels against their ops_cpu twins, under the CUDA simulator,
and compiled to PTX for sm_90 (see conftest)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.ops_cuda.test_nn import FLOATS, Twins, random


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n_keys", [0, 1, 9])
@pytest.mark.parametrize("n_heads, group", [(3, 1), (4, 2), (3, 3)])
def test_decode_attention_block_and_finalize(dtype, n_keys, n_heads, group):
    width, nq, n_kv = 5, 2, n_heads // group
    q = random((nq, n_heads * width), dtype, 0)
    k, v = random((11, n_kv * width), dtype, 1), random((11, n_kv * width), dtype, 2)
    # state from an earlier cache tile: finite running max and sum, a partial output
    m = random((nq, n_heads), np.float64, 3)
    l = np.abs(random((nq, n_heads), np.float64, 4)) + 0.5
    acc = random((nq, n_heads * width), np.float64, 5)
    twins = Twins(q, k, v, m, l, acc, n_heads, 0.4, n_keys, group)
    twins.run("decode_attention_block")
    twins.check(dtype)
    _, _, _, m2, l2, acc2, *_ = twins.host
    out = np.zeros((nq, n_heads * width), dtype)
    final = Twins(acc2, l2, out, n_heads)
    final.run("decode_attention_finalize")
    final.check(dtype)


def test_decode_attention_block_from_an_empty_state():
    q, k, v = (
        random((1, 8), np.float32, 0),
        random((4, 8), np.float32, 1),
        random((4, 8), np.float32, 2),
    )
    m, l, acc = np.full((1, 2), -np.inf), np.zeros((1, 2)), np.zeros((1, 8))
    twins = Twins(q, k, v, m, l, acc, 2, 0.5, 4)
    twins.run("decode_attention_block")
    twins.check(np.float32)


@pytest.mark.parametrize("dtype", FLOATS + [np.int64])
def test_kv_cache_write(dtype):
    source = (random((6, 7), np.float64, 0) * 10).astype(dtype)
    cache = (random((9, 7), np.float64, 1) * 10).astype(dtype)
    twins = Twins(source, 2, cache, 5, 3)
    twins.run("kv_cache_write")
    twins.check(dtype, rtol=0, atol=0)
    assert (twins.host[2][5:8] == source[2:5]).all()


_COMPILE = """
    from numtile.ops_cuda import launch
    from numtile.ops_cuda.nn import decode

    assert not launch.SIMULATOR
    i64, f64 = types.int64, types.float64
    s2 = types.float64[:, :]
    for dtype in (types.float32, types.float64):
        a2 = dtype[:, :]
        kernels = [
            (decode._decode_attention_block, (a2, a2, a2, s2, s2, s2, i64, f64, i64, i64)),
            (decode._decode_attention_finalize, (s2, s2, a2, i64)),
            (decode._kv_cache_write, (a2, i64, a2, i64, i64)),
        ]
        for kernel, signature in kernels:
            cuda.compile_ptx(kernel.py_func, signature, cc=(9, 0))
    u2 = types.uint16[:, :]  # bfloat16 caches: their bit patterns copied (bf16-mixed)
    cuda.compile_ptx(decode._kv_cache_write.py_func, (u2, i64, u2, i64, i64), cc=(9, 0))
"""


def test_kernels_compile_for_a_real_gpu(compile_for_a_real_gpu):
    compile_for_a_real_gpu(_COMPILE)
