"""Flash-attention tile kernels on bfloat16 q, k, v: every product on the CPU's bf16 units.

The same blocks as ``attention`` (its docstring gives the layout and statistics), for tiles
that hold bfloat16 bits (uint16) where oneMKL's bf16 GEMM runs on AVX512-BF16/AMX units
(``mkl_bf16.bind()`` true): the products read each head's columns in place (a column block of
the tile, its leading dimension the tile's width), with no float32 copies of q, k, v. As in
FlashAttention-2, the scores and their softmax statistics are float32 (row max, the sum ``l``
of the float32 probabilities, log-sum-exp in float64), and the probabilities P and the score
gradients dS are rounded to bfloat16 (nearest even) only as the inputs of the products that
follow (P V, P^T dO, dS K, dS^T Q), which accumulate in float32: the output accumulator and
dq, dk, dv are float32 tiles. The float32 kernels of ``attention`` stay the reference (and
serve CPUs without bf16 units, where they run on bfloat16 tiles widened to float32).

The row work (max, exp, sum, rounding, dS) runs in small functions whose loops LLVM vectorises
with 512-bit registers (``wide_vectors``), the exponential being ``fastmath_blocks``' short
float32 kernel (0.79 ulp) on scores minus their row max, which are <= 0: below -87 (where
exp is under 1.7e-38) it gives 0, NaN stays NaN. Per row of 4 heads x 256 keys, causal, one
thread: 47 us for the exponentials against 107 us with ``softmax_exp`` in 256-bit loops.
"""

import numba
import numpy as np
from numba.core import types
from numba.extending import overload

from numtile.ops_cpu.bf16_kernels import rounded
from numtile.ops_cpu.fastmath import select
from numtile.ops_cpu.fastmath_blocks import exp_f32_ordinary
from numtile.ops_cpu.helpers import inlined, wide_vectors
from numtile.ops_cpu.mkl_bf16 import bind
from numtile.ops_cpu.mkl_bf16 import gemm_bf16_compiled as gemm
from numtile.ops_cpu.nn.attention import _copy_head, _row_max, _visible_keys, skipped
from numtile.ops_cpu.scratch import empty_many


def bf16_attention_ready() -> bool:
    """Whether these kernels can run: oneMKL's bf16 GEMM found and bound (``mkl_bf16.bind``).
    Whether the CPU has bf16 units (else MKL emulates them, no faster than float32) is the
    caller's to check."""
    return bind()


_FLUSH = np.float32(-87.0)  # exp_f32_ordinary holds above; exp(-87) = 1.65e-38


@inlined
def _shifted_exp(x):
    """exp(x) for float32 x <= 0 (a score minus its row max): 0 below -87, NaN for NaN."""
    y = exp_f32_ordinary(select(x > _FLUSH, x, _FLUSH))
    return select(x > _FLUSH, y, select(x != x, x, np.float32(0)))


@numba.njit(nogil=True, cache=True, error_model="numpy", fastmath={"reassoc"})
def _row_sum(values, count):
    """Sum of the float32 values[:count] in float64, in 512-bit vectors (``attention``'s
    ``_wide_sum`` keeps its 256-bit summation order: the float32 kernels' bits)."""
    wide_vectors()
    total = 0.0
    for j in range(count):
        total += np.float64(values[j])
    return total


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _weights_row(row, rounded_row, visible, shift):
    """row[j] = exp(row[j] - shift) and rounded_row[j] its bfloat16 bits, j < visible (the
    rest of rounded_row 0)."""
    wide_vectors()
    for j in range(visible):
        p = _shifted_exp(row[j] - shift)
        row[j] = p
        rounded_row[j] = rounded(p)
    rounded_row[visible:] = 0


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _gradient_row(scores, d_weights, p_bits, ds_bits, visible, shift, offset):
    """The bfloat16 bits of P = exp(scores - shift) and of dS = P (dP - offset), j < visible
    (the rest 0)."""
    wide_vectors()
    for j in range(visible):
        p = _shifted_exp(scores[j] - shift)
        p_bits[j] = rounded(p)
        ds_bits[j] = rounded(p * (d_weights[j] - offset))
    p_bits[visible:] = 0
    ds_bits[visible:] = 0


def _put_head(source, first, target):
    """One head's float32 gradient into columns first:first + width of its tile: added to a
    float32 tile (an accumulator), or rounded into a bfloat16 (uint16) one, the task being
    that tile's only contribution (``fused.attention``: one sequence tile)."""
    raise NotImplementedError("_put_head is only callable from numba-compiled code")


@overload(_put_head, inline="always")
def _put_head_overload(source, first, target):
    if target.dtype == types.uint16:

        def store(source, first, target):
            for i in range(source.shape[0]):
                for d in range(source.shape[1]):
                    target[i, first + d] = rounded(source[i, d])

        return store

    def add(source, first, target):
        for i in range(source.shape[0]):
            for d in range(source.shape[1]):
                target[i, first + d] += source[i, d]

    return add


def attention_forward_block_bf16(
    q, k, v, m, l, acc, n_heads, scale, q_start, k_start, causal, group=1
):
    """``attention.attention_forward_block`` for uint16 (bfloat16) q, k, v and a float32
    ``acc``: the weights P rounded to bfloat16 for P V, their sum taken in float32. The
    working arrays are this thread's scratch, as there."""
    n_queries, n_keys = q.shape[0], k.shape[0]
    if skipped(n_queries, n_keys, q_start, k_start, causal):
        return
    width = q.shape[1] // n_heads
    work = empty_many(
        ((n_queries, width), np.float32),  # update
        ((n_queries, n_keys), np.float32),  # weights: the scores, then exp(S - new max)
        ((n_queries, n_keys), np.uint16),  # rounded_weights
        (n_queries, np.float64),  # rescale
        ((n_queries, width), np.uint16),  # q_head
        ((n_keys, width), np.uint16),  # k_head
        ((n_keys, width), np.uint16),  # v_head
    )
    _forward_block_bf16(q, k, v, m, l, acc, n_heads, scale, q_start, k_start, causal, group, *work)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _forward_block_bf16(
    q, k, v, m, l, acc, n_heads, scale, q_start, k_start, causal, group,
    update, weights, rounded_weights, rescale, q_head, k_head, v_head,
):  # fmt: skip
    """``attention_forward_block_bf16`` in the working arrays given."""
    n_queries, n_keys = q.shape[0], k.shape[0]
    width = q.shape[1] // n_heads
    for h in range(n_heads):
        _copy_head(q, h, width, q_head)
        if h % group == 0:
            _copy_head(k, h // group, width, k_head)
            _copy_head(v, h // group, width, v_head)
        gemm(q_head, k_head, weights, False, True, scale, 0.0)
        for i in range(n_queries):
            visible = _visible_keys(i, n_keys, q_start, k_start, causal)
            row, target = weights[i], rounded_weights[i]
            if visible == 0:
                rescale[i] = 1.0
                target[:] = 0
                continue
            previous = m[i, h]
            new_max = max(previous, np.float64(_row_max(row, visible)))
            _weights_row(row, target, visible, np.float32(new_max))
            total = _row_sum(row, visible)
            rescale[i] = np.exp(previous - new_max)
            m[i, h] = new_max
            l[i, h] = l[i, h] * rescale[i] + total
        gemm(rounded_weights, v_head, update, False, False, 1.0, 0.0)
        first = h * width
        for i in range(n_queries):
            factor = np.float32(rescale[i])
            for d in range(width):
                acc[i, first + d] = acc[i, first + d] * factor + update[i, d]


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _backward_block_bf16(
    q, k, v, dout, lse, delta, dq, dk, dv, n_heads, scale, q_start, k_start, causal, group,
    probabilities, dscores, rounded_p, rounded_ds, q_head, dout_head, k_head, v_head,
    d_queries, d_keys, d_values,
):  # fmt: skip
    """``attention_backward_block_bf16`` in the working arrays given."""
    n_queries, n_keys = q.shape[0], k.shape[0]
    width = q.shape[1] // n_heads
    for h in range(n_heads):
        kv = (h // group) * width
        first = h * width
        _copy_head(q, h, width, q_head)
        _copy_head(dout, h, width, dout_head)
        begins = h % group == 0  # the first query head of its key/value head in this tile
        if begins:
            _copy_head(k, h // group, width, k_head)
            _copy_head(v, h // group, width, v_head)
        gemm(q_head, k_head, probabilities, False, True, scale, 0.0)
        gemm(dout_head, v_head, dscores, False, True, 1.0, 0.0)  # dP
        for i in range(n_queries):
            visible = _visible_keys(i, n_keys, q_start, k_start, causal)
            row, gradient = probabilities[i], dscores[i]
            shift = np.float32(lse[i, h])
            offset = np.float32(delta[i, h])
            _gradient_row(row, gradient, rounded_p[i], rounded_ds[i], visible, shift, offset)
        gemm(rounded_ds, k_head, d_queries, False, False, scale, 0.0)
        _put_head(d_queries, first, dq)
        # dk and dv sum over the group's query heads here, then go to their tiles once
        gemm(rounded_p, dout_head, d_values, True, False, 1.0, 0.0 if begins else 1.0)
        gemm(rounded_ds, q_head, d_keys, True, False, scale, 0.0 if begins else 1.0)
        if h % group == group - 1 or h == n_heads - 1:
            _put_head(d_values, kv, dv)
            _put_head(d_keys, kv, dk)


def attention_backward_block_bf16(
    q, k, v, dout, lse, delta, dq, dk, dv, n_heads, scale, q_start, k_start, causal, group=1
):
    """``attention.attention_backward_block`` for uint16 (bfloat16) q, k, v, dout and float32
    dq, dk, dv: P and dS rounded to bfloat16 as the inputs of the three gradient products,
    which add into dq, dk, dv in place; or uint16 (bfloat16) dq, dk, dv when this task is
    their only contribution: the gradients rounded into them once. The working arrays are
    this thread's scratch."""
    n_queries, n_keys = q.shape[0], k.shape[0]
    if skipped(n_queries, n_keys, q_start, k_start, causal):
        return
    width = q.shape[1] // n_heads
    scores, bits = ((n_queries, n_keys), np.float32), ((n_queries, n_keys), np.uint16)
    queries, keys = ((n_queries, width), np.uint16), ((n_keys, width), np.uint16)
    work = empty_many(
        scores,  # probabilities
        scores,  # dscores
        bits,  # rounded_p
        bits,  # rounded_ds
        queries,  # q_head
        queries,  # dout_head
        keys,  # k_head
        keys,  # v_head
        ((n_queries, width), np.float32),  # d_queries
        ((n_keys, width), np.float32),  # d_keys
        ((n_keys, width), np.float32),  # d_values
    )
    _backward_block_bf16(
        q, k, v, dout, lse, delta, dq, dk, dv, n_heads, scale, q_start, k_start, causal, group,
        *work,
    )  # fmt: skip
