"""Tests for numtile/tiletensor/linalg/lu.py: the tiled LU with partial pivoting and the general
solve, inverse and determinants on it, against SciPy and NumPy."""

import numpy as np
import pytest
import scipy.linalg

import numtile as nt
from numtile.tiletensor.linalg.common import square_tiles
from numtile.tiletensor.linalg.lu import lu_factor

TILES = [(3, 3), (4, 4), (11, 11), (1, 1), (2, 5)]  # none divides 11; (2, 5) is retiled
TOLERANCE = {np.float32: 2e-4, np.float64: 1e-10}


def _general(n, dtype=np.float64, seed=0):
    return np.random.default_rng(seed).standard_normal((n, n)).astype(dtype)


def _singular(n, seed=0):
    a = _general(n, seed=seed)
    a[:, n // 2] = 0  # an exactly zero pivot in the middle of a panel
    return a


@pytest.mark.parametrize("tile_shape", TILES)
def test_lu_factor_matches_scipy_pivots_and_factor(tile_shape):
    a = _general(11, seed=1)
    lu, pivots = lu_factor(square_tiles(nt.from_numpy(a, tile_shape=tile_shape), "lu"))
    factor, ipiv = scipy.linalg.lu_factor(a)
    tile = lu.tile_shape[0]
    relative = np.concatenate([ipiv[k : k + tile] - k for k in range(0, 11, tile)])
    np.testing.assert_array_equal(pivots.to_numpy(), relative)
    np.testing.assert_allclose(lu.to_numpy(), factor, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("tile_shape", TILES)
@pytest.mark.parametrize("b_shape, b_tiles", [((11,), (4,)), ((11, 3), (5, 2))])
def test_solve_matches_scipy(dtype, tile_shape, b_shape, b_tiles, make_array, check_tiles):
    a = _general(11, dtype, seed=2)
    b = make_array(b_shape, dtype, seed=3)
    x = nt.linalg.solve(
        nt.from_numpy(a, tile_shape=tile_shape), nt.from_numpy(b, tile_shape=b_tiles)
    )
    expected = scipy.linalg.solve(a.astype(np.float64), b.astype(np.float64))
    tolerance = TOLERANCE[dtype]
    check_tiles(x, expected, rtol=tolerance, atol=tolerance, dtype=dtype)


def test_solve_under_each_scheduler(scheduler, make_array, check_tiles):
    a, b = _general(10, seed=4), make_array((10, 2), np.float64, seed=5)
    x = nt.linalg.solve(nt.from_numpy(a, tile_shape=(3, 3)), nt.from_numpy(b, tile_shape=(3, 1)))
    check_tiles(x, np.linalg.solve(a, b), rtol=1e-10, atol=1e-10)


def test_solve_of_an_ill_conditioned_matrix_is_as_accurate_as_lapack(make_array):
    a = scipy.linalg.hilbert(9)  # condition number ~ 5e11: pivoting matters
    b = make_array((9,), np.float64, seed=6)
    x = nt.linalg.solve(nt.from_numpy(a, tile_shape=(4, 4)), nt.from_numpy(b, tile_shape=(4,)))
    np.testing.assert_allclose(x.to_numpy(), scipy.linalg.solve(a, b), rtol=1e-3)  # cond * eps
    residual = np.linalg.norm(a @ x.to_numpy() - b)  # backward stable, as LAPACK's
    assert residual < 100 * np.finfo(float).eps * np.linalg.norm(a) * np.linalg.norm(x.to_numpy())


def test_solve_needs_pivoting_where_cholesky_fails(check_tiles):
    a = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 3.0], [4.0, 5.0, 0.0]])  # a[0, 0] = 0
    b = np.array([1.0, 2.0, 3.0])
    x = nt.linalg.solve(nt.from_numpy(a, tile_shape=(2, 2)), nt.from_numpy(b, tile_shape=(2,)))
    check_tiles(x, np.linalg.solve(a, b), rtol=1e-12, atol=1e-12)


def test_solve_assume_pos_keeps_the_spd_path(make_spd, make_array, check_tiles):
    a, b = make_spd(7, seed=7), make_array((7,), np.float64, seed=8)
    x = nt.linalg.solve(nt.from_numpy(a, tile_shape=(3, 3)), nt.from_numpy(b), assume_a="pos")
    check_tiles(x, np.linalg.solve(a, b), rtol=1e-10, atol=1e-10)
    x = nt.linalg.solve(
        nt.from_numpy(_general(4), tile_shape=(2, 2)), nt.ones((4,)), assume_a="pos"
    )
    with pytest.raises(np.linalg.LinAlgError, match="not symmetric|not positive definite"):
        x.to_numpy()


@pytest.mark.parametrize("name", ["solve", "inv"])
@pytest.mark.parametrize("tile_shape", [(3, 3), (11, 11)])
def test_a_singular_matrix_raises_when_the_result_is_read(name, tile_shape, check_tiles):
    a = nt.from_numpy(_singular(11, seed=9), tile_shape=tile_shape)
    result = nt.linalg.solve(a, nt.ones((11,))) if name == "solve" else nt.linalg.inv(a)
    with pytest.raises(np.linalg.LinAlgError, match=r"singular matrix.*\(11, 11\).*U\[5, 5\]"):
        result.to_numpy()
    with pytest.raises(np.linalg.LinAlgError):
        np.linalg.inv(_singular(11, seed=9))  # as NumPy
    check_tiles(nt.linalg.inv(nt.from_numpy(np.eye(3) * 2)), np.eye(3) / 2)  # still usable


@pytest.mark.parametrize("value", [np.nan, np.inf])
@pytest.mark.parametrize("where", [(0, 0), (1, 9), (10, 10)])
def test_non_finite_input_raises_value_error_like_scipy(value, where):
    a = _general(11, seed=10)
    a[where] = value
    with pytest.raises(ValueError, match="infs or NaNs"):
        scipy.linalg.solve(a, np.ones(11))
    x = nt.linalg.solve(nt.from_numpy(a, tile_shape=(4, 4)), nt.ones((11,)))
    with pytest.raises(ValueError, match=r"\(11, 11\) contains infs or NaNs"):
        x.to_numpy()
    with pytest.raises(ValueError, match="infs or NaNs"):
        nt.linalg.det(nt.from_numpy(a, tile_shape=(4, 4))).to_numpy()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("tile_shape", [(3, 3), (4, 4), (1, 1), (11, 11)])
def test_inv_matches_numpy(dtype, tile_shape, check_tiles):
    a = _general(11, dtype, seed=11)
    inverse = nt.linalg.inv(nt.from_numpy(a, tile_shape=tile_shape))
    tolerance = 10 * TOLERANCE[dtype]
    check_tiles(
        inverse, np.linalg.inv(a.astype(np.float64)), rtol=tolerance, atol=tolerance, dtype=dtype
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("tile_shape", [(3, 3), (4, 4), (11, 11)])
@pytest.mark.parametrize("seed", [12, 13, 14])
def test_det_and_slogdet_match_numpy(dtype, tile_shape, seed):
    a = _general(11, dtype, seed=seed)
    x = nt.from_numpy(a, tile_shape=tile_shape)
    sign, logabs = nt.linalg.slogdet(x)
    expected_sign, expected_log = np.linalg.slogdet(a.astype(np.float64))
    assert sign.item() == expected_sign and sign.dtype == dtype and sign.shape == ()
    tolerance = TOLERANCE[dtype]
    np.testing.assert_allclose(logabs.item(), expected_log, rtol=tolerance, atol=tolerance)
    det = nt.linalg.det(x)
    assert det.shape == () and det.dtype == dtype
    np.testing.assert_allclose(
        det.item(), np.linalg.det(a.astype(np.float64)), rtol=100 * tolerance
    )


def test_det_of_a_singular_matrix_is_zero_like_numpy():
    a = _singular(11, seed=15)
    x = nt.from_numpy(a, tile_shape=(4, 4))
    sign, logabs = nt.linalg.slogdet(x)
    assert (sign.item(), logabs.item()) == tuple(np.linalg.slogdet(a)) == (0.0, -np.inf)
    assert nt.linalg.det(x).item() == np.linalg.det(a) == 0.0


def test_det_of_integers_and_of_a_permutation():
    a = np.array([[0, 1, 0], [0, 0, 1], [1, 0, 0]])  # an even permutation: det 1
    assert nt.linalg.det(nt.from_numpy(a, tile_shape=(2, 2))).item() == pytest.approx(1.0)
    swapped = a[[1, 0, 2]]
    assert nt.linalg.det(nt.from_numpy(swapped, tile_shape=(1, 1))).item() == pytest.approx(-1.0)


@pytest.mark.parametrize("name", ["inv", "det", "slogdet"])
def test_non_square_input_raises_like_numpy(name):
    with pytest.raises(np.linalg.LinAlgError):
        getattr(np.linalg, name)(np.ones((2, 3)))
    with pytest.raises(np.linalg.LinAlgError, match=r"square.*\(2, 3\)"):
        getattr(nt.linalg, name)(nt.ones((2, 3)))
    with pytest.raises(np.linalg.LinAlgError, match=r"square.*\(3,\)"):
        getattr(nt.linalg, name)(nt.ones((3,)))


def test_solve_errors_name_the_shapes():
    with pytest.raises(np.linalg.LinAlgError, match=r"square.*\(3, 4\)"):
        nt.linalg.solve(nt.ones((3, 4)), nt.ones((3,)))
    with pytest.raises(ValueError, match=r"\(3, 3\).*\(4,\)"):
        nt.linalg.solve(nt.ones((3, 3)), nt.ones((4,)))
    with pytest.raises(ValueError, match=r"\(3, 3\).*\(3, 2, 2\)"):
        nt.linalg.solve(nt.ones((3, 3)), nt.ones((3, 2, 2)))
    with pytest.raises(ValueError, match="assume_a"):
        nt.linalg.solve(nt.ones((3, 3)), nt.ones((3,)), assume_a="sym")


def test_lu_runs_on_a_gpu_worker_like_on_cpu(make_array):
    a, b = _general(9, seed=16), make_array((9, 2), np.float64, seed=17)
    nt.init(ncpu=1, ncuda=1, restrict="cuda")
    try:
        x = nt.linalg.solve(
            nt.from_numpy(a, tile_shape=(4, 4)), nt.from_numpy(b, tile_shape=(4, 2))
        )
        np.testing.assert_allclose(x.to_numpy(), np.linalg.solve(a, b), rtol=1e-10, atol=1e-10)
        sign, logabs = nt.linalg.slogdet(nt.from_numpy(a, tile_shape=(4, 4)))
        assert (sign.item(), pytest.approx(logabs.item())) == tuple(np.linalg.slogdet(a))
        assert nt.get_runtime().busy[0] == 0  # the CPU worker ran nothing
    finally:
        nt.init()


def test_solve_out_of_core_under_a_host_limit_four_times_below_the_working_set(tmp_path):
    n, tile = 192, 32  # a, its factor, b and the solves: ~4 x 288 KiB; the limit: 256 KiB
    a = _general(n, seed=18) + n**0.5 * np.eye(n)
    b = np.random.default_rng(19).standard_normal((n, 4))
    runtime = nt.init(ncpu=2, host_mem_limit=256 << 10, spill_dir=str(tmp_path))
    try:
        x = nt.linalg.solve(
            nt.from_numpy(a, tile_shape=(tile, tile)), nt.from_numpy(b, tile_shape=(tile, 4))
        )
        np.testing.assert_allclose(x.to_numpy(), np.linalg.solve(a, b), rtol=1e-10, atol=1e-10)
        counters = runtime.manager.counters()
        assert counters["nodes"]["host"]["peak"] <= 256 << 10
        assert counters["spill"]["writes"] > 0
    finally:
        nt.init()


def test_a_panel_whose_columns_span_4_kib_matches_scipy():
    """512 float64 rows: the CPU panel pads LAPACK's leading dimension (ops_cpu.lu)."""
    a = _general(512, seed=13)
    lu, pivots = lu_factor(nt.from_numpy(a, tile_shape=(256, 256)))
    factor, ipiv = scipy.linalg.lu_factor(a)
    np.testing.assert_array_equal(pivots.to_numpy(), np.concatenate([ipiv[:256], ipiv[256:] - 256]))
    np.testing.assert_allclose(lu.to_numpy(), factor, rtol=1e-11, atol=1e-11)


def test_laswp_tiles_swaps_rows_between_tiles_of_any_dtype():
    from numtile.ops_cpu import laswp_tiles

    pivots = np.array([5, 9, 2, 11, 4])  # LAPACK's ipiv less one
    for dtype in (np.float32, np.complex128):
        a = (np.arange(36).reshape(12, 3) * (1 - 2j if dtype == np.complex128 else 1)).astype(dtype)
        expected = a.copy()
        for i, p in enumerate(pivots):
            expected[[i, p]] = expected[[p, i]]
        tiles = [a[:5].copy(), a[5:9].copy(), a[9:].copy()]
        laswp_tiles(tiles, pivots)
        np.testing.assert_array_equal(np.vstack(tiles), expected)
