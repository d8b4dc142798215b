"""TSQR's leaves: a well-conditioned float64 leaf skips orgqr (its Q is A R^-1), an
ill-conditioned one forms Q; both give NumPy's R (up to signs) and an orthonormal Q."""

import numpy as np
import pytest

import numtile as nt
from numtile import ops_cpu
from numtile.tiletensor.linalg import tsqr


def _graded(rows: int, columns: int, seed: int) -> np.ndarray:
    """U diag(1 .. 1e-10) V^T with random orthonormal U, V: condition number 1e10 that no
    column scaling removes (A R^-1 of it is orthonormal only to ~1e-6)."""
    rng = np.random.default_rng(seed)
    u = np.linalg.qr(rng.standard_normal((rows, columns)))[0]
    v = np.linalg.qr(rng.standard_normal((columns, columns)))[0]
    return u * np.logspace(0, -10, columns) @ v.T


@pytest.mark.parametrize("graded, expected_flag", [(False, 1), (True, 0)])
def test_the_leaf_kernel_skips_q_only_when_r_is_well_conditioned(graded, expected_flag):
    a = _graded(40, 6, 1) if graded else np.random.default_rng(1).standard_normal((40, 6))
    q, r, flag = np.full((40, 6), np.nan), np.empty((6, 6)), np.empty(1, np.int64)
    ops_cpu.qr_leaf(a, q, r, flag, tsqr.CONDITION_LIMIT)
    assert flag[0] == expected_flag
    np.testing.assert_allclose(np.abs(r), np.abs(np.linalg.qr(a)[1]), rtol=1e-6, atol=1e-14)
    if expected_flag:
        assert np.isnan(q).all()  # Q left alone
    else:
        np.testing.assert_allclose(q @ r, a, atol=1e-14)


@pytest.mark.parametrize("graded", [False, True])
def test_tsqr_q_is_orthonormal_whichever_way_each_leaf_went(graded, monkeypatch):
    monkeypatch.setattr(tsqr, "LEAF_ROWS", 1)  # leaves of the input's row tiles: 5 leaves
    rows, columns = 75, 5
    a = (
        _graded(rows, columns, 2)
        if graded
        else np.random.default_rng(2).standard_normal((rows, columns))
    )
    q, r = nt.linalg.qr(nt.from_numpy(a, tile_shape=(16, columns)))
    q, r = q.to_numpy(), r.to_numpy()
    # A R^-1 on a leaf of condition 1e10 would be orthonormal only to ~1e-6
    np.testing.assert_allclose(q.T @ q, np.eye(columns), atol=1e-13)
    np.testing.assert_allclose(q @ r, a, atol=1e-13)
    np.testing.assert_allclose(np.abs(r), np.abs(np.linalg.qr(a)[1]), rtol=1e-6, atol=1e-14)
