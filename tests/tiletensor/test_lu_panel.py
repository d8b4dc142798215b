"""Tests for the CPU LU panel and row interchanges (numtile/ops_cpu/lu.py getrf_tiles and
laswp_tiles, behind numtile/tiletensor/codelets/lu.py): panels wide enough to be split
(recursive LU) give LAPACK's pivots and factor."""

import numpy as np
import pytest
import scipy.linalg

import numtile as nt
from numtile.ops_cpu import lu as lu_kernels
from numtile.tiletensor.linalg.lu import lu_factor

WIDE = 2 * lu_kernels.RECURSE_WIDTH + 16  # split once; the 320 - WIDE leftover tile is not


def test_a_split_panel_gives_lapacks_pivots_and_factor():
    a = np.random.default_rng(5).standard_normal((320, 320))
    lu, pivots = lu_factor(nt.from_numpy(a, tile_shape=(WIDE, WIDE)))
    factor, ipiv = scipy.linalg.lu_factor(a)
    np.testing.assert_array_equal(
        pivots.to_numpy(), np.concatenate([ipiv[:WIDE], ipiv[WIDE:] - WIDE])
    )
    np.testing.assert_allclose(lu.to_numpy(), factor, rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("column", [WIDE // 4, 3 * WIDE // 4])  # in the left / right half
def test_a_split_panel_reports_the_first_zero_pivot(column):
    a = np.random.default_rng(6).standard_normal((320, 320))
    a[:, column] = 0
    x = nt.linalg.solve(nt.from_numpy(a, tile_shape=(WIDE, WIDE)), nt.ones((320,)))
    with pytest.raises(np.linalg.LinAlgError, match=rf"pivot U\[{column}, {column}\]"):
        x.to_numpy()


def test_laswp_tiles_moves_rows_between_tiles_of_any_dtype():
    rng = np.random.default_rng(7)
    pivots = np.array([5, 9, 2, 11, 4])  # LAPACK's ipiv less one
    for dtype in (np.float32, np.complex128):
        a = (rng.standard_normal((12, 3)) * (1 + 1j if dtype == np.complex128 else 1)).astype(dtype)
        expected = a.copy()
        for i, p in enumerate(pivots):
            expected[[i, p]] = expected[[p, i]]
        tiles = [a[:5].copy(), a[5:9].copy(), a[9:].copy()]
        lu_kernels.laswp_tiles(tiles, pivots)
        np.testing.assert_array_equal(np.vstack(tiles), expected)
