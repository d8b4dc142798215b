"""float32 x ** y with explicit AVX-512 code: 16 float32 lanes and 32-entry tables held in
registers, looked up by ``vpermi2ps`` (``vector_ir``), which LLVM's loop vectoriser does not
make from scalar code (``fastmath_pow``'s float64 kernel, reduced to such a fast path, took
2.2-2.4 ns an element).

Fast path, for positive finite bases (subnormals too) whose result is a normal float32
(|b ln a| < 86, which also rules out zero, infinite and NaN operands, and negative bases, whose
significand ``vgetmantps`` makes NaN); a block of 16 with any other lane stores the fast
lanes and redoes the others by ``fastmath_pow.pow_f32`` (C99's special values bit for bit,
negative bases, subnormal and overflowing results). Each element's bits depend on its a and b
alone, not on where the block boundaries fall.

- ln a = k ln 2 + ln c + ln(1 + r): a = 2**k m with m in [1, 2) (``vgetexpps``,
  ``vgetmantps``), 32 intervals of m by its top 5 fraction bits, each with a ``1/c`` of few
  bits such that ``r = m / c - 1`` is exact in one FMA (|r| < 2**-5; c = 1 and c = 2 at the
  ends, so that k ln 2 + ln c is 0 next to 1); ln 2 and ln c as float32 pairs whose high parts
  (16 fraction bits) make ``k ln 2 + ln c`` exact in one FMA;
- ln(1 + r) = s + low, s = r - r**2 / 2 rounded once, its error by a second FMA, r**3 Q(r)
  (degree 3, fitted here) in ``low``; added to k ln 2 + ln c by Fast2Sum (that sum exceeds
  |s| or is 0, asserted for every interval): ln a to about 2**-36 relative;
- z = b ln a as a pair (an FMA gives the product's error); n = z / ln 2 rounded to a multiple
  of 1/32, f = z - n ln 2 (Cody-Waite, the high part exact), e**f - 1 by a degree-3
  polynomial, 2**(j/32) (j = 32 n mod 32) from a table as a float32 pair, one rounding, then
  times 2**floor(n) (``vscalefps``: exact for normal results).

Within 0.55 ulp of long double's pow over random and hard pairs (bases within 3% of 1 with
|b ln a| near 86 are the worst; ``tests/ops_cpu/test_pow_avx512.py``). One thread, CPU ns an
element (``bench/vector_width.py --vml --ops power``, medians of 9-11 interleaved rounds, load
1.7-2.7, 2026-12-06): 0.65 / 0.67 / 0.64 at 16K / 64K / 4M elements, VML (HA) 1.20 / 0.92 /
0.99, NumPy's float32 power 0.74 / 0.78 / 0.84; then 0.91x that time (64K, 15 interleaved
rounds, 2 runs, load 3.9-4.0) with vgetmantps' NaN for negative bases in place of a range
check and vscalefps in place of the exponent's integer arithmetic. Streamed tiles prefetch
both inputs ``_AHEAD`` elements ahead: 2 threads over 16 tiles of 4M, wall time, medians of
15 interleaved rounds, 6 runs at load 1.7-2.5: 0.62-0.84x the time without.

Used by ``binary`` only where ``vector_ir.have_avx512()`` and the switch (``NUMTILE_AVX512``,
``set_enabled``) allow it; elsewhere (CPUs without AVX-512, Numba compiling for another CPU)
float32 power goes to VML (Intel CPUs, where MKL loads), else to ``pow_blocks``.
"""

from __future__ import annotations

import functools

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

from numtile import opcodes
from numtile.config import Config
from numtile.ops_cpu.fastmath_pow import pow_f32
from numtile.ops_cpu.helpers import inlined
from numtile.ops_cpu.per_op import dense_apart
from numtile.ops_cpu.streaming import aligned_start, prefetch, store_fence, store_line, wanted
from numtile.ops_cpu.vector_ir import LANES, Vectors, have_avx512

_INTERVAL_SHIFT = 18  # 32 intervals of the significand m in [1, 2): its top 5 fraction bits
_R_LIMIT = 2.0**-5
_Z_LIMIT = 86.0  # |b ln a| below (125 ln 2 = 86.6): the result and 2**(n >> 5) are normal
_AHEAD = 2048  # elements: streamed tiles prefetch a and b this far ahead of the block
_SHIFTER = 1.5 * 2.0**18  # fma(z, 1 / ln 2, it) rounds z / ln 2 to a multiple n of 1/32
_LD = np.longdouble
_LN2 = np.log(_LD(2))
_ONE_BITS = 0x3F800000


def _significands() -> np.ndarray:
    """Every float32 significand in [1, 2), as float64, 2**18 an interval."""
    bits = np.arange(1 << 23, dtype=np.int64) + _ONE_BITS
    return bits.astype(np.uint32).view(np.float32).astype(np.float64).reshape(32, -1)


def _inverse(m: np.ndarray, index: int) -> float:
    """1/c for interval ``index`` of m: 1 and 1/2 at the ends (ln c + k ln 2 is 0 next to 1),
    else 1 / centre with as many bits as keep ``m / c - 1`` exact in float32 for every m of
    the interval."""
    if index in (0, 31):
        return 1.0 / (1 + index // 31)
    centre = (m[0] + m[-1]) / 2.0
    for bits in range(16, 3, -1):
        inverse = np.round(2.0**bits / centre) / 2.0**bits
        r = m * inverse - 1.0  # exact in float64: m has 24 bits, inverse at most 17
        if np.all(r.astype(np.float32) == r) and np.abs(r).max() < _R_LIMIT:
            return float(inverse)
    raise AssertionError(f"no exact reduction for interval {index}")


def _fit(function, low: float, high: float, degree: int) -> np.ndarray:
    """float32 coefficients (constant first) of a least-squares fit of ``function`` on
    Chebyshev nodes of [low, high]."""
    nodes = np.cos(np.pi * (np.arange(400) + 0.5) / 400)
    x = (low + high) / 2 + (high - low) / 2 * nodes
    return np.polynomial.polynomial.polyfit(x, function(x), degree).astype(np.float32)


def _split(value, fraction_bits: int):
    """(high, low) float32: high a multiple of 2**-fraction_bits, low the rest rounded."""
    high = np.float32(np.round(value * _LD(2.0**fraction_bits)) / _LD(2.0**fraction_bits))
    return high, np.float32(value - _LD(high))


@functools.cache
def _tables():
    """1/c, ln c (high, low), 2**(j/32) (high, low) as lists of 32, and the polynomials. Built
    when a kernel is first compiled (about a second; never where the compiled kernel comes from
    Numba's cache), not at import."""
    significands = _significands()
    inverse = [_inverse(significands[j], j) for j in range(32)]
    r = [significands[j] * inverse[j] - 1.0 for j in range(32)]
    log_c = [_split(-np.log(_LD(value)), 16) for value in inverse]
    exp2 = [np.exp2(_LD(j) / 32) for j in range(32)]
    exp2 = [(np.float32(v), np.float32(v - _LD(np.float32(v)))) for v in exp2]
    # Fast2Sum in ln a = (k ln 2 + ln c) + ln(1 + r) needs |k ln 2 + ln c| above |ln(1 + r)|
    # or 0 (k = 0 and c = 1, k = -1 and c = 2); k = 0 and k = -1 are the closest calls
    for j in range(32):
        for k in (0, -1):
            head = abs(k * float(_LN2_HIGH) + float(log_c[j][0]))
            assert head == 0 or head > np.abs(np.log1p(r[j])).max(), (j, k)
    low, high = min(x.min() for x in r), max(x.max() for x in r)
    # ln(1 + r) = r - r**2/2 + r**3 Q(r); (e**f - 1) / f for |f| <= ln 2 / 64 and a little
    q = _fit(lambda x: (np.log1p(x) - x + x * x / 2) / x**3, low, high, 3)
    e = _fit(lambda f: np.expm1(f) / f, -0.0109, 0.0109, 2)
    tables = [inverse] + [[pair[i] for pair in table] for table in (log_c, exp2) for i in (0, 1)]
    return tables, q, e


_LN2_HIGH, _LN2_LOW = _split(_LN2, 16)  # k ln 2 + ln c's high part exact: k has 8 bits
_LN2_SHORT, _LN2_REST = _split(_LN2, 12)  # n ln 2 exact for n a multiple of 1/32 below 128


def _halves(v, values):
    """A 32-entry table as its two register halves."""
    return v.table(values[:LANES]), v.table(values[LANES:])


def _pow16(v: Vectors, a, b):
    """(a ** b for 16 lanes, the mask of lanes on the fast path)."""
    (inverses, log_high, log_low, exp_high, exp_low), q_poly, e_poly = _tables()
    q0, q1, q2, q3 = (v.floats(c) for c in q_poly)
    e0, e1, e2 = (v.floats(c) for c in e_poly)
    m = v.mantissa(a)
    k = v.exponent(a)
    index = v.shift_right(v.bits(m), _INTERVAL_SHIFT)
    inverse = v.lookup(*_halves(v, inverses), index)
    # k ln 2 + ln c = head + low: the high parts' sum exact
    k_log_c = v.fma(k, v.floats(_LN2_HIGH), v.lookup(*_halves(v, log_high), index))
    k_log_c_low = v.fma(k, v.floats(_LN2_LOW), v.lookup(*_halves(v, log_low), index))
    r = v.fma(m, inverse, v.floats(-1.0))  # exact
    # ln(1 + r) = s + low: s = r - r**2 / 2 rounded once, e its rounding error (r - s exact:
    # Sterbenz) to 2**-24 of itself
    minus_half = v.mul(r, v.floats(-0.5))
    s = v.fma(minus_half, r, r)
    e = v.fma(minus_half, r, v.sub(r, s))
    q = v.fma(v.fma(v.fma(q3, r, q2), r, q1), r, q0)
    low = v.fma(v.mul(r, v.mul(r, r)), q, e)
    # ln a = head + tail (Fast2Sum: |k ln 2 + ln c| > |s| or k ln 2 + ln c = 0)
    head = v.add(k_log_c, s)
    tail = v.add(v.sub(s, v.sub(head, k_log_c)), v.add(low, k_log_c_low))
    # z = b ln a = z + z_low; n = rint(z 32 / ln 2), f = z - n ln 2 / 32 (the high part exact)
    z = v.mul(b, head)
    z_low = v.fma(b, tail, v.fma(b, head, v.negate(z)))
    shifted = v.fma(v.add(z, z_low), v.floats(1 / _LN2), v.floats(_SHIFTER))
    n = v.sub(shifted, v.floats(_SHIFTER))  # a multiple of 1/32
    f = v.fma(n, v.floats(-_LN2_SHORT), z)
    f = v.fma(n, v.floats(-_LN2_REST), v.add(f, z_low))
    steps = v.bits(shifted)  # 32 n in the low bits: its low 5 index 2**(j/32)
    step = v.lookup(*_halves(v, exp_high), steps)
    step_low = v.lookup(*_halves(v, exp_low), steps)
    poly = v.mul(f, v.fma(v.fma(e2, f, e1), f, e0))
    value = v.scale(v.add(step, v.fma(step, poly, step_low)), n)  # times 2**floor(n)
    # fast lanes: |z| < _Z_LIMIT, false for NaN: a negative (m NaN), zero or infinite (k
    # infinite), b infinite or NaN (0 * inf for a = 1) all make z infinite or NaN
    magnitude = v.from_bits(v.int_and(v.bits(z), v.ints(0x7FFFFFFF)))
    return value, v.below(magnitude, v.floats(_Z_LIMIT))


def _pow_block(streamed: bool):
    """``pow16(a, b, out, i, spill)``: out[i:i+16] = a[i:i+16] ** b[i:i+16] where every lane is
    on the fast path (a non-temporal store where ``streamed``: out[i] 64-byte aligned), else
    the 16 fast-path values to ``spill`` (out untouched); returns the lanes that are not on
    the fast path, as the bits of an int32."""

    @intrinsic
    def pow16(typingctx, a, b, out, i, spill):
        if not all(isinstance(x, types.Array) for x in (a, b, out, spill)):
            return None

        def codegen(context, builder, signature, args):
            v = Vectors(builder)
            a, b, out, spill = (
                context.make_array(signature.args[k])(context, builder, args[k]).data
                for k in (0, 1, 2, 4)
            )
            a, b, out = (builder.gep(data, [args[3]]) for data in (a, b, out))
            value, fast = _pow16(v, v.load(a), v.load(b))
            slow = builder.xor(v.mask_bits(fast), ir.Constant(ir.IntType(32), 0xFFFF))
            every = builder.icmp_unsigned("==", slow, slow.type(0))
            with builder.if_else(every, likely=True) as (fast_path, spilled):
                with fast_path:
                    v.store(value, out, streamed)
                with spilled:
                    v.store(value, spill, False)
            return slow

        return types.int32(a, b, out, i, spill), codegen

    return pow16


_POW16, _POW16_STREAMED = _pow_block(False), _pow_block(True)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _redo(a, b, out, i, spill, slow, streamed):
    """The lanes of ``slow`` by ``fastmath_pow.pow_f32`` into ``spill``, which holds the other
    lanes' fast-path values, then the 16 to out[i:i+16] (one streaming store where
    ``streamed``). A function of its own, called only off the fast path: inlined, its array
    arguments would cost reference counting in every block."""
    for j in range(LANES):
        if (slow >> j) & 1:
            spill[j] = pow_f32(a[i + j], b[i + j])
    if streamed:
        store_line(out, i * out.itemsize, spill, 0)
    else:
        out[i : i + LANES] = spill


@inlined
def _edge(a, b, out, start, stop, spill):
    """out[start:stop] (fewer than 16) = a ** b through padded copies: the same bits as in a
    whole block."""
    count = stop - start
    if count > 0:
        a16, b16 = np.ones(LANES, np.float32), np.ones(LANES, np.float32)
        a16[:count], b16[:count] = a[start:stop], b[start:stop]
        slow = _POW16(a16, b16, a16, 0, spill)
        if slow != 0:
            _redo(a16, b16, a16, 0, spill, slow, False)
        out[start:stop] = a16[:count]


def _tile(streamed: bool):
    """The tile function out = a ** b over flat float32 arrays, streamed or not (a streamed
    tile also prefetches its inputs: the hardware prefetcher alone leaves the loop waiting,
    as in ``fastmath_blocks``' exp). Each element's bits depend on its a and b alone (not on
    its place in a block)."""
    pow16 = _POW16_STREAMED if streamed else _POW16

    @numba.njit(nogil=True, cache=True, error_model="numpy")
    def tile(a, b, out):
        size = out.size
        head = 0
        if streamed:
            head = aligned_start(out)
        spill = np.empty(LANES, np.float32)
        _edge(a, b, out, 0, head, spill)
        stop = head + (size - head) // LANES * LANES
        for i in range(head, stop, LANES):
            if streamed:
                prefetch(a, i + _AHEAD)
                prefetch(b, i + _AHEAD)
            slow = pow16(a, b, out, i, spill)
            if slow != 0:
                _redo(a, b, out, i, spill, slow, streamed)
        _edge(a, b, out, stop, size, spill)
        if streamed:
            store_fence()

    return tile


TILES = {streamed: _tile(streamed) for streamed in (False, True)}

_switch: dict[str, bool] = {}


def enabled() -> bool:
    """True where float32 power may take this kernel: the CPU has AVX-512 and the switch is on
    (``NUMTILE_AVX512``, default on; ``set_enabled``)."""
    if "on" not in _switch:
        _switch["on"] = Config.defaults().avx512
    return _switch["on"] and have_avx512()


def set_enabled(on: bool) -> bool:
    """Turns this kernel on or off for this process (off: VML or the scalar kernel); returns
    the previous setting."""
    previous = _switch["on"] if "on" in _switch else Config.defaults().avx512
    _switch["on"] = bool(on)
    return previous


def power(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """out = a ** b for flat C-contiguous float32 arrays of one size (AVX-512 only)."""
    TILES[wanted(out)](a, b, out)


def binary(a, a_strides, b, b_strides, out, shape, code: int) -> bool:
    """out = a ** b through ``power`` where ``code`` is POWER, all three are float32, dense in
    C order (no broadcasting) and out overlaps neither input, or is one of them exactly; False
    (nothing done) otherwise. The signature of ``mkl_vml.binary``."""
    if code != opcodes.POWER or not enabled():
        return False
    if not (a.dtype == b.dtype == out.dtype == np.float32):
        return False
    if not dense_apart(a, a_strides, b, b_strides, out, shape):
        return False
    power(a.reshape(-1), b.reshape(-1), out.reshape(-1))
    return True


__all__ = ["TILES", "binary", "enabled", "power", "set_enabled"]
