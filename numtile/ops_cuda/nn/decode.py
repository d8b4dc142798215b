"""Decoding CUDA kernels (twins of ``numtile.ops_cpu.nn.decode``): attention of a few query
rows against a key/value cache tile, its finalize, and the cache write.

The block kernel runs one thread per (query row, query head; head h reads key/value head
h // group), streaming over the cache rows with an online softmax (one pass, rescaling the
running output whenever the max grows); the finalize and the cache write run one thread per
element.
"""

from __future__ import annotations

import math

from numba import cuda

from numtile.ops_cuda.launch import DeviceArray, cached_kernel, launch


@cached_kernel
def _decode_attention_block(q, k, v, m, l, acc, n_heads, scale, n_keys, group):
    width = q.shape[1] // n_heads
    for t in range(cuda.grid(1), q.shape[0] * n_heads, cuda.gridsize(1)):
        i = t // n_heads
        h = t - i * n_heads
        first = h * width
        kv_first = (h // group) * width
        peak = m[i, h]
        total = l[i, h]
        for j in range(n_keys):
            s = 0.0
            for d in range(width):
                s += float(q[i, first + d]) * float(k[j, kv_first + d])
            s *= scale
            if s > peak:
                correction = math.exp(peak - s)
                total *= correction
                for d in range(width):
                    acc[i, first + d] *= correction
                peak = s
            p = math.exp(s - peak)
            total += p
            for d in range(width):
                acc[i, first + d] += p * float(v[j, kv_first + d])
        m[i, h] = peak
        l[i, h] = total


@cached_kernel
def _decode_attention_finalize(acc, l, out, n_heads):
    width = out.shape[1] // n_heads
    for t in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        i = t // out.shape[1]
        c = t - i * out.shape[1]
        out[i, c] = acc[i, c] / l[i, c // width]


@cached_kernel
def _kv_cache_write(source, s_start, cache, c_start, count):
    columns = cache.shape[1]
    for t in range(cuda.grid(1), count * columns, cuda.gridsize(1)):
        r = t // columns
        c = t - r * columns
        cache[c_start + r, c] = source[s_start + r, c]


def decode_attention_block(
    q: DeviceArray,
    k: DeviceArray,
    v: DeviceArray,
    m: DeviceArray,
    l: DeviceArray,
    acc: DeviceArray,
    n_heads: int,
    scale: float,
    n_keys: int,
    group: int = 1,
    *,
    stream=0,
) -> None:
    """Online-softmax update of (m, l, acc) with the first ``n_keys`` rows of k, v; query
    head h reads key/value head h // group."""
    args = (q, k, v, m, l, acc, int(n_heads), float(scale), int(n_keys), int(group))
    launch(_decode_attention_block, q.shape[0] * n_heads, stream, *args)


def decode_attention_finalize(
    acc: DeviceArray, l: DeviceArray, out: DeviceArray, n_heads: int, *, stream=0
) -> None:
    """out = acc / l per head (in out's dtype)."""
    launch(_decode_attention_finalize, out.size, stream, acc, l, out, int(n_heads))


def kv_cache_write(
    source: DeviceArray, s_start: int, cache: DeviceArray, c_start: int, count: int, *, stream=0
) -> None:
    """cache[c_start + r] = source[s_start + r] for r < count (rows of equal width)."""
    args = (source, int(s_start), cache, int(c_start), int(count))
    launch(_kv_cache_write, count * cache.shape[1], stream, *args)
