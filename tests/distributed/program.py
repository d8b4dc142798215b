"""The checks one ``mpiexec -n P`` launch runs on every rank (``python -m`` from
tests/distributed/test_mpi.py): each prints ``CHECK <name> ok`` or raises, so one launch
(the start-up is the cost) covers the random task graphs, the tiled ops and a failure."""

from __future__ import annotations

import os
import sys
import time
import warnings

import numpy as np

import numtile as nt
from numtile.runtime import Access, DataHandle
from numtile.runtime.distributed.front import ALL, place
from tests.distributed.program_scheduling import (
    cholesky_on_a_row_of_ranks,
    deferred_fills,
    polling,
)
from tests.faults.helpers import host_codelet
from tests.faults.test_random_graphs import CODELETS, OPS, TILES, _random_graph, _replay

ACC = Access.ACCUMULATE


def launch_name() -> int:
    """A name of this launch, the same on every rank: rank 0's process id."""
    theirs = nt.get_runtime().distributed.node.exchange(os.getpid(), 60)
    return os.getpid() if nt.rank() == 0 else theirs[0]


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


def random_graphs_reduced() -> None:
    """The random graphs again with their accumulation declared a sum: accumulations run
    where their input lives and are reduced on the owner (or, for a replicated tile, on the
    first contributor), interleaved at random with reads and writes of the same tiles."""
    from numtile.runtime.distributed.reduce import ADDITIVE, register_additive

    name = CODELETS["accumulate"].name
    register_additive(name)
    try:
        random_graphs(seeds=12)
    finally:
        ADDITIVE.discard(name)


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


def accumulations() -> None:
    """Gradient sums into a tile owned by rank 0 (and into a replicated tile) from tasks whose
    inputs live on every rank: computed where the inputs are, reduced on the owner. Only the
    partial sums travel, once per contributing rank, and the values equal NumPy."""
    runtime = nt.get_runtime()
    node = runtime.distributed.node
    ranks = nt.nranks()
    rng = np.random.default_rng(3)
    a = rng.standard_normal((4 * ranks, 6))
    x = nt.from_numpy(a, tile_shape=(2, 6), distribution=nt.distribution.by_axis(0))
    runtime.wait_all()
    before = node.bytes_received, node.bytes_sent
    total = nt.sum(x, axis=0)  # one output tile, owned by rank 0 (by_axis(0) of tile (0,))
    np.testing.assert_allclose(total.to_numpy(), a.sum(axis=0))
    runtime.wait_all()  # the sends of the result, too
    received = node.bytes_received - before[0]
    sent = node.bytes_sent - before[1]
    tile = 6 * 8
    # rank 0 receives a partial from each other rank; then the result goes to every rank
    expected_received = (ranks - 1) * tile if nt.rank() == 0 else tile
    expected_sent = (ranks - 1) * tile if nt.rank() == 0 else tile
    assert (received, sent) == (expected_received, expected_sent), (received, sent)
    # a replicated target, two accumulation groups with a read in between, and grads
    axpy = nt.tiletensor.codelets.elementwise.axpy
    target = nt.from_numpy(np.zeros(6), tile_shape=6, distribution=nt.distribution.replicated)
    rows = nt.redistribute(x, nt.distribution.by_axis(0), tile_shape=(1, 6))
    for round_ in range(2):
        for i in range(rows.grid[0]):
            handle = rows.tile((i, 0))
            flat = DataHandle((6,), np.float64)
            place(flat, handle.owner)
            runtime.submit(
                nt.tiletensor.codelets.copy.cast, [(handle, nt.Access.R), (flat, nt.Access.W)]
            )
            runtime.submit(axpy, [(flat, nt.Access.R), (target.handles[0], ACC)], (1.0,))
        np.testing.assert_allclose(target.to_numpy(), (round_ + 1) * a.sum(axis=0))
    w = nt.from_numpy(np.ones((6, 3)), tile_shape=(6, 3), distribution=lambda index: 0)
    w.requires_grad_()
    loss = nt.sum(nt.matmul(x, w))  # dw = x^T @ ones: the sum over every rank's rows
    loss.backward()
    np.testing.assert_allclose(w.grad.to_numpy(), a.sum(axis=0)[:, None] * np.ones((1, 3)))


def placement() -> None:
    """Results take their first input's distribution (so a block-cyclic A @ B is
    block-cyclic); ``redistribute`` changes owners and tiles; a wrong rank is refused."""
    d = nt.distribution
    grid = d.block_cyclic()
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((9, 7)), rng.standard_normal((7, 8))
    x = nt.from_numpy(a, tile_shape=(2, 2), distribution=grid)
    y = nt.from_numpy(b, tile_shape=(2, 3), distribution=d.by_axis(1))
    for result in (x + 1, nt.exp(x), x @ y):
        assert result.distribution is grid, result.distribution
        for index, handle in zip(result.layout.indices(), result.handles):
            assert handle.owner == grid.owner(index), (index, handle.owner)
    assert (y * 2).distribution.axis == 1
    np.testing.assert_allclose((x @ y).to_numpy(), a @ b)
    z = nt.redistribute(x @ y, d.by_axis(0), tile_shape=(4, 5))
    assert z.tile_shape == (4, 5) and [h.owner for h in z.handles][::2] == [
        i % nt.nranks() for i in range(3)
    ]
    np.testing.assert_allclose(z.to_numpy(), a @ b)
    np.testing.assert_allclose(nt.redistribute(z, d.replicated).to_numpy(), a @ b)
    try:
        nt.redistribute(z, lambda index: nt.nranks())
    except ValueError as error:
        assert f"rank {nt.nranks()}" in str(error), error
    else:
        raise AssertionError("a distribution naming a missing rank was accepted")


def linear_algebra() -> None:
    """Matmul, Cholesky and the SPD solve over 2-D block-cyclic tensors equal SciPy; the
    bytes each rank receives for the Cholesky equal the 2-D block-cyclic lower bound (each
    tile once per rank that needs it and does not own it), within 1.2x."""
    import scipy.linalg

    runtime = nt.get_runtime()
    node = runtime.distributed.node
    ranks = nt.nranks()
    grid = nt.distribution.block_cyclic((2, ranks // 2) if ranks % 2 == 0 else (1, ranks))
    rng = np.random.default_rng(5)
    n, tile = 22, 4  # 6 x 6 tiles, the last one smaller
    m = rng.standard_normal((n, n))
    spd = m @ m.T + n * np.eye(n)
    rhs = rng.standard_normal((n, 3))
    a = nt.from_numpy(spd, tile_shape=(tile, tile), distribution=grid)
    b = nt.from_numpy(rhs, tile_shape=(tile, 3), distribution=grid)
    np.testing.assert_allclose((a @ b).to_numpy(), spd @ rhs, rtol=1e-12, atol=1e-12)
    runtime.wait_all()
    before = node.bytes_received
    factor = nt.linalg.cholesky(a)
    runtime.wait_all()
    received = node.bytes_received - before
    np.testing.assert_allclose(
        factor.to_numpy(), scipy.linalg.cholesky(spd, lower=True), rtol=1e-10, atol=1e-12
    )
    solution = nt.linalg.solve(a, b, assume_a="pos")
    np.testing.assert_allclose(
        solution.to_numpy(), scipy.linalg.solve(spd, rhs, assume_a="pos"), rtol=1e-10
    )
    # the lower bound: for each tile of L, the ranks whose tasks read it, less its owner
    tiles = factor.grid[0]
    needed = set()
    for k in range(tiles):
        for i in range(k + 1, tiles):
            needed.add(((k, k), grid.owner((i, k))))  # TRSM of (i, k) reads L(k, k)
            for j in range(k + 1, i + 1):  # SYRK / GEMM of (i, j) read L(i, k), L(j, k)
                needed.add(((i, k), grid.owner((i, j))))
                needed.add(((j, k), grid.owner((i, j))))
    bound = sum(factor.tile(t).nbytes for t, r in needed if r == nt.rank() and grid.owner(t) != r)
    assert bound <= received <= 1.2 * bound, (received, bound)
    print(f"CHOLESKY bytes received rank {nt.rank()}: {received} bound {bound}", flush=True)


def observability() -> None:
    """``nt.trace`` writes one Chrome trace on rank 0: a process per rank with its worker
    rows and send/receive rows; ``runtime_summary`` names this rank's bytes."""
    import io
    import json
    import os
    import tempfile

    # a folder of this launch's own: launches that run at once (two test runs on one machine)
    # overwrote and removed each other's trace at one shared path in /tmp
    folder = os.environ.get("NUMTILE_TEST_CHECKS_DIR") or tempfile.gettempdir()
    path = os.environ.get("NUMTILE_TEST_TRACE") or os.path.join(
        folder, f"numtile-mpi-trace-{launch_name()}.json"
    )
    a = np.arange(144.0).reshape(12, 12)  # 3 x 3 tiles: every rank computes some
    x = nt.from_numpy(a, tile_shape=(4, 4), distribution=nt.distribution.block_cyclic())
    with nt.trace(path):
        np.testing.assert_allclose((x @ x).to_numpy(), a @ a)
    text = nt.runtime_summary(file=io.StringIO())
    assert f"mpi rank {nt.rank()} of {nt.nranks()}" in text and "sent" in text, text
    if nt.rank() != 0:
        return
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    names = {(e["pid"], e["args"]["name"]) for e in events if e["name"] == "thread_name"}
    for rank in range(nt.nranks()):
        assert {(rank, "cpu0"), (rank, "mpi send"), (rank, "mpi receive")} <= names, names
        ran = [e for e in events if e["ph"] == "X" and e["pid"] == rank]
        assert any(e["name"] == "gemm" for e in ran), rank
        assert any(e.get("cat") == "mpi" for e in ran), rank
    os.remove(path)


def sequence_mismatch() -> None:
    """A program that submits an extra task on rank 0: every rank's next wait raises
    ``SubmissionMismatchError`` naming the first task that differs, on both sides."""
    from numtile.runtime.distributed.sequence import SubmissionMismatchError

    x = nt.from_numpy(np.ones((4, 4)), tile_shape=(2, 2), distribution=lambda index: 0)
    nt.wait_all()
    if nt.rank() == 0:  # what a program must not do
        x = x * 3
    y = nt.exp(x)
    try:
        y.to_numpy()
    except SubmissionMismatchError as error:
        text = str(error)
        assert "different task sequences" in text and "task #" in text, text
        assert "'unary:exp" in text and "'binary_scalar:multiply" in text, text
    else:
        raise AssertionError("the diverging sequences were not detected")
    nt.init(ncpu=1)  # the ranks' records differ now: start afresh


def split_gemm_chains() -> None:
    """A GEMM chain over inputs of several ranks (a weight gradient ``x^T g`` over batch
    tiles spread by ``by_axis(0)``) runs each rank's products where they are, into a partial:
    the owner receives P-1 partial tiles, not the inputs; equal to NumPy."""
    node = nt.get_runtime().distributed.node
    rng = np.random.default_rng(3)
    a, g = rng.standard_normal((12, 3)), rng.standard_normal((12, 5))
    rows = nt.distribution.by_axis(0)
    x = nt.from_numpy(a, tile_shape=(2, 3), distribution=rows)
    y = nt.from_numpy(g, tile_shape=(2, 5), distribution=rows)
    nt.wait_all()
    before = node.bytes_received
    gw = nt.linalg.matmul(x, y, transpose_a=True).to_numpy(root=0)  # one tile, on rank 0
    received = node.bytes_received - before
    expected = (nt.nranks() - 1) * 3 * 5 * 8 if nt.rank() == 0 else 0
    assert received == expected, (received, expected)
    if nt.rank() == 0:
        np.testing.assert_allclose(gw, a.T @ g, rtol=1e-12)


def gather_on_one_rank() -> None:
    """``to_numpy(root=r)``: the array on rank r, None elsewhere; only r receives tiles, each
    one it lacks once; then a read on every rank moves only what the others still lack."""
    node = nt.get_runtime().distributed.node
    a = np.arange(35.0).reshape(7, 5)
    x = nt.from_numpy(a, tile_shape=(3, 2), distribution=nt.distribution.block_cyclic()) * 2
    last = nt.nranks() - 1
    owned_elsewhere = [
        o != last for o in nt.distribution.block_cyclic().owners(x.layout.indices(), nt.nranks())
    ]
    nt.wait_all()
    before = node.bytes_received
    got = x.to_numpy(root=last)
    received = node.bytes_received - before
    if nt.rank() == last:
        np.testing.assert_array_equal(got, 2 * a)
        nbytes = [h.nbytes for h in x.handles]
        assert received == sum(n for n, o in zip(nbytes, owned_elsewhere) if o), received
    else:
        assert got is None and received == 0, (got, received)
    np.testing.assert_array_equal(x.to_numpy(), 2 * a)  # every rank, after
    for bad in (nt.nranks(), -1, 0.5, True):
        try:
            x.to_numpy(root=bad)
        except ValueError as error:
            assert "root must be a rank" in str(error), error
        else:
            raise AssertionError(f"root={bad!r} was accepted")


def last_sends() -> None:
    """A read waits for a tile's writers, not for the sends that carry it on, so a rank's
    last sends leave after its last wait: ``shutdown(wait=False)`` (what exit does) still
    posts them, and the other ranks receive the tile instead of waiting forever."""
    runtime = nt.get_runtime()
    tile = DataHandle((4,), np.float64, np.zeros(4) if nt.rank() == 0 else None)
    place(tile, 0)
    runtime.wait_all()

    def slow(t):
        time.sleep(0.3)  # the program reaches its end while this runs
        np.add(t, 1, out=t)

    runtime.submit(host_codelet("mpi_test:slow", slow), [(tile, nt.Access.RW)])  # on rank 0
    runtime.distributed.bring(tile, runtime.distributed.everyone)  # what a read submits
    nt.shutdown(wait=False)
    np.testing.assert_array_equal(tile.host_array(), np.ones(4))
    nt.init(ncpu=1)


def bf16_tiles() -> None:
    """bfloat16 and float16 tiles travel between ranks as their bytes: ops on block-cyclic
    bfloat16 tensors equal the float32 ops rounded once (ml_dtypes) on every rank, and a bf16-mixed
    linear layer (float32 partial sums, one rounding) equals its single-process result."""
    from numtile.nn import functional

    bf16 = nt.bfloat16
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((7, 5)).astype(bf16), rng.standard_normal((7, 5))
    d = nt.distribution
    x = nt.from_numpy(a, tile_shape=(3, 2), distribution=d.block_cyclic())
    z = nt.from_numpy(b, tile_shape=(3, 2), distribution=lambda i: (sum(i) + 1) % nt.nranks())
    got = (x * 2 + z.astype(bf16)).to_numpy()
    want = (a.astype(np.float32) * 2 + b.astype(bf16).astype(np.float32)).astype(bf16)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    half = a.astype(np.float16)  # float16 tiles travel the same way (NaN, -0 included)
    half[0, :2] = [np.nan, -0.0]
    h = nt.from_numpy(half, tile_shape=(3, 2), distribution=d.block_cyclic())
    zero = nt.from_numpy(
        np.zeros_like(half), tile_shape=(3, 2), distribution=lambda i: sum(i) % nt.nranks()
    )
    np.testing.assert_array_equal(h.to_numpy().view(np.uint16), half.view(np.uint16))
    moved = (h + zero).to_numpy()  # owners differ: tiles sent and received
    np.testing.assert_array_equal(moved.view(np.uint16), (half + np.float16(0)).view(np.uint16))
    total = nt.sum(x, axis=0).to_numpy().astype(np.float64)  # partials of every rank
    np.testing.assert_allclose(total, a.astype(np.float64).sum(0), rtol=2**-7)
    w = rng.standard_normal((5, 4)).astype(np.float32)
    tw = nt.from_numpy(w, tile_shape=(2, 3), distribution=d.by_axis(0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # this CPU's bf16 fallback, said once
        with nt.nn.precision("bf16-mixed"):
            y = functional.linear(x.astype(np.float32), tw)  # three inner tiles: a partial
    exact = a.astype(np.float64) @ w.astype(bf16).astype(np.float64)
    assert y.dtype == bf16
    np.testing.assert_allclose(y.to_numpy().astype(np.float64), exact, rtol=2**-7, atol=1e-6)


def one_writer() -> None:
    """``save_hf``'s folder writer under MPI: the tiles travel to rank 0, which alone writes
    the folder (the others receive nothing and leave when it is complete); the files equal
    NumPy; a write that fails on rank 0 raises on every rank instead of hanging them."""
    import tempfile

    from safetensors.numpy import load_file

    from numtile.io import hf as files

    node = nt.get_runtime().distributed.node
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((7, 5)), rng.standard_normal(9)
    x = nt.from_numpy(a, tile_shape=(3, 2), distribution=nt.distribution.block_cyclic()) * 2
    y = nt.from_numpy(b, tile_shape=4, distribution=nt.distribution.by_axis(0)) + 1
    # one folder for every rank (made by rank 0, named to the others by the test's folder)
    folder = os.path.join(os.environ.get("NUMTILE_TEST_CHECKS_DIR") or tempfile.gettempdir(), "hf")
    nt.wait_all()
    before = node.bytes_received
    files.write_folder(folder, "{}", [("x", x), ("y", y)], "float64")
    received = node.bytes_received - before
    assert (received > 0) == (nt.rank() == 0), received  # rank 0 gathers, the others send
    written = load_file(os.path.join(folder, files.WEIGHTS))
    np.testing.assert_array_equal(written["x"], 2 * a)
    np.testing.assert_array_equal(written["y"], b + 1)
    if nt.rank() == 0:  # (the others may read on while rank 0 starts the next write)
        assert not [n for n in os.listdir(os.path.dirname(folder)) if n.endswith(".tmp")]
        # what rank 0 alone meets: a full disk, say

        def full(*args):
            raise OSError("no space left")

        files.write_safetensors, write = full, files.write_safetensors
    try:
        files.write_folder(folder, "{}", [("x", x)], "float64")
    except (OSError, RuntimeError) as error:  # on rank 0 its own error, on the others its text
        assert "no space left" in str(error), error
        assert isinstance(error, OSError) == (nt.rank() == 0), error
    else:
        raise AssertionError("the failed write was not reported")
    finally:
        if nt.rank() == 0:
            files.write_safetensors = write
    np.testing.assert_array_equal(load_file(os.path.join(folder, files.WEIGHTS))["y"], b + 1)


def tied_weight_gradient() -> None:
    """A weight read by two GEMMs over every rank's rows (as GPT-2's token embedding by the
    embedding and the LM head): its two gradient sums reach the owner as one, so rank 0
    receives as many bytes as for one use (P-1 partial tiles), and the gradient equals NumPy."""
    node = nt.get_runtime().distributed.node
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((4 * nt.nranks(), 6)), rng.standard_normal((4 * nt.nranks(), 6))
    rows = nt.distribution.by_axis(0)
    x = nt.from_numpy(a, tile_shape=(2, 6), distribution=rows)
    z = nt.from_numpy(b, tile_shape=(2, 6), distribution=rows)
    received = []
    for uses in (1, 2):
        w = nt.from_numpy(np.ones((6, 3)), tile_shape=(6, 3), distribution=lambda index: 0)
        w.requires_grad_()
        loss = nt.sum(nt.matmul(x, w))
        if uses == 2:
            loss = loss + nt.sum(nt.matmul(z, w))
        nt.wait_all()
        before = node.bytes_received
        loss.backward()
        grad = w.grad.to_numpy(root=0)
        received.append(node.bytes_received - before)
        total = a.sum(axis=0) + (b.sum(axis=0) if uses == 2 else 0)
        if nt.rank() == 0:
            np.testing.assert_allclose(grad, total[:, None] * np.ones((1, 3)), rtol=1e-12)
    if nt.rank() == 0:
        assert received[1] == received[0] == (nt.nranks() - 1) * 6 * 3 * 8, received


KERNEL = """import numba


@numba.njit(cache=True)
def twice(x):
    return 2 * x
"""


def compiles_once() -> None:
    """The ranks of one host compile a cached kernel once: they reach it together, one
    compiles it (a disk-cache miss) while the others wait, then they load what it wrote (a
    hit each). The kernel's file is new to this launch, so its cache starts empty."""
    import importlib
    import tempfile

    node = nt.get_runtime().distributed.node
    folder = os.environ.get("NUMTILE_TEST_CHECKS_DIR") or tempfile.gettempdir()
    path = os.path.join(folder, f"kernel_{launch_name()}.py")
    if nt.rank() == 0:
        with open(path + ".tmp", "w") as f:
            f.write(KERNEL)
        os.replace(path + ".tmp", path)
    node.exchange(None, 60)  # the file is there, and the ranks start together
    sys.path.insert(0, folder)  # (a cached kernel's module is imported by name on loading)
    try:
        module = importlib.import_module(os.path.basename(path)[:-3])
    finally:
        sys.path.remove(folder)
    np.testing.assert_array_equal(module.twice(np.arange(3.0)), [0.0, 2.0, 4.0])
    stats = module.twice.stats
    mine = (sum(stats.cache_misses.values()), sum(stats.cache_hits.values()))
    every = [mine, *node.exchange(mine, 60).values()]
    assert sorted(every) == [(0, 1)] * (nt.nranks() - 1) + [(1, 0)], every


CHECKS = {
    "random_graphs": random_graphs,
    "tiled_ops": tiled_ops,
    "random_graphs_reduced": random_graphs_reduced,
    "cached_transfers": cached_transfers,
    "limited_memory": limited_memory,
    "accumulations": accumulations,
    "placement": placement,
    "linear_algebra": linear_algebra,
    "observability": observability,
    "sequence_mismatch": sequence_mismatch,
    "split_gemm_chains": split_gemm_chains,
    "gather_on_one_rank": gather_on_one_rank,
    "tied_weight_gradient": tied_weight_gradient,
    "compiles_once": compiles_once,
    "one_writer": one_writer,
    "last_sends": last_sends,
    "bf16_tiles": bf16_tiles,
    "polling": polling,
    "cholesky_on_a_row_of_ranks": cholesky_on_a_row_of_ranks,
    "deferred_fills": deferred_fills,
    "failure": failure,  # last: its notices may still arrive at the other ranks
}

if __name__ == "__main__":
    nt.init(ncpu=1)
    assert nt.nranks() > 1, "run under mpiexec -n P, P > 1"
    # mpiexec forwards each rank's output in chunks that may split a line and interleave with
    # another rank's: the test reads the passed checks from one file per rank instead
    record = os.environ.get("NUMTILE_TEST_CHECKS_DIR")
    if record:  # and each rank's whole output goes to a file of its own (the test showed the
        # tail of mpiexec's interleaved output: a rare failure's message was lost)
        log = os.open(os.path.join(record, f"rank{nt.rank()}.log"), os.O_WRONLY | os.O_CREAT)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(log, 1)
        os.dup2(log, 2)
    for name in sys.argv[1:] or CHECKS:
        CHECKS[name]()
        print(f"CHECK {name} ok rank {nt.rank()}", flush=True)
        if record:
            with open(os.path.join(record, f"rank{nt.rank()}"), "a") as f:
                f.write(f"{name}\n")
