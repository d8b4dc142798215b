"""Tests for numtile/tiletensor/linalg/products.py and norms.py: cross, diagonal, trace, outer,
vecdot, tensordot, matrix_power and the matrix norms on stacks, against NumPy and
array_api_strict, over tile shapes that divide nothing."""

import array_api_strict as xp
import numpy as np
import pytest

import numtile as nt
from numtile.tiletensor.linalg.products import diagonal_scatter

DTYPES = [np.float32, np.float64]
TOLERANCE = {np.float32: 1e-5, np.float64: 1e-12, np.complex128: 1e-12}


def _tensor(data, tile_shape):
    return nt.from_numpy(np.asarray(data), tile_shape=tile_shape)


def _close(actual, expected, dtype):
    assert actual.dtype == np.dtype(dtype), (actual.dtype, dtype)
    tolerance = TOLERANCE[np.dtype(dtype).type]
    np.testing.assert_allclose(actual.to_numpy(), expected, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("dtype", DTYPES + [np.complex128])
@pytest.mark.parametrize(
    "shapes, tiles",
    [
        (((4, 3), (4, 3)), ((3, 2), (2, 3))),
        (((5, 1, 3), (2, 3)), ((2, 1, 2), (1, 3))),  # broadcasting, tiles cut the vectors
        (((3,), (2, 2, 3)), ((2,), (1, 2, 1))),
    ],
)
def test_cross_matches_numpy_with_broadcasting(dtype, shapes, tiles, make_array):
    a = make_array(shapes[0], np.float64, seed=1).astype(dtype)
    b = make_array(shapes[1], np.float64, seed=2).astype(dtype)
    if np.dtype(dtype).kind == "c":
        a, b = a + 1j * a[..., ::-1], b - 2j * b
    _close(nt.linalg.cross(_tensor(a, tiles[0]), _tensor(b, tiles[1])), np.cross(a, b), dtype)


def test_cross_along_another_axis_matches_array_api_strict(make_array):
    a, b = make_array((3, 5), np.float64, seed=3), make_array((2, 3, 5), np.float64, seed=4)
    expected = xp.linalg.cross(xp.asarray(a), xp.asarray(b), axis=-2)
    got = nt.linalg.cross(_tensor(a, (2, 2)), _tensor(b, (1, 2, 3)), axis=-2)
    np.testing.assert_allclose(got.to_numpy(), np.asarray(expected), rtol=1e-12)


def test_cross_rejects_bad_shapes_and_axes():
    with pytest.raises(ValueError, match=r"\(4, 2\) and \(4, 2\).*3 elements"):
        nt.linalg.cross(nt.ones((4, 2)), nt.ones((4, 2)))
    with pytest.raises(ValueError, match=r"axis 0 must be in \[-2, -1\]"):
        nt.linalg.cross(nt.ones((3, 3)), nt.ones((3, 3)), axis=0)
    with pytest.raises(ValueError, match=r"\(2, 3\) and \(4, 3\) cannot be broadcast"):
        nt.linalg.cross(nt.ones((2, 3)), nt.ones((4, 3)))
    with pytest.raises(TypeError, match="numeric"):
        nt.linalg.cross(nt.ones((3,)) > 0, nt.ones((3,)) > 0)


@pytest.mark.parametrize("offset", [0, 1, 3, -1, -4, 7, -5])
@pytest.mark.parametrize("tiles", [(1, 2, 3), (2, 5, 7), (2, 4, 2)])
def test_diagonal_and_trace_match_numpy(offset, tiles, make_array, check_tiles):
    x = make_array((3, 5, 7), np.float64, seed=5)
    d = nt.linalg.diagonal(_tensor(x, tiles), offset=offset)
    check_tiles(d, np.diagonal(x, offset, -2, -1))
    trace = nt.linalg.trace(_tensor(x, tiles), offset=offset)
    np.testing.assert_allclose(trace.to_numpy(), np.trace(x, offset, -2, -1), rtol=1e-12)


def test_trace_dtype_follows_the_standard(make_array):
    x = make_array((4, 4), np.int32, seed=6)
    t = nt.linalg.trace(_tensor(x, (3, 3)))
    assert xp.linalg.trace(xp.asarray(x)).dtype == xp.int64 and t.dtype == np.int64
    assert t.item() == np.trace(x)
    t32 = nt.linalg.trace(_tensor(x, (3, 3)), dtype=nt.float32)
    assert t32.dtype == np.float32 and t32.item() == np.trace(x)


def test_diagonal_scatter_puts_a_diagonal_back(make_array):
    x = make_array((2, 5, 4), np.float64, seed=7)
    tensor = _tensor(x, (1, 2, 3))
    for offset in (0, 2, -3):
        back = diagonal_scatter(nt.linalg.diagonal(tensor, offset=offset), tensor.layout, offset)
        mask = np.eye(5, 4, offset, dtype=bool)
        np.testing.assert_array_equal(back.to_numpy(), np.where(mask, x, 0.0))
        assert back.tile_shape == tensor.tile_shape


@pytest.mark.parametrize("dtype", DTYPES)
def test_outer_matches_numpy(dtype, make_array, check_tiles):
    u, v = make_array((5,), dtype, seed=8), make_array((4,), dtype, seed=9)
    check_tiles(nt.linalg.outer(_tensor(u, 2), _tensor(v, 3)), np.outer(u, v))
    with pytest.raises(ValueError, match=r"1-d vectors.*\(2, 2\)"):
        nt.linalg.outer(nt.ones((2, 2)), nt.ones((2,)))


@pytest.mark.parametrize("dtype", DTYPES + [np.complex128])
@pytest.mark.parametrize(
    "shapes, tiles, axis",
    [
        (((4, 5), (4, 5)), ((3, 2), (2, 3)), -1),
        (((2, 1, 5), (3, 5)), ((1, 1, 2), (2, 3)), -1),
        (((5, 3), (2, 5, 1)), ((2, 2), (1, 3, 1)), -2),
    ],
)
def test_vecdot_matches_array_api_strict(dtype, shapes, tiles, axis, make_array):
    a = make_array(shapes[0], np.float64, seed=10).astype(dtype)
    b = make_array(shapes[1], np.float64, seed=11).astype(dtype)
    if np.dtype(dtype).kind == "c":
        a, b = a * (1 + 2j), b * (3 - 1j)
    expected = xp.linalg.vecdot(xp.asarray(a), xp.asarray(b), axis=axis)
    got = nt.linalg.vecdot(_tensor(a, tiles[0]), _tensor(b, tiles[1]), axis=axis)
    _close(got, np.asarray(expected), dtype)


def test_vecdot_rejects_mismatched_vectors():
    with pytest.raises(ValueError, match=r"\(2, 4\) and \(2, 3\) differ along axis -1"):
        nt.linalg.vecdot(nt.ones((2, 4)), nt.ones((2, 3)))
    with pytest.raises(ValueError, match=r"axis 1 must be in"):
        nt.linalg.vecdot(nt.ones((2, 4)), nt.ones((2, 4)), axis=1)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "axes, b_shape, b_tiles",
    [
        (0, (2, 3), (1, 2)),
        (1, (5, 2), (2, 1)),
        (2, (4, 5, 2), (3, 2, 1)),
        (([1, 2], [1, 0]), (5, 4, 3), (3, 2, 1)),
        (([0], [2]), (5, 4, 3), (3, 2, 2)),
        (((2, 0), (0, 2)), (5, 4, 3), (2, 3, 2)),
        (([-1], [0]), (5, 4, 3), (4, 4, 4)),
    ],
)
def test_tensordot_matches_numpy(dtype, axes, b_shape, b_tiles, make_array, check_tiles):
    a, b = make_array((3, 4, 5), dtype, seed=12), make_array(b_shape, dtype, seed=13)
    got = nt.linalg.tensordot(_tensor(a, (2, 3, 2)), _tensor(b, b_tiles), axes=axes)
    expected = np.tensordot(a.astype(np.float64), b.astype(np.float64), axes=axes)
    tolerance = 1e-4 if dtype == np.float32 else 1e-12
    check_tiles(got, expected, rtol=tolerance, atol=tolerance, dtype=dtype)


def test_tensordot_rejects_bad_axes():
    a, b = nt.ones((2, 3)), nt.ones((4, 2))
    with pytest.raises(ValueError, match=r"\(2, 3\) and \(4, 2\) differ on the contracted"):
        nt.linalg.tensordot(a, b, axes=1)
    with pytest.raises(ValueError, match="axes=3"):
        nt.linalg.tensordot(a, b, axes=3)
    with pytest.raises(ValueError, match="out of range"):
        nt.linalg.tensordot(a, b, axes=([5], [0]))
    with pytest.raises(ValueError, match="different numbers"):
        nt.linalg.tensordot(a, b, axes=([0, 1], [1]))
    # complex operands run the complex GEMM kernels (tests/tiletensor/test_linalg_complex.py)
    outer = nt.linalg.tensordot(nt.astype(a, nt.complex128), nt.astype(b, nt.complex128), axes=0)
    expected = np.tensordot(a.to_numpy(), b.to_numpy(), axes=0).astype(np.complex128)
    np.testing.assert_allclose(outer.to_numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 6, -1, -3])
@pytest.mark.parametrize("tiles", [(1, 2, 2), (2, 5, 5)])
def test_matrix_power_matches_numpy(n, tiles, check_tiles):
    x = np.random.default_rng(14).standard_normal((3, 5, 5)) / 2 + np.eye(5)
    got = nt.linalg.matrix_power(_tensor(x, tiles), n)
    check_tiles(got, np.linalg.matrix_power(x, n), rtol=1e-10, atol=1e-10)


def test_matrix_power_errors():
    with pytest.raises(ValueError, match=r"square matrices.*\(2, 3\)"):
        nt.linalg.matrix_power(nt.ones((2, 3)), 2)
    with pytest.raises(TypeError, match="integer"):
        nt.linalg.matrix_power(nt.ones((2, 2)), 1.5)
    singular = nt.linalg.matrix_power(nt.zeros((3, 3), tile_shape=(2, 2)), -1)
    with pytest.raises(np.linalg.LinAlgError):
        singular.to_numpy()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("order", ["fro", 1, -1, np.inf, -np.inf])
@pytest.mark.parametrize("keepdims", [False, True])
def test_matrix_norm_matches_numpy(dtype, order, keepdims, make_array):
    x = make_array((2, 5, 7), dtype, seed=15)
    got = nt.linalg.matrix_norm(_tensor(x, (1, 2, 3)), ord=order, keepdims=keepdims)
    _close(got, np.linalg.matrix_norm(x, ord=order, keepdims=keepdims), dtype)


def test_matrix_norm_rejects_an_unknown_ord():
    with pytest.raises(ValueError, match="unsupported ord 3"):
        nt.linalg.matrix_norm(nt.ones((2, 2)), ord=3)


@pytest.mark.parametrize("order", [2, 1, 0, np.inf, -np.inf, 3, 0.5, -1.5])
@pytest.mark.parametrize("axis, keepdims", [(None, False), (-1, True), ((0, 2), False)])
def test_vector_norm_matches_numpy(order, axis, keepdims, make_array):
    x = make_array((3, 4, 5), np.float64, seed=16)
    got = nt.linalg.vector_norm(_tensor(x, (2, 3, 2)), axis=axis, keepdims=keepdims, ord=order)
    expected = np.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=order)
    np.testing.assert_allclose(got.to_numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c @ c,
        lambda c: nt.linalg.solve(c, c),
        lambda c: nt.linalg.inv(c),
        lambda c: nt.linalg.det(c),
        lambda c: nt.linalg.cholesky(c),
        lambda c: nt.linalg.tensordot(c, c),
        lambda c: nt.linalg.matrix_power(c, 2),
    ],
)
def test_complex_matrices_run_the_complex_kernels(call):
    # (they raised TypeError while the kernels were real; tests/tiletensor/
    # test_linalg_complex*.py compare them with NumPy)
    c = nt.from_numpy(np.eye(3) * (1 + 1j), tile_shape=(2, 2))
    result = call(c)
    assert result.dtype == np.complex128
    assert np.isfinite(result.to_numpy()).all()
