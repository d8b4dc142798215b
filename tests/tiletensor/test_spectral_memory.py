"""The scratch memory of the gathered spectral task (``dense_lapack``) and of the LU panel
under a host memory limit: the manager makes room for it (evicting other tiles) before the
task runs, counts it in its peak, and refuses a task whose tiles and scratch cannot fit."""

import numpy as np
import pytest

import numtile as nt
from numtile.runtime import DataHandle
from numtile.runtime.memory import OutOfMemoryError
from numtile.tiletensor.codelets.qr import dense_lapack

N, TILE = 64, 32
BALLAST = 128 * 1024  # 8 tiles of 16 KiB, alive beside the matrix
OUTPUTS = {"eigh": N * N + N, "eigvalsh": N, "svd": 2 * N * N + N, "svdvals": N}  # elements


def _need(operation):
    """The bytes the one dense task holds: its input and output tiles, plus its scratch."""
    scratch = dense_lapack.scratch(
        DataHandle((N, N), np.float64), (N, N), (TILE, TILE), operation, False, ()
    )
    return (N * N + OUTPUTS[operation]) * 8 + scratch


@pytest.fixture
def limited(tmp_path):
    def start(limit):
        return nt.init(ncpu=1, host_mem_limit=limit, spill_dir=str(tmp_path))

    yield start
    nt.init()


def _symmetric():
    a = np.random.default_rng(3).standard_normal((N, N))
    return a + a.T


@pytest.mark.parametrize("operation", ["eigh", "svd", "svdvals"])
def test_the_gathered_task_makes_room_for_its_scratch(limited, operation):
    """The limit holds the matrix and the ballast, and the task's tiles beside the ballast,
    but not its tiles and scratch: half the ballast at least is spilled while it runs."""
    need = _need(operation)
    limit = need + BALLAST // 2
    runtime = limited(limit)
    a = _symmetric()
    ballast = nt.from_numpy(np.arange(BALLAST // 8, dtype=np.float64), tile_shape=2048)
    x = nt.from_numpy(a, tile_shape=(TILE, TILE))
    nt.wait_all()
    assert runtime.manager.counters()["nodes"]["host"]["evictions"] == 0
    if operation == "eigh":
        w, v = nt.linalg.eigh(x)
        w, v = w.to_numpy(), v.to_numpy()
        np.testing.assert_allclose(w, np.linalg.eigvalsh(a), rtol=1e-11, atol=1e-11)
        np.testing.assert_allclose(v @ np.diag(w) @ v.T, a, atol=1e-11)
    elif operation == "svd":
        u, s, vh = (part.to_numpy() for part in nt.linalg.svd(x))
        np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), rtol=1e-11)
        np.testing.assert_allclose(u @ np.diag(s) @ vh, a, atol=1e-11)
    else:
        s = nt.linalg.svdvals(x).to_numpy()
        np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), rtol=1e-11)
    host = runtime.manager.counters()["nodes"]["host"]
    assert need <= host["peak"] <= limit
    assert host["evictions"] >= 4  # 16 KiB tiles: 64 KiB of ballast at least
    np.testing.assert_array_equal(ballast.to_numpy(), np.arange(BALLAST // 8))


def test_a_gathered_task_whose_scratch_cannot_fit_is_refused(limited):
    limited(_need("eigvalsh") - 8 * 1024)  # the tiles fit, the scratch beside them does not
    x = nt.from_numpy(_symmetric(), tile_shape=(TILE, TILE))
    with pytest.raises(OutOfMemoryError, match=r"'dense_lapack' .* KiB of it scratch\), more"):
        nt.linalg.eigvalsh(x)


def test_the_lu_panel_declares_its_stacked_panel(limited):
    """A 64 x 64 matrix in 32 x 32 tiles: the first panel's two tiles (16 KiB) fit a 32 KiB
    limit, but not with their stacked copy beside them."""
    limited(32 * 1024)
    a = np.random.default_rng(4).standard_normal((N, N)) + N * np.eye(N)
    with pytest.raises(OutOfMemoryError, match=r"'getrf_panel' .* needs 34\.3 KiB .* scratch"):
        nt.linalg.solve(nt.from_numpy(a, tile_shape=(TILE, TILE)), nt.from_numpy(np.ones(N)))
