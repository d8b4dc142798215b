"""float32 exp, sin and cos: a short branch-free kernel for the ordinary arguments over the
whole tile, the accurate one only in the blocks that hold others.

``map_checked`` runs the short kernel in one loop over the tile while it takes the largest |x|
(as integer bits: NaN is larger than infinity); large outputs are stored with streaming stores
in that same loop (``streaming.store_streamed``), so the stores overlap the arithmetic. Only if
some |x| reached the kernel's limit, a second pass looks for the blocks of 512 that hold such
arguments and redoes them with the accurate function: ``exp_of`` over the whole block,
vectorised, selected where needed; libm's sinf/cosf one element at a time beyond
``LIMIT_F32``, as NumPy does (so a tile of huge arguments takes 4-5x the time of VML's
vectorised Payne-Hanek, 15-20 ns an element). exp's streamed loop also prefetches its input
(``streaming.prefetch_lines``) a block of 4096 ahead: the hardware prefetcher alone leaves the
loop waiting for x while it computes (2 threads over 16 tiles of 4M, thread CPU time against
-x's streamed loop, medians of 25-31 interleaved rounds, load 4-6: 1.33-1.36x before, 1.13-1.18x
with it, 0.85-0.88x the time); sin and cos, longer, took 1.04-1.08x the time with it, and keep
one loop. No per-element select handles special values in the common path:

- ``exp_f32_ordinary`` (|x| < 87, so the result and 2**n are normal floats): Cephes' expf
  polynomial after the reduction ``x = n ln 2 + r`` in fused multiply-adds, ``1 + r`` split
  exactly so that the last addition rounds once, and 2**n added to the result's exponent bits
  in one integer addition. Outside: ``exp_of`` (0, infinities, NaN, subnormal results).
- ``sin_f32_ordinary``/``cos_f32_ordinary`` (|x| < 2**17): ``x = q pi/2 + r + low`` with pi/2
  in three float32 parts (``x - q A`` exact, ``q B`` split exactly by a fused multiply-add, the
  rounding error of ``r`` recovered by Fast2Sum), then sin(r) = r + r**3 S(r**2) and cos(r) =
  1 - r**2 / 2 + r**4 C(r**2) (``fastmath_f32``'s coefficients) with ``low``, the low part of
  r**2 and the rounding of 1 - r**2 / 2 carried into the last addition; both are evaluated and
  the quadrant picks one and its sign by bit operations (cos(x) is sin in the next quadrant).
  NaN and inf give NaN by the arithmetic alone; sin(+-0) = +-0 by one select.

Accuracy against float64 (``bench/fastmath_ulps.py``: every float32 of the range): exp 0.794
ulp below 87 in magnitude, sin 0.828 and cos 0.831 ulp below 2**17 (NumPy's float32 ufuncs over
every 7th of the same floats: 2.45, 1.46, 1.48); the floats next to multiples of pi/2 are in
the tests. Speed, one thread: the table of ``mkl_vml``'s docstring.
"""

import numba
import numpy as np
from numba.core import types
from numba.extending import overload

from numtile.ops_cpu.fastmath import _f32_bits, _f32_from, exp_of, select
from numtile.ops_cpu.fastmath_f32 import LIMIT_F32, fma
from numtile.ops_cpu.fastmath_trig import map_reduced
from numtile.ops_cpu.helpers import inlined, wide_vectors
from numtile.ops_cpu.scalar_math import _cos, _cos_reduced, _exp, _sin, _sin_reduced
from numtile.ops_cpu.streaming import LINE, prefetch_lines, store_fence, store_streamed

_f = np.float32
_ROUNDER = _f(12582912.0)  # 1.5 * 2**23: fma(x, c, R) - R rounds x c to an integer n, and the
# low bits of fma(x, c, R) hold n
_ONE, _HALF = _f(1.0), _f(0.5)
_MAGNITUDE = np.int32(0x7FFFFFFF)  # the bits of |x|

# exp: n = rint(x log2 e), r = x - n ln 2 with ln 2 = high + low (n high exact); Cephes' expf
_LOG2_E = _f(1.4426950408889634)
_LN2_HIGH, _LN2_LOW = _f(0.693359375), _f(-2.12194440e-4)
_E0, _E1, _E2 = _f(1.9875691500e-4), _f(1.3981999507e-3), _f(8.3334519073e-3)
_E3, _E4, _E5 = _f(4.1665795894e-2), _f(1.6666665459e-1), _f(5.0000001201e-1)
EXP_LIMIT = np.int32(_f(87.0).view(np.int32))  # |x| below: n in [-126, 126], 2**n y normal

# sin, cos: pi/2 = A + B + C in float32, polynomials of fastmath_f32
_TWO_OVER_PI = _f(0.6366197466850281)
_A, _B, _C = _f(1.5707963705062866), _f(-4.371138828673793e-08), _f(-1.7150994166548195e-15)
_S1, _S2 = _f(-0.1666666716337204), _f(0.008333371952176094)
_S3, _S4 = _f(-0.00019849761156365275), _f(2.7976043384114746e-06)
_C1, _C2, _C3 = _f(0.04166664555668831), _f(-0.0013887292006984353), _f(2.4428834876744077e-05)
TRIG_LIMIT = np.int32(_f(LIMIT_F32).view(np.int32))


@inlined
def exp_f32_ordinary(x):
    """exp(x) for float32 |x| < 87 (0.79 ulp); other arguments give wrong results."""
    shifted = fma(x, _LOG2_E, _ROUNDER)
    n = shifted - _ROUNDER
    r = fma(n, -_LN2_LOW, fma(n, -_LN2_HIGH, x))
    p = fma(fma(fma(fma(fma(_E0, r, _E1), r, _E2), r, _E3), r, _E4), r, _E5)
    head = _ONE + r
    low = (_ONE - head) + r  # 1 + r = head + low exactly: |r| < 1
    y = head + fma(p, r * r, low)
    return _f32_from(_f32_bits(y) + (_f32_bits(shifted) << 23))  # y 2**n: n is in the low bits


@inlined
def _sin_or_cos_f32(x, quadrant_shift):
    """sin(x) (``quadrant_shift`` 0) or cos(x) (1: the sine a quadrant on) for float32
    |x| < 2**17."""
    shifted = fma(x, _TWO_OVER_PI, _ROUNDER)
    q = shifted - _ROUNDER
    high = fma(-q, _A, x)  # exact: a multiple of 2**-23 (or of x's ulp) below 1
    product = q * _B
    r = high - product
    # x - q pi/2 = r + low: Fast2Sum's error of high - product, q B's own, then q C
    low = fma(-q, _C, ((high - r) - product) - fma(q, _B, -product))
    z = r * r
    sine = r + fma(r * z, fma(z, fma(z, fma(z, _S4, _S3), _S2), _S1), low)
    z_low = fma(r, r, -z)  # r * r = z + z_low exactly
    half_z = _HALF * z
    w = _ONE - half_z
    poly = fma(z, fma(z, _C3, _C2), _C1)
    tail = ((_ONE - w) - half_z) + fma(z * z, poly, fma(-_HALF, z_low, -r * low))
    cosine = w + tail
    quadrant = _f32_bits(shifted) + quadrant_shift
    value = select((quadrant & 1) == 0, sine, cosine)
    return _f32_from(_f32_bits(value) ^ ((quadrant & 2) << 30))  # negated in quadrants 2, 3


# sin(-0) = -0: the additions above give +0
sin_f32_ordinary = inlined(lambda x: select(x == _f(0), x, _sin_or_cos_f32(x, np.int32(0))))
cos_f32_ordinary = inlined(lambda x: _sin_or_cos_f32(x, np.int32(1)))


_magnitude = inlined(lambda v: np.int32(_f32_bits(v) & _MAGNITUDE))  # |v|'s bits, NaN largest


@inlined
def redo_beyond(exact, limit, block, buffer):
    """buffer[j] = exact(block[j]) where |block[j]| reaches ``limit``, one element at a time
    (``exact`` calls libm: a few elements of a block)."""
    for j in range(block.size):
        if _magnitude(block[j]) >= limit:
            buffer[j] = exact(block[j])


@inlined
def redo_selected(exact, limit, block, buffer):
    """``redo_beyond`` for a branch-free ``exact``: computed for the whole block, which
    vectorises, and selected where |block[j]| reaches ``limit``."""
    for j in range(block.size):
        value = block[j]
        buffer[j] = select(_magnitude(value) >= limit, exact(value), buffer[j])


_FIX_BLOCK = 512  # elements a block of the fix-up pass


@inlined
def _largest_magnitude(ordinary, x, out, streamed):
    """out[i] = ordinary(x[i]), with streaming stores where ``streamed`` (``out`` must then
    start on a 64-byte boundary); returns the largest |x[i]|'s bits (int32: it vectorises)."""
    largest = np.int32(0)
    for i in range(out.size):
        value = x[i]
        if streamed:
            store_streamed(out, i, ordinary(value))
        else:
            out[i] = ordinary(value)
        magnitude = _magnitude(value)
        largest = select(magnitude > largest, magnitude, largest)
    return largest


@inlined
def _beyond(x, limit):
    """True where some |x[i]| reaches ``limit`` (NaN included)."""
    largest = np.int32(0)
    for i in range(x.size):
        magnitude = _magnitude(x[i])
        largest = select(magnitude > largest, magnitude, largest)
    return largest >= limit


PREFETCH_BLOCK = 4096  # float32 elements (16 KiB) a block of the prefetched loop
PREFETCH_AHEAD = 2048  # before a block, the lines of x from this far past its start on


@inlined
def _streamed_body(ordinary, x, out, prefetched):
    """``_largest_magnitude`` of the streamed part of the tile (``out`` 64-byte aligned); where
    ``prefetched``, in blocks of PREFETCH_BLOCK, each after a ``prefetch`` of the next block's
    x (a block's worth of lines from PREFETCH_AHEAD past its start)."""
    size = out.size
    block = PREFETCH_BLOCK if prefetched else max(size, 1)
    largest = np.int32(0)
    for first in range(0, size, block):
        stop = min(size, first + block)
        if prefetched:
            prefetch_lines(x, first + PREFETCH_AHEAD, stop + PREFETCH_AHEAD)
        part = _largest_magnitude(ordinary, x[first:stop], out[first:stop], True)
        largest = select(part > largest, part, largest)
    return largest


@inlined
def map_checked(ordinary, redo, exact, limit, x, out, streamed, prefetched):
    """out[i] = ordinary(x[i]) where |x[i]| < ``limit`` (bits of a float32) and exact(x[i])
    elsewhere, for float32 x and out: one loop over the tile (with streaming stores from its
    first 64-byte boundary where ``streamed``, as ``streaming.wanted`` wants it, and software
    prefetches of x where ``prefetched`` too: ``_streamed_body``), then, only if some |x|
    reached ``limit`` (NaN included), a pass over blocks of x in which ``redo``
    (``redo_beyond`` or ``redo_selected``) puts exact's values into the blocks that need them.
    Where x and out overlap and some |x| reaches ``limit``, exact computes every element (x is
    not there to be read again)."""
    size = out.size
    x_start, out_start = x.ctypes.data, out.ctypes.data
    overlap = x_start < out_start + out.nbytes and out_start < x_start + x.nbytes
    if overlap and _beyond(x, limit):
        limit = np.int32(0)  # every element exact, each read before it is written
    else:
        head = size
        if streamed:
            head = min(size, (LINE - out_start % LINE) % LINE // out.itemsize)
        largest = _largest_magnitude(ordinary, x[:head], out[:head], False)
        if head < size:
            body = _streamed_body(ordinary, x[head:], out[head:], prefetched)
            largest = select(body > largest, body, largest)
            store_fence()
        if largest < limit:
            return
    for first in range(0, size, _FIX_BLOCK):
        block = x[first : first + _FIX_BLOCK]
        if _beyond(block, limit):
            redo(exact, limit, block, out[first : first + _FIX_BLOCK])


def _tile(op: str, streamed: bool):
    """The float32 tile function out = op(x) of ``op`` (exp, sin or cos), its output streamed
    or not: a closure over constants, so that Numba prunes the other ops and caches it. Each is
    compiled on first use, once whichever kernel calls it."""

    @numba.njit(nogil=True, cache=True, error_model="numpy")
    def tile(x, out):
        wide_vectors()
        # exp prefetches its streamed input; sin and cos, longer, lost 8% by it (PREFETCH_*)
        if op == "exp":
            map_checked(
                exp_f32_ordinary, redo_selected, _exp, EXP_LIMIT, x, out, streamed, streamed
            )
        elif op == "sin":
            map_checked(sin_f32_ordinary, redo_beyond, _sin, TRIG_LIMIT, x, out, streamed, False)
        else:
            map_checked(cos_f32_ordinary, redo_beyond, _cos, TRIG_LIMIT, x, out, streamed, False)

    return tile


TILES = {(op, streamed): _tile(op, streamed) for op in ("exp", "sin", "cos") for streamed in (0, 1)}


def map_exp(x, out, streamed):
    """out = exp(x) over flat arrays (Numba-only; ``streamed`` a constant): float32 by its tile
    function (``map_checked``), other types by ``exp_of`` one element after another
    (``streamed`` ignored)."""
    raise NotImplementedError("map_exp is only callable from numba-compiled code")


def map_sin(x, out, streamed):
    """out = sin(x) over flat arrays (Numba-only): float32 by its tile function, other types by
    ``fastmath_trig.map_reduced`` (ordinary stores)."""
    raise NotImplementedError("map_sin is only callable from numba-compiled code")


def map_cos(x, out, streamed):
    """out = cos(x) over flat arrays (Numba-only), as ``map_sin``."""
    raise NotImplementedError("map_cos is only callable from numba-compiled code")


def _overload_map(function, op, other):
    """``function(x, out, streamed)``: the float32 tile function of ``op`` chosen by the
    constant ``streamed`` while typing, ``other(x, out)`` for other types."""

    @overload(function, inline="always", prefer_literal=True)
    def chosen(x, out, streamed):
        if not x.dtype == out.dtype == types.float32:
            return lambda x, out, streamed: other(x, out)
        if isinstance(streamed, types.BooleanLiteral):
            tile = TILES[(op, int(streamed.literal_value))]
            return lambda x, out, streamed: tile(x, out)
        ordinary, streaming = TILES[(op, 0)], TILES[(op, 1)]
        return lambda x, out, streamed: streaming(x, out) if streamed else ordinary(x, out)

    return chosen


@inlined
def _exp_loop(x, out):
    for i in range(out.size):
        out[i] = exp_of(x[i])


_overload_map(map_exp, "exp", _exp_loop)
_overload_map(map_sin, "sin", inlined(lambda x, out: map_reduced(_sin_reduced, _sin, x, out)))
_overload_map(map_cos, "cos", inlined(lambda x, out: map_reduced(_cos_reduced, _cos, x, out)))
