"""The streaming column sum (numtile.ops_cpu.reduction.sum_columns, and its CUDA twin under the
simulator) against NumPy: several column blocks, row counts that the four bands of rows do
not divide (one to three rows after them, fewer rows than bands), partial sums added to what
the output holds."""

import numpy as np
import pytest

from tests.kernels import Host

CASES = [
    ((2, 9, 2050), np.float32),
    ((1, 4, 3), np.float64),
    ((3, 1, 5), np.float64),
    ((2, 11, 6), np.float64),
]


@pytest.mark.parametrize(("plan", "dtype"), CASES, ids=str)
def test_sum_columns_adds_the_column_sums_to_out(backend, plan, dtype):
    pre, n, post = plan
    rng = np.random.default_rng(0)
    x = rng.standard_normal(plan).astype(dtype)
    out = rng.standard_normal((pre, post)).astype(dtype)
    expected = out.astype(np.float64) + x.astype(np.float64).sum(axis=1)
    backend.run("sum_columns", x.reshape(-1), out.reshape(-1), *map(Host, plan))
    np.testing.assert_allclose(out, expected, rtol=1e-6 if dtype == np.float32 else 1e-13)
