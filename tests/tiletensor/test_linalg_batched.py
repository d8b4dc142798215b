"""Tests for numtile/tiletensor/linalg/batched.py: stacks of matrices in cholesky, solve, inv,
det and slogdet, both where the matrices fit one tile (one batched task per tile) and where
they do not (the tiled algorithm per matrix), against NumPy and array_api_strict."""

import json

import array_api_strict as xp
import numpy as np
import pytest

import numtile as nt

# (tiles of a (2, 3, 5, 5) stack): whole matrices per tile (batched tasks), tiles bigger than
# the matrices, and tiles that cut them (per matrix, tiles that divide nothing)
TILES = [(1, 2, 5, 5), (2, 3, 8, 8), (1, 1, 2, 3)]
TOLERANCE = {np.float32: 2e-4, np.float64: 1e-10}


def _general(shape, dtype=np.float64, seed=0):
    return (np.random.default_rng(seed).standard_normal(shape) + 3 * np.eye(shape[-1])).astype(
        dtype
    )


def _spd(shape, dtype=np.float64, seed=0):
    x = np.random.default_rng(seed).standard_normal(shape)
    return (x @ np.swapaxes(x, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(dtype)


def _close(tensor, expected, dtype, check_tiles, scale=1):
    tolerance = scale * TOLERANCE[dtype]
    check_tiles(tensor, expected, rtol=tolerance, atol=tolerance, dtype=dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("tiles", TILES)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_of_a_stack_matches_numpy(dtype, tiles, upper, check_tiles):
    a = _spd((2, 3, 5, 5), dtype, seed=1)
    expected = np.linalg.cholesky(a.astype(np.float64), upper=upper)
    result = nt.linalg.cholesky(nt.from_numpy(a, tile_shape=tiles), upper=upper)
    _close(result, expected, dtype, check_tiles)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("tiles", TILES)
def test_inv_det_slogdet_of_a_stack_match_numpy(dtype, tiles, check_tiles):
    a = _general((2, 3, 5, 5), dtype, seed=2)
    a[1, 2] = a[1, 2, [1, 0, 2, 3, 4]]  # a negative determinant somewhere
    x = nt.from_numpy(a, tile_shape=tiles)
    wide = a.astype(np.float64)
    _close(nt.linalg.inv(x), np.linalg.inv(wide), dtype, check_tiles, scale=10)
    sign, logabs = nt.linalg.slogdet(x)
    expected_sign, expected_log = np.linalg.slogdet(wide)
    check_tiles(sign, expected_sign.astype(dtype))
    _close(logabs, expected_log, dtype, check_tiles)
    _close(nt.linalg.det(x), np.linalg.det(wide), dtype, check_tiles, scale=100)


@pytest.mark.parametrize("tiles", TILES)
@pytest.mark.parametrize(
    "b_shape",
    [(5,), (5, 2), (3, 5, 1), (2, 1, 5, 3), (4, 2, 3, 5, 2)],  # broadcast b against a's batch
)
def test_solve_of_a_stack_broadcasts_like_array_api_strict(tiles, b_shape, check_tiles):
    a, b = _general((2, 3, 5, 5), seed=3), np.random.default_rng(4).standard_normal(b_shape)
    expected = np.asarray(xp.linalg.solve(xp.asarray(a), xp.asarray(b)))
    x = nt.linalg.solve(nt.from_numpy(a, tile_shape=tiles), nt.from_numpy(b))
    check_tiles(x, expected, rtol=1e-10, atol=1e-10)


def test_a_matrix_solved_for_a_stack_of_right_hand_sides(check_tiles):
    a, b = _general((5, 5), seed=5), np.random.default_rng(6).standard_normal((3, 5, 2))
    x = nt.linalg.solve(nt.from_numpy(a, tile_shape=(2, 2)), nt.from_numpy(b))
    check_tiles(x, np.linalg.solve(a, b), rtol=1e-10, atol=1e-10)


def test_solve_assume_pos_of_a_stack(check_tiles):
    a, b = _spd((3, 4, 4), seed=7), np.random.default_rng(8).standard_normal((3, 4, 2))
    x = nt.linalg.solve(nt.from_numpy(a, tile_shape=(1, 4, 4)), nt.from_numpy(b), assume_a="pos")
    check_tiles(x, np.linalg.solve(a, b), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("tiles", [(1, 2, 5, 5), (2, 3, 5, 5)])
def test_a_singular_member_raises_naming_it_when_read(tiles):
    a = _general((2, 3, 5, 5), seed=9)
    a[1, 2, :, 3] = 0
    x = nt.from_numpy(a, tile_shape=tiles)
    with pytest.raises(np.linalg.LinAlgError):
        np.linalg.inv(a)
    with pytest.raises(np.linalg.LinAlgError, match=r"matrix \(1, 2\) of the stack.*zero pivot"):
        nt.linalg.inv(x).to_numpy()
    with pytest.raises(np.linalg.LinAlgError, match=r"matrix \(1, 2\)"):
        nt.linalg.solve(x, nt.ones((5,))).to_numpy()
    sign, logabs = nt.linalg.slogdet(x)  # singular members have determinant 0, as NumPy
    expected_sign, expected_log = np.linalg.slogdet(a)
    np.testing.assert_array_equal(sign.to_numpy(), expected_sign)
    assert logabs.to_numpy()[1, 2] == expected_log[1, 2] == -np.inf


def test_a_member_that_is_not_positive_definite_is_named():
    a = _spd((2, 3, 4, 4), seed=10)
    a[0, 1, 2, 2] = -50.0
    with pytest.raises(np.linalg.LinAlgError, match=r"matrix \(0, 1\).*not positive definite"):
        nt.linalg.cholesky(nt.from_numpy(a, tile_shape=(2, 2, 4, 4))).to_numpy()
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        nt.linalg.cholesky(nt.from_numpy(a, tile_shape=(1, 1, 3, 3))).to_numpy()


def test_non_finite_members_raise_value_error():
    a = _general((3, 4, 4), seed=11)
    a[2, 1, 1] = np.nan
    with pytest.raises(ValueError, match=r"matrix \(2,\) of the stack of shape \(3, 4, 4\)"):
        nt.linalg.inv(nt.from_numpy(a, tile_shape=(2, 4, 4))).to_numpy()


def test_stack_shape_errors_name_the_shapes():
    with pytest.raises(np.linalg.LinAlgError, match=r"square.*\(2, 3, 4\)"):
        nt.linalg.inv(nt.ones((2, 3, 4)))
    with pytest.raises(ValueError, match=r"\(2, 3, 3\).*\(2, 4, 1\)"):
        nt.linalg.solve(nt.ones((2, 3, 3)), nt.ones((2, 4, 1)))
    with pytest.raises(ValueError, match=r"batch shapes of a \(2, 3, 3\) and b \(4, 3, 1\)"):
        nt.linalg.solve(nt.ones((2, 3, 3)), nt.ones((4, 3, 1)))
    with pytest.raises(ValueError, match=r"square matrices.*\(2, 3, 4\)"):
        nt.linalg.cholesky(nt.ones((2, 3, 4)))


def test_stacks_run_on_a_gpu_worker_like_on_cpu():
    a, spd = _general((3, 4, 4), seed=12), _spd((3, 4, 4), seed=13)
    b = np.random.default_rng(14).standard_normal((3, 4, 2))
    nt.init(ncpu=1, ncuda=1, restrict="cuda")
    try:
        x = nt.from_numpy(a, tile_shape=(2, 4, 4))
        np.testing.assert_allclose(
            nt.linalg.solve(x, nt.from_numpy(b)).to_numpy(), np.linalg.solve(a, b), rtol=1e-10
        )
        np.testing.assert_allclose(nt.linalg.inv(x).to_numpy(), np.linalg.inv(a), rtol=1e-10)
        sign, logabs = nt.linalg.slogdet(x)
        np.testing.assert_allclose(
            sign.to_numpy() * np.exp(logabs.to_numpy()), np.linalg.det(a), rtol=1e-10
        )
        factor = nt.linalg.cholesky(nt.from_numpy(spd, tile_shape=(2, 4, 4)))
        np.testing.assert_allclose(factor.to_numpy(), np.linalg.cholesky(spd), rtol=1e-10)
        u, v = a[..., :3], b[0, :, :1] * np.ones(3)  # (3, 4, 3) x (4, 3)
        crossed = nt.linalg.cross(nt.from_numpy(u, tile_shape=(2, 3, 3)), nt.from_numpy(v))
        np.testing.assert_allclose(crossed.to_numpy(), np.cross(u, v), rtol=1e-12)
        assert nt.get_runtime().busy[0] == 0  # the CPU worker ran nothing
    finally:
        nt.init()


@pytest.mark.parametrize("lower, trans", [(True, False), (False, True)])
def test_solve_triangular_of_a_stack(lower, trans, check_tiles):
    a = np.tril(_general((2, 5, 5), seed=15)) if lower else np.triu(_general((2, 5, 5), seed=15))
    b = np.random.default_rng(16).standard_normal((3, 1, 5, 2))
    x = nt.linalg.solve_triangular(
        nt.from_numpy(a, tile_shape=(1, 2, 2)), nt.from_numpy(b), lower=lower, trans=trans
    )
    op = np.swapaxes(a, -1, -2) if trans else a
    check_tiles(x, np.linalg.solve(op, b), rtol=1e-10, atol=1e-10)
    vector = nt.linalg.solve_triangular(nt.from_numpy(a), nt.ones((5,)), lower=lower, trans=trans)
    check_tiles(vector, np.linalg.solve(op, np.ones((2, 5, 1)))[..., 0], rtol=1e-10, atol=1e-10)


def test_matrices_that_fit_one_tile_run_one_task_per_tile(tmp_path):
    a = _general((6, 4, 4), seed=17)  # tiles of 4 matrices: 2 tiles
    x = nt.from_numpy(a, tile_shape=(4, 4, 4))
    path = tmp_path / "trace.json"
    with nt.trace(str(path)):
        nt.linalg.inv(x).wait()
        nt.linalg.slogdet(x).sign.wait()
        nt.linalg.cholesky(nt.from_numpy(_spd((6, 4, 4), seed=18), tile_shape=(4, 4, 4))).wait()
    names = [event["name"] for event in json.loads(path.read_text())["traceEvents"]]
    assert names.count("solve_stack") == names.count("slogdet_stack") == 2
    assert names.count("cholesky_stack") == 2
    assert "getrf_panel" not in names and "potrf" not in names


def test_a_stack_under_each_scheduler(scheduler, check_tiles):
    a, b = _general((3, 5, 5), seed=19), np.random.default_rng(20).standard_normal((3, 5, 2))
    for tiles in [(2, 5, 5), (1, 2, 2)]:
        x = nt.linalg.solve(nt.from_numpy(a, tile_shape=tiles), nt.from_numpy(b))
        check_tiles(x, np.linalg.solve(a, b), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("shape, tiles", [((0, 3, 3), (1, 2, 2)), ((2, 0, 0), (1, 1, 1))])
def test_empty_stacks_like_numpy(shape, tiles):
    x = nt.zeros(shape, tile_shape=tiles)
    assert nt.linalg.inv(x).to_numpy().shape == np.linalg.inv(np.zeros(shape)).shape
    np.testing.assert_array_equal(nt.linalg.det(x).to_numpy(), np.linalg.det(np.zeros(shape)))
    assert nt.linalg.cholesky(x).shape == shape
    assert nt.linalg.solve(x, nt.zeros(shape[1:2])).shape == shape[:-1]
