"""The vectorised sin, cos, tan (``ops_cpu.fastmath_trig``, float32 in ``fastmath_f32``) and
float32 and float64 pow (``ops_cpu.fastmath_pow``) through the ``unary``/``binary`` kernels:
error in ulps against extended-precision references (long double for float64, float64 for
float32), NumPy's special values bit for bit (NaN, infinities, signed zeros, subnormals),
arguments next to multiples of pi/2 (every one below the float32 reduction's limit) and beyond
the reduction's range (the libm fix-up pass), pow's table of special values, its broadcasting
paths and its whole range (subnormal results, huge exponents).

One file, so that one CI worker compiles these kernels once (``--dist loadfile``)."""

import warnings

import numba
import numpy as np
import pytest

from numtile import opcodes, ops_cpu
from numtile.ops_cpu import fastmath
from numtile.ops_cpu.fastmath_f32 import LIMIT_F32

TRIG = {"sin": np.sin, "cos": np.cos, "tan": np.tan}
# the fdlibm / musl kernels are under 1 ulp (measured: 0.56-0.85)
MAX_ULP = 1.0


def _unary(name, x):
    out = np.empty_like(x)
    ops_cpu.unary.kernel(x, out, opcodes.UNARY_OPS[name])  # ours, not VML (test_mkl_vml)
    return out


def _ulps(actual, reference, dtype):
    """|actual - reference| in units of the last place of ``dtype`` at the reference."""
    spacing = np.spacing(np.abs(reference).astype(dtype)).astype(reference.dtype)
    return np.abs(actual.astype(reference.dtype) - reference) / spacing


def _arguments(dtype):
    """Ordinary, large and tiny arguments, and the floats next to k pi/2 (the hardest cases
    of the reduction), some beyond 2**19 (the libm pass) in the middle of a tile's blocks."""
    rng = np.random.default_rng(0)
    tiny = 10.0 ** rng.uniform(-300 if dtype == np.float64 else -40, -3, 500)
    near = (np.arange(1, 300_000, 997) * (np.pi / 2)).astype(dtype)
    parts = [rng.uniform(-10, 10, 4000), rng.uniform(-4e5, 4e5, 2000), tiny, -tiny]
    parts += [near, np.nextafter(near, np.inf), np.nextafter(near, -np.inf)]
    parts += [rng.uniform(-1e7, 1e7, 30), [1e22, -3.4e38, 524288.0, -524287.9]]
    return rng.permutation(np.concatenate(parts).astype(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(TRIG))
def test_trigonometric_functions_are_within_one_ulp(name, dtype):
    x = _arguments(dtype)
    wide = np.longdouble if dtype == np.float64 else np.float64
    reference = TRIG[name](x.astype(wide))
    assert _ulps(_unary(name, x), reference, dtype).max() <= MAX_ULP


SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-310, -5e-324, 1e-40, -1e-45]
SPECIAL += [np.pi / 2, np.pi, 1e30, -1e300]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(TRIG))
def test_trigonometric_special_values_match_numpy(name, dtype):
    with np.errstate(all="ignore"):
        x = np.array(SPECIAL, dtype)
        expected = TRIG[name](x)
    actual = _unary(name, x)
    exact = ~np.isfinite(expected) | (expected == 0) | (np.abs(x) < 1e-30)
    np.testing.assert_array_equal(actual[exact], expected[exact])  # NaN where NumPy's are
    number = ~np.isnan(expected)
    np.testing.assert_array_equal(np.signbit(actual[number]), np.signbit(expected[number]))
    np.testing.assert_allclose(actual, expected, rtol=2 * np.finfo(dtype).eps)


def _power(a, b):
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    out = np.empty(np.broadcast_shapes(a.shape, b.shape), a.dtype)
    a_strides, b_strides = (
        np.array([s // v.itemsize for s in np.broadcast_to(v, out.shape).strides], np.int64)
        for v in (a, b)
    )
    shape = np.array(out.shape, np.int64)
    kernel = ops_cpu.binary.kernel  # ours, not VML (test_mkl_vml)
    kernel(a.ravel(), a_strides, b.ravel(), b_strides, out.ravel(), shape, opcodes.POWER)
    return out


POWER_EXTREMES = {
    np.float32: [1e-40, -1e-45, 3e38, -3e38, 16777217.0, -16777215.0],
    np.float64: [5e-324, -1e-310, 1.7e308, -1.7e308, 9007199254740993.0, -9007199254740991.0],
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_power_special_values_match_numpy(dtype):
    # every pair of the C99 / array API table's values: zeros, infinities, NaN, +-1, odd and
    # even integers, fractions, subnormals and the extremes
    values = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0]
    values += [2.5, -2.5, *POWER_EXTREMES[dtype]]
    a, b = (v.astype(dtype).ravel() for v in np.meshgrid(values, values))
    actual = _power(a, b)
    with np.errstate(all="ignore"):
        expected = np.power(a, b)
    same = (actual == expected) & (np.signbit(actual) == np.signbit(expected))
    same |= np.isnan(actual) & np.isnan(expected)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        close = np.isfinite(expected) & (_ulps(actual, expected.astype(np.longdouble), dtype) <= 1)
    assert np.all(same | close), list(zip(a[~(same | close)], b[~(same | close)]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_power_redoes_exactly_the_special_elements_of_a_block(dtype):
    # the kernel maps a block by the fast path (positive normal bases, finite exponents) and
    # redoes only its other elements: special values sprinkled over ordinary ones (blocks of
    # one, some and no special elements, a tail block) give NumPy's results there and the
    # same bits as a tensor without them everywhere else
    rng = np.random.default_rng(5)
    n = 5000
    a = rng.uniform(0.1, 8, n).astype(dtype)
    b = rng.uniform(-20, 20, n).astype(dtype)
    tiny = np.finfo(dtype).tiny
    specials_a = [0.0, -0.0, np.inf, -np.inf, np.nan, -2.0, -0.5, 1.0, tiny / 4, -tiny / 8]
    specials_b = [np.inf, -np.inf, np.nan, 0.0, -0.0, 3.0, 2.0, -1.0, 0.5, 7.0]
    where = np.sort(rng.choice(np.arange(600, n), 40, replace=False))
    a_special, b_special = a.copy(), b.copy()
    a_special[where] = np.resize(specials_a, where.size)
    b_special[where[::3]] = np.resize(specials_b, where[::3].size)
    actual = _power(a_special, b_special)
    ordinary = np.ones(n, bool)
    ordinary[where] = False
    np.testing.assert_array_equal(
        actual[ordinary].view(np.uint8), _power(a, b)[ordinary].view(np.uint8)
    )
    with np.errstate(all="ignore"):
        expected = np.power(a_special[where], b_special[where])
    got = actual[where]
    same = (got == expected) & (np.signbit(got) == np.signbit(expected))
    same |= np.isnan(got) & np.isnan(expected)
    finite = np.isfinite(expected) & ~same
    ulps = _ulps(got[finite], expected[finite].astype(np.longdouble), dtype)
    assert np.all(same | finite) and np.all(ulps <= 1), list(zip(a_special[where], got))


def test_float32_power_is_correctly_rounded_nearly_and_broadcasts():
    rng = np.random.default_rng(1)
    a = (rng.standard_normal((64, 48)) * 4).astype(np.float32)
    b = (rng.standard_normal((64, 48)) * 6).astype(np.float32)
    b[::2] = np.round(b[::2])  # integer exponents of negative bases
    with np.errstate(all="ignore"):
        reference = np.power(a.astype(np.float64), b.astype(np.float64))
        cases = [(a, b), (a, np.float32(2.5).reshape(1, 1)), (a[:, :1], b[:1, :])]
        for x, y in cases:  # elementwise, scalar exponent, a column against a row (strided)
            expected = np.power(x.astype(np.float64), y.astype(np.float64))
            actual = _power(x, y)
            finite = np.isfinite(expected) & (np.abs(expected) > np.finfo(np.float32).tiny)
            finite &= np.abs(expected) < np.finfo(np.float32).max
            assert _ulps(actual[finite], expected[finite], np.float32).max() <= 0.51
            np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected))
    assert np.isfinite(reference).mean() > 0.5


def _near_multiples():
    """The float32 nearest to k pi/2 and its two neighbours, for every k below the limit."""
    half_pi = np.longdouble("1.570796326794896619231321691639751442")
    k = np.arange(1, int(LIMIT_F32 / 1.5707963) + 2)
    nearest = (k.astype(np.longdouble) * half_pi).astype(np.float32)
    up, down = np.nextafter(nearest, np.float32(np.inf)), np.nextafter(nearest, np.float32(0))
    return np.concatenate([nearest, up, down, -nearest])


@pytest.mark.parametrize("name", sorted(TRIG))
def test_float32_trig_is_within_one_ulp_next_to_every_multiple_of_half_pi(name):
    limits = [LIMIT_F32, 2.0**19]  # around the limit too (the fix-up pass: libm beyond it)
    edges = [np.nextafter(np.float32(v), np.float32(d)) for v in limits for d in (0, np.inf)]
    x = np.concatenate([_near_multiples(), np.float32(limits), np.float32(edges)])
    x = np.random.default_rng(0).permutation(x)
    ulps = _ulps(_unary(name, x), TRIG[name](x.astype(np.float64)), np.float32)
    assert ulps.max() <= MAX_ULP, (x[np.argmax(ulps)], ulps.max())
    assert np.median(ulps) < 0.3  # a wrong coefficient shows here before it breaks 1 ulp


def test_float32_power_is_within_half_an_ulp_plus_a_hundredth_over_the_range():
    rng = np.random.default_rng(2)
    n = 1 << 16
    a = np.concatenate([10 ** rng.uniform(-45, 38, n), rng.uniform(0.999, 1.001, n)])
    b = np.concatenate([rng.uniform(-6, 6, n), rng.uniform(-3e4, 3e4, n)])
    a, b = a.astype(np.float32), b.astype(np.float32)
    actual = _power(a, b)
    with np.errstate(all="ignore"):
        reference = np.power(a.astype(np.float64), b.astype(np.float64))
    finite = np.abs(reference) < np.finfo(np.float32).max
    normal = finite & (np.abs(reference) >= np.finfo(np.float32).tiny)
    assert normal.sum() > n  # both halves reach normal results
    assert _ulps(actual[normal], reference[normal], np.float32).max() <= 0.51
    # subnormal results: one rounding of a float64 (at most half a subnormal spacing more)
    tiny = finite & ~normal
    assert np.abs(actual[tiny] - reference[tiny]).max() <= 2.0**-149
    np.testing.assert_array_equal(np.isinf(actual), ~finite)


@pytest.mark.skipif(np.finfo(np.longdouble).nmant < 63, reason="needs an extended long double")
def test_float64_power_is_within_0_61_ulp_over_the_range_and_broadcasts():
    # exp(b ln a) with ln a and the product in double-double: 0.52 ulp for ordinary arguments,
    # up to 0.61 where |b ln a| nears 700 (measured); one rounding more for subnormal results
    rng = np.random.default_rng(3)
    n = 1 << 15
    near_one = 1 + rng.uniform(-1e-6, 1e-6, n)
    a = np.concatenate([10 ** rng.uniform(-300, 300, n), rng.uniform(0.5, 2, n), near_one])
    a[: n // 8] = rng.uniform(1e-320, 1e-308, n // 8)  # subnormal bases
    b = np.concatenate(
        [rng.uniform(-1, 1, n), rng.uniform(-700, 700, n), rng.uniform(-1e8, 1e8, n)]
    )
    b[n : 2 * n] /= np.log(a[n : 2 * n])  # |b ln a| up to 700: results over the whole range
    negative = rng.random(3 * n) < 0.25
    a[negative], b[negative] = -a[negative], np.round(b[negative])  # negative bases, integer b
    actual = _power(a, b)
    with np.errstate(all="ignore"):
        reference = np.power(a.astype(np.longdouble), b.astype(np.longdouble))
    finite = np.abs(reference) < np.finfo(np.float64).max
    normal = finite & (np.abs(reference) >= np.finfo(np.float64).tiny)
    assert normal.sum() > 2 * n
    ulps = _ulps(actual[normal], reference[normal], np.float64)
    assert ulps.max() <= 0.61, (a[normal][ulps.argmax()], b[normal][ulps.argmax()], ulps.max())
    assert np.median(ulps) < 0.3
    tiny = finite & ~normal  # subnormal results: within one subnormal spacing
    assert tiny.sum() > 100
    assert np.abs(actual[tiny] - reference[tiny]).max() <= 2.0**-1074
    np.testing.assert_array_equal(np.isinf(actual), ~finite)
    for x, y in [
        (a[n : n + 64].reshape(8, 8), np.float64(2.5).reshape(1, 1)),
        (a[n : n + 8, None], b[None, :8]),
    ]:
        with np.errstate(all="ignore"):  # a scalar exponent, a column against a row (strided)
            expected = np.power(x.astype(np.longdouble), y.astype(np.longdouble))
        ok = np.isfinite(expected) & (np.abs(expected) >= np.finfo(np.float64).tiny)
        assert _ulps(_power(x, y)[ok], expected[ok], np.float64).max() <= 0.61


def test_float32_exp_is_within_one_ulp_over_the_range():
    # Cephes' polynomial with FMA reduction and Horner: 0.98 ulp measured over 5M arguments
    rng = np.random.default_rng(4)
    x = np.concatenate([rng.uniform(-104, 89, 1 << 18), rng.uniform(-1, 1, 1 << 16)])
    x = np.concatenate([x, [0.0, -0.0, 88.72, 88.73, -87.3, -103.9, -104.0, 1e-30, -1e-40]])
    x = np.concatenate([x, [np.inf, -np.inf, np.nan, -np.nan, 1e30, -1e30]]).astype(np.float32)
    actual = _unary("exp", x)
    with np.errstate(over="ignore"):
        reference = np.exp(x.astype(np.float64))
    finite = np.isfinite(reference) & (reference < np.finfo(np.float32).max)
    normal = finite & (reference >= np.finfo(np.float32).tiny)
    ulps = _ulps(actual[normal], reference[normal], np.float32)
    assert ulps.max() <= 1.0, (x[normal][ulps.argmax()], ulps.max())
    assert np.median(ulps) < 0.3
    tiny = finite & ~normal  # subnormal results: the second factor of 2**k rounds once more
    assert np.abs(actual[tiny] - reference[tiny]).max() <= 2.0**-149
    with np.errstate(all="ignore"):
        expected = np.exp(x[~finite | (x == 0)])
    np.testing.assert_array_equal(actual[~finite | (x == 0)], expected)  # 0, inf and NaN


@numba.njit
def _through_opaque(value):
    return fastmath.opaque(value) + fastmath.opaque(value)


@pytest.mark.parametrize("value", [np.float32(1.25), -2.5e-300, np.int32(-7), np.int64(1 << 40)])
def test_opaque_is_its_value(value):
    # fastmath.opaque hides a constant from LLVM (x86: an empty inline-assembly statement)
    result = _through_opaque(value)
    assert result == value + value
