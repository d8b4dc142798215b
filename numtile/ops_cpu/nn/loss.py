"""Cross-entropy tile kernels over vocabulary tiles: running log-sum-exp, target pick, gradient.

The row statistics (running max m, sum s of exp(logit - m), picked target logit) are 1-D
float64 arrays accumulated across a row's vocabulary tiles, in any order.

Logits may be float32, float64, or bfloat16 given as their uint16 bits (bf16-mixed training's
logits: each element widened in a register, no float32 copy of the tile); a bfloat16 gradient
tile (uint16 bits) is written rounded once to nearest even. The exponentials of float32 and
bfloat16 logits run in float32 (``softmax_exp``: no libm call, so rows go through SIMD
registers, as ``torch`` computes a float32 softmax), those of float64 logits in float64; the
row sums accumulate in float64.
"""

import numba
import numpy as np
from numba.core import types
from numba.extending import overload

from numtile.ops_cpu.bf16_kernels import bf16_value, rounded
from numtile.ops_cpu.helpers import wide_vectors, widen
from numtile.ops_cpu.scalar_math import _maximum, softmax_exp

_BLOCK = 512  # exponentials computed a block at a time, then summed (see _exp_sum)


def logit(element):
    """The value of a logits element: bfloat16 bits (uint16) widened to float32, a float as it
    is (Numba-only)."""
    raise NotImplementedError("logit is only callable from numba-compiled code")


@overload(logit, inline="always")
def _logit(element):
    if element == types.uint16:
        return lambda element: bf16_value(element)
    if isinstance(element, types.Float):
        return lambda element: element
    return None


def stored(value, out):
    """``value`` as an element of the array ``out``: rounded to bfloat16 bits where ``out``
    holds them (uint16), else converted to ``out``'s dtype (Numba-only)."""
    raise NotImplementedError("stored is only callable from numba-compiled code")


@overload(stored, inline="always")
def _stored(value, out):
    if out.dtype == types.uint16:
        return lambda value, out: rounded(np.float32(value))
    target = out.dtype
    return lambda value, out: target(value)


def exponent_typed(value, logits):
    """``value`` in the float type the exponentials of ``logits`` run in: float64 for float64
    logits, float32 for float32 and bfloat16 ones (Numba-only)."""
    raise NotImplementedError("exponent_typed is only callable from numba-compiled code")


@overload(exponent_typed, inline="always")
def _exponent_typed(value, logits):
    target = types.float64 if logits.dtype == types.float64 else types.float32
    return lambda value, logits: target(value)


def exponent_block(logits, size):
    """An empty vector of ``size`` elements of the type of ``exponent_typed`` (Numba-only)."""
    raise NotImplementedError("exponent_block is only callable from numba-compiled code")


@overload(exponent_block, inline="always")
def _exponent_block(logits, size):
    target = np.float64 if logits.dtype == types.float64 else np.float32
    return lambda logits, size: np.empty(size, target)


# Kept out of the exponentials' function: reassoc lets LLVM split the sums over SIMD lanes,
# and would also let it undo softmax_exp's exact ln 2 split.
@numba.njit(nogil=True, cache=True, error_model="numpy", fastmath={"reassoc"})
def _wide_sum(values, count):
    """Sum of values[:count] in float64."""
    wide_vectors()
    total = 0.0
    for j in range(count):
        total += widen(values[j])
    return total


# nnan: the max of a row holding NaN is unspecified, but the NaN still reaches the sum (and so
# the loss) through exp
@numba.njit(nogil=True, cache=True, error_model="numpy", fastmath={"nnan", "reassoc"})
def _row_max(row):
    """The largest logit of ``row`` (not empty)."""
    wide_vectors()
    peak = logit(row[0])
    for j in range(1, row.size):
        peak = _maximum(peak, logit(row[j]))
    return peak


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _exp_sum(row, shift, block):
    """Sum in float64 of exp(logit - shift) over ``row``, ``block`` (a scratch vector of the
    exponentials' type) holding a block of exponentials at a time."""
    wide_vectors()
    total = 0.0
    for start in range(0, row.size, block.size):
        # a slice, so the loop's indices are known non-negative: contiguous loads, no gather
        chunk = row[start : start + block.size]
        for j in range(chunk.size):
            block[j] = softmax_exp(logit(chunk[j]) - shift)
        total += _wide_sum(block, chunk.size)
    return total


@numba.njit(nogil=True, cache=True, error_model="numpy")
def logsumexp_accumulate(logits, m, s):
    """Fold a vocabulary tile into each row's running max m and sum s of exp(logit - m), in
    float64 (tiles in any order; a tile of -inf logits changes nothing)."""
    if logits.shape[1] == 0:
        return
    block = exponent_block(logits, min(_BLOCK, logits.shape[1]))
    for i in range(logits.shape[0]):
        peak = _row_max(logits[i])
        # exp(-inf - -inf) would be NaN: a row that is all -inf so far has nothing to add.
        if peak == -np.inf:
            continue
        # the max of logits, so exact in their float type: the subtractions below stay in it
        new_max = max(m[i], widen(peak))
        s[i] = s[i] * np.exp(m[i] - new_max) + _exp_sum(
            logits[i], exponent_typed(new_max, logits), block
        )
        m[i] = new_max


@numba.njit(nogil=True, cache=True, error_model="numpy")
def cross_entropy_pick(logits, targets, v_start, picked):
    """picked[i] += logits[i, targets[i] - v_start] when the target is in this tile (an
    ignored target -1 never is, as v_start >= 0)."""
    for i in range(logits.shape[0]):
        column = targets[i] - v_start
        if 0 <= column < logits.shape[1]:
            picked[i] += widen(logit(logits[i, column]))


@numba.njit(nogil=True, cache=True, error_model="numpy")
def cross_entropy_backward(logits, targets, m, s, v_start, grad_scale, dlogits):
    """dlogits = grad_scale * (softmax - onehot(target)) on this tile, the softmax from the
    row's m and s; rows with a negative (ignored) target get 0."""
    wide_vectors()
    for i in range(logits.shape[0]):
        row = dlogits[i]
        if targets[i] < 0:
            row[:] = 0
            continue
        shift = exponent_typed(m[i], logits)
        factor = exponent_typed(grad_scale / s[i], logits)
        for j in range(row.size):
            row[j] = stored(softmax_exp(logit(logits[i, j]) - shift) * factor, row)
        column = targets[i] - v_start
        if 0 <= column < row.size:
            # Recomputed rather than row[column] -= grad_scale, which cancels in float32.
            probability = np.exp(widen(logit(logits[i, column])) - m[i]) / s[i]
            row[column] = stored((probability - 1.0) * grad_scale, row)
