"""The one-pass moments kernel of var (numtile.ops_cpu.moments, and its CUDA twin under the
simulator) against NumPy: count, mean (held minus a shift) and M2 of every (p, q) column,
merged over tiles and partial states, with NumPy's digits for data far from zero."""

import numpy as np
import pytest

from tests.kernels import FAR_FROM_ZERO, Host, exact_m2, far_from_zero

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
# here; whole columns on a GPU): the last digits of M2 differ
TWINS = {"rtol": 1e-12, "atol": 0}


def empty_state(columns: int):
    """count, shift, mean, M2 of ``columns`` columns holding no rows: only the count says so
    (the first chunk sets the others)."""
    return np.zeros(columns), *(np.full(columns, np.nan) for _ in range(3))


@pytest.mark.parametrize(("plan", "dtype"), CASES, ids=str)
def test_two_tiles_merge_into_the_moments_of_both(backend, plan, dtype):
    pre, n, post = plan
    rng = np.random.default_rng(0)
    # far from zero: sums of squares would lose every digit of the variance
    tiles = [(1e6 + rng.standard_normal(plan) * (k + 1)).astype(dtype) for k in range(2)]
    count, shift, mean, m2 = empty_state(pre * post)
    for tile in tiles:
        arguments = (tile.reshape(-1), count, shift, mean, m2, *map(Host, plan))
        backend.run("moments_accumulate", *arguments, tolerance=TWINS)
    both = np.concatenate(tiles, axis=1).astype(np.float64)
    np.testing.assert_array_equal(count, 2 * n)
    np.testing.assert_array_equal(shift, tiles[0][:, 0].reshape(-1))  # the first value
    np.testing.assert_allclose(shift + mean, both.mean(axis=1).reshape(-1), rtol=1e-14)
    expected = ((both - both.mean(axis=1, keepdims=True)) ** 2).sum(axis=1).reshape(-1)
    np.testing.assert_allclose(m2, expected, rtol=1e-12)


def test_merged_moments_are_the_moments_of_both(backend):
    rng = np.random.default_rng(1)
    # two row blocks of 3 columns (the third column empty in the second block), far from zero
    blocks = [1e6 + rng.standard_normal((rows, 3)) * (k + 1) for k, rows in enumerate((40, 7))]
    moments = []
    for block in blocks:
        state = empty_state(3)
        arguments = (block.reshape(-1), *state, *map(Host, (1, len(block), 3)))
        backend.run("moments_accumulate", *arguments, tolerance=TWINS)
        moments.append(state)
    (count, shift, mean, m2), other = moments
    other[0][2] = 0.0  # a partial with no rows leaves its column as it was
    expected = [np.concatenate([blocks[0][:, :2], blocks[1][:, :2]]), blocks[0][:, 2:]]
    backend.run("moments_merge", count, shift, mean, m2, *other)
    np.testing.assert_array_equal(count, [47, 47, 40])
    mean = shift + mean
    for columns, got_mean, got_m2 in (
        (expected[0], mean[:2], m2[:2]),
        (expected[1], mean[2:], m2[2:]),
    ):
        np.testing.assert_allclose(got_mean, columns.mean(axis=0), rtol=1e-14)
        np.testing.assert_allclose(
            got_m2, ((columns - columns.mean(axis=0)) ** 2).sum(axis=0), rtol=1e-12
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
    count, shift, mean, m2 = empty_state(70)
    moments_accumulate(x.reshape(-1), count, shift, mean, m2, 1, len(x), 70)
    precise = x.astype(np.longdouble)
    expected = ((precise - precise.mean(axis=0)) ** 2).sum(axis=0)
    np.testing.assert_allclose(m2, expected.astype(np.float64), rtol=1e-13)
    np.testing.assert_allclose(shift + mean, precise.mean(axis=0).astype(np.float64), rtol=1e-12)


@pytest.mark.parametrize("data", FAR_FROM_ZERO)
@pytest.mark.parametrize("merges", ["one tile", "four tiles", "four tiles in two partials"])
def test_m2_keeps_numpys_digits_far_from_zero(backend, data, merges):
    # measured: at most 8e-16 (NumPy's var 1e-15 for N(1e6, 1), 5e-10 for N(-1e8, 1e-2), its
    # mean summed in order); with the running mean unshifted 2e-13 - 8e-12, 4e-9 - 9e-8
    tiles, rows, columns = 4, 300, 5
    x = far_from_zero(data, (tiles * rows, columns))
    parts = [x] if merges == "one tile" else np.split(x, tiles)
    states = [empty_state(columns) for _ in range(2 if "partials" in merges else 1)]
    for k, part in enumerate(parts):  # tiles in turn into the states, as the chains take them
        arguments = (
            part.reshape(-1),
            *states[k % len(states)],
            *map(Host, (1, len(part), columns)),
        )
        backend.run("moments_accumulate", *arguments, tolerance=TWINS)
    if len(states) > 1:  # the partials merged at the end into a state with no rows yet
        merged = empty_state(columns)
        for state in states:
            backend.run("moments_merge", *merged, *state)
        states = [merged]
    count, shift, mean, m2 = states[0]
    np.testing.assert_array_equal(count, len(x))
    np.testing.assert_allclose(m2, exact_m2(x).astype(np.float64), rtol=1e-14)
    precise_mean = x.astype(np.longdouble).mean(axis=0).astype(np.float64)
    np.testing.assert_allclose(shift + mean, precise_mean, rtol=1e-15)
