"""ops_cpu.pow_blocks: dense float32/float64 x ** y a block at a time. Within 0.51 (float32) and
0.53 (float64) ulp of long double's pow over random and hard pairs (bases next to 1 with large
exponents, results next to the overflow and underflow thresholds, subnormal results); the
scalar kernel's bits (``fastmath_pow``) everywhere, special values in any lane of a block
included, streamed and not, over lengths and offsets that blocks do not divide, in place;
which operands ``binary`` takes; ymm FMAs in the fast loop where the CPU has AVX2."""

import warnings

import numba
import numpy as np
import pytest
from llvmlite import binding

from numtile import opcodes, ops_cpu
from numtile.ops_cpu import mkl_vml, pow_avx512, pow_blocks
from numtile.ops_cpu.fastmath import pow_of
from tests.ops_cpu.test_pow_avx512 import _hard_cases, _specials

ONE = np.ones(1, np.int64)
MAX_ULP = {np.float32: 0.51, np.float64: 0.53}  # fastmath_pow: 0.5 + 0.002, 0.52 measured


@numba.njit(error_model="numpy")
def _scalar(a, b, out):
    for i in range(out.size):
        out[i] = pow_of(a[i], b[i])


def _power(a, b, streamed=False):
    out = np.empty_like(a)
    pow_blocks.TILES[(a.dtype.name, streamed)](a, b, out)
    return out


def _same_bits(actual, expected):
    integer = np.int32 if actual.dtype == np.float32 else np.int64
    np.testing.assert_array_equal(actual.view(integer), expected.view(integer))


def _hard_pairs(dtype, rng, n):
    """float32: test_pow_avx512's hard cases; float64: the same spread over float64's range."""
    if dtype == np.float32:
        return _hard_cases(rng, n)
    a = np.concatenate(
        [
            np.exp2(rng.uniform(-1022, 1024, n)),
            1 + rng.uniform(-0.04, 0.04, n),
            1 + rng.uniform(-1e-12, 1e-12, n),
            np.exp2(rng.uniform(-1074, -1022, n // 8)),
        ]
    )
    target = rng.uniform(-1080, 1025, a.size)  # log2 of the result
    target[: n // 2] = rng.uniform(-3, 3, n // 2)
    with np.errstate(all="ignore"):
        b = target / np.log2(a)
    b[~np.isfinite(b)] = 1.5
    return a, b


def _check(actual, a, b, dtype):
    """Normal results within MAX_ULP of long double's, subnormal ones within a subnormal
    spacing, infinities where the result overflows, NaN where it is NaN."""
    info = np.finfo(dtype)
    with np.errstate(all="ignore"):
        reference = np.power(a.astype(np.longdouble), b.astype(np.longdouble))
        finite = np.isfinite(reference.astype(dtype))
        normal = finite & (np.abs(reference) >= info.tiny)
        spacing = np.spacing(np.abs(reference[normal]).astype(dtype)).astype(np.longdouble)
    ulps = np.abs(actual[normal] - reference[normal]) / spacing
    assert ulps.max() <= MAX_ULP[dtype], (a[normal][ulps.argmax()], b[normal][ulps.argmax()])
    tiny = finite & ~normal
    assert np.all(np.abs(actual[tiny] - reference[tiny]) <= info.smallest_subnormal)
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(reference))
    np.testing.assert_array_equal(np.isinf(actual), ~finite & ~np.isnan(reference))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("streamed", [False, True])
def test_within_half_an_ulp_of_long_double_and_the_scalar_kernels_bits(dtype, streamed):
    rng = np.random.default_rng(7)
    a, b = _hard_pairs(dtype, rng, 1 << 15)
    a, b = a.astype(dtype), b.astype(dtype)
    actual = _power(a, b, streamed)
    _check(actual, a, b, dtype)
    expected = np.empty_like(a)
    _scalar(a, b, expected)
    _same_bits(actual, expected)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_special_values_in_any_lane_as_numpy_and_the_scalar_kernel(dtype):
    specials = _specials().astype(dtype)
    a, b = (grid.ravel().copy() for grid in np.meshgrid(specials, specials))
    rng = np.random.default_rng(8)
    # each pair in a block of otherwise ordinary lanes, at every position of a vector
    x = rng.uniform(0.5, 2, (a.size, 13)).astype(dtype)
    y = rng.uniform(-3, 3, (a.size, 13)).astype(dtype)
    rows, lane = np.arange(a.size), np.arange(a.size) % 13
    x[rows, lane], y[rows, lane] = a, b
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = np.power(a, b)
    special = ~np.isfinite(expected) | (expected == 0) | (a == 1) | (b == 0)
    special |= ~np.isfinite(a) | ~np.isfinite(b) | (a == 0)
    scalar = np.empty(x.size, dtype)
    _scalar(x.ravel(), y.ravel(), scalar)
    for streamed in (False, True):
        actual = _power(x.ravel(), y.ravel(), streamed)
        _same_bits(actual, scalar)
        got = actual.reshape(x.shape)[rows, lane]
        np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
        number = special & ~np.isnan(expected)
        np.testing.assert_array_equal(got[number], expected[number])
        np.testing.assert_array_equal(np.signbit(got[number]), np.signbit(expected[number]))


@pytest.mark.parametrize("size", [1, 15, 17, 511, 513, 1029, 70001])
@pytest.mark.parametrize("offset", [0, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lengths_offsets_and_in_place(size, offset, dtype):
    rng = np.random.default_rng(size + offset)
    x = rng.uniform(0.1, 10, size + offset).astype(dtype)
    y = rng.uniform(-8, 8, size + offset).astype(dtype)
    x[offset + size // 2] = -2.0  # a block through the scalar kernel
    expected = np.empty(size, dtype)
    _scalar(x[offset:], y[offset:], expected)
    for streamed in (False, True):
        buffer = np.full(size + offset + 1, 7.0, dtype)
        out = buffer[offset : offset + size]
        pow_blocks.TILES[(out.dtype.name, streamed)](x[offset:], y[offset:], out)
        assert buffer[size + offset] == 7.0 and np.all(buffer[:offset] == 7.0)
        _same_bits(out, expected)
    a = x[offset:].copy()
    pow_blocks.power(a, y[offset:], a)  # a **= y
    _same_bits(a, expected)
    b = y[offset:].copy()
    pow_blocks.power(x[offset:], b, b)
    _same_bits(b, expected)


def test_binary_takes_dense_separate_float_operands_of_power_only():
    x = np.linspace(0.5, 3.0, 100, dtype=np.float32)
    y = np.linspace(-2.0, 2.0, 100, dtype=np.float32)
    out, shape = np.empty_like(x), np.array([100], np.int64)
    assert pow_blocks.binary(x, ONE, y, ONE, out, shape, opcodes.POWER)
    np.testing.assert_allclose(out, x**y, rtol=1.2e-7)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    assert pow_blocks.binary(x64, ONE, y64, ONE, x64, shape, opcodes.POWER)  # out is a
    np.testing.assert_allclose(x64, x.astype(np.float64) ** y64, rtol=2.3e-16)
    assert not pow_blocks.binary(x, ONE, y, ONE, out, shape, opcodes.ATAN2)
    assert not pow_blocks.binary(x, ONE, y64, ONE, out, shape, opcodes.POWER)  # two dtypes
    assert not pow_blocks.binary(x[::2], ONE, y[:50], ONE, out[:50], shape // 2, opcodes.POWER)
    half, broadcast = np.array([2, 50], np.int64), np.array([0, 1], np.int64)
    assert not pow_blocks.binary(x, broadcast, y, ONE, out, half, opcodes.POWER)
    buffer = np.linspace(1, 2, 101, dtype=np.float32)
    assert not pow_blocks.binary(buffer[1:], ONE, y, ONE, buffer[:100], shape, opcodes.POWER)
    ints = np.arange(100)
    assert not pow_blocks.binary(ints, ONE, ints, ONE, ints.copy(), shape, opcodes.POWER)


def test_dense_power_takes_this_kernel_where_neither_avx512_nor_vml_does(monkeypatch):
    calls = []
    monkeypatch.setattr(pow_blocks, "power", lambda a, b, out: calls.append(out.dtype.name))
    x, shape = np.linspace(0.5, 3.0, 64), np.array([64], np.int64)
    for dtype in (np.float32, np.float64):
        a = x.astype(dtype)
        ops_cpu.binary(a, ONE, a, ONE, np.empty_like(a), shape, opcodes.POWER)
    vml = {name for name in ("float32", "float64") if mkl_vml.routes("power", name)}
    if pow_avx512.enabled():
        vml.add("float32")
    assert calls == [name for name in ("float32", "float64") if name not in vml]


@pytest.mark.skipif(
    not binding.get_host_cpu_features().get("avx2", False), reason="needs AVX2 (ymm registers)"
)
@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_the_fast_loop_uses_ymm_fmas(precision):
    tile = pow_blocks.TILES[(precision, False)]
    a = np.ones(8, precision)
    tile(a, a, np.empty_like(a))
    assembly = tile.inspect_asm(tile.signatures[0])
    assert any("vfmadd" in line and "%ymm" in line for line in assembly.splitlines())


def _broadcast(a, b, a_strides, b_strides, shape):
    """ops_cpu.binary.kernel (the broadcast kernel; not VML, not ``binary``'s dense path) over
    flat a and b read with element strides over ``shape``."""
    out = np.empty(int(np.prod(shape)), a.dtype)
    shape = np.array(shape, np.int64)
    a_strides, b_strides = np.array(a_strides, np.int64), np.array(b_strides, np.int64)
    ops_cpu.binary.kernel(a, a_strides, b, b_strides, out, shape, opcodes.POWER)
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_broadcast_and_strided_operands_give_the_scalar_kernels_bits(dtype):
    # gathered blocks go through this module's fast loop, then the signs of negative bases or
    # the scalar kernel: scalars either side, outer products, a column of exponents and a
    # transposed read, with special values and signed bases with integer exponents
    rng = np.random.default_rng(9)
    specials = _specials().astype(dtype)
    x = rng.uniform(-4, 4, 1500).astype(dtype)
    x[::37] = np.resize(specials, x[::37].size)
    y = rng.uniform(-3, 3, 600).astype(dtype)
    y[1::7] = np.round(y[1::7])
    y[::29] = np.resize(specials[::-1], y[::29].size)
    positive = np.abs(rng.uniform(0.5, 3, 1500)).astype(dtype)
    cases = [(x, np.array([e], dtype), [1], [0], [1500]) for e in (2.5, 3.0, -2.0, 0.0, np.inf)]
    cases += [(np.array([e], dtype), x, [0], [1], [1500]) for e in (2.5, -2.0, np.nan)]
    cases += [(positive, np.array([-1.5], dtype), [1], [0], [1500])]  # no block redone
    cases += [(x, y, [1, 0], [0, 1], [1500, 600])]  # x[:, None] ** y[None, :]
    cases += [(x, y, [0, 1], [1, 0], [600, 1500])]  # y[:, None] ** ... transposed roles
    cases += [(x, y, [1, 30], [1, 0], [30, 50])]  # x.reshape(50, 30).T ** y[:30, None]
    cases += [(positive, y, [50, 1], [1, 0], [30, 50])]  # a column of exponents
    for a, b, a_strides, b_strides, shape in cases:
        actual = _broadcast(a, b, a_strides, b_strides, shape)
        index = np.indices(shape).reshape(len(shape), -1)
        a_wide = a[np.tensordot(a_strides, index, 1)]
        b_wide = b[np.tensordot(b_strides, index, 1)]
        expected = np.empty_like(actual)
        _scalar(a_wide, b_wide, expected)
        _same_bits(actual, expected)
        with np.errstate(all="ignore"):
            reference = np.power(a_wide, b_wide)
        np.testing.assert_array_equal(np.isnan(actual), np.isnan(reference))
        number = ~np.isnan(reference)
        info = np.finfo(dtype)
        np.testing.assert_allclose(
            actual[number], reference[number], rtol=2 * info.eps, atol=info.smallest_subnormal
        )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_blocks_of_signed_bases_get_their_signs(dtype):
    # every block holds negative bases: odd integer exponents negate, even ones do not,
    # others give NaN; blocks with a special value besides go through the scalar kernel
    rng = np.random.default_rng(10)
    n = 4 * pow_blocks.BLOCK + 77
    x = rng.uniform(-3, 3, n).astype(dtype)
    y = np.round(rng.uniform(-9, 9, n)).astype(dtype)
    y[::5] += dtype(0.5)
    x[3 * pow_blocks.BLOCK + 11] = np.inf
    expected = np.empty_like(x)
    _scalar(x, y, expected)
    for streamed in (False, True):
        _same_bits(_power(x, y, streamed), expected)
    with np.errstate(all="ignore"):
        reference = np.power(x, y)
    np.testing.assert_array_equal(np.isnan(expected), np.isnan(reference))
    number = ~np.isnan(reference)
    np.testing.assert_array_equal(np.signbit(expected[number]), np.signbit(reference[number]))
    np.testing.assert_allclose(expected[number], reference[number], rtol=2 * np.finfo(dtype).eps)
