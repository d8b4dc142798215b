"""Tests for numtile/tiletensor/linalg/ (matmul.py, cholesky.py): matmul, Cholesky, triangular
and SPD solves."""

import numpy as np
import pytest
import scipy.linalg

import numtile as nt

MATMUL_TOLERANCE = {np.float32: 1e-4, np.float64: 1e-12}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "tiles_a, tiles_b",
    [
        ((2, 3), (3, 4)),  # inner tilings meet, nothing divides
        ((2, 3), (2, 5)),  # inner tilings differ: b is retiled
        ((5, 4), (4, 6)),  # single tiles
        ((1, 1), (1, 1)),
        ((3, 1), (4, 2)),
        ((5, 2), (1, 6)),
    ],
)
def test_matmul_2d(tiles_a, tiles_b, dtype, make_array, check_tiles):
    a, b = make_array((5, 4), dtype, 1), make_array((4, 6), dtype, 2)
    out = nt.matmul(nt.from_numpy(a, tile_shape=tiles_a), nt.from_numpy(b, tile_shape=tiles_b))
    tolerance = MATMUL_TOLERANCE[dtype]
    assert out.tile_shape == (tiles_a[0], tiles_b[1])
    check_tiles(out, a.astype(np.float64) @ b, rtol=tolerance, atol=tolerance, dtype=dtype)


def test_matmul_under_each_scheduler(scheduler, make_array, check_tiles):
    a, b = make_array((9, 7), np.float64, 1), make_array((7, 8), np.float64, 2)
    out = nt.from_numpy(a, tile_shape=(4, 3)) @ nt.from_numpy(b, tile_shape=(2, 3))
    check_tiles(out, a @ b)


def test_matmul_of_integers_is_exact_int64(make_array, check_tiles):
    a, b = make_array((5, 4), np.int64, 1), make_array((4, 3), np.int64, 2)
    check_tiles(nt.from_numpy(a, tile_shape=(2, 3)) @ nt.from_numpy(b, tile_shape=(3, 2)), a @ b)


def test_matmul_promotes_mixed_dtypes(make_array, check_tiles):
    a, b = make_array((3, 4), np.float32, 1), make_array((4, 2), np.int64, 2)
    out = nt.from_numpy(a, tile_shape=(2, 2)) @ nt.from_numpy(b, tile_shape=(2, 2))
    check_tiles(out, a @ b)  # float32 @ int64 -> float64, as in NumPy


@pytest.mark.parametrize(
    "shape_a, tiles_a, shape_b, tiles_b",
    [
        ((3, 5, 4), (2, 2, 3), (3, 4, 2), (2, 3, 1)),  # same batch, retiled to meet
        ((3, 5, 4), (2, 2, 3), (4, 2), (3, 1)),  # 2-d operand broadcast over the batch
        ((4, 2), (3, 1), (3, 2, 5), (1, 2, 2)),
        ((2, 1, 3, 4), (1, 1, 2, 3), (3, 4, 2), (2, 3, 2)),  # batch dims broadcast both ways
        ((2, 1, 3, 4), (2, 1, 3, 4), (1, 5, 4, 2), (1, 2, 4, 1)),
        ((1, 3, 4), (1, 2, 4), (6, 4, 3), (4, 4, 2)),
    ],
)
def test_matmul_batched(shape_a, tiles_a, shape_b, tiles_b, make_array, check_tiles):
    a, b = make_array(shape_a, np.float64, 1), make_array(shape_b, np.float64, 2)
    out = nt.from_numpy(a, tile_shape=tiles_a) @ nt.from_numpy(b, tile_shape=tiles_b)
    check_tiles(out, a @ b)


@pytest.mark.parametrize(
    "shape_a, tiles_a, shape_b, tiles_b",
    [
        ((4,), (3,), (4, 6), (2, 4)),  # vector @ matrix
        ((5, 4), (2, 3), (4,), (2,)),  # matrix @ vector
        ((4,), (3,), (4,), (2,)),  # dot product: 0-d result
        ((4,), (4,), (3, 4, 2), (2, 3, 2)),  # vector @ batch
        ((3, 5, 4), (2, 2, 3), (4,), (1,)),  # batch @ vector
    ],
)
def test_matmul_with_1d_operands(shape_a, tiles_a, shape_b, tiles_b, make_array, check_tiles):
    a, b = make_array(shape_a, np.float64, 1), make_array(shape_b, np.float64, 2)
    out = nt.from_numpy(a, tile_shape=tiles_a) @ nt.from_numpy(b, tile_shape=tiles_b)
    check_tiles(out, np.asarray(a @ b))


def test_matmul_with_empty_dimensions(check_tiles):
    check_tiles(nt.ones((2, 0)) @ nt.ones((0, 3)), np.zeros((2, 3)))
    check_tiles(
        nt.ones((0, 3), tile_shape=(2, 2)) @ nt.ones((3, 4), tile_shape=(2, 2)), np.zeros((0, 4))
    )


def test_matmul_errors():
    with pytest.raises(ValueError, match="0-d"):
        nt.ones(()) @ nt.ones((2,))
    with pytest.raises(TypeError, match="boolean"):
        nt.ones((2, 2), dtype=np.bool_) @ nt.ones((2, 2), dtype=np.bool_)
    with pytest.raises(TypeError, match="TileTensor"):
        nt.matmul(np.ones((2, 2)), nt.ones((2, 2)))
    with pytest.raises(ValueError, match=r"\(2, 2, 3\).*\(3, 3, 2\)"):
        nt.ones((2, 2, 3)) @ nt.ones((3, 3, 2))


# --- Cholesky ------------------------------------------------------------------------------------

CHOLESKY_TILES = [(2, 2), (3, 3), (7, 7), (1, 1), (4, 4), (2, 3), (None, None)]


@pytest.mark.parametrize("tile_shape", CHOLESKY_TILES)
@pytest.mark.parametrize("seed", [0, 1])
def test_cholesky_matches_numpy(tile_shape, seed, make_spd, check_tiles):
    a = make_spd(7, seed=seed)
    factor = nt.linalg.cholesky(nt.from_numpy(a, tile_shape=tile_shape))
    expected = np.linalg.cholesky(a)
    check_tiles(factor, expected, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(scipy.linalg.cholesky(a, lower=True), expected)  # same reference


def test_cholesky_float32(make_spd, check_tiles):
    a = make_spd(9, np.float32, seed=2)
    factor = nt.linalg.cholesky(nt.from_numpy(a, tile_shape=(4, 4)))
    check_tiles(
        factor, np.linalg.cholesky(a.astype(np.float64)), rtol=1e-4, atol=1e-4, dtype=np.float32
    )


def test_cholesky_upper(make_spd, check_tiles):
    a = make_spd(6, seed=3)
    upper = nt.linalg.cholesky(nt.from_numpy(a, tile_shape=(4, 4)), upper=True)
    check_tiles(upper, scipy.linalg.cholesky(a, lower=False), rtol=1e-10, atol=1e-10)


def test_cholesky_reads_only_the_lower_triangle(make_spd, check_tiles):
    a = make_spd(7, seed=4)
    junk = np.tril(a) + np.triu(np.full((7, 7), 1e6), 1)
    factor = nt.linalg.cholesky(nt.from_numpy(junk, tile_shape=(3, 3)))
    check_tiles(factor, np.linalg.cholesky(a), rtol=1e-10, atol=1e-10)


def test_cholesky_under_each_scheduler(scheduler, make_spd, check_tiles):
    a = make_spd(10, seed=5)
    check_tiles(
        nt.linalg.cholesky(nt.from_numpy(a, tile_shape=(3, 3))),
        np.linalg.cholesky(a),
        rtol=1e-10,
        atol=1e-10,
    )


def test_cholesky_of_integers_and_tiny_matrices(check_tiles):
    a = np.array([[4, 2], [2, 5]])
    check_tiles(
        nt.linalg.cholesky(nt.from_numpy(a, tile_shape=(1, 1))),
        np.linalg.cholesky(a.astype(np.float64)),
    )
    check_tiles(nt.linalg.cholesky(nt.from_numpy(np.array([[9.0]]))), np.array([[3.0]]))


def test_cholesky_needs_a_square_matrix():
    with pytest.raises(ValueError, match=r"square.*\(2, 3\)"):
        nt.linalg.cholesky(nt.ones((2, 3)))
    with pytest.raises(ValueError, match="square"):
        nt.linalg.cholesky(nt.ones((3,)))


@pytest.mark.parametrize("tile_shape", [(2, 2), (7, 7), (1, 1)])
def test_cholesky_of_a_non_spd_matrix_raises_at_to_numpy(
    tile_shape, scheduler, make_spd, check_tiles
):
    a = make_spd(7, seed=6)
    a[5, 5] = -100.0
    factor = nt.linalg.cholesky(nt.from_numpy(a, tile_shape=tile_shape))  # returns at once
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        factor.to_numpy()
    # the runtime is still usable, for linear algebra too
    good = make_spd(5, seed=7)
    check_tiles(
        nt.linalg.cholesky(nt.from_numpy(good, tile_shape=(2, 2))),
        np.linalg.cholesky(good),
        rtol=1e-10,
        atol=1e-10,
    )
    check_tiles(nt.ones((3, 3), tile_shape=(2, 2)) + 1, np.full((3, 3), 2.0))


def test_cholesky_error_is_a_task_error_naming_the_task(make_spd):
    factor = nt.linalg.cholesky(nt.from_numpy(-np.eye(4), tile_shape=(2, 2)))
    with pytest.raises(nt.TaskError, match="potrf") as info:
        factor.to_numpy()
    assert isinstance(info.value, np.linalg.LinAlgError)


def test_a_reported_cholesky_failure_is_not_raised_again(make_spd):
    factor = nt.linalg.cholesky(nt.from_numpy(-np.eye(6), tile_shape=(2, 2)))
    with pytest.raises(np.linalg.LinAlgError):
        factor.to_numpy()
    try:
        nt.wait_all()
    finally:
        nt.init()  # drop whatever the runtime still holds, for the tests after this one


# --- triangular and SPD solves -------------------------------------------------------------------


def _triangular(n, lower, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n)) + n * np.eye(n)
    return np.tril(a) if lower else np.triu(a)


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("b_shape, b_tiles", [((7,), (3,)), ((7, 3), (2, 2)), ((7, 4), (7, 4))])
@pytest.mark.parametrize("tile_shape", [(3, 3), (7, 7), (1, 1), (2, 4)])
def test_solve_triangular_matches_scipy(
    lower, trans, b_shape, b_tiles, tile_shape, make_array, check_tiles
):
    a = _triangular(7, lower)
    b = make_array(b_shape, np.float64, seed=3)
    x = nt.linalg.solve_triangular(
        nt.from_numpy(a, tile_shape=tile_shape),
        nt.from_numpy(b, tile_shape=b_tiles),
        lower=lower,
        trans=trans,
    )
    expected = scipy.linalg.solve_triangular(a, b, lower=lower, trans=1 if trans else 0)
    check_tiles(x, expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("lower", [True, False])
def test_solve_triangular_ignores_the_other_triangle(lower, make_array, check_tiles):
    a = _triangular(7, lower, seed=1)
    junk = a + (np.triu if lower else np.tril)(np.full((7, 7), 1e3), 1 if lower else -1)
    b = make_array((7, 2), np.float64, seed=4)
    x = nt.linalg.solve_triangular(
        nt.from_numpy(junk, tile_shape=(3, 3)), nt.from_numpy(b, tile_shape=(3, 1)), lower=lower
    )
    check_tiles(x, scipy.linalg.solve_triangular(a, b, lower=lower), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("trans", [False, True])
def test_solve_triangular_unit_diagonal(trans, make_array, check_tiles):
    a = _triangular(6, True, seed=2)
    np.fill_diagonal(a, 99.0)  # must be ignored
    b = make_array((6, 2), np.float64, seed=5)
    x = nt.linalg.solve_triangular(
        nt.from_numpy(a, tile_shape=(4, 4)),
        nt.from_numpy(b, tile_shape=(4, 2)),
        unit_diagonal=True,
        trans=trans,
    )
    expected = scipy.linalg.solve_triangular(
        a, b, lower=True, unit_diagonal=True, trans=1 if trans else 0
    )
    check_tiles(x, expected, rtol=1e-10, atol=1e-10)


def test_solve_triangular_float32(make_array, check_tiles):
    a = _triangular(8, True, seed=3).astype(np.float32)
    b = make_array((8, 3), np.float32, seed=6)
    x = nt.linalg.solve_triangular(
        nt.from_numpy(a, tile_shape=(3, 3)), nt.from_numpy(b, tile_shape=(3, 3))
    )
    expected = scipy.linalg.solve_triangular(a.astype(np.float64), b.astype(np.float64), lower=True)
    check_tiles(x, expected, rtol=1e-4, atol=1e-5, dtype=np.float32)


def test_solve_triangular_errors():
    with pytest.raises(ValueError, match=r"\(3, 3\).*\(4, 1\)|rows"):
        nt.linalg.solve_triangular(nt.ones((3, 3)), nt.ones((4,)))
    with pytest.raises(ValueError, match="square"):
        nt.linalg.solve_triangular(nt.ones((3, 4)), nt.ones((3,)))


@pytest.mark.parametrize("tile_shape", [(3, 3), (8, 8), (1, 1), (3, 5)])
@pytest.mark.parametrize("b_shape, b_tiles", [((8,), (3,)), ((8, 3), (5, 2))])
def test_solve_spd_matches_numpy(tile_shape, b_shape, b_tiles, make_spd, make_array, check_tiles):
    a = make_spd(8, seed=8)
    b = make_array(b_shape, np.float64, seed=9)
    x = nt.linalg.solve(
        nt.from_numpy(a, tile_shape=tile_shape), nt.from_numpy(b, tile_shape=b_tiles)
    )
    check_tiles(x, np.linalg.solve(a, b), rtol=1e-9, atol=1e-10)


def test_solve_under_each_scheduler(scheduler, make_spd, make_array, check_tiles):
    a, b = make_spd(9, seed=10), make_array((9, 2), np.float64, seed=11)
    x = nt.linalg.solve(nt.from_numpy(a, tile_shape=(4, 4)), nt.from_numpy(b, tile_shape=(4, 1)))
    check_tiles(x, np.linalg.solve(a, b), rtol=1e-9, atol=1e-10)
