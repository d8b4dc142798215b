"""ops_cpu.pow_avx512: float32 x ** y in explicit AVX-512 code. Within 0.56 ulp of a long
double reference over dense random pairs and the hard cases (bases next to 1 with large
exponents, results next to the overflow and underflow thresholds, subnormal results), special
values bit for bit as NumPy, lengths and offsets that 16 does not divide, streamed and
ordinary stores, in place, and the switch that sends float32 power back to VML or the scalar
kernel (the path of CPUs without AVX-512)."""

import warnings

import numpy as np
import pytest

import numtile as nt
from numtile import opcodes, ops_cpu
from numtile.config import Config
from numtile.ops_cpu import pow_avx512
from numtile.ops_cpu.vector_ir import have_avx512

pytestmark = pytest.mark.skipif(not have_avx512(), reason="needs AVX-512")
MAX_ULP = 0.56  # measured 0.55 (bases within 3% of 1, |b ln a| near 86)
ONE = np.ones(1, np.int64)


@pytest.fixture(autouse=True)
def _kernel_on():
    previous = pow_avx512.set_enabled(True)
    yield
    pow_avx512.set_enabled(previous)


def _power(a, b, streamed=False):
    out = np.empty_like(a)
    pow_avx512.TILES[streamed](a, b, out)
    return out


def _check(actual, a, b):
    """Normal results within MAX_ULP of long double's, subnormal ones within one subnormal
    spacing, overflow where the result overflows, NaN where it is NaN."""
    with np.errstate(all="ignore"):
        reference = np.power(a.astype(np.longdouble), b.astype(np.longdouble))
        finite = np.isfinite(reference.astype(np.float32))  # rounds below float32's overflow
        normal = finite & (np.abs(reference) >= np.finfo(np.float32).tiny)
        spacing = np.spacing(np.abs(reference[normal]).astype(np.float32)).astype(np.longdouble)
    ulps = np.abs(actual[normal] - reference[normal]) / spacing
    assert ulps.max() <= MAX_ULP, (a[normal][ulps.argmax()], b[normal][ulps.argmax()])
    tiny = finite & ~normal
    assert np.all(np.abs(actual[tiny] - reference[tiny]) <= 2.0**-149)
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(reference))
    np.testing.assert_array_equal(np.isinf(actual), ~finite & ~np.isnan(reference))
    return normal.sum()


def _hard_cases(rng, n):
    """Bases across the range and next to 1, exponents that put the results everywhere."""
    a = np.concatenate(
        [
            np.exp2(rng.uniform(-126, 128, n)),
            1 + rng.uniform(-0.04, 0.04, n),
            1 + rng.uniform(-1e-6, 1e-6, n),
            np.exp2(rng.uniform(-149, -126, n // 8)),  # subnormal bases
        ]
    ).astype(np.float32)
    target = rng.uniform(-150, 129, a.size)  # log2 of the result: overflow, subnormal, normal
    target[: n // 2] = rng.uniform(-3, 3, n // 2)
    with np.errstate(all="ignore"):
        b = (target / np.log2(a.astype(np.float64))).astype(np.float32)
    b[~np.isfinite(b)] = 1.5
    return a, b


@pytest.mark.parametrize("streamed", [False, True])
def test_within_0_56_ulp_of_long_double_on_random_and_hard_pairs(streamed):
    rng = np.random.default_rng(5)
    a, b = _hard_cases(rng, 1 << 16)
    assert _check(_power(a, b, streamed), a, b) > 2 << 16
    x = (np.abs(rng.standard_normal(1 << 16)) + 0.5).astype(np.float32)  # the benchmark's
    y = rng.standard_normal(1 << 16).astype(np.float32)
    _check(_power(x, y, streamed), x, y)


def _specials():
    info = np.finfo(np.float32)
    values = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 0.5, -0.5]
    values += [info.tiny, -info.tiny, info.smallest_subnormal, info.tiny / 4, info.max, -info.max]
    values += [1 - info.epsneg, 1 + info.eps, 127.9, 128.0, -149.5, 1e10, -1e10, 0.1, 0.3]
    return np.array(values, np.float32)


def test_special_values_bit_for_bit_as_numpy_in_any_lane():
    specials = _specials()
    a, b = (grid.ravel().copy() for grid in np.meshgrid(specials, specials))
    rng = np.random.default_rng(6)
    # each pair in a block of otherwise ordinary lanes, at every lane position
    x = rng.uniform(0.5, 2, (a.size, 17)).astype(np.float32)
    y = rng.uniform(-3, 3, (a.size, 17)).astype(np.float32)
    rows, lane = np.arange(a.size), np.arange(a.size) % 17
    x[rows, lane], y[rows, lane] = a, b
    ordinary = np.ones(x.shape, bool)
    ordinary[rows, lane] = False
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = np.power(a, b)
    special = ~np.isfinite(expected) | (expected == 0) | (a == 1) | (b == 0)
    special |= ~np.isfinite(a) | ~np.isfinite(b) | (a == 0)
    for streamed in (False, True):
        actual = _power(x.ravel(), y.ravel(), streamed).reshape(x.shape)
        got = actual[rows, lane]
        np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
        number = special & ~np.isnan(expected)
        np.testing.assert_array_equal(got[number], expected[number])
        np.testing.assert_array_equal(np.signbit(got[number]), np.signbit(expected[number]))
        _check(got[~special], a[~special], b[~special])
        _check(actual[ordinary], x[ordinary], y[ordinary])


@pytest.mark.parametrize("size", [1, 15, 16, 17, 31, 33, 1000, 4099])
@pytest.mark.parametrize("offset", [0, 1, 7])
def test_lengths_and_offsets_16_does_not_divide(size, offset):
    rng = np.random.default_rng(size + offset)
    x = rng.uniform(0.1, 10, size + offset).astype(np.float32)
    y = rng.uniform(-8, 8, size + offset).astype(np.float32)
    for streamed in (False, True):
        buffer = np.full(size + offset + 1, 7.0, np.float32)
        out = buffer[offset : offset + size]
        pow_avx512.TILES[streamed](x[offset:], y[offset:], out)
        assert buffer[size + offset] == 7.0 and np.all(buffer[:offset] == 7.0)
        _check(out, x[offset:], y[offset:])
        np.testing.assert_array_equal(out, _power(x[offset:], y[offset:]))


def test_in_place_and_which_operands_it_takes():
    rng = np.random.default_rng(7)
    x = rng.uniform(0.5, 4, 100).astype(np.float32)
    y = rng.uniform(-3, 3, 100).astype(np.float32)
    expected = _power(x, y)
    shape = np.array([100], np.int64)
    a = x.copy()
    assert pow_avx512.binary(a, ONE, y, ONE, a, shape, opcodes.POWER)  # out is a
    np.testing.assert_array_equal(a, expected)
    out = np.empty(100, np.float32)
    assert not pow_avx512.binary(x, ONE, y, ONE, out, shape, opcodes.ATAN2)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    assert not pow_avx512.binary(x64, ONE, y64, ONE, out.astype(np.float64), shape, 6)
    assert not pow_avx512.binary(x[::2], ONE, y[:50], ONE, out[:50], shape // 2, 6)
    buffer = np.concatenate([x, x])  # out overlapping a, shifted: not taken
    assert not pow_avx512.binary(buffer[1:101], ONE, y, ONE, buffer[:100], shape, 6)


def test_the_switch_sends_power_back_to_the_other_kernels_and_tiled_ops_agree():
    rng = np.random.default_rng(8)
    x = rng.uniform(0.5, 4, 3000).astype(np.float32)
    y = rng.uniform(-3, 3, 3000).astype(np.float32)
    shape = np.array([3000], np.int64)
    results = []
    for on in (True, False):
        pow_avx512.set_enabled(on)
        assert pow_avx512.enabled() == on
        out = np.empty_like(x)
        assert pow_avx512.binary(x, ONE, y, ONE, out, shape, opcodes.POWER) == on
        ops_cpu.binary(x, ONE, y, ONE, out, shape, opcodes.POWER)
        tiled = nt.from_numpy(x, tile_shape=(1000,)) ** nt.from_numpy(y, tile_shape=(1000,))
        results.append(tiled.to_numpy())
        _check(out, x, y)
        np.testing.assert_allclose(results[-1], out, rtol=3e-7)
    _check(results[0], x, y)
    np.testing.assert_array_equal(results[0], _power(x, y))


def test_switch_from_the_environment(monkeypatch):
    monkeypatch.setenv("NUMTILE_AVX512", "0")
    assert Config().avx512 is False
    monkeypatch.delenv("NUMTILE_AVX512")
    assert Config().avx512 is True  # on by default
    monkeypatch.setenv("NUMTILE_AVX512", "maybe")
    with pytest.raises(ValueError, match="NUMTILE_AVX512"):
        Config()
