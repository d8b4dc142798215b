"""Checks of where and when distributed tasks run, for tests/distributed/program.py (one
launch runs them all): the MPI worker's polls are rare while the workers compute and prompt
when one waits; a Cholesky's updates run on their tiles' owners."""

from __future__ import annotations

import time

import numpy as np

import numtile as nt
from numtile.runtime import Access, DataHandle
from numtile.runtime.distributed.front import place
from numtile.tiletensor.codelets.linalg import gemm
from tests.faults.helpers import host_codelet

BUSY = 1.2  # seconds rank 1's worker computes while its receive is in flight
WRITTEN = 1.6  # when rank 0 writes the tile rank 1 waits for


def polling() -> None:
    """With polls ``mpi_max_poll`` = 1 s apart while the workers compute, rank 1 looks at its
    receive in flight a few times during a 1.2 s task (each look costs ~0.1 ms of the core
    the task uses; at the former 1 ms pace it looked hundreds of times), and once its worker
    runs out of tasks it polls every <= 1 ms: the receive completes within 0.25 s of rank 0
    writing the tile (a 1 s pace would take 0.5 s on average)."""
    runtime = nt.init(ncpu=1, mpi_max_poll=1.0)
    node = runtime.distributed.node
    rank = nt.rank()
    tile = DataHandle((4,), np.float64, np.zeros(4) if rank == 0 else None)
    work = DataHandle((1,), np.float64, np.zeros(1) if rank == 1 else None)
    out = DataHandle((4,), np.float64)
    for handle, owner in ((tile, 0), (work, 1), (out, 1)):
        place(handle, owner)
    runtime.wait_all()
    stamps = {}

    def write_late(t):  # rank 0
        time.sleep(WRITTEN)
        np.add(t, 1, out=t)
        stamps["written"] = time.time()

    def compute(w):  # rank 1, while the receive of ``tile`` is in flight
        time.sleep(BUSY)
        np.add(w, 1, out=w)

    def read(t, o):  # rank 1, once the tile came
        np.copyto(o, t)
        stamps["read"] = time.time()

    runtime.submit(host_codelet("mpi_test:write_late", write_late), [(tile, Access.RW)])
    runtime.submit(host_codelet("mpi_test:compute", compute), [(work, Access.RW)])
    runtime.submit(host_codelet("mpi_test:read", read), [(tile, Access.R), (out, Access.W)])
    polls = node.polls
    time.sleep(BUSY / 3)
    polls = node.polls - polls
    runtime.wait_all()
    theirs = node.exchange(stamps, 60)
    if rank == 1:
        assert polls <= 6, polls
        latency = stamps["read"] - theirs[0]["written"]
        assert 0 < latency < 0.25, latency
        np.testing.assert_array_equal(out.host_array(), np.ones(4))
    nt.init(ncpu=1)


def cholesky_on_a_row_of_ranks() -> None:
    """On a 1 x P grid (column j of tiles on rank j % P, block_cyclic's default for 2 ranks)
    every GEMM update of the Cholesky runs on the owner of the tile it writes, as on any
    grid: the owner already holds one of the two panel tiles (its SYRK brought it), so the
    update is not split into partial sums on the panel's rank, which had put every update
    of a panel on one rank (55% of the work on one of 2 ranks at 16 x 16 tiles). Equal to
    SciPy; no partial sum is reduced."""
    import scipy.linalg

    ranks = nt.nranks()
    rng = np.random.default_rng(7)
    n, tile = 22, 4  # 6 x 6 tiles, the last one smaller
    m = rng.standard_normal((n, n))
    spd = m @ m.T + n * np.eye(n)
    row = nt.distribution.block_cyclic((1, ranks))
    a = nt.from_numpy(spd, tile_shape=(tile, tile), distribution=row)
    front = nt.get_runtime().distributed
    nt.wait_all()
    gemms, adds = gemm.calls, front.reductions.add.calls
    factor = nt.linalg.cholesky(a)
    np.testing.assert_allclose(
        factor.to_numpy(), scipy.linalg.cholesky(spd, lower=True), rtol=1e-10, atol=1e-12
    )
    tiles = a.grid[0]
    mine = sum(
        1 for k in range(tiles) for i in range(k + 1, tiles) for j in range(k + 1, i)
        if j % ranks == nt.rank()
    )  # fmt: skip
    assert (gemm.calls - gemms, front.reductions.add.calls - adds) == (mine, 0)


def deferred_fills() -> None:
    """A zero-fill of tiles without an owner (``zeros`` made outside any distribution, as
    inside a backward pass) runs only on the rank whose task then reads each tile, not on
    every rank; and a GEMM chain whose products all run on its tile's rank (activations of
    one batch tile times a weight every rank holds) does not start from a pass of zeros. Both
    equal NumPy. (Before: every rank filled every tile; each chain filled its tile first.)"""
    from numtile.tiletensor.codelets.copy import fill

    ranks = nt.nranks()
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal((2 * ranks, 6)), rng.standard_normal((6, 4))
    rows = nt.distribution.by_axis(0)
    x = nt.from_numpy(a, tile_shape=(2, 3), distribution=rows)  # tile (i, k) on rank i % P
    w = nt.from_numpy(b, tile_shape=(3, 4))  # held by every rank
    nt.wait_all()
    fills = fill.calls
    zeros = nt.zeros(x.shape, tile_shape=x.tile_shape)
    total = (zeros + x).to_numpy()
    assert fill.calls - fills == x.grid[1], (fill.calls - fills, x.grid)  # its row's tiles
    np.testing.assert_array_equal(total, a)
    fills = fill.calls
    product = nt.matmul(x, w)  # each tile: 2 products, on the tile's rank
    np.testing.assert_allclose(product.to_numpy(), a @ b, rtol=1e-12)
    assert fill.calls == fills, fill.calls - fills
    assert [h.owner for h in product.handles] == [i % ranks for i in range(ranks)]
