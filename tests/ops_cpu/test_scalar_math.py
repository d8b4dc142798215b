"""numtile.ops_cpu.scalar_math: the branch-free float32 functions, against NumPy in float64."""

import numba
import numpy as np

from numtile.ops_cpu import scalar_math


@numba.njit(error_model="numpy")
def softmax_exp(x, out):
    """out[i] = exp(x[i]) through the attention kernels' own exp."""
    for i in range(x.size):
        out[i] = scalar_math.softmax_exp(x[i])


def test_softmax_exp_is_accurate_in_float32():
    x = np.concatenate([np.linspace(-100, 89, 200001), [-np.inf, np.inf, np.nan]]).astype(
        np.float32
    )
    out = np.empty_like(x)
    softmax_exp(x, out)
    expected = np.exp(x.astype(np.float64))
    normal = (x >= -87.33) & (x <= 88.03)
    np.testing.assert_allclose(out[normal], expected[normal], rtol=1.5e-7)  # about 1 ulp
    assert np.all(out[x < -87.33] == 0) and np.all(np.isposinf(out[x > 88.72]))
    assert np.isnan(out[-1])
