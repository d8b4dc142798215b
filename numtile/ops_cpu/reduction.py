"""Reduction kernels along the middle axis of a flat array viewed as (pre, n, post).

Reducing axis k of an N-d tile is the middle axis of (prod(shape[:k]), shape[k],
prod(shape[k+1:])), so one kernel with runtime sizes serves every axis. Sums and products are
accumulated in float64 (in int64 for integers) whatever the input precision; maxima and minima
in the input's own type, where they are exact (bools in uint8): float32 partials fill twice
the SIMD lanes of float64 ones, with no conversion, which took the column max of 16 float32
tiles of 2048 x 2048 (2 threads) from 1.11x the thread CPU time of their column sum to 1.0x,
and of int32 tiles from 1.23x to 1.0x. The moduli of complex tiles reduce into real partials
(``modulus_reduce_accumulate``: the vector norms), read from each element with no |z| tile in
between.

A reduced axis that is not innermost (``sum(x, axis=0)`` of a matrix) is read in blocks of up
to ``_COLUMNS`` columns whose partials stay in L1 cache while rows stream past, four rows a
step, one from each quarter of the rows: a tile at most ``_COLUMNS`` wide is then read as four
long contiguous streams, which the hardware prefetchers follow. ``sum_columns``, the float
column sum, is that kernel's sum. Measured on the column sum (Zen 3, 2 cores, AVX2): four
rows a step, twice the speed of a row at a time over half as wide blocks; quarters rather
than neighbouring rows, 0.90-0.93x the thread CPU time on 16 tiles of 2048 x 2048 float64 (2
threads), 0.62x on 16384 x 256 tiles and 0.45x on 8192 x 64; eight bands no better than four,
software prefetch a row ahead 1.3x slower, blocks of 1024 or 512 columns 1.3x and 1.5x slower
than 2048. The same layout took max, min and prod over axis 0 of a 2048^2 tile from 1.3-1.4x
NumPy's time to 0.4-0.7x (one thread). The reads bound it, not the combine step: the float64
column max (``llvm.maximum``, five instructions a vector on AVX2) takes 1.04-1.09x the thread
CPU time of the column sum on 16 tiles of 2048 x 2048 (2 threads), and a compare-and-select
max (one instruction) with a per-column NaN flag and a rescan of the columns it flags or leaves
at zero measured no faster (1.02x llvm.maximum's time): it was not kept.

Rows (the reduced axis innermost) are read one row at a time. Reading them as four streams,
as the columns are (four rows a step, one from each quarter; a row alone as its four
quarters), took 0.67-0.69x the thread CPU time for max over axis 1 and 0.77-0.80x for sum on
16 tiles of 2048 x 2048 float64 (2 threads), but each step was then inlined four times more: a
row kernel's first compile took 1.5-1.6 s of CPU instead of 0.7, and the typical start-up
script 3 s more (cold 21.6 s with fused reductions, over issue 13's 20 s). It was not kept.
"""

import functools
import math

import numba
import numpy as np
from numba import types
from numba.extending import overload

from numtile.opcodes import MODULUS_REDUCE_OPS, REDUCE_OPS
from numtile.ops_cpu import scalar_math
from numtile.ops_cpu.helpers import as_type_of, by_name, inlined, widen
from numtile.ops_cpu.per_op import ByNeed, OpKernel
from numtile.ops_cpu.scalar_math import _add, _maximum

# Columns handled at once when the reduced axis is not innermost: a reduction's partials
# (16 KiB of float64) and softmax's two scratch rows (8 KiB each) stay in L1 cache while the
# inner loops run over contiguous memory.
_COLUMNS = 2048
_BLOCK = 1024  # softmax's


@inlined
def _identity(value):
    return value


@inlined
def _widened(value):
    return widen(value)


def _as_compared(value):
    """``value`` as the partials of a maximum or minimum hold it: as it is (an extremum is exact
    in any type, and a narrow one fills more SIMD lanes), a bool as a uint8 (any and all are the
    max and min of bools: 32 of them a SIMD vector)."""
    raise NotImplementedError("_as_compared is only callable from numba-compiled code")


@inlined
def _compared(value):
    return _as_compared(value)


@overload(_as_compared, inline="always")
def _compared_overload(value):
    if isinstance(value, types.Boolean):
        return lambda value: np.uint8(value)
    return lambda value: value


def by_layout(build):
    """The kernel ``kernel(x, out, pre, n, post)`` that runs ``build(False)``, the row loop,
    where post == 1 (the reduced axis innermost) and ``build(True)``, the column loop,
    elsewhere, each compiled on its first call: a program compiles only the loops it runs.
    (One function holding both loops took 1.5x as long to compile as the row loop alone, and
    LLVM would not drop the unused one: the choice must be a constant of the kernel's own
    closure, which Numba prunes before typing.)"""
    rows, columns = build(False), build(True)

    def reduce_by_layout(x, out, pre, n, post):
        (rows if post == 1 else columns)(x, out, pre, n, post)

    return ByNeed(reduce_by_layout, rows, columns)


def _step(name: str):
    """The function ``name`` of this module or ``scalar_math``: a load, transform or combine
    step of a reduction. A kernel's closure holds the names of its steps, and ``part`` finds
    them (a closure over functions would not stay in Numba's on-disk cache)."""
    return globals().get(name) or getattr(scalar_math, name)


part = by_name(_step)


@inlined
def _reduce_rows(load, transform, combine, x, out, pre, n, post):
    """out[p] = combine(out[p], combine over j of transform(load(x[p, j]))), in wide precision:
    ``load`` reads an element widened (``_widened``: float64, int64 or uint64; the bfloat16
    kernels pass one that widens bit patterns; ``_compared`` keeps it as it is). The reduction
    of each row (post == 1), one row at a time."""
    if n == 0:
        return
    for p in range(pre):
        values = x[p * n : (p + 1) * n]
        partial = transform(load(values[0]))
        for j in range(1, n):
            partial = combine(partial, transform(load(values[j])))
        _combine_into(combine, out, p, partial)


@inlined
def _combine_into(combine, out, index, partial):
    """out[index] = combine(out[index], partial), in out's wide type."""
    wide = widen(out[index])
    out[index] = combine(wide, as_type_of(partial, wide))


@inlined
def _reduce_columns(load, transform, combine, x, out, pre, n, post):
    """out[p, q] = combine(out[p, q], combine over j of transform(load(x[p, j, q]))), as
    ``_reduce_rows``, for any post (written for post > 1): blocks of up to ``_COLUMNS`` columns,
    four rows a step."""
    if n == 0:
        return
    # scratch of the loaded type (filled with x's first element; every entry is set below)
    partial = np.full(min(post, _COLUMNS), load(x[0]))
    band = (n - 1) // 4  # rows a quarter of the rows after the first
    for p in range(pre):
        for first in range(0, post, _COLUMNS):
            width = min(_COLUMNS, post - first)
            start = p * n * post + first
            values = x[start : start + width]
            for q in range(width):
                partial[q] = transform(load(values[q]))
            # a row of each quarter a step: four long streams (a tile at most _COLUMNS wide is
            # read as four contiguous runs, which the prefetchers follow)
            for j in range(1, band + 1):
                row = start + j * post
                r0 = x[row : row + width]
                r1 = x[row + band * post : row + band * post + width]
                r2 = x[row + 2 * band * post : row + 2 * band * post + width]
                r3 = x[row + 3 * band * post : row + 3 * band * post + width]
                for q in range(width):
                    pair0 = combine(transform(load(r0[q])), transform(load(r1[q])))
                    pair1 = combine(transform(load(r2[q])), transform(load(r3[q])))
                    partial[q] = combine(partial[q], combine(pair0, pair1))
            for k in range(1 + 4 * band, n):
                values = x[start + k * post : start + k * post + width]
                for q in range(width):
                    partial[q] = combine(partial[q], transform(load(values[q])))
            for q in range(width):
                _combine_into(combine, out, p * post + first + q, partial[q])


@numba.njit(nogil=True, cache=True, error_model="numpy", fastmath={"reassoc"})
def sum_columns(x, out, pre, n, post):
    """out[p, q] += sum over j of x[p, j, q] of a float array, accumulated in float64."""
    _reduce_columns(_widened, _identity, _add, x, out, pre, n, post)


# (load, transform, combine) of each reduction: names of functions of this module or
# scalar_math
_REDUCTIONS = {
    "sum": ("_widened", "_identity", "_add"),
    "max": ("_compared", "_identity", "_maximum"),
    "min": ("_compared", "_identity", "_minimum"),
    "prod": ("_widened", "_identity", "_multiply"),
    "sumsq": ("_widened", "_square", "_add"),
    "sumabs": ("_widened", "_abs", "_add"),
    "maxabs": ("_widened", "_abs", "_maximum"),
}
# the same of the moduli of complex elements
_MODULUS_REDUCTIONS = {
    "sumsq": ("_squared_modulus", "_identity", "_add"),
    "sumabs": ("_modulus", "_identity", "_add"),
    "maxabs": ("_modulus", "_identity", "_maximum"),
}


def _reduce_kernel(op, table=_REDUCTIONS):
    """The kernel of the reduction ``op`` (a name of ``table``) along the middle axis."""
    return by_layout(functools.partial(_reduce_loop, *table[op]))


def _reduce_loop(load, transform, combine, columns):
    """``_reduce_kernel``'s loop over columns (``columns``) or rows, of the steps named."""

    # reassoc lets LLVM vectorise sums by splitting them over SIMD lanes (NaN and inf semantics
    # are kept); the result may differ from a sequential sum in the last bits.
    @numba.njit(nogil=True, cache=True, error_model="numpy", fastmath={"reassoc"})
    def reduce_op(x, out, pre, n, post):
        read, step, join = part(load), part(transform), part(combine)
        if columns:
            _reduce_columns(read, step, join, x, out, pre, n, post)
        else:
            _reduce_rows(read, step, join, x, out, pre, n, post)

    return reduce_op


reduce_accumulate = OpKernel(
    "reduce_accumulate",
    REDUCE_OPS,
    _reduce_kernel,
    """out[p, q] = combine(out[p, q], reduction over j of x[p, j, q]) for ``op`` (a code of
    REDUCE_OPS).""",
)


@inlined
def _modulus(z):
    # sqrt(re^2 + im^2) where the squares neither overflow nor lose precision to underflow
    # (it vectorises and is as exact as hypot there, within an ulp); hypot elsewhere
    re, im = np.float64(z.real), np.float64(z.imag)
    square = re * re + im * im
    if 1e-290 < square < 1e290:
        return math.sqrt(square)
    return math.hypot(re, im)


@inlined
def _squared_modulus(z):
    # re^2 + im^2, which vectorises; an infinite part makes it inf even beside a NaN (|z| is
    # inf then, as annex G says and the modulus above gives)
    re, im = np.float64(z.real), np.float64(z.imag)
    square = re * re + im * im
    if square != square and (abs(re) == np.inf or abs(im) == np.inf):
        return np.inf
    return square


modulus_reduce_accumulate = OpKernel(
    "modulus_reduce_accumulate",
    MODULUS_REDUCE_OPS,
    functools.partial(_reduce_kernel, table=_MODULUS_REDUCTIONS),
    """out[p, q] = combine(out[p, q], reduction over j of |x[p, j, q]|) of a complex tile x into
    a real out, for ``op`` (sumsq, sumabs or maxabs: a code of MODULUS_REDUCE_OPS); in float64,
    sumsq from re^2 + im^2.""",
)


@numba.njit(nogil=True, cache=True, error_model="numpy", fastmath={"reassoc"})
def softmax(x, out, pre, n, post):
    """out = exp(x - max) / sum(exp(x - max)) along the middle axis of (pre, n, post)."""
    if n == 0:
        return
    if post == 1:
        for p in range(pre):
            values = x[p * n : (p + 1) * n]
            result = out[p * n : (p + 1) * n]
            peak = values[0]
            for j in range(1, n):
                peak = _maximum(peak, values[j])
            total = 0.0
            for j in range(n):
                result[j] = np.exp(values[j] - peak)
                total += result[j]
            inverse = 1.0 / total
            for j in range(n):
                result[j] = result[j] * inverse
        return
    block = min(post, _BLOCK)
    peak = np.empty(block, x.dtype)
    total = np.empty(block, np.float64)
    for p in range(pre):
        for first in range(0, post, _BLOCK):
            width = min(_BLOCK, post - first)
            start = p * n * post + first
            peak[:width] = x[start : start + width]
            for j in range(1, n):
                values = x[start + j * post : start + j * post + width]
                for q in range(width):
                    peak[q] = _maximum(peak[q], values[q])
            total[:width] = 0.0
            for j in range(n):
                values = x[start + j * post : start + j * post + width]
                result = out[start + j * post : start + j * post + width]
                for q in range(width):
                    result[q] = np.exp(values[q] - peak[q])
                    total[q] += result[q]
            for q in range(width):
                total[q] = 1.0 / total[q]
            for j in range(n):
                result = out[start + j * post : start + j * post + width]
                for q in range(width):
                    result[q] = result[q] * total[q]


@numba.njit(nogil=True, cache=True, error_model="numpy", fastmath={"reassoc"})
def softmax_backward(y, grad_out, grad_in, pre, n, post):
    """grad_in = y * (grad_out - sum_j(grad_out * y)) along the middle axis; y = softmax
    output."""
    if n == 0:
        return
    if post == 1:
        for p in range(pre):
            probabilities = y[p * n : (p + 1) * n]
            upstream = grad_out[p * n : (p + 1) * n]
            result = grad_in[p * n : (p + 1) * n]
            dot = 0.0
            for j in range(n):
                dot += upstream[j] * widen(probabilities[j])
            for j in range(n):
                result[j] = probabilities[j] * (upstream[j] - dot)
        return
    dot = np.empty(min(post, _BLOCK), np.float64)
    for p in range(pre):
        for first in range(0, post, _BLOCK):
            width = min(_BLOCK, post - first)
            start = p * n * post + first
            dot[:width] = 0.0
            for j in range(n):
                row = start + j * post
                probabilities = y[row : row + width]
                upstream = grad_out[row : row + width]
                for q in range(width):
                    dot[q] += upstream[q] * widen(probabilities[q])
            for j in range(n):
                row = start + j * post
                probabilities = y[row : row + width]
                upstream = grad_out[row : row + width]
                result = grad_in[row : row + width]
                for q in range(width):
                    result[q] = probabilities[q] * (upstream[q] - dot[q])
