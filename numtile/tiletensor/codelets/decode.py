"""Codelets of decoding with a key/value cache: attention of the newest position against
cache tiles, its finalize, and writing new key/value rows into a cache tile.

Tiles are (batch, sequence, heads * head width) as in the attention codelets; each kernel
call sees one batch row of each tile. The attention codelet's ``first`` flag resets the running
max, sum and output, so a step reuses them without fill tasks. ``decode_segment`` runs the
tasks of a recorded decode-step segment as one task.
"""

from __future__ import annotations

import math

from numtile.runtime import Codelet


def _decode_block(ops, q, k, v, m, l, acc, n_heads, scale, n_keys, group, first):
    if first:  # the first cache tile of a step starts the running state afresh
        ops.fill(m.reshape(-1), -math.inf)
        ops.fill(l.reshape(-1), 0.0)
        ops.fill(acc.reshape(-1), 0.0)
    for b in range(q.shape[0]):
        ops.nn.decode_attention_block(
            q[b], k[b], v[b], m[b], l[b], acc[b], n_heads, scale, n_keys, group
        )


def _decode_finalize(ops, acc, l, out, n_heads):
    for b in range(out.shape[0]):
        ops.nn.decode_attention_finalize(acc[b], l[b], out[b], n_heads)


def _cache_write(ops, source, cache, s_start, c_start, count):
    for b in range(cache.shape[0]):
        ops.nn.kv_cache_write(source[b], s_start, cache[b], c_start, count)


def _run_segment(ops, *values):
    """The kernels of a fused segment in order; the last value is its plan: (kernel, indices
    of its buffers among this task's, its scalar arguments) per task."""
    buffers, plan = values[:-1], values[-1]
    for kernel, indices, args in plan:
        kernel(ops, *[buffers[i] for i in indices], *args)


decode_attention = Codelet(
    "decode_attention",
    kernel=_decode_block,
    flops=lambda q, k, *args: 4.0 * math.prod(q) * args[-3],
)
decode_finalize = Codelet("decode_finalize", kernel=_decode_finalize)
kv_cache_write = Codelet("kv_cache_write", kernel=_cache_write)
decode_segment = Codelet("decode_segment", kernel=_run_segment)
