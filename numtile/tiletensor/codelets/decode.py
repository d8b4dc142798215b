"""Codelets of decoding with a key/value cache: attention of the newest position against
cache tiles, its finalize, and writing new key/value rows into a cache tile.

Tiles are (batch, sequence, heads * head width) as in the attention codelets; each kernel
call sees one batch row of each tile. The attention codelet's ``first`` flag resets the running
max, sum and output, so a step reuses them without fill tasks. ``decode_segment`` runs the
tasks of a recorded decode-step segment as one task.

bfloat16 (and float16) tiles, as bf16-mixed generation makes them: the attention widens its
query and the filled rows of each cache tile to float32 scratch (exact) and rounds its output
once; a cache write copies the 16-bit patterns when source and cache share a dtype, else
converts the rows as ``astype`` does (float32 keys rounded into a bfloat16 cache).
"""

from __future__ import annotations

import math

import numpy as np

from numtile.runtime import Codelet
from numtile.tiletensor.codelets.narrow import bits, cast, is_narrow, narrow_into, widen


def _decode_block(ops, q, k, v, m, l, acc, n_heads, scale, n_keys, group, first):
    if first:  # the first cache tile of a step starts the running state afresh
        ops.fill(m.reshape(-1), -math.inf)
        ops.fill(l.reshape(-1), 0.0)
        ops.fill(acc.reshape(-1), 0.0)
    for b in range(q.shape[0]):
        ops.nn.decode_attention_block(
            _wide(ops, q[b]),
            _wide(ops, k[b, :n_keys]),
            _wide(ops, v[b, :n_keys]),
            m[b],
            l[b],
            acc[b],
            n_heads,
            scale,
            n_keys,
            group,
        )


def _wide(ops, rows):
    """``rows`` (a query, or a cache tile's filled rows), as a float32 scratch copy when they
    are bfloat16/float16 (exact)."""
    return widen(ops, rows) if is_narrow(rows) else rows


def _decode_finalize(ops, acc, l, out, n_heads):
    target = ops.empty(tuple(out.shape), np.float32) if is_narrow(out) else out
    for b in range(out.shape[0]):
        ops.nn.decode_attention_finalize(acc[b], l[b], target[b], n_heads)
    if target is not out:
        narrow_into(ops, target, out)  # a bfloat16 output, rounded once


def _cache_write(ops, source, cache, s_start, c_start, count):
    if source.dtype != cache.dtype:  # rows converted as astype converts them
        for b in range(cache.shape[0]):
            cast(ops, source[b, s_start : s_start + count], cache[b, c_start : c_start + count])
        return
    source, cache = bits(source), bits(cache)  # 16-bit floats move as their bit patterns
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
