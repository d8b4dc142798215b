"""Complex ``*`` and ``/`` (and ``reciprocal``) with C99/C11 annex G's recovery of
infinities, on CPU and the CUDA twin: every pair of a grid of special and ordinary values
against ``_Cmultd`` and ``_Cdivd`` transcribed below from C11 G.5.1 (signed zeros and NaN
positions exact), against the properties G.5.1 states in words, and ordinary values against
NumPy (which does not recover infinities: ``(inf + nan j) * (1 + 1j)`` is NaN + NaN j there).

The standard (2023.12, ``multiply``/``divide``) leaves these cases implementation dependent
and names C99's one-infinity model as the model; numtile follows it."""

import math

import numpy as np
import pytest

import numtile as nt
from numtile import opcodes
from tests.kernels import Host

INF, NAN = np.inf, np.nan
PARTS = [0.0, -0.0, 1.0, -1.0, 2.5, -0.5, 1e300, 1e-310, INF, -INF, NAN]
GRID = np.array([complex(a, b) for a in PARTS for b in PARTS])
LEFT, RIGHT = np.repeat(GRID, GRID.size), np.tile(GRID, GRID.size)

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


# --- C11 G.5.1, example 1 and 2, in float64 (NumPy scalars: division by zero is inf) ----------


def _box(v):
    return math.copysign(1.0 if math.isinf(v) else 0.0, v)


def _unnan(v):
    return math.copysign(0.0, v) if math.isnan(v) else v


def cmultd(z: complex, w: complex) -> complex:
    a, b, c, d = z.real, z.imag, w.real, w.imag
    ac, bd, ad, bc = a * c, b * d, a * d, b * c
    x, y = ac - bd, ad + bc
    if math.isnan(x) and math.isnan(y):
        recalc = False
        if math.isinf(a) or math.isinf(b):
            a, b = _box(a), _box(b)
            c, d = _unnan(c), _unnan(d)
            recalc = True
        if math.isinf(c) or math.isinf(d):
            c, d = _box(c), _box(d)
            a, b = _unnan(a), _unnan(b)
            recalc = True
        if not recalc and any(math.isinf(p) for p in (ac, bd, ad, bc)):
            a, b, c, d = _unnan(a), _unnan(b), _unnan(c), _unnan(d)
            recalc = True
        if recalc:
            x = INF * (a * c - b * d)
            y = INF * (a * d + b * c)
    return complex(x, y)


def cdivd(z: complex, w: complex) -> complex:
    a, b, c, d = (np.float64(v) for v in (z.real, z.imag, w.real, w.imag))
    ilogbw = 0
    largest = np.fmax(abs(c), abs(d))
    # logb: the binary exponent of a finite nonzero value (of subnormals too), else log|v|
    logbw = np.frexp(largest)[1] - 1.0 if np.isfinite(largest) and largest else np.log(largest)
    if np.isfinite(logbw):
        ilogbw = int(logbw)
        c, d = np.ldexp(c, -ilogbw), np.ldexp(d, -ilogbw)
    denom = c * c + d * d
    x = np.ldexp((a * c + b * d) / denom, -ilogbw)
    y = np.ldexp((b * c - a * d) / denom, -ilogbw)
    if np.isnan(x) and np.isnan(y):
        if denom == 0.0 and (not np.isnan(a) or not np.isnan(b)):
            x = np.copysign(INF, c) * a
            y = np.copysign(INF, c) * b
        elif (np.isinf(a) or np.isinf(b)) and np.isfinite(c) and np.isfinite(d):
            a, b = _box(a), _box(b)
            x = INF * (a * c + b * d)
            y = INF * (b * c - a * d)
        elif np.isinf(logbw) and logbw > 0.0 and np.isfinite(a) and np.isfinite(b):
            c, d = _box(c), _box(d)
            x = 0.0 * (a * c + b * d)
            y = 0.0 * (b * c - a * d)
    return complex(x, y)


# --- helpers ---------------------------------------------------------------------------------


def _same(u: complex, v: complex) -> bool:
    """Equal parts, signed zeros and NaN positions included."""

    def part(p, q):
        if math.isnan(p) or math.isnan(q):
            return math.isnan(p) and math.isnan(q)
        return p == q and math.copysign(1, p) == math.copysign(1, q)

    return part(u.real, v.real) and part(u.imag, v.imag)


def _ordinary(z, w, divide):
    finite = np.isfinite(z) & np.isfinite(w)
    return finite & (w != 0) if divide else finite


def _expected(z, w, divide):
    """Annex G's value, except a finite quotient (finite operands, nonzero divisor), which is
    NumPy's (Smith's algorithm) wherever NumPy's has no NaN."""
    if not divide:
        return cmultd(z, w)
    ours = cdivd(z, w)
    if _ordinary(z, w, True):
        theirs = np.complex128(z) / np.complex128(w)
        if not np.isnan(theirs.real) and not np.isnan(theirs.imag):
            return complex(theirs)
    return ours


def _mismatches(got, z, w, divide):
    return [
        (a, b, g, e)
        for a, b, g in zip(z, w, got)
        if not _same(complex(g), e := _expected(complex(a), complex(b), divide))
    ]


def _assert_numpys_product(got, x, y):
    """``got`` is NumPy's product of x and y up to rounding: both are the textbook formula,
    but NumPy's AVX2 loop fuses one multiply-add (a last-bit difference of the larger term)."""
    eps, tiny = np.finfo(x.dtype).eps, np.finfo(x.dtype).smallest_subnormal
    expected = x * y
    a, b, c, d = x.real, x.imag, y.real, y.imag
    bound = 2 * eps * (abs(a * c) + abs(b * d)) + 2 * tiny
    assert (abs(got.real - expected.real) <= bound).all()
    bound = 2 * eps * (abs(a * d) + abs(b * c)) + 2 * tiny
    assert (abs(got.imag - expected.imag) <= bound).all()


def _infinite(z):
    return np.isinf(z.real) | np.isinf(z.imag)


# --- tests ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["multiply", "divide"])
def test_special_values_follow_annex_g(name):
    divide = name == "divide"
    z, w = nt.from_numpy(LEFT, tile_shape=1000), nt.from_numpy(RIGHT, tile_shape=1000)
    got = (z / w if divide else z * w).to_numpy()
    assert _mismatches(got, LEFT, RIGHT, divide) == []
    # what G.5.1 says in words: an infinity times a nonzero (or infinite) value is an infinity;
    # infinite / finite is an infinity, finite / infinite a zero, nonzero / zero an infinity
    finite_nonzero = np.isfinite(RIGHT) & (RIGHT != 0)
    nan_free = ~np.isnan(LEFT.real) & ~np.isnan(LEFT.imag)
    if divide:
        assert _infinite(got[_infinite(LEFT) & np.isfinite(RIGHT)]).all()
        assert (got[np.isfinite(LEFT) & _infinite(RIGHT)] == 0).all()
        assert _infinite(got[nan_free & (LEFT != 0) & (RIGHT == 0)]).all()
    else:
        assert _infinite(got[_infinite(LEFT) & (finite_nonzero | _infinite(RIGHT))]).all()
    # where NumPy's value is finite, it agrees
    expected = LEFT / RIGHT if divide else LEFT * RIGHT
    clean = np.isfinite(expected) & _ordinary(LEFT, RIGHT, divide)
    if divide:
        np.testing.assert_array_equal(got[clean], expected[clean])
    else:
        _assert_numpys_product(got[clean], LEFT[clean], RIGHT[clean])


def test_the_standards_cases_and_numpy_departures():
    cases = [  # (z, w, z * w, z / w)
        (complex(INF, NAN), 1 + 1j, complex(INF, INF), complex(INF, -INF)),
        (complex(NAN, INF), 2 - 1j, complex(INF, INF), complex(-INF, INF)),
        (complex(NAN, NAN), complex(NAN, NAN), complex(NAN, NAN), complex(NAN, NAN)),
        (1 + 1j, complex(INF, NAN), complex(INF, INF), 0j),
        (1 + 1j, 0j, 0j, complex(INF, INF)),
        (1 + 1j, complex(-0.0, 0.0), complex(-0.0, 0.0), complex(-INF, -INF)),
        (0j, 1e-320 + 0j, 0j, 0j),  # NumPy: NaN + NaN j (its reciprocal overflows)
    ]
    z = nt.asarray([c[0] for c in cases])
    w = nt.asarray([c[1] for c in cases])
    for got, column in (((z * w).to_numpy(), 2), ((z / w).to_numpy(), 3)):
        for case, value in zip(cases, got):
            assert _same(complex(value), case[column]), (case, value)
    # scalar operands and reciprocal recover the same way
    infinite = nt.asarray([complex(INF, NAN)])
    assert _same(complex((infinite * (1 + 1j)).to_numpy()[0]), complex(INF, INF))
    assert _same(complex(((1 + 1j) / infinite).to_numpy()[0]), 0j)
    assert _same(complex(nt.reciprocal(infinite).to_numpy()[0]), 0j)


def test_ordinary_values_equal_numpy():
    rng = np.random.default_rng(0)
    a = rng.standard_normal(3000) * 10.0 ** rng.integers(-5, 5, 3000) + 1j * rng.normal(size=3000)
    b = rng.standard_normal(3000) + 1j * rng.normal(size=3000) * 10.0 ** rng.integers(-5, 5, 3000)
    for dtype in (np.complex128, np.complex64):
        x, y = a.astype(dtype), b.astype(dtype)
        tx, ty = nt.from_numpy(x, tile_shape=700), nt.from_numpy(y, tile_shape=700)
        quotient = (tx / ty).to_numpy()
        assert quotient.dtype == dtype
        np.testing.assert_array_equal(quotient, x / y)  # Smith's algorithm, bit for bit
        _assert_numpys_product((tx * ty).to_numpy(), x, y)


def _launch_parameter(values):
    # read-only int64, as the tiled ops pass them (another signature would compile anew)
    array = np.array(values, np.int64)
    array.setflags(write=False)
    return Host(array)


@pytest.mark.parametrize("name", ["multiply", "divide"])
def test_kernels_of_both_backends_recover_infinities(backend, name):
    # the grid's table through the kernel (the CUDA twin under the simulator), the left
    # operand broadcast along the rows as a scalar operand is
    rows = np.ascontiguousarray(GRID[::6])
    out = np.zeros((rows.size, GRID.size), np.complex128)
    strides = _launch_parameter([1, 0]), _launch_parameter([0, 1])
    backend.run(
        "complex_binary",
        rows,
        strides[0],
        GRID,
        strides[1],
        out.reshape(-1),
        _launch_parameter(out.shape),
        opcodes.BINARY_OPS[name],
        twin=False,
    )
    z, w = np.broadcast_arrays(rows.reshape(-1, 1), GRID)
    assert _mismatches(out.reshape(-1), z.reshape(-1), w.reshape(-1), name == "divide") == []


@pytest.mark.parametrize("name", ["multiply", "divide"])
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_in_place_and_0d_operands_recover_infinities_too(name, dtype):
    # x *= y and x /= y write x's own tiles, which the recovery pass reads again; a 0-d tile
    # has no axis to walk: both must give the grid's annex-G values, as the 1-D form does
    divide = name == "divide"
    z, w = LEFT.astype(dtype), RIGHT.astype(dtype)
    expected = nt.divide if divide else nt.multiply
    expected = expected(nt.from_numpy(z, tile_shape=1000), nt.from_numpy(w, tile_shape=1000))
    expected = expected.to_numpy()
    x = nt.from_numpy(z, tile_shape=1000)
    if divide:
        x /= nt.from_numpy(w, tile_shape=1000)
    else:
        x *= nt.from_numpy(w, tile_shape=1000)
    in_place = x.to_numpy()
    picks = np.flatnonzero(_infinite(expected) | (RIGHT == 0))[::37]
    zero_d = [getattr(nt, name)(nt.asarray(z[i]), nt.asarray(w[i])).to_numpy() for i in picks]
    for got, at in ((in_place, range(z.size)), (zero_d, picks)):
        mismatches = [(z[i], w[i], g) for g, i in zip(got, at) if not _same(g, expected[i])]
        assert mismatches == []
