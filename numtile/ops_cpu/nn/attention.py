"""Flash-attention tile kernels: forward block, finalize, backward delta and backward block.

Attention tiles hold several heads side by side: a query tile is (tq, n_heads * D) with head h
in columns h*D:(h+1)*D, key and value tiles are (tk, n_kv * D) for the key/value heads of those
query heads (grouped-query attention: query head h of the tile reads key/value head
h // group, so n_kv = ceil(n_heads / group); group 1 is plain multi-head attention), and the
per-head row statistics (running max m, sum l, log-sum-exp, delta) are float64 arrays
(tq, n_heads), passed in and updated in place, so a tiled op calls the kernel once per
(query tile, key tile) pair and gets the full result. Per-block matrix products go to BLAS.

Example (attention of 3 queries on 5 keys, the keys in two blocks):

>>> import numpy as np
>>> from numtile.ops_cpu import nn
>>> rng = np.random.default_rng(0)
>>> q, k, v = (rng.standard_normal((n, 4)) for n in (3, 5, 5))  # one head, D = 4
>>> m, l, acc = np.full((3, 1), -np.inf), np.zeros((3, 1)), np.zeros((3, 4))
>>> for start, stop in [(0, 2), (2, 5)]:
...     nn.attention_forward_block(q, k[start:stop].copy(), v[start:stop].copy(), m, l, acc,
...                                1, 0.5, 0, start, False)
>>> out, lse = np.empty((3, 4)), np.empty((3, 1))
>>> nn.attention_forward_finalize(acc, m, l, out, lse, 1)
>>> weights = np.exp(0.5 * q @ k.T - lse)
>>> bool(np.allclose(out, weights @ v) and np.allclose(weights.sum(axis=1), 1))
True
"""

import numba
import numpy as np

from numtile.ops_cpu.helpers import as_type_of, inlined, wide_vectors, widen
from numtile.ops_cpu.matmul import gemm
from numtile.ops_cpu.scalar_math import _maximum, softmax_exp
from numtile.ops_cpu.scratch import empty_many


# The two row reductions of the online softmax are functions of their own, not inlined, so that
# their fast-math flags, which let LLVM split them over SIMD lanes, reach no other arithmetic
# (reassoc could undo the exact ln 2 split of softmax_exp).
@numba.njit(nogil=True, error_model="numpy", fastmath={"reassoc"})
def _wide_sum(values, count):
    """Sum of values[:count] in float64."""
    total = 0.0
    for j in range(count):
        total += widen(values[j])
    return total


# nnan: the max of a row holding NaN is unspecified, but the NaN itself still reaches the sum and
# the output through exp, so attention propagates it all the same.
@numba.njit(nogil=True, error_model="numpy", fastmath={"nnan", "reassoc"})
def _row_max(values, count):
    """Largest of values[:count] (count >= 1), in 512-bit vectors where the CPU has them (the
    max is the same in any order)."""
    wide_vectors()
    peak = values[0]
    for j in range(1, count):
        peak = _maximum(peak, values[j])
    return peak


@inlined
def _visible_keys(row, n_keys, q_start, k_start, causal):
    """How many leading keys of a block query ``row`` may attend to (all unless causal)."""
    if not causal:
        return n_keys
    return min(max(q_start + row - k_start + 1, 0), n_keys)


@inlined
def _copy_head(source, head, width, target):
    """target = source[:, head*width:(head+1)*width]: one head's columns, contiguous for BLAS."""
    first = head * width
    for i in range(target.shape[0]):
        for d in range(width):
            target[i, d] = source[i, first + d]


@inlined
def _store_head(source, head, width, target):
    """target[:, head*width:(head+1)*width] = source (the inverse of _copy_head)."""
    first = head * width
    for i in range(source.shape[0]):
        for d in range(width):
            target[i, first + d] = source[i, d]


def skipped(n_queries, n_keys, q_start, k_start, causal) -> bool:
    """Whether a (query block, key block) pair has nothing to do: no keys, or every key after
    every query under the causal mask."""
    return n_keys == 0 or (causal and k_start > q_start + n_queries - 1)


def attention_forward_block(q, k, v, m, l, acc, n_heads, scale, q_start, k_start, causal, group=1):
    """Online-softmax update of each head's running max m, sum l and unnormalised output acc
    with the key/value block starting at k_start (causal: key k_start+j seen by q_start+i iff
    k_start+j <= q_start+i; rows that see nothing are left unchanged); query head h reads
    key/value head h // group. The kernel's working arrays (head copies, the scores) are this
    thread's scratch (``scratch.empty_many``): allocated in the kernel, the 256 x 256 scores
    of a llama-small tile were fresh pages, faulted in at every call, under a host limit."""
    n_queries, n_keys = q.shape[0], k.shape[0]
    if skipped(n_queries, n_keys, q_start, k_start, causal):
        return
    width, dtype = q.shape[1] // n_heads, q.dtype
    work = empty_many(
        ((n_queries, width), dtype),  # q_head
        ((n_keys, width), dtype),  # k_head
        ((n_keys, width), dtype),  # v_head
        ((n_queries, width), dtype),  # update
        ((n_queries, n_keys), dtype),  # weights
        (n_queries, np.float64),  # rescale
    )
    _forward_block(q, k, v, m, l, acc, n_heads, scale, q_start, k_start, causal, group, *work)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _forward_block(
    q, k, v, m, l, acc, n_heads, scale, q_start, k_start, causal, group,
    q_head, k_head, v_head, update, weights, rescale,
):  # fmt: skip
    """``attention_forward_block`` in the working arrays given: ``weights`` holds the scores,
    overwritten in place by the unnormalised probabilities exp(S - new max)."""
    n_queries, n_keys = q.shape[0], k.shape[0]
    width = q.shape[1] // n_heads
    for h in range(n_heads):
        _copy_head(q, h, width, q_head)
        _copy_head(k, h // group, width, k_head)
        _copy_head(v, h // group, width, v_head)
        gemm(q_head, k_head, weights, False, True, scale, 0.0)
        for i in range(n_queries):
            visible = _visible_keys(i, n_keys, q_start, k_start, causal)
            row = weights[i]
            row[visible:] = 0
            if visible == 0:
                rescale[i] = 1.0
                continue
            previous = m[i, h]
            # The new max is a value of the data dtype, so exp below runs in that dtype.
            new_max = max(previous, widen(_row_max(row, visible)))
            shift = as_type_of(new_max, row)
            for j in range(visible):
                row[j] = softmax_exp(row[j] - shift)
            total = _wide_sum(row, visible)
            rescale[i] = np.exp(previous - new_max)
            m[i, h] = new_max
            l[i, h] = l[i, h] * rescale[i] + total
        gemm(weights, v_head, update, False, False, 1.0, 0.0)
        first = h * width
        for i in range(n_queries):
            for d in range(width):
                acc[i, first + d] = acc[i, first + d] * rescale[i] + update[i, d]


@numba.njit(nogil=True, cache=True, error_model="numpy")
def attention_forward_finalize(acc, m, l, out, lse, n_heads):
    """out = acc / l and lse = m + log(l) per head, after the last key block."""
    width = acc.shape[1] // n_heads
    for i in range(acc.shape[0]):
        for h in range(n_heads):
            inverse = 1.0 / l[i, h]
            for d in range(h * width, (h + 1) * width):
                out[i, d] = acc[i, d] * inverse
            lse[i, h] = m[i, h] + np.log(l[i, h])


@numba.njit(nogil=True, cache=True, error_model="numpy")
def attention_backward_delta(dout, out, delta, n_heads):
    """delta[i, h] = sum over head h's columns of dout * out (rowsum of dP * P)."""
    width = out.shape[1] // n_heads
    for i in range(out.shape[0]):
        for h in range(n_heads):
            total = 0.0
            for d in range(h * width, (h + 1) * width):
                total += widen(dout[i, d]) * out[i, d]
            delta[i, h] = total


def attention_backward_block(
    q, k, v, dout, lse, delta, dq, dk, dv, n_heads, scale, q_start, k_start, causal, group=1
):
    """Accumulate one (query block, key block) pair's share of dq, dk and dv, recomputing
    P = exp(scale * q k^T - lse) (masked entries 0); pairs may come in any order. Query head h
    reads key/value head h // group, whose dk and dv sum over the group's query heads. The
    working arrays are this thread's scratch, as in ``attention_forward_block``."""
    n_queries, n_keys = q.shape[0], k.shape[0]
    if skipped(n_queries, n_keys, q_start, k_start, causal):
        return
    width, dtype = q.shape[1] // n_heads, q.dtype
    queries, keys = ((n_queries, width), dtype), ((n_keys, width), dtype)
    scores = ((n_queries, n_keys), dtype)
    # q, dout, dq heads; k, v, dk, dv heads; the probabilities and the score gradients
    work = empty_many(queries, queries, queries, keys, keys, keys, keys, scores, scores)
    _backward_block(
        q, k, v, dout, lse, delta, dq, dk, dv, n_heads, scale, q_start, k_start, causal, group,
        *work,
    )  # fmt: skip


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _backward_block(
    q, k, v, dout, lse, delta, dq, dk, dv, n_heads, scale, q_start, k_start, causal, group,
    q_head, dout_head, dq_head, k_head, v_head, dk_head, dv_head, probabilities, dscores,
):  # fmt: skip
    """``attention_backward_block`` in the working arrays given."""
    n_queries, n_keys = q.shape[0], k.shape[0]
    width = q.shape[1] // n_heads
    for h in range(n_heads):
        _copy_head(q, h, width, q_head)
        _copy_head(dout, h, width, dout_head)
        _copy_head(dq, h, width, dq_head)
        kv = h // group
        _copy_head(k, kv, width, k_head)
        _copy_head(v, kv, width, v_head)
        _copy_head(dk, kv, width, dk_head)
        _copy_head(dv, kv, width, dv_head)
        gemm(q_head, k_head, probabilities, False, True, scale, 0.0)
        gemm(dout_head, v_head, dscores, False, True, 1.0, 0.0)  # dP
        for i in range(n_queries):
            visible = _visible_keys(i, n_keys, q_start, k_start, causal)
            row = probabilities[i]
            shift = as_type_of(lse[i, h], row)
            for j in range(visible):
                row[j] = softmax_exp(row[j] - shift)
            row[visible:] = 0
            offset = as_type_of(delta[i, h], row)
            gradient = dscores[i]
            for j in range(n_keys):
                gradient[j] = row[j] * (gradient[j] - offset)  # dS
        gemm(probabilities, dout_head, dv_head, True, False, 1.0, 1.0)
        gemm(dscores, k_head, dq_head, False, False, scale, 1.0)
        gemm(dscores, q_head, dk_head, True, False, scale, 1.0)
        _store_head(dq_head, h, width, dq)
        _store_head(dk_head, kv, width, dk)
        _store_head(dv_head, kv, width, dv)
