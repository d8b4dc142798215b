"""Vectorisable exp and log of float32 and float64, and pow, for the elementwise kernels.

Without SVML, Numba calls libm's ``expf``/``exp``/``logf``/``log`` once per element, which
blocks SIMD. These versions are Cephes' algorithms (argument reduction, then a polynomial or
rational approximation, about 1 ulp; float32 exp with fused multiply-adds in the reduction
and in Horner's rule, 0.98 ulp measured, 0.7x the time without) written as pure arithmetic on
IEEE bit patterns with selects for the special cases, so a loop over them vectorises.
Special values are those of C99 (and of the array API standard): exp(-inf) = 0,
exp(inf) = inf, exp(NaN) = NaN, log(0) = -inf, log(x < 0) = NaN, log(inf) = inf, subnormal
inputs and results included.

``exp_of(v)`` and ``log_of(v)`` fall back to NumPy's for other types (integers).
``pow_of(a, b)`` of two float32 is ``fastmath_pow.pow_f32``, 2**(b log2|a|) in float64 with
selects for C99's special values; of two float64, ``fastmath_pow.pow_f64``, exp(b ln|a|) with
ln|a| and the product in double-double (``b ln|a|`` needs about 66 bits).
"""

import platform

import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic, overload

from numtile.ops_cpu.helpers import inlined, inner_axis, is_c_contiguous, row_offsets, unsigned


def _bitcast(source, target):
    """A Numba intrinsic reinterpreting the bits of a scalar as ``target``; ``source`` is a
    float type, or the integer type of ``target``'s width (any integer is truncated to it)."""

    @intrinsic
    def cast(typingctx, value):
        if isinstance(source, types.Integer):
            if not isinstance(value, types.Integer):
                return None
        elif value != source:
            return None

        def codegen(context, builder, signature, args):
            argument = args[0]
            if isinstance(source, types.Integer) and value.bitwidth != source.bitwidth:
                argument = builder.trunc(argument, ir.IntType(source.bitwidth))
            return builder.bitcast(argument, context.get_value_type(target))

        return target(value), codegen

    return cast


@intrinsic
def select(typingctx, condition, if_true, if_false):
    """``if_true if condition else if_false`` as one LLVM select: no branch, so loops around
    it vectorise (and Numba's SSA pass sees no control flow in inlined code)."""
    if not isinstance(condition, types.Boolean) or if_true != if_false:
        return None

    def codegen(context, builder, signature, args):
        return builder.select(*args)

    return if_true(condition, if_true, if_false), codegen


_X86 = platform.machine().lower() in ("x86_64", "amd64")


@intrinsic
def opaque(typingctx, value):
    """``value`` through an empty inline-assembly statement: a constant LLVM can no longer see.
    Numba compiles for the large code model, where each constant of a vectorised loop that
    does not stay in a register is reloaded by two instructions (its address, then a
    broadcast) at every use; an opaque one is hoisted before the loop (the statement has no
    effect and reads no memory) and spilled, then read as a memory operand of its user. Only
    on x86 (its register constraints); elsewhere the value itself."""
    if not isinstance(value, (types.Float, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        if not _X86:
            return args[0]
        kind = args[0].type
        register = "=x,0" if isinstance(kind, (ir.FloatType, ir.DoubleType)) else "=r,0"
        statement = ir.InlineAsm(ir.FunctionType(kind, [kind]), "", register)
        return builder.call(statement, [args[0]], attrs=("readnone", "nounwind"))

    return value(value), codegen


_f32_bits = _bitcast(types.float32, types.int32)
_f32_from = _bitcast(types.int32, types.float32)
_f64_bits = _bitcast(types.float64, types.int64)
_f64_from = _bitcast(types.int64, types.float64)


def exp_of(v):
    """exp(v), vectorisable for float32 and float64 (Numba-only)."""
    raise NotImplementedError("exp_of is only callable from numba-compiled code")


def log_of(v):
    """log(v), vectorisable for float32 and float64 (Numba-only)."""
    raise NotImplementedError("log_of is only callable from numba-compiled code")


_LOG2_E = 1.4426950408889634
# float32: Cephes expf (ln 2 split so that n * high is exact)
_F32_LN2_HIGH, _F32_LN2_LOW = 0.693359375, -2.12194440e-4
_EXPF = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1)
_EXPF_LAST = 5.0000001201e-1
# float64: Cephes exp, exp(r) = 1 + 2 r P(r^2) / (Q(r^2) - r P(r^2))
_F64_LN2_HIGH, _F64_LN2_LOW = 6.93145751953125e-1, 1.42860682030941723212e-6
_EXP_P = (1.26177193074810590878e-4, 3.02994407707441961300e-2, 9.99999999999999999910e-1)
_EXP_Q = (3.00198505138664455042e-6, 2.52448340349684104192e-3, 2.27265548208155028766e-1)
_EXP_Q_LAST = 2.00000000000000000009e0


@overload(exp_of, inline="always")
def _exp_of(v):
    if v == types.float32:
        # imported here: fastmath_f32 builds on this module's select and bit casts
        from numtile.ops_cpu.fastmath_f32 import fma

        f = np.float32
        lowest, highest = f(-104.0), f(89.0)  # exp is 0 below, inf above
        log2_e, high, low = f(_LOG2_E), f(_F32_LN2_HIGH), f(_F32_LN2_LOW)
        c0, c1, c2, c3, c4 = (f(c) for c in _EXPF)
        c5, zero, one = f(_EXPF_LAST), f(0), f(1)
        rounder, rounder_bits = f(12582912.0), np.int32(0x4B400000)  # 1.5 * 2**23 and its bits

        def expf(v):
            low_clamped = select(v > lowest, v, lowest)  # NaN becomes lowest, NaN at the end
            x = select(low_clamped < highest, low_clamped, highest)
            shifted = fma(x, log2_e, rounder)  # n = rint(x log2 e) in the low mantissa bits
            n = shifted - rounder
            r = fma(n, -low, fma(n, -high, x))
            p = fma(fma(fma(fma(fma(c0, r, c1), r, c2), r, c3), r, c4), r, c5)
            y = p * r * r + r + one
            k = _f32_bits(shifted) - rounder_bits
            h = k >> 1  # 2**k as two factors: no overflow of the exponent field, subnormals
            value = y * _f32_from((h + 127) << 23) * _f32_from((k - h + 127) << 23)
            return select(v < lowest, zero, select(v == v, value, v))

        return expf
    if v == types.float64:
        lowest, highest = -746.0, 710.0
        p0, p1, p2 = _EXP_P
        q0, q1, q2 = _EXP_Q
        q3 = _EXP_Q_LAST

        def exp(v):
            low_clamped = select(v > lowest, v, lowest)
            x = select(low_clamped < highest, low_clamped, highest)
            n = np.floor(x * _LOG2_E + 0.5)
            r = x - n * _F64_LN2_HIGH - n * _F64_LN2_LOW
            rr = r * r
            pr = r * ((p0 * rr + p1) * rr + p2)
            q = ((q0 * rr + q1) * rr + q2) * rr + q3
            y = 1.0 + 2.0 * pr / (q - pr)
            k = np.int64(np.int32(n))  # int32: the conversion vectorises without AVX-512
            h = k >> 1
            value = y * _f64_from((h + 1023) << 52) * _f64_from((k - h + 1023) << 52)
            return select(v < lowest, 0.0, select(v == v, value, v))

        return exp
    return lambda v: np.exp(v)


_SQRT_HALF = 0.70710678118654752440
# float32: Cephes logf
_LOGF = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1)
_LOGF += (-1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1)
# float64: Cephes log, log(1 + x) = x - x^2 / 2 + x^3 P(x) / Q(x)
_LOG_P = (1.01875663804580931796e-4, 4.97494994976747001425e-1, 4.70579119878881725854e0)
_LOG_P += (1.44989225341610930846e1, 1.79368678507819816313e1, 7.70838733755885391666e0)
_LOG_Q = (1.12873587189167450590e1, 4.52279145837532221105e1, 8.29875266912776603211e1)
_LOG_Q += (7.11544750618563894466e1, 2.31251620126765340583e1)


@overload(log_of, inline="always")
def _log_of(v):
    if v == types.float32:
        f = np.float32
        tiny, scale_up = f(np.finfo(np.float32).tiny), f(2.0**23)
        sqrt_half, high, low = f(_SQRT_HALF), f(_F32_LN2_HIGH), f(_F32_LN2_LOW)
        a0, a1, a2, a3, a4, a5, a6, a7, a8 = (f(c) for c in _LOGF)
        zero, one, half, inf, nan = f(0), f(1), f(0.5), f(np.inf), f(np.nan)

        def logf(v):
            subnormal = v < tiny
            x = select(subnormal, v * scale_up, v)
            bits = _f32_bits(x)
            exponent = ((bits >> 23) & 0xFF) - select(subnormal, 149, 126)
            m = _f32_from((bits & 0x007FFFFF) | 0x3F000000)  # x = m * 2**e, m in [0.5, 1)
            low_m = m < sqrt_half
            e = f(exponent - select(low_m, 1, 0))
            t = select(low_m, m + m - one, m - one)
            z = t * t
            y = (((((((a0 * t + a1) * t + a2) * t + a3) * t + a4) * t + a5) * t + a6) * t + a7) * t
            y = (y + a8) * t * z
            result = t + (y + low * e - half * z) + high * e
            # log(0) = -inf; NaN for negatives; inf and NaN stay
            special = select(v == zero, -inf, select(v < zero, nan, v))
            return select(v > zero, select(v < inf, result, v), special)

        return logf
    if v == types.float64:
        tiny, scale_up = np.finfo(np.float64).tiny, 2.0**54
        p0, p1, p2, p3, p4, p5 = _LOG_P
        q0, q1, q2, q3, q4 = _LOG_Q

        def log(v):
            subnormal = v < tiny
            x = select(subnormal, v * scale_up, v)
            bits = _f64_bits(x)
            exponent = ((bits >> 52) & 0x7FF) - select(subnormal, 1076, 1022)
            m = _f64_from((bits & 0x000FFFFFFFFFFFFF) | 0x3FE0000000000000)
            low_m = m < _SQRT_HALF
            e = np.float64(exponent - select(low_m, 1, 0))
            t = select(low_m, m + m - 1.0, m - 1.0)
            z = t * t
            p = ((((p0 * t + p1) * t + p2) * t + p3) * t + p4) * t + p5
            q = ((((t + q0) * t + q1) * t + q2) * t + q3) * t + q4
            y = t * (z * p / q) - e * 2.121944400546905827679e-4 - 0.5 * z
            result = t + y + e * 0.693359375
            special = select(v == 0.0, -np.inf, select(v < 0.0, np.nan, v))
            return select(v > 0.0, select(v < np.inf, result, v), special)

        return log
    return lambda v: np.log(v)


def pow_of(a, b):
    """a ** b, vectorisable for two float32 or two float64 (Numba-only); other types use
    ``**``."""
    raise NotImplementedError("pow_of is only callable from numba-compiled code")


def _overload_for_floats(function, float32_name, float64_name, other):
    """Overloads ``function(a, b)`` by ``fastmath_pow``'s functions of those names for two
    float32 or two float64, by ``other`` for the rest."""

    @overload(function, inline="always")
    def chosen(a, b):
        # imported here: fastmath_pow builds on this module's select and bit casts
        from numtile.ops_cpu import fastmath_pow

        names = {types.float32: float32_name, types.float64: float64_name}
        if a == b and a in names:
            kernel = getattr(fastmath_pow, names[a])
            return lambda a, b: kernel(a, b)
        return other

    return chosen


_overload_for_floats(pow_of, "pow_f32", "pow_f64", lambda a, b: a**b)


_BLOCK = 512  # elements gathered per block: they stay in L1 while ``block`` maps them


@inlined
def broadcast_gathered(block, a, a_strides, b, b_strides, out, shape):
    """out = a op b over C-ordered ``shape`` (element strides, as ``_broadcast`` of
    ``elementwise``) with ONE inlined copy of the op: the operands of a block of outputs are
    gathered into two small contiguous buffers first, then ``block(a_part, b_part, out_part)``
    maps them to the block's outputs (pow: ``pow_blocks.gathered``, a fast loop that
    vectorises and a call that redoes the block where it holds special values). For a long
    function (pow) four broadcast loops cost four times its compile time."""
    size = out.size
    if size == 0:
        return
    a_flat = a.size == 1 or (a.size == size and is_c_contiguous(a_strides, shape))
    b_flat = b.size == 1 or (b.size == size and is_c_contiguous(b_strides, shape))
    inner = inner_axis(shape)
    if a_flat and b_flat:  # one row over the whole tile
        extent = size
        a_step, b_step = select(a.size == 1, 0, 1), select(b.size == 1, 0, 1)
    else:
        extent = shape[inner]
        a_step, b_step = a_strides[inner], b_strides[inner]
    a_block = np.empty(_BLOCK, a.dtype)
    b_block = np.empty(_BLOCK, b.dtype)
    for row in range(size // extent):
        a_start, b_start = 0, 0
        if not (a_flat and b_flat):
            a_start, b_start = row_offsets(row, shape, inner, a_strides, b_strides)
        for chunk in range(0, extent, _BLOCK):
            count = min(_BLOCK, extent - chunk)
            for j in range(count):
                a_block[j] = a[unsigned(a_start + (chunk + j) * a_step)]
                b_block[j] = b[unsigned(b_start + (chunk + j) * b_step)]
            start = row * extent + chunk
            block(a_block[:count], b_block[:count], out[start : start + count])
