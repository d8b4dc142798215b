"""Complex factorisations (issue 14 for complex64/complex128) against NumPy/SciPy: the tiled LU
(solve, inv, det, slogdet with a complex sign and a real log|det|), Cholesky of Hermitian
matrices (HERK and conjugate-transposed TRSM/GEMM), triangular solves with trans=2, the tiled
QR (blocked, tree and TSQR paths), the spectral functions (real eigenvalues and singular
values) and the matrix norms; stacks that fit one tile (one batched numpy.linalg task each)
too. Shapes are small and tiles divide none of them."""

import numpy as np
import pytest
import scipy.linalg

import numtile as nt

RNG = np.random.default_rng(11)
TOLERANCE = {np.complex64: 2e-4, np.complex128: 1e-10}
# complex64 kernels are checked by the products' tests (test_linalg_complex.py) and the
# stacks below; the factorisations run on complex128 only, to keep new compiles few (CI time)
DTYPES = [np.complex128]


def _complex(shape, dtype=np.complex128):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)


def _hermitian(n, dtype, batch=()):
    g = _complex(batch + (n, n), dtype)
    return (g @ np.conj(np.swapaxes(g, -1, -2)) + n * np.eye(n)).astype(dtype)


def _close(actual, expected, dtype, scale=1.0):
    tolerance = TOLERANCE[np.dtype(dtype).type] * scale
    np.testing.assert_allclose(actual, expected, rtol=tolerance, atol=tolerance)


def _tensor(x, tile):
    return nt.from_numpy(x, tile_shape=tile)


@pytest.mark.parametrize("dtype", DTYPES)
def test_lu_solve_inverse_and_determinants_match_numpy(dtype):
    a, b = _complex((7, 7), dtype), _complex((7, 2), dtype)
    x = _tensor(a, (3, 3))
    solved = nt.linalg.solve(x, _tensor(b, (3, 2))).to_numpy()
    assert solved.dtype == dtype
    _close(solved, np.linalg.solve(a, b), dtype)
    _close(nt.linalg.inv(x).to_numpy(), np.linalg.inv(a), dtype)
    sign, logabs = nt.linalg.slogdet(x)
    expected_sign, expected_log = np.linalg.slogdet(a)
    assert sign.dtype == dtype and logabs.dtype == np.empty(0, dtype).real.dtype
    _close(sign.item(), expected_sign, dtype)
    _close(logabs.item(), expected_log, dtype)
    _close(nt.linalg.det(x).item() / np.linalg.det(a), 1.0, dtype)
    power = nt.linalg.matrix_power(x, -2).to_numpy()
    _close(power, np.linalg.matrix_power(a, -2), dtype, scale=10)


def test_singular_complex_matrix_raises_and_has_zero_sign():
    a = np.zeros((3, 3), complex)
    a[0, 0], a[1, 2] = 1j, 2 - 1j  # an exactly zero pivot in the last column
    sign, logabs = nt.linalg.slogdet(_tensor(a, (2, 2)))
    assert sign.item() == 0 and logabs.item() == -np.inf  # as NumPy
    assert nt.linalg.det(_tensor(a, (2, 2))).item() == 0
    with pytest.raises(np.linalg.LinAlgError, match="singular"):
        nt.linalg.inv(_tensor(a, (2, 2))).to_numpy()


@pytest.mark.parametrize("dtype", DTYPES)
def test_cholesky_and_hermitian_solve_match_numpy(dtype):
    h, b = _hermitian(7, dtype), _complex((7, 3), dtype)
    x = _tensor(h, (3, 3))
    factor = nt.linalg.cholesky(x).to_numpy()
    _close(factor, np.linalg.cholesky(h), dtype)
    _close(nt.linalg.cholesky(x, upper=True).to_numpy(), np.linalg.cholesky(h).conj().T, dtype)
    _close(nt.linalg.solve(x, _tensor(b, (3, 2)), assume_a="pos").to_numpy(),
           np.linalg.solve(h, b), dtype)  # fmt: skip
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        nt.linalg.cholesky(_tensor(-h, (3, 3))).to_numpy()
    not_hermitian = h.copy()
    not_hermitian[5, 1] += 1j  # symmetric in the real sense would not be enough
    with pytest.raises(np.linalg.LinAlgError, match="not symmetric"):
        nt.linalg.solve(
            _tensor(not_hermitian, (3, 3)), _tensor(b, (3, 2)), assume_a="pos"
        ).to_numpy()


def test_triangular_solves_take_every_trans():
    b = _complex((7, 2))
    for lower in (True, False):
        a = (np.tril if lower else np.triu)(_complex((7, 7))) + 4 * np.eye(7)
        for trans in (0, 1, 2):
            got = nt.linalg.solve_triangular(_tensor(a, (3, 3)), _tensor(b, (3, 2)),
                                             lower=lower, trans=trans)  # fmt: skip
            expected = scipy.linalg.solve_triangular(a, b, lower=lower, trans=trans)
            _close(got.to_numpy(), expected, np.complex128)
    with pytest.raises(ValueError, match="trans must be 0, 1 or 2"):
        nt.linalg.solve_triangular(_tensor(a, (3, 3)), _tensor(b, (3, 2)), trans=3)


@pytest.mark.parametrize(
    "shape, tile",
    [((7, 7), (3, 3)), ((5, 9), (2, 2)), ((13, 4), (3, 3)), ((12, 3), (4, 3))],
    ids=["blocked", "wide", "tree", "tsqr"],
)
def test_qr_is_unitary_times_upper(shape, tile):
    a = _complex(shape)
    for mode in ("reduced", "complete"):
        q, r = (t.to_numpy() for t in nt.linalg.qr(_tensor(a, tile), mode=mode))
        expected_q, expected_r = np.linalg.qr(a, mode=mode)
        assert q.shape == expected_q.shape and r.shape == expected_r.shape
        _close(q @ r, a, np.complex128)
        _close(q.conj().T @ q, np.eye(q.shape[1]), np.complex128)
        assert not np.tril(r, -1).any()
        # unique up to a phase per column: |R| matches NumPy's
        _close(np.abs(r), np.abs(expected_r), np.complex128)


@pytest.mark.parametrize("dtype", DTYPES)
def test_spectral_functions_match_numpy(dtype):
    real = np.empty(0, dtype).real.dtype
    h = _hermitian(6, dtype) - 3 * np.eye(6, dtype=dtype)
    w, v = nt.linalg.eigh(_tensor(h, (4, 4)))
    assert w.dtype == real and v.dtype == dtype
    _close(w.to_numpy(), np.linalg.eigvalsh(h), dtype, scale=10)
    _close(h @ v.to_numpy(), v.to_numpy() * w.to_numpy(), dtype, scale=10)
    _close(nt.linalg.eigvalsh(_tensor(h, (4, 4))).to_numpy(), np.linalg.eigvalsh(h), dtype, 10)
    for shape in [(9, 3), (3, 8), (5, 5)]:  # tall (QR first), wide, square
        a = _complex(shape, dtype)
        x = _tensor(a, (2, 2))
        u, s, vh = nt.linalg.svd(x, full_matrices=False)
        assert s.dtype == real
        _close(s.to_numpy(), np.linalg.svd(a, compute_uv=False), dtype)
        _close((u.to_numpy() * s.to_numpy()) @ vh.to_numpy(), a, dtype)
        _close(nt.linalg.svdvals(x).to_numpy(), np.linalg.svd(a, compute_uv=False), dtype)
        _close(nt.linalg.pinv(x).to_numpy(), np.linalg.pinv(a), dtype)
        assert nt.linalg.matrix_rank(x).item() == np.linalg.matrix_rank(a)
        for order in ("fro", "nuc", 2, -2, 1, -np.inf):
            norm = nt.linalg.matrix_norm(x, ord=order)
            assert norm.dtype == real
            _close(norm.item(), np.linalg.norm(a, ord=order), dtype)


def test_stacks_in_one_tile_match_numpy():
    h, b = _hermitian(4, np.complex128, (3,)), _complex((3, 4, 2))
    stack = _tensor(h, (2, 4, 4))
    _close(nt.linalg.cholesky(stack).to_numpy(), np.linalg.cholesky(h), np.complex128)
    _close(nt.linalg.solve(stack, _tensor(b, (2, 4, 2))).to_numpy(), np.linalg.solve(h, b),
           np.complex128)  # fmt: skip
    _close(nt.linalg.inv(stack).to_numpy(), np.linalg.inv(h), np.complex128)
    sign, logabs = nt.linalg.slogdet(_tensor(h * 1j, (2, 4, 4)))
    expected_sign, expected_log = np.linalg.slogdet(h * 1j)
    assert sign.dtype == np.complex128 and logabs.dtype == np.float64
    _close(sign.to_numpy(), expected_sign, np.complex128)
    _close(logabs.to_numpy(), expected_log, np.complex128)
    w, _ = nt.linalg.eigh(stack)
    assert w.dtype == np.float64
    _close(w.to_numpy(), np.linalg.eigvalsh(h), np.complex128)
    a = _complex((2, 5, 3), np.complex64)
    s = nt.linalg.svdvals(_tensor(a, (1, 5, 3)))
    assert s.dtype == np.float32
    _close(s.to_numpy(), np.linalg.svd(a, compute_uv=False), np.complex64)
    _close(nt.linalg.pinv(_tensor(a, (1, 5, 3))).to_numpy(), np.linalg.pinv(a), np.complex64)


def test_on_a_gpu_worker_lu_and_cholesky_match_numpy():
    # every task on the CUDA twins (simulator): complex gemm, trsm, herk, potrf, getrf, laswp
    from numtile.ops_cuda import available

    if not available():
        pytest.skip("needs a GPU or the CUDA simulator")
    a, b = _complex((5, 5)) + 3 * np.eye(5), _complex((5, 2))
    h = _hermitian(5, np.complex128)
    nt.init(ncpu=1, ncuda=1, restrict="cuda", cuda_mem_limit=64 * 1024)
    try:
        x, rhs = _tensor(a, (2, 2)), _tensor(b, (2, 2))
        _close((x @ rhs).to_numpy(), a @ b, np.complex128)
        _close(nt.linalg.solve(x, rhs).to_numpy(), np.linalg.solve(a, b), np.complex128)
        _close(nt.linalg.cholesky(_tensor(h, (2, 2))).to_numpy(), np.linalg.cholesky(h),
               np.complex128)  # fmt: skip
        _close(nt.linalg.slogdet(x).sign.item(), np.linalg.slogdet(a)[0], np.complex128)
    finally:
        nt.init()
