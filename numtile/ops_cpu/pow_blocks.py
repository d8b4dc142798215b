"""float32 and float64 x ** y over dense tiles, a block at a time: ``fastmath_pow``'s functions
for positive bases in one loop that LLVM vectorises on any x86 CPU (AVX2: 8 float32 lanes
converted to two vectors of 4 float64; no tables), the full ``pow_f32``/``pow_f64`` only in
the blocks that need them.

Each block of ``BLOCK`` elements is computed by ``fastmath_pow``'s ordinary path without its
selects for signs, zeros, infinities, NaN and +-1 (2**(b log2 a) in float64 for float32;
exp(b ln a) with ln a and the product as double-doubles for float64), and the same loop folds
the bits of a and |b| into one minimum that says whether every base was a positive normal
finite float and every exponent finite. Where not, the whole block is computed again by
``pow_f32``/``pow_f64`` (C99's special values, negative bases) in a function of its own:
inlined into the same loop nest, it left the fast loop at 19 ns an element instead of 3.5
(float32, AMD EPYC Zen 3). With the check in a loop of its own before the fast one (three
reductions) the kernel took 6.2-6.4 ns an element against 3.8-4.4 with one reduction in the
fast loop, which LLVM then interleaves two vectors deep (one thread, interleaved rounds, load
5). On the fast path both compute the same operations, so the results are the scalar kernel's
bit for bit (within its accuracy: 0.5 ulp plus 0.002 for float32, 0.52 ulp for float64). Out
may be a or b (``power`` computes apart and copies: the fast loop writes out before a block
may be read again), not a part of either.

Outputs that ``streaming.wanted`` names are stored with streaming stores from inside the
vectorised loop, from their first 64-byte boundary on (blocks of 2 or 4 KiB keep every block
start on a line).

Used by ``elementwise``'s binary kernel for dense float32/float64 power where neither
``pow_avx512`` (CPUs with AVX-512) nor oneMKL's VML (``mkl_vml``: Intel CPUs, and float64 on
others) takes it: float32 power on AMD CPUs, and both where MKL is missing or ``NUMTILE_VML=0``.
One thread, CPU ns an element, 64K elements, AMD EPYC Zen 3 (AVX2), medians of 11 interleaved
rounds, load 4.8 (``bench/vector_width.py --vml --ops power``): float32 4.25 against VML's 5.93,
the broadcast kernel's 7.43 (``fastmath.broadcast_gathered``) and NumPy's 9.10; float64 12.88
against 10.99, 17.09 and 19.02.
"""

from __future__ import annotations

import numba
import numpy as np

from numtile import opcodes
from numtile.ops_cpu.fastmath import _f32_bits, _f64_bits, pow_of
from numtile.ops_cpu.fastmath_pow import (
    _exp2_f32,
    _exp_product_f64,
    _ln_scaled_f64,
    _log2_normal_f32,
)
from numtile.ops_cpu.helpers import as_type_of, inlined
from numtile.ops_cpu.per_op import dense_apart
from numtile.ops_cpu.streaming import aligned_start, store_fence, store_streamed, wanted

BLOCK = 512  # elements a block: 2 KiB of float32, 4 KiB of float64 (both whole lines)


@inlined
def _positive_f32(a, b):
    """a ** b for a positive normal finite float32 a and a finite b (``pow_f32``'s value)."""
    return _exp2_f32(np.float64(b) * _log2_normal_f32(a))


@inlined
def _positive_f64(a, b):
    """a ** b for a positive normal finite float64 a and a finite b (``pow_f64``'s value)."""
    ln_high, ln_low = _ln_scaled_f64(a, 0)
    return _exp_product_f64(b, ln_high, ln_low)


@inlined
def _block(positive, bits, tiny, infinity, magnitude, a, b, out, streamed):
    """out = positive(a, b) elementwise (streaming stores where ``streamed``: out 64-byte
    aligned); returns True where that is a ** b throughout: every a a positive normal finite
    float and every b finite. In bits: a's from the smallest normal's (``tiny``; a negative
    base's are negative) and the larger of a's and |b|'s (``magnitude``: every bit but the
    sign; a NaN's are above infinity's) below ``infinity``'s, folded into one minimum that
    reaches ``tiny`` (no overflow: the larger is 0 or more). One reduction in the loop: LLVM
    then interleaves two vectors of lanes, which the long dependency chain of each needs."""
    ceiling = infinity - as_type_of(1, tiny) + tiny
    smallest = ceiling
    for i in range(out.size):
        x, y = a[i], b[i]
        if streamed:
            store_streamed(out, i, positive(x, y))
        else:
            out[i] = positive(x, y)
        a_bits = bits(x)
        larger = max(a_bits, as_type_of(bits(y) & magnitude, tiny))
        smallest = min(smallest, min(a_bits, as_type_of(ceiling - larger, tiny)))
    return smallest >= tiny


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _exact(a, b, out):
    """out = a ** b by ``pow_f32``/``pow_f64`` (C99's special values). Not inlined into the
    tile function: a copy in its loop nest slowed the fast loop 5x."""
    for i in range(out.size):
        out[i] = pow_of(a[i], b[i])


# the fast function and the bits of the smallest normal and of infinity, by precision
_PRECISIONS = {
    "float32": (_positive_f32, _f32_bits, np.int32(0x00800000), np.int32(0x7F800000)),
    "float64": (_positive_f64, _f64_bits, np.int64(1 << 52), np.int64(0x7FF << 52)),
}


def _tile(precision: str, streamed: bool):
    """The tile function out = a ** b over flat arrays of ``precision``, its output streamed
    from the first 64-byte boundary on (the elements before it by ``_exact``) or not."""
    positive, bits, tiny, infinity = _PRECISIONS[precision]
    magnitude = type(tiny)(np.iinfo(type(tiny)).max)  # every bit but the sign

    @numba.njit(nogil=True, cache=True, error_model="numpy")
    def tile(a, b, out):
        head = aligned_start(out) if streamed else 0  # the elements before a 64-byte line
        _exact(a[:head], b[:head], out[:head])
        for first in range(head, out.size, BLOCK):
            stop = min(out.size, first + BLOCK)
            x, y, block = a[first:stop], b[first:stop], out[first:stop]
            if not _block(positive, bits, tiny, infinity, magnitude, x, y, block, streamed):
                _exact(x, y, block)
        if streamed:
            store_fence()

    return tile


TILES = {
    (precision, streamed): _tile(precision, streamed)
    for precision in _PRECISIONS
    for streamed in (False, True)
}


def power(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """out = a ** b for flat C-contiguous arrays of one float dtype (float32 or float64) and
    size; out may be a or b (then computed apart and copied: a block's fast loop writes out
    before the block's operands may be read again), not a part of either.

    >>> a, b = np.array([2.0, -8.0, 0.0]), np.array([0.5, 1 / 3, -1.0])
    >>> out = np.empty(3)
    >>> power(a, b, out); out
    array([1.41421356,        nan,        inf])
    """
    if out.ctypes.data in (a.ctypes.data, b.ctypes.data):
        result = np.empty_like(out)
        power(a, b, result)
        out[...] = result
        return
    TILES[(out.dtype.name, wanted(out))](a, b, out)


def binary(a, a_strides, b, b_strides, out, shape, code: int) -> bool:
    """out = a ** b through ``power`` where ``code`` is POWER, all three are float32 or all
    float64, dense in C order (no broadcasting) and out overlaps neither input or is one of
    them exactly; False (nothing done) otherwise. The signature of ``mkl_vml.binary``."""
    if code != opcodes.POWER or out.dtype.name not in _PRECISIONS:
        return False
    if not a.dtype == b.dtype == out.dtype:
        return False
    if not dense_apart(a, a_strides, b, b_strides, out, shape):
        return False
    power(a.reshape(-1), b.reshape(-1), out.reshape(-1))
    return True


__all__ = ["BLOCK", "TILES", "binary", "power"]
