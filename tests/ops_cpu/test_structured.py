"""The structured-tile kernels (numtile.ops_cpu.structured: band, linspace_fill, and their CUDA
twins under the simulator) against NumPy's tril/triu/eye and linspace."""

import numpy as np
import pytest

DTYPES = [np.float32, np.float64, np.int64, np.bool_, np.complex128]
FAR = 2**62


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "row0, col0, lower, upper", [(0, 0, -FAR, 0), (2, 3, 1, FAR), (4, 0, -2, 3), (1, 5, 4, 4)]
)
def test_band_keeps_the_diagonals_of_the_band(backend, dtype, row0, col0, lower, upper):
    x = (np.arange(2 * 5 * 6).reshape(2, 5, 6) % 7 + 1).astype(dtype)
    out = np.zeros_like(x)
    backend.run("band", x, out, row0, col0, lower, upper, exact=True)
    rows = row0 + np.arange(5)[:, None]
    cols = col0 + np.arange(6)[None, :]
    keep = (cols - rows >= lower) & (cols - rows <= upper)
    np.testing.assert_array_equal(out, np.where(keep, x, 0))


def test_band_in_place_makes_an_eye(backend):
    out = np.ones((1, 4, 6))
    backend.run("band", out, out, 0, 0, 1, 1, exact=True)
    np.testing.assert_array_equal(out[0], np.eye(4, 6, k=1))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("endpoint", [True, False])
def test_linspace_fill_is_numpys_formula(backend, dtype, endpoint):
    num, start, stop = 11, -1.5, 2.25
    if np.dtype(dtype).kind == "c":
        start, stop = complex(start, 1), complex(stop, -3)
    expected = np.linspace(start, stop, num, endpoint=endpoint, dtype=dtype)
    step = (stop - start) / (num - 1 if endpoint else num)
    out = np.zeros(num, dtype)
    last = num - 1 if endpoint else -1
    backend.run("linspace_fill", out[:4], start, step, 0, last, stop, exact=True)
    backend.run("linspace_fill", out[4:], start, step, 4, last, stop, exact=True)
    if np.dtype(dtype).kind == "c":  # complex products may round differently in the last bit
        np.testing.assert_allclose(out, expected, rtol=1e-6 if dtype == np.complex64 else 1e-15)
    else:
        np.testing.assert_array_equal(out, expected)
