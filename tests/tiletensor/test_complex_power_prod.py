"""Complex ``exp``, ``pow`` and ``prod`` by the standard's rules, on CPU and the CUDA twin:
``exp`` against the 2023.12 table of its complex special cases, ``pow`` as if it were
``exp(x2 * log(x1))`` (the standard's rule for complex operands) with annex G's exp, log and
multiply, over every pair of a grid of special and ordinary values, and ``prod`` as successive
annex G products (the standard: "as if implemented by successive application of multiply"),
against the C11 G.5.1 transcription of tests/tiletensor/test_complex_arithmetic.py. Ordinary
values against NumPy, which follows none of this for infinities."""

import functools
import math

import numpy as np
import pytest

import numtile as nt
from numtile import opcodes
from tests.kernels import Host
from tests.tiletensor.test_complex_arithmetic import _same, cmultd

INF, NAN = np.inf, np.nan
PARTS = [0.0, -0.0, 1.0, -1.0, 2.0, -0.5, 1e300, INF, -INF, NAN]
GRID = np.array([complex(a, b) for a in PARTS for b in PARTS])

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def spec_exp(z: complex) -> complex:
    """exp by the standard's table (2023.12), conj(exp(z)) = exp(conj(z)) for negative b; the
    unspecified signs are numtile's (+0 + 0j, +inf + NaN j)."""
    a, b = z.real, z.imag
    if math.copysign(1.0, b) < 0 and not math.isnan(b):
        return spec_exp(complex(a, -b)).conjugate()
    if b == 0:  # +-0 -> 1 + 0j; +inf -> inf + 0j; NaN -> NaN + 0j; the rest exp(a) + 0j
        return complex(np.exp(a), b)
    if math.isinf(a) and not math.isfinite(b):
        return 0j if a < 0 else complex(INF, NAN)
    if not math.isfinite(b) or math.isnan(a):
        return complex(NAN, NAN)
    if math.isinf(a):  # -inf: +0 cis(b); +inf: +inf cis(b)
        scale = 0.0 if a < 0 else INF
        return complex(scale * math.cos(b), scale * math.sin(b))
    return complex(np.exp(np.longdouble(a)) * math.cos(b), np.exp(np.longdouble(a)) * math.sin(b))


def _log(z: complex) -> complex:
    with np.errstate(divide="ignore"):
        return complex(np.log(np.hypot(z.real, z.imag)), math.atan2(z.imag, z.real))


def spec_pow(z: complex, w: complex) -> complex:
    """z ** w as exp(w * log(z)) with annex G's parts; z ** 0 is 1 and a finite nonzero z to
    an integer |n| < 100 is a product of squares where that is finite (NumPy's and CPython's
    "more careful" cases)."""
    if w == 0:
        return 1 + 0j
    n = w.real
    if w.imag == 0 and abs(n) < 100 and n == math.floor(n) and np.isfinite(z) and z != 0:
        m, base, result = abs(int(n)), np.complex128(z), None
        while m:
            if m & 1:
                result = base if result is None else result * base
            m >>= 1
            if m:
                base = base * base
        result = np.complex128(1.0) / result if n < 0 else result
        if np.isfinite(result):
            return complex(result)
    return spec_exp(cmultd(w, _log(z)))


def _close(got: complex, expected: complex) -> bool:
    """Exactly the special values (NaN positions, infinities, zeros and their signs), finite
    values within a few ulps (of |expected|, or of the part itself next to an infinite part):
    exp and log round differently from libm's."""
    if np.isfinite(got) and np.isfinite(expected) and expected != 0:
        return abs(got - expected) <= 1e-13 * abs(expected)

    def part(g, e):
        if math.isfinite(g) and math.isfinite(e) and e != 0:
            return abs(g - e) <= 1e-13 * abs(e)
        return _same(complex(g, 0.0), complex(e, 0.0))

    return part(got.real, expected.real) and part(got.imag, expected.imag)


def _strides(values):
    array = np.array(values, np.int64)
    array.setflags(write=False)  # as the tiled ops pass them (else a second compile)
    return Host(array)


def test_exp_follows_the_standards_table(backend):
    out = np.zeros_like(GRID)
    backend.run("complex_unary", GRID, out, opcodes.COMPLEX_UNARY_OPS["exp"], twin=False)
    assert [(z, g) for z, g in zip(GRID, out) if not _close(g, spec_exp(z))] == []
    # near overflow: exp(x) is inf where exp(x) cis(y) is not, and exp(x + 0j) keeps its zero
    near = np.array([710 + 1j, 1000 + 0j, complex(1000, -0.0), 1400 + 1e-300j])
    got = nt.exp(nt.asarray(near)).to_numpy()
    assert np.isfinite(got[0].real) and got[0].imag == INF
    assert _same(got[1], complex(INF, 0.0)) and _same(got[2], complex(INF, -0.0))
    assert got[3].real == INF and 0 < got[3].imag < INF


def test_pow_is_exp_of_w_log_z_on_every_pair_of_special_values(backend):
    rows = np.ascontiguousarray(GRID[::9]) if backend.name == "cuda" else GRID
    out = np.zeros((rows.size, GRID.size), np.complex128)
    backend.run(
        "complex_binary",
        rows,
        _strides([1, 0]),
        GRID,
        _strides([0, 1]),
        out.reshape(-1),
        _strides(out.shape),
        opcodes.BINARY_OPS["power"],
        twin=False,
    )
    z, w = (a.reshape(-1) for a in np.broadcast_arrays(rows.reshape(-1, 1), GRID))
    wrong = [(a, b, g) for a, b, g in zip(z, w, out.reshape(-1)) if not _close(g, spec_pow(a, b))]
    assert wrong == []


def test_pow_of_tensors_and_scalars():
    got = nt.asarray([1j, -1 + 0j, complex(NAN, NAN), 0j]) ** 2
    assert _same(got.to_numpy()[0], -1 + 0j) and _same(got.to_numpy()[1], complex(1, -0.0))
    assert np.isnan(got.to_numpy()[2]) and _same(got.to_numpy()[3], 0j)
    assert _same(complex((nt.asarray([complex(NAN, 1.0)]) ** 0j).to_numpy()[0]), 1 + 0j)
    # the standard's rule where NumPy gives NaN + NaN j: 0 ** -1 is exp(inf + NaN j)
    assert _same(complex((nt.asarray([0j]) ** -1).to_numpy()[0]), complex(INF, NAN))
    assert _same(
        complex((nt.asarray([complex(INF, NAN)]) ** 1.5).to_numpy()[0]),
        spec_pow(complex(INF, NAN), 1.5 + 0j),
    )
    rng = np.random.default_rng(0)
    z = rng.uniform(-3, 3, 40) + 1j * rng.uniform(-3, 3, 40)  # (complex128 only: each dtype
    w = rng.uniform(-3, 3, 40) + 1j * rng.uniform(-2, 2, 40)  # compiles the kernel anew)
    w[:10] = np.arange(-5, 5)  # integer exponents: products of squares, as NumPy
    got = (nt.from_numpy(z, tile_shape=16) ** nt.from_numpy(w, tile_shape=16)).to_numpy()
    np.testing.assert_allclose(got, z**w, rtol=1e-13)


def _prod_reference(values, tiles):
    # one partial per tile along the reduced axis (from 1 + 0j), then the partials into the
    # output's 1 + 0j: with two tiles the order of the accumulations does not matter
    partials = [functools.reduce(cmultd, part, 1 + 0j) for part in np.array_split(values, tiles)]
    return functools.reduce(cmultd, partials, 1 + 0j)


@pytest.mark.parametrize("tiles", [1, 2])
def test_prod_recovers_infinities_as_successive_multiplies(tiles):
    pairs = np.stack([np.repeat(GRID, GRID.size), np.tile(GRID, GRID.size)], axis=1)
    got = nt.prod(nt.from_numpy(pairs, tile_shape=(2500, 3 - tiles)), axis=1).to_numpy()
    expected = [_prod_reference(row, tiles) for row in pairs]
    assert [(r, g, e) for r, g, e in zip(pairs, got, expected) if not _same(g, e)] == []
    # the standard's example: an infinity times a finite nonzero value stays infinite
    x = nt.asarray([complex(INF, NAN), 1 + 1j, 2 + 0j], tile_shape=2)
    assert _same(complex(nt.prod(x).to_numpy()), complex(INF, INF))  # NumPy: NaN + NaN j
    assert np.isnan(np.prod(x.to_numpy()))


def test_prod_kernels_of_both_backends(backend):
    pairs = np.stack([np.repeat(GRID[::7], 15), np.tile(GRID[::7], 15)], axis=1)  # (225, 2)
    out = np.ones(pairs.shape[0], np.complex128)
    code = opcodes.REDUCE_OPS["prod"]
    backend.run("complex_reduce_accumulate", pairs.reshape(-1), out, 225, 2, 1, code, twin=False)
    expected = [_prod_reference(row, 1) for row in pairs]
    assert [(r, g, e) for r, g, e in zip(pairs, out, expected) if not _same(g, e)] == []
