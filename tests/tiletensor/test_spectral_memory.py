"""The scratch memory tasks declare (``Codelet(scratch=)``) under a host memory limit: the
gathered spectral task (``dense_lapack``), the LU panel and its row interchanges
(``laswp``), the batched spectral tasks (``spectral_stack``), the blocked QR's panel and the
QR tile kernels, a reduction's gather of non-adjacent axes. The manager makes room for it
(evicting other tiles) before the task runs, counts it in its peak, and refuses a task whose
tiles and scratch cannot fit; where the task's allocations are NumPy's, the declaration
bounds them (tracemalloc)."""

import math
import tracemalloc

import numpy as np
import pytest

import numtile as nt
from numtile import ops_cpu
from numtile.runtime import DataHandle
from numtile.runtime.memory import OutOfMemoryError
from numtile.tiletensor.codelets import linalg, lu, qr, reduction
from numtile.tiletensor.codelets.qr import dense_lapack
from numtile.tiletensor.linalg import qr_blocked
from numtile.tiletensor.linalg.common import RW, R

pytestmark = pytest.mark.usefixtures("frozen_heap")

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


def _with_ballast(limited, task_bytes, scratch, build, run):
    """Under a limit that holds ``build()``'s tensors (the task's tiles, ``task_bytes``) and
    8 ballast tiles but nothing more, ``run(*built)`` makes room for ``scratch`` by evicting
    ballast; returns run's result."""
    tile = 8 * math.ceil(scratch / 32)  # bytes: 8 tiles hold twice the scratch
    runtime = limited(task_bytes + 8 * tile)
    ballast = nt.from_numpy(np.arange(tile, dtype=np.float64), tile_shape=tile // 8)
    built = build()
    nt.wait_all()
    host = runtime.manager.counters()["nodes"]["host"]
    assert host["evictions"] == 0
    result = run(*built)
    host = runtime.manager.counters()["nodes"]["host"]
    assert host["evictions"] * tile >= scratch  # the scratch's worth of ballast went out
    assert task_bytes + scratch <= host["peak"] <= task_bytes + 8 * tile
    np.testing.assert_array_equal(ballast.to_numpy(), np.arange(tile, dtype=np.float64))
    return result


def test_laswp_makes_room_for_the_rows_it_moves_and_allocates_no_more(limited):
    a = np.random.default_rng(1).standard_normal((32, 64))
    pivots = np.array([5, 9, 2, 31, 4, 17, 8, 30])  # LAPACK's ipiv less one, rows 0..7
    column = [DataHandle((8, 64), np.float64) for _ in range(4)]
    scratch = lu.laswp.scratch(*column, DataHandle((8,), np.int64))
    expected = a.copy()
    for i, p in enumerate(pivots):
        expected[[i, p]] = expected[[p, i]]
    tiles = [a[r : r + 8].copy() for r in range(0, 32, 8)]
    ops_cpu.laswp_tiles([np.zeros((1, 1))], np.zeros(1, np.int64))  # compiled beforehand
    tracemalloc.start()
    lu._laswp_cpu(ops_cpu, *tiles, pivots)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak <= scratch
    np.testing.assert_array_equal(np.vstack(tiles), expected)

    def build():
        return nt.from_numpy(a, tile_shape=(8, 64)), nt.from_numpy(pivots, tile_shape=8)

    def run(x, p):
        accesses = [(x.tile((i, 0)), RW) for i in range(4)] + [(p.tile((0,)), R)]
        nt.get_runtime().submit(lu.laswp, accesses)
        return x.to_numpy()

    result = _with_ballast(limited, a.nbytes + pivots.nbytes, scratch, build, run)
    np.testing.assert_array_equal(result, expected)


def test_a_batched_spectral_task_makes_room_for_numpy_and_lapack(limited):
    a = np.random.default_rng(2).standard_normal((4, 16, 12))
    values = DataHandle((4, 12), np.float64)
    scratch = linalg.spectral_stack.scratch(
        DataHandle(a.shape, np.float64), values, "svdvals", (0,), a.shape
    )
    tracemalloc.start()
    out = np.empty((4, 12))
    linalg._spectral_stack_cpu(ops_cpu, a, out, "svdvals", (0,), a.shape)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak <= scratch

    def build():
        return (nt.from_numpy(a, tile_shape=a.shape),)

    s = _with_ballast(limited, a.nbytes + values.nbytes, scratch, build,
                      lambda x: nt.linalg.svdvals(x).to_numpy())  # fmt: skip
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), rtol=1e-12)


def test_a_reduction_makes_room_for_gathering_non_adjacent_axes(limited):
    a = np.random.default_rng(3).standard_normal((4, 8, 16))
    scratch = reduction.reduce["sum"].scratch(
        DataHandle(a.shape, np.float64), DataHandle((8,), np.float64), (0, 2), 8, 64, 1
    )
    assert scratch == a.nbytes  # the gathered copy; adjacent axes need none
    assert (
        reduction.reduce["sum"].scratch(
            DataHandle(a.shape, np.float64), DataHandle((4,), np.float64), None, 4, 128, 1
        )
        == 0
    )

    def build():
        return (nt.from_numpy(a, tile_shape=a.shape),)

    total = _with_ballast(limited, a.nbytes + 8 * 8, scratch, build,
                          lambda x: nt.sum(x, axis=(0, 2)).to_numpy())  # fmt: skip
    np.testing.assert_allclose(total, a.sum(axis=(0, 2)), rtol=1e-12)


def test_the_blocked_qr_panel_makes_room_for_its_stacked_panel(limited):
    a = np.random.default_rng(4).standard_normal((40, 8))  # one tile column: one panel
    tiles = [DataHandle((8, 8), np.float64) for _ in range(5)]
    scratch = qr.geqrt_panel.scratch(*tiles, DataHandle((8, 8), np.float64), tiles[0])
    assert scratch >= a.nbytes  # the stacked panel

    def build():
        return (nt.from_numpy(a, tile_shape=(8, 8)),)

    def run(x):
        factor = qr_blocked.factor(x)
        nt.wait_all()
        return factor

    # the factor's tiles (the matrix and the T and V tiles of its one panel) and the scratch
    factor = _with_ballast(limited, a.nbytes + 2 * 8 * 8 * 8, scratch, build, run)
    r = np.triu(factor.a.to_numpy()[:8])
    np.testing.assert_allclose(np.abs(r), np.abs(np.linalg.qr(a)[1]), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["geqrt", "tpqrt"])
def test_a_qr_tile_kernel_whose_workspace_cannot_fit_is_refused(limited, name):
    """A 32 x 32 float64 tile and its 32 x 32 factor tile (16 KiB) fit a 20 KiB limit; with
    the kernel's column-major copies and LAPACK's workspace beside them they do not."""
    limited(20 * 1024 + (8 << 10 if name == "tpqrt" else 0))
    x = nt.from_numpy(np.eye(32), tile_shape=(32, 32))
    t = nt.zeros((32, 32), tile_shape=(32, 32))
    accesses = [(x.tile((0, 0)), RW), (t.tile((0, 0)), RW)]
    if name == "tpqrt":  # the R on top of another tile
        b = nt.from_numpy(np.eye(32), tile_shape=(32, 32))
        accesses.insert(1, (b.tile((0, 0)), RW))
    with pytest.raises(OutOfMemoryError, match=rf"'{name}' .* KiB of it scratch\), more"):
        nt.get_runtime().submit(getattr(qr, name), accesses, () if name == "geqrt" else (False,))
