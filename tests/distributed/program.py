"""The checks one ``mpiexec -n P`` launch runs on every rank (``python -m`` from
tests/distributed/test_mpi.py): each prints ``CHECK <name> ok`` or raises, so one launch
(the start-up is the cost) covers the random task graphs, the tiled ops and a failure."""

from __future__ import annotations

import sys

import numpy as np

import numtile as nt
from numtile.runtime import DataHandle
from numtile.runtime.distributed.front import ALL, place
from tests.faults.helpers import host_codelet
from tests.faults.test_random_graphs import CODELETS, OPS, TILES, _random_graph, _replay


def random_graphs(seeds: int = 6) -> None:
    """Random task graphs over tiles with random owners (some replicated, some unowned):
    every tile, read on every rank, equals a sequential NumPy replay."""
    runtime = nt.get_runtime()
    for seed in range(seeds):
        rng = np.random.default_rng(seed)  # the same on every rank: the same program
        initial = [rng.integers(-3, 4, size=(8,)) for _ in range(TILES)]
        owners = [int(o) for o in rng.integers(-2, nt.nranks(), size=TILES)]
        handles = []
        for value, owner in zip(initial, owners):
            mine = owner < 0 or owner == nt.rank()
            handles.append(DataHandle((8,), np.int64, value.copy() if mine else None))
            if owner != -2:  # -2: no owner (valid everywhere until a task writes it)
                place(handles[-1], ALL if owner == -1 else owner)
        graph = _random_graph(rng)
        for name, tiles in graph:
            modes = OPS[name][0]
            runtime.submit(CODELETS[name], [(handles[t], m) for t, m in zip(tiles, modes)])
        values, _, _ = _replay(initial, graph, set())
        runtime.wait_handles(handles)
        for index, handle in enumerate(handles):
            np.testing.assert_array_equal(handle.host_array(), values[index], f"seed {seed}")
    runtime.wait_all()


def tiled_ops() -> None:
    """Elementwise ops and matmul on block-cyclic tensors combined with other distributions,
    with tiles the shape does not divide, equal NumPy on every rank."""
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((7, 5)), rng.standard_normal((5, 6))
    c = rng.standard_normal((7, 5))
    d = nt.distribution
    x = nt.from_numpy(a, tile_shape=(3, 2), distribution=d.block_cyclic())
    y = nt.from_numpy(b, tile_shape=(2, 4), distribution=d.by_axis(1))
    z = nt.from_numpy(c, tile_shape=(3, 2), distribution=lambda index: sum(index) % nt.nranks())
    w = nt.from_numpy(c, tile_shape=(3, 2), distribution=d.replicated)
    np.testing.assert_allclose((x * 2 + z - w).to_numpy(), 2 * a + c - c)
    np.testing.assert_allclose(nt.exp(x).to_numpy(), np.exp(a))
    np.testing.assert_allclose((x @ y).to_numpy(), a @ b)
    np.testing.assert_allclose(((x + z) @ y).to_numpy(), (a + c) @ b)
    np.testing.assert_allclose(float(nt.sum(x).item()), a.sum())
    ones = nt.ones((7, 5), tile_shape=(3, 2), distribution=d.by_axis(0))
    np.testing.assert_allclose((ones + x).to_numpy(), 1 + a)
    if nt.nranks() > 2:
        try:
            d.block_cyclic((2, 2))
        except ValueError as error:
            assert "only 3 run" in str(error), error
        else:
            raise AssertionError("block_cyclic((2, 2)) on 3 ranks was accepted")


def cached_transfers() -> None:
    """A tile read by several tasks of another rank travels once, and again once written:
    the bytes each rank receives are exactly that."""
    runtime = nt.get_runtime()
    node = runtime.distributed.node
    weight = DataHandle((16,), np.float64, np.ones(16) if nt.rank() == 0 else None)
    place(weight, 0)
    outputs = [DataHandle((16,), np.float64) for _ in range(5)]
    for output in outputs:
        place(output, 1)
    copy = host_codelet("mpi_test:copy", lambda w, out: np.multiply(w, 2, out=out))
    twice = host_codelet("mpi_test:twice", lambda w: np.multiply(w, 2, out=w))
    runtime.wait_all()
    before = node.bytes_received
    for output in outputs:
        runtime.submit(copy, [(weight, nt.Access.R), (output, nt.Access.W)])
    runtime.submit(twice, [(weight, nt.Access.RW)])  # on rank 0: rank 1's copy is stale now
    for output in outputs:
        runtime.submit(copy, [(weight, nt.Access.R), (output, nt.Access.W)])
    runtime.wait_all()
    expected = 2 * weight.nbytes if nt.rank() == 1 else 0
    assert node.bytes_received - before == expected, (node.bytes_received - before, expected)
    runtime.wait_handles(outputs)  # every rank reads them: equal to 2 * the updated weight
    for output in outputs:
        np.testing.assert_array_equal(output.host_array(), np.full(16, 4.0))


def limited_memory() -> None:
    """The random graphs again with a host memory limit (tiles through the memory manager)."""
    nt.init(ncpu=1, host_mem_limit=1 << 20)
    random_graphs(seeds=2)
    nt.init(ncpu=1)


def failure() -> None:
    """A task that raises on the last rank: every rank's read of what depends on it raises
    naming that rank and the task; nothing hangs (the launch has a timeout)."""
    last = nt.nranks() - 1

    def boom(tile):
        raise ValueError("injected")

    x = nt.from_numpy(np.ones((4, 4)), tile_shape=(2, 2), distribution=lambda index: last)
    nt.get_runtime().submit(host_codelet("mpi_test:boom", boom), [(x.handles[0], nt.Access.RW)])
    y = x + 1  # on the last rank, its tile 0 cancelled; read on every rank
    try:
        y.to_numpy()
    except nt.TaskError as error:
        text = str(error)
        assert f"rank {last}" in text and "'mpi_test:boom'" in text and "injected" in text, text
    else:
        raise AssertionError("the failure was not reported")
    try:
        nt.wait_all()
    except nt.TaskError:
        pass  # the notices of the failure, on the ranks that did not read it yet


CHECKS = {
    "random_graphs": random_graphs,
    "tiled_ops": tiled_ops,
    "cached_transfers": cached_transfers,
    "limited_memory": limited_memory,
    "failure": failure,  # last: its notices may still arrive at the other ranks
}

if __name__ == "__main__":
    nt.init(ncpu=1)
    assert nt.nranks() > 1, "run under mpiexec -n P, P > 1"
    for name in sys.argv[1:] or CHECKS:
        CHECKS[name]()
        print(f"CHECK {name} ok rank {nt.rank()}", flush=True)
