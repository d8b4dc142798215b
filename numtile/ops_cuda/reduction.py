"""CUDA reduction kernels along the middle axis of a flat array viewed as (pre, n, post)
(twins of ``ops_cpu.reduction``, with the op codes of ``numtile.opcodes``).

Two layouts of the work: one thread per output element (per (p, q) column) walking the
reduced axis, whose neighbouring threads read neighbouring elements when ``post > 1``; and one
block per output element, whose threads stride over the reduced axis and combine their
partials in shared memory, used when the reduced axis is long and either contiguous
(``post == 1``) or there are too few outputs to give every GPU thread one. Partial results
are accumulated in float64 (in int64 for integers and bools) whatever the input precision, as
on the CPU; the summation order differs from the CPU's vectorised one, so float sums agree to
rounding. ``modulus_reduce_accumulate`` reads the moduli of complex elements into the same
kernels (a sum or maximum of |z|, or a sum of re^2 + im^2).
"""

from __future__ import annotations

import functools
import math

import numba
import numpy as np
from numba import cuda

from numtile.opcodes import (
    MAX,
    MAXABS,
    MIN,
    MODULUS_REDUCE_OPS,
    REDUCE_OPS,
    SUM,
    SUMABS,
    SUMSQ,
)
from numtile.ops_cuda.launch import MAX_BLOCKS, DeviceArray, block, grid
from numtile.ops_cuda.scalar_math import maximum, minimum

__all__ = ["modulus_reduce_accumulate", "reduce_accumulate", "softmax", "softmax_backward"]

_float64 = numba.float64
# A block reduces each output element when the reduced axis has at least _ROWS_MIN_N
# elements and is contiguous, or when there are fewer than _COLUMNS_MIN_OUTPUTS outputs (too
# few threads to fill a GPU with one per output); otherwise a thread reduces each.
_ROWS_MIN_N = 32
_COLUMNS_MIN_OUTPUTS = 4096
_SCRATCH = 1024  # one shared slot per thread of the largest block


def _by_rows(pre: int, n: int, post: int) -> bool:
    """Whether a block (rather than a thread) should reduce each output element."""
    return n >= _ROWS_MIN_N and (post == 1 or pre * post < _COLUMNS_MIN_OUTPUTS)


def _rows_launch(pre: int, post: int) -> tuple[int, int]:
    """(blocks, threads) of a block-per-output kernel."""
    return max(1, min(pre * post, MAX_BLOCKS)), min(block(), _SCRATCH)


def _wide(dtype) -> numba.types.Type:
    """The accumulation type of ``dtype``: float64 for floats, uint64 for unsigned integers,
    int64 otherwise."""
    kind = np.dtype(dtype).kind
    return numba.float64 if kind == "f" else numba.uint64 if kind == "u" else numba.int64


@cuda.jit(device=True)
def _transform(value, op):
    if op == SUMSQ:
        return value * value
    if op == SUMABS or op == MAXABS:
        return abs(value)
    return value


@cuda.jit(device=True)
def _combine(total, value, op):
    if op == SUM or op == SUMSQ or op == SUMABS:
        return total + value
    if op == MAX or op == MAXABS:
        return maximum(total, value)
    if op == MIN:
        return minimum(total, value)
    return total * value  # PROD


@cuda.jit(device=True)
def _column_start(column, n, post):
    """Flat index of the first element that output ``column`` (p * post + q) reduces."""
    p = column // post
    return p * n * post + (column - p * post)


@cuda.jit(device=True)
def _block_threads(n):
    """(thread index, block size, threads with elements) of a block reducing ``n`` elements."""
    width = cuda.blockDim.x
    return cuda.threadIdx.x, width, width if width < n else n


@cuda.jit(device=True)
def _block_combine(scratch, active, op):
    """scratch[0] = combination of scratch[:active] over the block; every thread of the block
    calls it after writing its slot, and reads scratch[0] after it."""
    cuda.syncthreads()
    tid = cuda.threadIdx.x
    step = 1
    while step < active:
        if tid % (2 * step) == 0 and tid + step < active:
            scratch[tid] = _combine(scratch[tid], scratch[tid + step], op)
        cuda.syncthreads()
        step *= 2


@cuda.jit(device=True)
def _as_stored(element):
    return element


@functools.cache
def _reduce_kernels(x_wide, out_wide, read=_as_stored):
    """(thread per output, block per output) reduction kernels for these accumulation types;
    ``read`` turns an element of x into a number (bfloat16 bits into their float32 value)."""

    @cuda.jit
    def columns(x, out, pre, n, post, op):
        for column in range(cuda.grid(1), pre * post, cuda.gridsize(1)):
            start = _column_start(column, n, post)
            partial = _transform(x_wide(read(x[start])), op)
            for j in range(1, n):
                partial = _combine(partial, _transform(x_wide(read(x[start + j * post])), op), op)
            out[column] = _combine(out_wide(out[column]), partial, op)

    @cuda.jit
    def rows(x, out, pre, n, post, op):
        scratch = cuda.shared.array(_SCRATCH, x_wide)
        tid, width, active = _block_threads(n)
        for column in range(cuda.blockIdx.x, pre * post, cuda.gridDim.x):
            start = _column_start(column, n, post)
            if tid < active:
                partial = _transform(x_wide(read(x[start + tid * post])), op)
                for j in range(tid + width, n, width):
                    partial = _combine(
                        partial, _transform(x_wide(read(x[start + j * post])), op), op
                    )
                scratch[tid] = partial
            _block_combine(scratch, active, op)
            if tid == 0:
                out[column] = _combine(out_wide(out[column]), scratch[0], op)
            cuda.syncthreads()  # scratch[0] is read before the next column overwrites it

    return columns, rows


@functools.cache
def _softmax_kernels(real):
    """(thread per row, block per row) softmax kernels for elements of numba type ``real``."""

    @cuda.jit
    def columns(x, out, pre, n, post):
        for column in range(cuda.grid(1), pre * post, cuda.gridsize(1)):
            start = _column_start(column, n, post)
            end = start + n * post
            peak = x[start]
            for k in range(start + post, end, post):
                peak = maximum(peak, x[k])
            total = _float64(0.0)
            for k in range(start, end, post):
                # exp in the input's precision, summed as stored, as on the CPU
                out[k] = math.exp(x[k] - peak)
                total += out[k]
            inverse = 1.0 / total
            for k in range(start, end, post):
                out[k] = out[k] * inverse

    @cuda.jit
    def rows(x, out, pre, n, post):
        scratch = cuda.shared.array(_SCRATCH, _float64)
        tid, width, active = _block_threads(n)
        for column in range(cuda.blockIdx.x, pre * post, cuda.gridDim.x):
            start = _column_start(column, n, post)
            if tid < active:
                peak = x[start + tid * post]
                for j in range(tid + width, n, width):
                    peak = maximum(peak, x[start + j * post])
                scratch[tid] = peak
            _block_combine(scratch, active, MAX)
            peak = real(scratch[0])
            total = _float64(0.0)
            for j in range(tid, n, width):
                k = start + j * post
                out[k] = math.exp(x[k] - peak)
                total += out[k]
            cuda.syncthreads()
            if tid < active:
                scratch[tid] = total
            _block_combine(scratch, active, SUM)
            inverse = 1.0 / scratch[0]
            for j in range(tid, n, width):
                k = start + j * post
                out[k] = out[k] * inverse
            cuda.syncthreads()

    return columns, rows


@cuda.jit
def _softmax_backward_columns(y, grad_out, grad_in, pre, n, post):
    for column in range(cuda.grid(1), pre * post, cuda.gridsize(1)):
        start = _column_start(column, n, post)
        end = start + n * post
        dot = _float64(0.0)
        for k in range(start, end, post):
            dot += grad_out[k] * _float64(y[k])
        for k in range(start, end, post):
            grad_in[k] = y[k] * (grad_out[k] - dot)


@cuda.jit
def _softmax_backward_rows(y, grad_out, grad_in, pre, n, post):
    scratch = cuda.shared.array(_SCRATCH, _float64)
    tid, width, active = _block_threads(n)
    for column in range(cuda.blockIdx.x, pre * post, cuda.gridDim.x):
        start = _column_start(column, n, post)
        dot = _float64(0.0)
        for j in range(tid, n, width):
            k = start + j * post
            dot += grad_out[k] * _float64(y[k])
        if tid < active:
            scratch[tid] = dot
        _block_combine(scratch, active, SUM)
        dot = scratch[0]
        for j in range(tid, n, width):
            k = start + j * post
            grad_in[k] = y[k] * (grad_out[k] - dot)
        cuda.syncthreads()


def _launch_middle(kernels, arrays, pre, n, post, scalars, stream) -> None:
    """Launch the kernel of the pair ``kernels`` (thread per output, block per output) that
    suits (pre, n, post) on ``arrays``, pre, n, post and ``scalars``; nothing when there is
    nothing to reduce."""
    pre, n, post = int(pre), int(n), int(post)
    if n == 0 or pre * post == 0:
        return
    columns, rows = kernels
    if _by_rows(pre, n, post):
        blocks, threads = _rows_launch(pre, post)
        rows[blocks, threads, stream](*arrays, pre, n, post, *scalars)
    else:
        columns[grid(pre * post), block(), stream](*arrays, pre, n, post, *scalars)


def reduce_accumulate(
    x: DeviceArray, out: DeviceArray, pre: int, n: int, post: int, op: int, *, stream=0
) -> None:
    """out[p, q] = combine(out[p, q], reduction over j of x[p, j, q]) for ``op`` (a code of
    REDUCE_OPS)."""
    op = int(op)
    if not 0 <= op < len(REDUCE_OPS):
        raise ValueError("reduce_accumulate: unknown op code")
    kernels = _reduce_kernels(_wide(x.dtype), _wide(out.dtype))
    _launch_middle(kernels, (x, out), pre, n, post, (op,), stream)


@cuda.jit(device=True)
def _modulus(z):
    # as the CPU twin: sqrt(re^2 + im^2) where the squares are safe, hypot elsewhere
    re, im = _float64(z.real), _float64(z.imag)
    square = re * re + im * im
    if 1e-290 < square < 1e290:
        return math.sqrt(square)
    return math.hypot(re, im)


@cuda.jit(device=True)
def _squared_modulus(z):
    re, im = _float64(z.real), _float64(z.imag)
    square = re * re + im * im
    if square != square and (abs(re) == math.inf or abs(im) == math.inf):
        return math.inf  # |z| is inf beside a NaN part (annex G)
    return square


def modulus_reduce_accumulate(
    x: DeviceArray, out: DeviceArray, pre: int, n: int, post: int, op: int, *, stream=0
) -> None:
    """out[p, q] = combine(out[p, q], reduction over j of |x[p, j, q]|) of a complex tile x into
    a real out, for ``op`` (sumsq, sumabs or maxabs: a code of MODULUS_REDUCE_OPS)."""
    op = int(op)
    if op not in MODULUS_REDUCE_OPS.values():
        raise ValueError("modulus_reduce_accumulate: unknown op code")
    read = _squared_modulus if op == SUMSQ else _modulus
    kernels = _reduce_kernels(_float64, _wide(out.dtype), read)
    _launch_middle(kernels, (x, out), pre, n, post, (MAX if op == MAXABS else SUM,), stream)


def softmax(x: DeviceArray, out: DeviceArray, pre: int, n: int, post: int, *, stream=0) -> None:
    """out = exp(x - max) / sum(exp(x - max)) along the middle axis of (pre, n, post)."""
    kernels = _softmax_kernels(numba.from_dtype(x.dtype))
    _launch_middle(kernels, (x, out), pre, n, post, (), stream)


def softmax_backward(
    y: DeviceArray,
    grad_out: DeviceArray,
    grad_in: DeviceArray,
    pre: int,
    n: int,
    post: int,
    *,
    stream=0,
) -> None:
    """grad_in = y * (grad_out - sum_j(grad_out * y)) along the middle axis; y = softmax
    output."""
    kernels = (_softmax_backward_columns, _softmax_backward_rows)
    _launch_middle(kernels, (y, grad_out, grad_in), pre, n, post, (), stream)
