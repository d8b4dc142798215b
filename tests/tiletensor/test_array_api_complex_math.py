"""The complex element-wise functions of numtile/complex_math.py (expm1 log1p log2 log10 sin cos
tan sinh cosh tanh asin acos atan asinh acosh atanh sign round) against NumPy: annex G's special
values (infinities, NaNs, signed zeros) over a grid of every pair of special and ordinary
parts, exactly, except where NumPy departs from the standard's tables (there the standard's
value is asserted), and random complex64 inputs within float32 rounding."""

import numpy as np
import pytest

import numtile as nt
from numtile import opcodes

INF, NAN = np.inf, np.nan
PARTS = [0.0, -0.0, 1.0, -1.0, 2.5, -0.5, 30.0, INF, -INF, NAN]
GRID = np.array([complex(a, b) for a in PARTS for b in PARTS])

# where NumPy is not the standard: expm1 (NumPy gives NaN parts the tables define) and sign
# (the standard: a NaN part gives NaN + NaN j)
# (keyed by repr: 0.0 and -0.0 hash alike)
STANDARD = {
    "expm1": [
        (complex(INF, 0.0), complex(INF, 0.0)),
        (complex(INF, -0.0), complex(INF, -0.0)),
        (complex(INF, INF), complex(INF, NAN)),
        (complex(INF, -INF), complex(INF, NAN)),
        (complex(INF, NAN), complex(INF, NAN)),
        (complex(-INF, INF), complex(-1.0, 0.0)),
        (complex(-INF, -INF), complex(-1.0, 0.0)),
        (complex(-INF, NAN), complex(-1.0, 0.0)),
        (complex(NAN, 0.0), complex(NAN, 0.0)),
        (complex(NAN, -0.0), complex(NAN, -0.0)),
    ],
    "sign": [(z, complex(NAN, NAN)) for z in GRID if np.isnan(z.real) != np.isnan(z.imag)],
}
STANDARD = {name: {repr(complex(z)): v for z, v in table} for name, table in STANDARD.items()}
# the standard leaves the sign of the infinite imaginary part unspecified (sin is -i sinh(iz))
UNSIGNED = {"sin": {z for z in GRID if np.isinf(z.imag) and not np.isfinite(z.real)}}


def _same(ours: complex, theirs: complex, signed: bool = True) -> bool:
    def part(u, v):
        if np.isnan(u) or np.isnan(v):
            return np.isnan(u) and np.isnan(v)
        if u == v:
            return not signed or np.signbit(u) == np.signbit(v)
        return abs(u - v) <= 2e-15 * abs(v)

    return part(ours.real, theirs.real) and part(ours.imag, theirs.imag)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("name", list(opcodes.COMPLEX_MATH))
def test_special_values_follow_annex_g(name):
    got = getattr(nt, name)(nt.from_numpy(GRID, tile_shape=37)).to_numpy()
    expected = getattr(np, name)(GRID)
    for z, ours, theirs in zip(GRID, got, expected):
        theirs = STANDARD.get(name, {}).get(repr(complex(z)), theirs)
        unsigned = z in UNSIGNED.get(name, ())
        assert _same(ours, theirs, signed=not unsigned), (name, z, ours, theirs)


def test_complex64_inputs_round_to_float32_like_numpy():
    rng = np.random.default_rng(0)
    values = (rng.uniform(-3, 3, 50) + 1j * rng.uniform(-3, 3, 50)).astype(np.complex64)
    x = nt.from_numpy(values, tile_shape=16)
    for name in opcodes.COMPLEX_MATH:
        got = getattr(nt, name)(x)
        assert got.dtype == np.complex64
        np.testing.assert_allclose(got.to_numpy(), getattr(np, name)(values), rtol=3e-6, atol=1e-6)
    assert nt.round(nt.asarray([2.5 - 0.5j, -1.5 + 3.5j])).to_numpy().tolist() == [2 - 0j, -2 + 4j]
    with pytest.raises(TypeError, match="trunc does not support complex"):
        nt.trunc(x)
