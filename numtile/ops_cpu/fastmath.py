"""Scalar maths in the precision of the data, written so that loops over it vectorise."""

import numpy as np
from numba.core import types
from numba.extending import overload


def tanh_of(v):
    """tanh in the precision of ``v``: a vectorisable rational approximation for float32."""
    raise NotImplementedError("tanh_of is only callable from numba-compiled code")


# Rational minimax approximation of tanh on [-7.905, 7.905] for float32 (the coefficients of
# Eigen's generic_fast_tanh_float, max error a few float32 ulps). Pure arithmetic, so the
# loops around it vectorise; libm's tanhf (no SVML here) is a scalar call per element.
_TANH_CLAMP = 7.90531110763549805
_TANH_ALPHA = (
    -2.76076847742355e-16,
    2.00018790482477e-13,
    -8.60467152213735e-11,
    5.12229709037114e-08,
    1.48572235717979e-05,
    6.37261928875436e-04,
    4.89352455891786e-03,
)
_TANH_BETA = (
    1.19825839466702e-06,
    1.18534705686654e-04,
    2.26843463243900e-03,
    4.89352518554385e-03,
)


@overload(tanh_of, inline="always")
def _tanh_of(v):
    if v != types.float32:
        return lambda v: np.tanh(v)
    f = np.float32
    clamp = f(_TANH_CLAMP)
    a0, a1, a2, a3, a4, a5, a6 = (f(c) for c in _TANH_ALPHA)
    b0, b1, b2, b3 = (f(c) for c in _TANH_BETA)

    def approximate(v):
        x = min(max(v, -clamp), clamp)
        x2 = x * x
        p = ((((((a0 * x2 + a1) * x2 + a2) * x2 + a3) * x2 + a4) * x2 + a5) * x2 + a6) * x
        q = ((b0 * x2 + b1) * x2 + b2) * x2 + b3
        return p / q

    return approximate
