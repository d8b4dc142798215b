"""The norms of numtile.linalg (tiletensor/reduction.py's vector_norm, tiletensor/linalg/norms.py's
matrix_norm) on complex64/complex128 input, against array-api-strict and NumPy: the real dtype of
the same precision, stacks, axis tuples and keepdims, tiles that divide nothing; integers and
booleans refused as the standard's reference refuses them. (Real input: test_reduction.py.)"""

import array_api_strict as xs
import numpy as np
import pytest

import numtile as nt

ORDS = [2, 1, np.inf, -np.inf, 0, 3, 0.5, -1.5]
REAL = {np.complex64: np.float32, np.complex128: np.float64}
TOLERANCE = {np.complex64: 2e-5, np.complex128: 1e-12}


def _complex(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    a.flat[::5] = 0  # zeros count for ord 0 and take part in -inf
    a.flat[1::7] = a.flat[1::7].real  # and purely real entries
    return a


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("ord", ORDS)
@pytest.mark.parametrize(
    "axis, keepdims", [(None, False), (None, True), (1, False), ((0, 2), True), ((-1, -3), False)]
)
def test_complex_vector_norm_matches_array_api_strict(dtype, ord, axis, keepdims, check_tiles):
    a = _complex((3, 4, 5), dtype, seed=1)
    out = nt.linalg.vector_norm(
        nt.from_numpy(a, tile_shape=(2, 3, 2)), axis=axis, keepdims=keepdims, ord=ord
    )
    with np.errstate(divide="ignore"):  # (negative ords over zeros: inf ** -1, as NumPy)
        expected = xs.linalg.vector_norm(xs.asarray(a), axis=axis, keepdims=keepdims, ord=ord)
    expected = np.asarray(expected)
    assert expected.dtype == REAL[dtype]
    check_tiles(out, expected, rtol=TOLERANCE[dtype], atol=0)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("ord", ["fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf])
@pytest.mark.parametrize("keepdims", [False, True])
def test_complex_matrix_norm_of_a_stack_matches_numpy(dtype, ord, keepdims, check_tiles):
    a = _complex((3, 4, 5), dtype, seed=2)
    a[1] = 0  # a zero matrix in the stack
    for tile_shape in [(2, 3, 2), (1, 4, 5)]:  # tiles that divide nothing; whole matrices
        x = nt.from_numpy(a, tile_shape=tile_shape)
        out = nt.linalg.matrix_norm(x, ord=ord, keepdims=keepdims)
        expected = np.linalg.norm(a, ord=ord, axis=(-2, -1), keepdims=keepdims)
        assert expected.dtype == REAL[dtype]
        atol = 10 * TOLERANCE[dtype] * np.abs(expected).max()  # (the zero matrix's ord 2, -2)
        check_tiles(out, expected, rtol=TOLERANCE[dtype] * 10, atol=atol)


@pytest.mark.parametrize("dtype", ["int64", "uint8", "bool"])
def test_norms_refuse_integers_and_booleans_naming_the_dtype(dtype):
    x = nt.ones((3, 3), dtype=dtype)
    with pytest.raises(TypeError, match=f"vector_norm needs a real or complex .* got {dtype}"):
        nt.linalg.vector_norm(x)
    for ord in ["fro", 1, 2, "nuc"]:
        with pytest.raises(TypeError, match=f"matrix_norm needs a real or complex .* got {dtype}"):
            nt.linalg.matrix_norm(x, ord=ord)
    with pytest.raises(TypeError):  # the standard's reference refuses alike
        xs.linalg.vector_norm(xs.ones((3, 3), dtype=getattr(xs, dtype)))


@pytest.mark.parametrize("ord", [2, 1, np.inf, 3, -np.inf])
def test_complex_vector_norm_special_values_match_torch(ord):
    # |inf + nan j| is inf (annex G; torch agrees, NumPy's ord 2 sums re^2 + im^2 into NaN);
    # ord 1 and inf take huge and tiny moduli whole (hypot where the squares would overflow or
    # vanish); ord 2 and p square them unscaled, as the real norms and torch do (inf and 0 here)
    torch = pytest.importorskip("torch")
    a = np.array(
        [[complex(np.inf, np.nan), 1 + 1j, 2j], [1e300 + 1e300j, -3e299j, 1], [1e-300j, 3e-300, 0]]
    )
    out = nt.linalg.vector_norm(nt.from_numpy(a, tile_shape=(2, 2)), axis=1, ord=ord)
    expected = torch.linalg.vector_norm(torch.from_numpy(a), dim=1, ord=ord).numpy()
    np.testing.assert_allclose(out.to_numpy(), expected, rtol=1e-14, atol=0)
