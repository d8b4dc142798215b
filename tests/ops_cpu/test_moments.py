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


# the twins chunk the columns differently (a head of 32 rows, then the rest shifted by its mean
# here; whole columns on a GPU): data 1e6 from zero keeps ~11 digits of M2 either way
TWINS = {"rtol": 1e-10, "atol": 0}


@pytest.mark.parametrize(("plan", "dtype"), CASES, ids=str)
def test_two_tiles_merge_into_the_moments_of_both(backend, plan, dtype):
    pre, n, post = plan
    rng = np.random.default_rng(0)
    # far from zero: sums of squares would lose every digit of the variance
    tiles = [(1e6 + rng.standard_normal(plan) * (k + 1)).astype(dtype) for k in range(2)]
    count, mean, m2 = (np.zeros(pre * post) for _ in range(3))
    for tile in tiles:
        arguments = (tile.reshape(-1), count, mean, m2, *map(Host, plan))
        backend.run("moments_accumulate", *arguments, tolerance=TWINS)
    both = np.concatenate(tiles, axis=1).astype(np.float64)
    np.testing.assert_array_equal(count, 2 * n)
    np.testing.assert_allclose(mean, both.mean(axis=1).reshape(-1), rtol=1e-14)
    expected = ((both - both.mean(axis=1, keepdims=True)) ** 2).sum(axis=1).reshape(-1)
    np.testing.assert_allclose(m2, expected, rtol=1e-9)


def test_merged_moments_are_the_moments_of_both(backend):
    rng = np.random.default_rng(1)
    # two row blocks of 3 columns (the third column empty in the second block), far from zero
    blocks = [1e6 + rng.standard_normal((rows, 3)) * (k + 1) for k, rows in enumerate((40, 7))]
    moments = []
    for block in blocks:
        count, mean, m2 = (np.zeros(3) for _ in range(3))
        arguments = (block.reshape(-1), count, mean, m2, *map(Host, (1, len(block), 3)))
        backend.run("moments_accumulate", *arguments, tolerance=TWINS)
        moments.append((count, mean, m2))
    (count, mean, m2), (other_count, other_mean, other_m2) = moments
    other_count[2] = 0.0  # a partial with no rows leaves its column as it was
    expected = [np.concatenate([blocks[0][:, :2], blocks[1][:, :2]]), blocks[0][:, 2:]]
    backend.run("moments_merge", count, mean, m2, other_count, other_mean, other_m2)
    np.testing.assert_array_equal(count, [47, 47, 40])
    for columns, got_mean, got_m2 in (
        (expected[0], mean[:2], m2[:2]),
        (expected[1], mean[2:], m2[2:]),
    ):
        np.testing.assert_allclose(got_mean, columns.mean(axis=0), rtol=1e-14)
        np.testing.assert_allclose(
            got_m2, ((columns - columns.mean(axis=0)) ** 2).sum(axis=0), rtol=1e-9
        )


@pytest.mark.parametrize("data", ["offset", "outlier first", "trend"])
def test_one_tile_keeps_the_digits_of_m2(data):
    # the rows after the head are summed in one pass, shifted by the head's mean: unshifted
    # (or shifted badly) their sum of squares would lose most digits of M2 to cancellation
    from numtile.ops_cpu.moments import moments_accumulate

    rng = np.random.default_rng(2)
    x = rng.standard_normal((4099, 70))
    if data == "offset":
        x += 1e6
    elif data == "outlier first":
        x[0] *= 1e6
    else:
        x += np.arange(len(x))[:, None] * 1e3
    count, mean, m2 = (np.zeros(70) for _ in range(3))
    moments_accumulate(x.reshape(-1), count, mean, m2, 1, len(x), 70)
    precise = x.astype(np.longdouble)
    expected = ((precise - precise.mean(axis=0)) ** 2).sum(axis=0)
    np.testing.assert_allclose(m2, expected.astype(np.float64), rtol=2e-12)
    np.testing.assert_allclose(mean, precise.mean(axis=0).astype(np.float64), rtol=1e-12)
