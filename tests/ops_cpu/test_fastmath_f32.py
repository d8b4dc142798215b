"""The float32-native sin, cos, tan (``ops_cpu.fastmath_f32``) and the float32 pow of
``ops_cpu.fastmath_pow`` through the ``unary``/``binary`` kernels, against float64 references:
every float32 next to a multiple of pi/2 below the float32 reduction's limit (its hardest
arguments), the limit itself (libm beyond it, in ``map_reduced``'s fix-up pass), and pow over
the whole float32 range (subnormal results, huge exponents)."""

import numpy as np
import pytest

from numtile import opcodes, ops_cpu
from numtile.ops_cpu.fastmath_f32 import LIMIT_F32

TRIG = {"sin": np.sin, "cos": np.cos, "tan": np.tan}


def _ulps(actual, reference):
    """|actual - reference| in float32 ulps at the float64 ``reference``."""
    spacing = np.spacing(np.abs(reference).astype(np.float32)).astype(np.float64)
    return np.abs(actual.astype(np.float64) - reference) / spacing


def _near_multiples():
    """The float32 nearest to k pi/2 and its two neighbours, for every k below the limit."""
    half_pi = np.longdouble("1.570796326794896619231321691639751442")
    k = np.arange(1, int(LIMIT_F32 / 1.5707963) + 2)
    nearest = (k.astype(np.longdouble) * half_pi).astype(np.float32)
    up, down = np.nextafter(nearest, np.float32(np.inf)), np.nextafter(nearest, np.float32(0))
    return np.concatenate([nearest, up, down, -nearest])


@pytest.mark.parametrize("name", sorted(TRIG))
def test_float32_trig_is_within_one_ulp_next_to_every_multiple_of_half_pi(name):
    # around the limit too (the fix-up pass: libm beyond it)
    limits = [LIMIT_F32, 2.0**19]
    edges = [np.nextafter(np.float32(v), np.float32(d)) for v in limits for d in (0, np.inf)]
    x = np.concatenate([_near_multiples(), np.float32(limits), np.float32(edges)])
    x = np.random.default_rng(0).permutation(x)  # beyond-limit elements inside blocks
    out = np.empty_like(x)
    ops_cpu.unary(x, out, opcodes.UNARY_OPS[name])
    ulps = _ulps(out, TRIG[name](x.astype(np.float64)))
    assert ulps.max() <= 1.0, (x[np.argmax(ulps)], ulps.max())
    assert np.median(ulps) < 0.3  # a wrong coefficient shows here before it breaks 1 ulp


def test_float32_power_is_within_half_an_ulp_plus_a_hundredth_over_the_range():
    rng = np.random.default_rng(2)
    n = 1 << 16
    a = np.concatenate([10 ** rng.uniform(-45, 38, n), rng.uniform(0.999, 1.001, n)])
    b = np.concatenate([rng.uniform(-6, 6, n), rng.uniform(-3e4, 3e4, n)])
    a, b = a.astype(np.float32), b.astype(np.float32)
    out = np.empty_like(a)
    unit = np.array([1], np.int64)
    ops_cpu.binary(a, unit, b, unit, out, np.array([a.size], np.int64), opcodes.POWER)
    with np.errstate(all="ignore"):
        reference = np.power(a.astype(np.float64), b.astype(np.float64))
    finite = np.abs(reference) < np.finfo(np.float32).max
    normal = finite & (np.abs(reference) >= np.finfo(np.float32).tiny)
    assert normal.sum() > n  # both halves reach normal results
    assert _ulps(out[normal], reference[normal]).max() <= 0.51
    # subnormal results: one rounding of a float64 (at most half a subnormal spacing more)
    tiny = finite & ~normal
    assert np.abs(out[tiny] - reference[tiny]).max() <= 2.0**-149
    np.testing.assert_array_equal(np.isinf(out), ~finite)
