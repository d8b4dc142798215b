"""Decoding tile kernels: attention of a few query rows against a key/value cache tile, its
finalize, and the cache write (copy new key/value rows into a cache tile).

Tiles hold several heads side by side as the flash-attention kernels do: a query tile is
(nq, n_heads * D), cache tiles are (tk, n_kv * D), query head h reading key/value head
h // group (grouped-query attention; group 1 is multi-head attention); the running max ``m``
and sum ``l`` are float64 (nq, n_heads) and the running output ``acc`` is float64
(nq, n_heads * D), all updated in place, so a tiled op calls the block kernel once per cache
tile. Only the first ``n_keys`` rows of a cache tile are read (the rest is not written yet).
Every query row sees every one of those keys: a decode step's query is the newest position.

>>> import numpy as np
>>> from numtile.ops_cpu import nn
>>> rng = np.random.default_rng(0)
>>> q, k, v = rng.standard_normal((1, 4)), rng.standard_normal((6, 4)), rng.standard_normal((6, 4))
>>> m, l, acc = np.full((1, 1), -np.inf), np.zeros((1, 1)), np.zeros((1, 4))
>>> nn.decode_attention_block(q, k[:3].copy(), v[:3].copy(), m, l, acc, 1, 0.5, 3)
>>> nn.decode_attention_block(q, k[3:].copy(), v[3:].copy(), m, l, acc, 1, 0.5, 2)
>>> out = np.empty((1, 4))
>>> nn.decode_attention_finalize(acc, l, out, 1)
>>> w = np.exp(0.5 * q @ k[:5].T); w /= w.sum()
>>> bool(np.allclose(out, w @ v[:5]))
True
"""

import math

import numba
import numpy as np

from numtile.ops_cpu.helpers import widen


@numba.njit(nogil=True, error_model="numpy", cache=True)
def decode_attention_block(q, k, v, m, l, acc, n_heads, scale, n_keys, group=1):
    """Online-softmax update of (m, l, acc) with the first ``n_keys`` rows of k, v; query
    head h reads key/value head h // group (grouped-query attention)."""
    width = q.shape[1] // n_heads
    scores = np.empty(max(n_keys, 1), np.float64)
    for i in range(q.shape[0]):
        for h in range(n_heads):
            first = h * width
            kv_first = (h // group) * width
            peak = m[i, h]
            for j in range(n_keys):
                s = 0.0
                for d in range(width):
                    s += widen(q[i, first + d]) * widen(k[j, kv_first + d])
                scores[j] = s * scale
                peak = max(peak, scores[j])
            if n_keys == 0 or peak == -math.inf:
                continue
            correction = math.exp(m[i, h] - peak)
            total = l[i, h] * correction
            for d in range(width):
                acc[i, first + d] *= correction
            for j in range(n_keys):
                p = math.exp(scores[j] - peak)
                total += p
                for d in range(width):
                    acc[i, first + d] += p * widen(v[j, kv_first + d])
            m[i, h] = peak
            l[i, h] = total


@numba.njit(nogil=True, error_model="numpy", cache=True)
def decode_attention_finalize(acc, l, out, n_heads):
    """out = acc / l per head (in out's dtype)."""
    width = out.shape[1] // n_heads
    for i in range(out.shape[0]):
        for h in range(n_heads):
            for d in range(width):
                out[i, h * width + d] = acc[i, h * width + d] / l[i, h]


@numba.njit(nogil=True, error_model="numpy", cache=True)
def kv_cache_write(source, s_start, cache, c_start, count):
    """cache[c_start + r] = source[s_start + r] for r < count (rows of equal width)."""
    for r in range(count):
        for c in range(cache.shape[1]):
            cache[c_start + r, c] = source[s_start + r, c]
