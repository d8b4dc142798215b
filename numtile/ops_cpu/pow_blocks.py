"""float32 and float64 x ** y a block at a time: ``fastmath_pow``'s functions for |a| in one
loop that LLVM vectorises on any x86 CPU (AVX2: 8 float32 lanes converted to two vectors of 4
float64; no tables), the signs of negative bases and the full ``pow_f32``/``pow_f64`` only in
the blocks that need them. Dense tiles (``power``) and, through ``gathered``, the broadcast
kernel's gathered blocks (``fastmath.broadcast_gathered``: scalars, broadcasts, strides).

Each block of ``BLOCK`` elements is computed by ``fastmath_pow``'s ordinary path on |a|
without its selects for signs, zeros, infinities, NaN and +-1 (2**(b log2 |a|) in float64 for
float32; exp(b ln |a|) with ln |a| and the product as double-doubles for float64), and the
same loop folds the bits of a and |b| into one minimum that says whether every base was a
positive normal finite float and every exponent finite. Where not, a function of its own
(``FINISH``) looks at the block again: every base normal finite (of either sign) and every
exponent finite, it puts in the signs (``fastmath_pow``'s selects: -|a|**b for an odd integer
b, NaN for a fraction) in one more loop over the block; else the whole block is computed again
by ``pow_f32``/``pow_f64`` (C99's special values). Inlined into the same loop nest, the full
pow left the fast loop at 19 ns an element instead of 3.5 (float32, AMD EPYC Zen 3); the
signs' selects in the fast loop cost float64 1.8x its time. With the check in a loop of its
own before the fast one (three reductions) the kernel took 6.2-6.4 ns an element against
3.8-4.4 with one reduction in the fast loop. On the fast path both compute the same
operations, so the results are the scalar kernel's bit for bit (within its accuracy: 0.5 ulp
plus 0.002 for float32, 0.52 ulp for float64). Out may be a or b (``power`` computes apart and
copies: the fast loop writes out before a block may be read again), not a part of either.

Outputs that ``streaming.wanted`` names are stored with streaming stores from inside the
vectorised loop, from their first 64-byte boundary on (blocks of 2 or 4 KiB keep every block
start on a line).

Used by ``elementwise``'s binary kernel for dense float32/float64 power where neither
``pow_avx512`` (CPUs with AVX-512) nor oneMKL's VML (``mkl_vml``: Intel CPUs) takes it: both
precisions on AMD CPUs, and where MKL is missing or ``NUMTILE_VML=0``. One thread, CPU ns an
element, 64K elements, AMD EPYC Zen 3 (AVX2, no AVX-512), medians of 11 interleaved rounds,
load 6.7 (``bench/vector_width.py --vml --ops power``): float32 3.34 against VML's 6.29, the
broadcast kernel's 3.26 and NumPy's 11.39; float64 7.54 against 11.50, 8.32 and 19.90. Before
``fastmath.opaque`` kept the polynomials' constants out of the loop (each reloaded by two
instructions at every use) and the signs left the fast loop: float32 4.25 against VML's 5.93,
float64 12.88 against 10.99 (load 4.8); the broadcast kernel 7.43 and 17.09.
"""

from __future__ import annotations

import numba
import numpy as np
from numba.extending import overload

from numtile import opcodes
from numtile.ops_cpu.fastmath import _f32_bits, _f64_bits, pow_of
from numtile.ops_cpu.fastmath_pow import (
    _exp2_f32,
    _exp_product_f64,
    _ln_scaled_f64,
    _log2_normal_f32,
    _signed,
    ordinary_f32,
    ordinary_f64,
)
from numtile.ops_cpu.helpers import as_type_of, inlined
from numtile.ops_cpu.per_op import dense_apart
from numtile.ops_cpu.streaming import aligned_start, store_fence, store_streamed, wanted

BLOCK = 512  # elements a block: 2 KiB of float32, 4 KiB of float64 (both whole lines)


@inlined
def _positive_f32(a, b):
    """|a| ** b for a normal finite float32 a and a finite b (``pow_f32``'s value where a > 0)."""
    return _exp2_f32(np.float64(b) * _log2_normal_f32(abs(a)))


@inlined
def _positive_f64(a, b):
    """|a| ** b for a normal finite float64 a and a finite b (``pow_f64``'s value where a > 0)."""
    ln_high, ln_low = _ln_scaled_f64(abs(a), 0)
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


# the fast function, the bits of the smallest normal and of infinity, and the test of one
# element for ``fastmath_pow``'s ordinary path, by precision
_PRECISIONS = {
    "float32": (_positive_f32, _f32_bits, np.int32(0x00800000), np.int32(0x7F800000)),
    "float64": (_positive_f64, _f64_bits, np.int64(1 << 52), np.int64(0x7FF << 52)),
}
_ORDINARY = {"float32": ordinary_f32, "float64": ordinary_f64}


def _finisher(precision: str):
    """``finish(a, b, out)`` for a block of ``precision`` that ``_block`` found not positive
    throughout, out holding |a| ** b from its fast loop: where every element is ordinary
    (normal finite bases of either sign, finite exponents) the signs of negative bases are put
    in by ``fastmath_pow``'s selects, in a loop over the block, else the whole block is done
    again by ``_exact``. ``pow_f32``/``pow_f64``'s bits either way; the fast loop stays as it
    is for signed bases (with the selects in it, float64 took 1.8x its time)."""
    bits, ordinary = _PRECISIONS[precision][1], _ORDINARY[precision]

    @numba.njit(nogil=True, cache=True, error_model="numpy")
    def finish(a, b, out):
        special = False
        for i in range(out.size):
            special |= not ordinary(a[i], b[i])
        if special:
            _exact(a, b, out)
            return
        for i in range(out.size):
            out[i] = _signed(bits(a[i]) < 0, a[i], b[i], out[i])

    return finish


FINISH = {precision: _finisher(precision) for precision in _PRECISIONS}


def _whole_block(precision: str, streamed: bool):
    """``block(a, b, out)``, inlined: out = a ** b over one block of ``precision``, by the
    fast loop (streamed or not), then ``FINISH`` where the block is not positive throughout."""
    positive, bits, tiny, infinity = _PRECISIONS[precision]
    magnitude = type(tiny)(np.iinfo(type(tiny)).max)  # every bit but the sign
    finish = FINISH[precision]

    @inlined
    def block(a, b, out):
        if not _block(positive, bits, tiny, infinity, magnitude, a, b, out, streamed):
            finish(a, b, out)

    return block


def _tile(precision: str, streamed: bool):
    """The tile function out = a ** b over flat arrays of ``precision``, its output streamed
    from the first 64-byte boundary on (the elements before it by ``_exact``) or not."""
    block = _whole_block(precision, streamed)

    @numba.njit(nogil=True, cache=True, error_model="numpy")
    def tile(a, b, out):
        head = aligned_start(out) if streamed else 0  # the elements before a 64-byte line
        _exact(a[:head], b[:head], out[:head])
        for first in range(head, out.size, BLOCK):
            stop = min(out.size, first + BLOCK)
            block(a[first:stop], b[first:stop], out[first:stop])
        if streamed:
            store_fence()

    return tile


TILES = {
    (precision, streamed): _tile(precision, streamed)
    for precision in _PRECISIONS
    for streamed in (False, True)
}


def gathered_block(a, b, out):
    """out = a ** b over one block of contiguous arrays (Numba-only; ``fastmath``'s
    ``broadcast_gathered`` calls it on the operands it gathered): for three arrays of one
    float dtype, the dense tile's block (the fast loop, then ``FINISH`` where a base is not
    positive normal finite or an exponent not finite: calls, not copies in the loop nest);
    ``pow_of`` element by element for other dtypes."""
    raise NotImplementedError("gathered_block is only callable from numba-compiled code")


@overload(gathered_block, inline="always")
def _gathered_block(a, b, out):
    name = str(out.dtype)
    if a.dtype == b.dtype == out.dtype and name in _PRECISIONS:
        whole = _whole_block(name, False)

        def block(a, b, out):
            whole(a, b, out)

        return block

    def each(a, b, out):
        for i in range(out.size):
            out[i] = pow_of(a[i], b[i])

    return each


gathered = inlined(lambda a, b, out: gathered_block(a, b, out))


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


__all__ = ["BLOCK", "TILES", "binary", "gathered", "gathered_block", "power"]
