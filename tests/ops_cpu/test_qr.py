"""The QR tile kernels (numtile.ops_cpu.qr: geqrt, gemqrt, tpqrt, tpmqrt, triu_copy, eye_fill,
and their CUDA twins under the simulator) against NumPy, on row-major tiles.

Every body parametrized over ``backend`` runs on both; on cuda each call is also checked
against the CPU twin (R, reflectors and block factors T alike: a tile factored on one
backend is applied on the other). CUDA-only checks are in tests/ops_cuda/test_qr.py.
"""

import numpy as np
import pytest

from tests.kernels import random

FLOATS = [np.float32, np.float64]
TOLERANCE = {np.float32: 2e-5, np.float64: 1e-12}
TWIN = {"rtol": 1e-4, "atol": 1e-5}  # float32 reflectors through different sums


def _abs_r(a):
    return np.abs(np.linalg.qr(a.astype(np.float64), mode="r"))


def run_geqrt(backend, a, ib):
    t = np.zeros((a.shape[1], ib), a.dtype)
    backend.run("geqrt", a, t, tolerance=TWIN if a.dtype == np.float32 else None)
    return t


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape, ib", [((6, 6), 4), ((9, 4), 3), ((4, 7), 2), ((5, 5), 32)])
def test_geqrt_then_gemqrt_rebuild_the_tile(backend, dtype, shape, ib):
    a = random(shape, dtype, 1)
    original = a.copy()
    t = run_geqrt(backend, a, ib)
    k = min(shape)
    tolerance = TOLERANCE[dtype]
    r = np.triu(a)
    np.testing.assert_allclose(np.abs(r[:k]), _abs_r(original), rtol=1e-3, atol=10 * tolerance)
    q = np.eye(shape[0], dtype=dtype)
    backend.run("gemqrt", a, t, q, False, tolerance=TWIN)
    np.testing.assert_allclose(q @ r, original, rtol=10 * tolerance, atol=10 * tolerance)
    np.testing.assert_allclose(q.T @ q, np.eye(shape[0]), atol=10 * tolerance)
    c = original.copy()
    backend.run("gemqrt", a, t, c, True, tolerance=TWIN)  # Q^T a = R
    np.testing.assert_allclose(c, r, rtol=10 * tolerance, atol=10 * tolerance)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("triangular", [False, True])
@pytest.mark.parametrize("bottom_rows", [7, 3])
def test_tpqrt_eliminates_the_tile_below(backend, dtype, triangular, bottom_rows):
    n = 5
    top, bottom = random((6, n), dtype, 2), random((bottom_rows, n), dtype, 3)
    run_geqrt(backend, top, 2)
    if triangular:  # a tile after its own geqrt: R above, its reflectors below (kept)
        run_geqrt(backend, bottom, 2)
    used = min(bottom_rows, n) if triangular else bottom_rows
    stacked = np.vstack([np.triu(top)[:n], np.triu(bottom)[:used] if triangular else bottom])
    below_diagonal = np.tril(bottom, -1).copy()
    t = np.zeros((n, 2), dtype)
    backend.run("tpqrt", top, bottom, t, triangular, tolerance=TWIN)
    tolerance = TOLERANCE[dtype]
    np.testing.assert_allclose(np.abs(np.triu(top)[:n]), _abs_r(stacked), rtol=1e-3, atol=1e-4)
    if triangular:  # the tile's own reflectors are left alone
        np.testing.assert_array_equal(np.tril(bottom, -1), below_diagonal)
    a, b = np.zeros((6, n), dtype), np.zeros_like(bottom)
    a[:n], b[:used] = stacked[:n], stacked[n:]
    backend.run("tpmqrt", bottom, t, a, b, True, triangular, tolerance=TWIN)
    np.testing.assert_allclose(a[:n], np.triu(top)[:n], rtol=10 * tolerance, atol=10 * tolerance)
    np.testing.assert_allclose(b[:used], 0, atol=10 * tolerance)
    backend.run("tpmqrt", bottom, t, a, b, False, triangular, tolerance=TWIN)  # Q Q^T = I
    np.testing.assert_allclose(a[:n], stacked[:n], rtol=10 * tolerance, atol=10 * tolerance)
    np.testing.assert_allclose(b[:used], stacked[n:], rtol=10 * tolerance, atol=10 * tolerance)


def test_block_factors_match_lapack_across_backends(backend):
    a = random((12, 9), np.float64, 4)
    t = run_geqrt(backend, a, 4)  # three blocks of T, the last one narrower
    expected = np.zeros_like(t)
    for start in range(0, 9, 4):  # larft: T = (triu(V^T V, 1) + diag(1 / tau))^-1 per block
        v = np.tril(a, -1)[:, start : start + 4] + np.eye(12, 9)[:, start : start + 4]
        taus = np.diag(t[start : start + 4, : v.shape[1]])
        inverse = np.triu(v.T @ v, 1) + np.diag(1 / taus)
        expected[start : start + 4, : v.shape[1]] = np.linalg.inv(inverse).T
    np.testing.assert_allclose(t, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("diagonal", [-2, 0, 3])
def test_triu_copy_and_eye_fill(backend, diagonal):
    source = random((5, 6), np.float64, 5)
    out = np.full((4, 6), 9.0)
    backend.run("triu_copy", source, out, diagonal, exact=True)
    np.testing.assert_array_equal(out, np.triu(source[:4], diagonal))
    backend.run("eye_fill", out, diagonal, exact=True)
    np.testing.assert_array_equal(out, np.eye(4, 6, diagonal))


@pytest.mark.parametrize("dtype", FLOATS + [np.complex128])
@pytest.mark.parametrize("shape", [(400, 300), (300, 400), (260, 129), (50, 50)])
def test_qr_explicit_matches_numpy_across_geqrt_blocks(dtype, shape):
    # wider than GEQRT_BLOCK: tau comes from the diagonals of several T blocks, and a wrong one
    # would break orgqr's Q
    from numtile.ops_cpu import qr

    rng = np.random.default_rng(7)
    a = rng.standard_normal(shape).astype(dtype)
    if dtype == np.complex128:
        a = a + 1j * rng.standard_normal(shape)
    k = min(shape)
    q, r = np.zeros((shape[0], k), dtype), np.zeros((k, shape[1]), dtype)
    qr.qr_explicit(a, q, r, True)
    tolerance = 50 * TOLERANCE.get(dtype, 1e-12)
    np.testing.assert_allclose(q @ r, a, atol=tolerance * np.abs(a).max())
    np.testing.assert_allclose(q.conj().T @ q, np.eye(k), atol=tolerance)
    np.testing.assert_allclose(np.abs(r), np.abs(np.linalg.qr(a)[1]), atol=tolerance * k)
    assert np.array_equal(r, np.triu(r))
