"""Flash-attention CUDA kernels: forward block, finalize, backward delta and backward block (twins
of ``numtile.ops_cpu.nn.attention``).

Attention tiles hold ``n_heads`` heads side by side (head h in columns h*D:(h+1)*D) with
per-head float64 row statistics (rows, n_heads); key and value tiles hold the key/value heads
of those query heads, query head h reading key/value head h // group (grouped-query attention).
One thread per (row, head); the backward has a second set of threads, one per (key row,
key/value head), for dk and dv, summing over the query heads of its group, so no two threads
write the same element. Arithmetic is float64 (the CPU twins do some of it in the data
precision: float32 results agree to float32 rounding).
"""

from __future__ import annotations

import math

from numba import cuda

from numtile.ops_cuda.launch import DeviceArray, block, cached_kernel, device_function, grid
from numtile.ops_cuda.scalar_math import python_max, python_min


@device_function
def _visible_keys(row, n_keys, q_start, k_start, causal):
    """How many leading keys of a block query ``row`` may attend to (all unless causal)."""
    if not causal:
        return n_keys
    return python_min(python_max(q_start + row - k_start + 1, 0), n_keys)


@device_function
def _dot(a, i, first, b, j, b_first, width):
    """sum over d < width of a[i, first + d] * b[j, b_first + d], in float64."""
    total = 0.0
    for d in range(width):
        total += float(a[i, first + d]) * float(b[j, b_first + d])
    return total


@cached_kernel
def _attention_forward(q, k, v, m, l, acc, n_heads, width, scale, q_start, k_start, causal, group):
    # one thread per (query row, head): a first pass over the visible keys finds the new max,
    # a second adds exp(score - max) to l and exp(score - max) * v to acc
    n_keys = k.shape[0]
    for t in range(cuda.grid(1), q.shape[0] * n_heads, cuda.gridsize(1)):
        i = t // n_heads
        h = t - i * n_heads
        first = h * width
        kv_first = (h // group) * width
        visible = _visible_keys(i, n_keys, q_start, k_start, causal)
        if visible == 0:
            continue
        peak = -math.inf
        for j in range(visible):
            peak = python_max(peak, scale * _dot(q, i, first, k, j, kv_first, width))
        previous = m[i, h]
        new_max = python_max(previous, peak)
        rescale = math.exp(previous - new_max)
        for d in range(first, first + width):
            acc[i, d] = float(acc[i, d]) * rescale
        total = 0.0
        for j in range(visible):
            weight = math.exp(scale * _dot(q, i, first, k, j, kv_first, width) - new_max)
            total += weight
            for d in range(width):
                acc[i, first + d] = float(acc[i, first + d]) + weight * float(v[j, kv_first + d])
        m[i, h] = new_max
        l[i, h] = l[i, h] * rescale + total


@cached_kernel
def _attention_finalize(acc, m, l, out, lse, n_heads, width):
    for t in range(cuda.grid(1), acc.shape[0] * n_heads, cuda.gridsize(1)):
        i = t // n_heads
        h = t - i * n_heads
        inverse = 1.0 / l[i, h]
        for d in range(h * width, (h + 1) * width):
            out[i, d] = float(acc[i, d]) * inverse
        lse[i, h] = m[i, h] + math.log(l[i, h])


@cached_kernel
def _attention_delta(dout, out, delta, n_heads, width):
    for t in range(cuda.grid(1), out.shape[0] * n_heads, cuda.gridsize(1)):
        i = t // n_heads
        h = t - i * n_heads
        delta[i, h] = _dot(dout, i, h * width, out, i, h * width, width)


@device_function
def _score_gradient(q, k, v, dout, lse, delta, i, j, h, first, kv_first, width, scale):
    """(P, dS) of query i, key j, head h: P = exp(scale q.k - lse), dS = P (dout.v - delta)."""
    probability = math.exp(scale * _dot(q, i, first, k, j, kv_first, width) - lse[i, h])
    gradient = _dot(dout, i, first, v, j, kv_first, width) - delta[i, h]
    return probability, probability * gradient


@cached_kernel
def _attention_backward(
    q, k, v, dout, lse, delta, dq, dk, dv, n_heads, width, scale, q_start, k_start, causal, group
):
    # threads [0, n_queries * n_heads) own a (query row, head) of dq and loop over the keys it
    # sees; the next n_keys * n_kv own a (key row, key/value head) of dk and dv and loop over
    # the query heads of its group and the queries that see it
    n_queries, n_keys = q.shape[0], k.shape[0]
    n_kv = k.shape[1] // width
    query_items = n_queries * n_heads
    for t in range(cuda.grid(1), query_items + n_keys * n_kv, cuda.gridsize(1)):
        if t < query_items:
            i = t // n_heads
            h = t - i * n_heads
            first = h * width
            kv_first = (h // group) * width
            for j in range(_visible_keys(i, n_keys, q_start, k_start, causal)):
                _, dscore = _score_gradient(
                    q, k, v, dout, lse, delta, i, j, h, first, kv_first, width, scale
                )
                dscore *= scale
                for d in range(width):
                    dq[i, first + d] = float(dq[i, first + d]) + dscore * float(k[j, kv_first + d])
        else:
            u = t - query_items
            j = u // n_kv
            kv = u - j * n_kv
            kv_first = kv * width
            first_query = python_max(k_start + j - q_start, 0) if causal else 0
            for h in range(kv * group, python_min((kv + 1) * group, n_heads)):
                first = h * width
                for i in range(first_query, n_queries):
                    probability, dscore = _score_gradient(
                        q, k, v, dout, lse, delta, i, j, h, first, kv_first, width, scale
                    )
                    dscore *= scale
                    for d in range(width):
                        e = kv_first + d
                        dv[j, e] = float(dv[j, e]) + probability * float(dout[i, first + d])
                        dk[j, e] = float(dk[j, e]) + dscore * float(q[i, first + d])


def _launch_per_head(kernel, arrays, rows, n_heads, stream) -> None:
    """Launch ``kernel`` on ``arrays``, ``n_heads`` and the head width (of the columns of
    ``rows``) with a thread per (row of ``rows``, head)."""
    n = rows.shape[0] * n_heads
    if n == 0:
        return
    kernel[grid(n), block(), stream](*arrays, int(n_heads), rows.shape[1] // n_heads)


def _launch_attention_block(
    kernel, arrays, key_threads, n_heads, scale, q_start, k_start, causal, group, stream
) -> None:
    """Launch a flash-attention block kernel on ``arrays`` (q and k first) and the scalars all
    of them take: a thread per (query row, head), and a thread per (key row, key/value head)
    too with ``key_threads``. Nothing is launched for an empty block or one the causal mask
    hides."""
    q, k = arrays[0], arrays[1]
    n_queries, n_keys = q.shape[0], k.shape[0]
    if n_queries == 0 or n_keys == 0 or (causal and k_start > q_start + n_queries - 1):
        return
    width = q.shape[1] // n_heads
    n = n_queries * n_heads + (n_keys * (k.shape[1] // width) if key_threads else 0)
    scalars = (int(n_heads), width, float(scale), int(q_start), int(k_start), bool(causal))
    scalars += (int(group),)
    kernel[grid(n), block(), stream](*arrays, *scalars)


def attention_forward_block(
    q: DeviceArray,
    k: DeviceArray,
    v: DeviceArray,
    m: DeviceArray,
    l: DeviceArray,
    acc: DeviceArray,
    n_heads: int,
    scale: float,
    q_start: int,
    k_start: int,
    causal: bool,
    group: int = 1,
    *,
    stream=0,
) -> None:
    """Online-softmax update of each head's running max m, sum l and output acc by one key block
    (query head h reads key/value head h // group)."""
    arrays = (q, k, v, m, l, acc)
    _launch_attention_block(
        _attention_forward, arrays, False, n_heads, scale, q_start, k_start, causal, group, stream
    )


def attention_forward_finalize(
    acc: DeviceArray,
    m: DeviceArray,
    l: DeviceArray,
    out: DeviceArray,
    lse: DeviceArray,
    n_heads: int,
    *,
    stream=0,
) -> None:
    """out = acc / l and lse = m + log(l) per head, after the last key block."""
    _launch_per_head(_attention_finalize, (acc, m, l, out, lse), acc, n_heads, stream)


def attention_backward_delta(
    dout: DeviceArray, out: DeviceArray, delta: DeviceArray, n_heads: int, *, stream=0
) -> None:
    """delta[i, h] = sum over head h's columns of dout * out."""
    _launch_per_head(_attention_delta, (dout, out, delta), out, n_heads, stream)


def attention_backward_block(
    q: DeviceArray,
    k: DeviceArray,
    v: DeviceArray,
    dout: DeviceArray,
    lse: DeviceArray,
    delta: DeviceArray,
    dq: DeviceArray,
    dk: DeviceArray,
    dv: DeviceArray,
    n_heads: int,
    scale: float,
    q_start: int,
    k_start: int,
    causal: bool,
    group: int = 1,
    *,
    stream=0,
) -> None:
    """Accumulate one (query block, key block) pair's share of dq, dk and dv (query head h reads
    key/value head h // group)."""
    arrays = (q, k, v, dout, lse, delta, dq, dk, dv)
    _launch_attention_block(
        _attention_backward, arrays, True, n_heads, scale, q_start, k_start, causal, group, stream
    )
