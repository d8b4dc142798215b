"""Codelets of decoding with a key/value cache: attention of the newest position against
cache tiles, its finalize, and writing new key/value rows into a cache tile.

Tiles are (batch, sequence, heads * head width) as in the attention codelets; each kernel
call sees one batch row of each tile.
"""

from __future__ import annotations

import math

from numtile.runtime import Codelet


def _decode_block(ops, q, k, v, m, l, acc, n_heads, scale, n_keys):
    for b in range(q.shape[0]):
        ops.nn.decode_attention_block(q[b], k[b], v[b], m[b], l[b], acc[b], n_heads, scale, n_keys)


def _decode_finalize(ops, acc, l, out, n_heads):
    for b in range(out.shape[0]):
        ops.nn.decode_attention_finalize(acc[b], l[b], out[b], n_heads)


def _cache_write(ops, source, cache, s_start, c_start, count):
    for b in range(cache.shape[0]):
        ops.nn.kv_cache_write(source[b], s_start, cache[b], c_start, count)


decode_attention = Codelet(
    "decode_attention",
    kernel=_decode_block,
    flops=lambda q, k, *args: 4.0 * math.prod(q) * args[-1],
)
decode_finalize = Codelet("decode_finalize", kernel=_decode_finalize)
kv_cache_write = Codelet("kv_cache_write", kernel=_cache_write)
