"""The one-pass moments kernel of var (numtile.ops_cpu.moments, and its CUDA twin under the
simulator) against NumPy: count, mean and M2 of every (p, q) column, merged over two tiles,
exact for data far from zero."""

import numpy as np
import pytest

from tests.kernels import Host

# (pre, n, post), dtype: the reduced axis innermost (chunks of a run), in the middle, over
# several row chunks and column blocks, of length 1
CASES = [
    ((3, 5000, 1), np.float32),
    ((3, 5000, 1), np.float64),
    ((2, 70, 9), np.float32),
    ((1, 66, 514), np.float64),
    ((4, 1, 3), np.float32),
]


@pytest.mark.parametrize(("plan", "dtype"), CASES, ids=str)
def test_two_tiles_merge_into_the_moments_of_both(backend, plan, dtype):
    pre, n, post = plan
    rng = np.random.default_rng(0)
    # far from zero: sums of squares would lose every digit of the variance
    tiles = [(1e6 + rng.standard_normal(plan) * (k + 1)).astype(dtype) for k in range(2)]
    count, mean, m2 = (np.zeros(pre * post) for _ in range(3))
    # the twins chunk the columns differently (rows of 64 here, whole columns on a GPU)
    twins = {"rtol": 1e-10, "atol": 0}
    for tile in tiles:
        arguments = (tile.reshape(-1), count, mean, m2, *map(Host, plan))
        backend.run("moments_accumulate", *arguments, tolerance=twins)
    both = np.concatenate(tiles, axis=1).astype(np.float64)
    np.testing.assert_array_equal(count, 2 * n)
    np.testing.assert_allclose(mean, both.mean(axis=1).reshape(-1), rtol=1e-14)
    expected = ((both - both.mean(axis=1, keepdims=True)) ** 2).sum(axis=1).reshape(-1)
    np.testing.assert_allclose(m2, expected, rtol=1e-9)
