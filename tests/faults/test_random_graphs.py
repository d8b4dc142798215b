"""Random faults in random task graphs (issue 9, Deliver): a task error, a ``BaseException``
or a failed spill write, injected into a seeded random graph of small codelets over a few
tiles, under each scheduler, with and without a host memory limit. Nothing hangs (every
scenario runs under a deadline), every tile the failure did not reach keeps the value a
NumPy replay of the same graph gives it, every tile it reached says so when read, and the
error names the failing task."""

from __future__ import annotations

import errno
import os

import numpy as np
import pytest

from numtile.runtime import Access, Codelet, DataHandle, TaskCancelled, TaskError, TaskState
from numtile.runtime import spill as spill_module
from numtile.runtime.access import READS, WRITES
from tests.faults.helpers import host_codelet

pytestmark = pytest.mark.usefixtures("frozen_heap")

R, W, RW, ACC = Access.R, Access.W, Access.RW, Access.ACCUMULATE
TILES = 6
SMALL = (8,)  # without a limit
BIG = (64, 128)  # int64: 64 KiB, four fit under the limit, so tiles go to disk and back
LIMIT = 4 * 64 * 128 * 8

# name -> (access modes, kernel on NumPy tiles): integer data, so any order of the
# commutative accumulations gives the same bits
OPS = {
    "add": ((R, RW), lambda x, y: np.add(y, x, out=y)),
    "twice": ((RW,), lambda y: np.multiply(y, 2, out=y)),
    "copy": ((R, W), lambda x, y: np.subtract(x, 1, out=y)),
    "mix": ((R, R, W), lambda x, y, z: np.subtract(x, y, out=z)),
    "accumulate": ((R, ACC), lambda x, y: np.add(y, x, out=y)),
}
CODELETS = {name: host_codelet(f"random_graph:{name}", kernel) for name, (_, kernel) in OPS.items()}


class StrRaises(Exception):
    def __str__(self) -> str:
        raise RuntimeError("broken __str__")


# fault -> (what the failing codelet raises, the type the waiting code catches)
FAULTS = {
    "error": (lambda: ValueError("injected"), ValueError),
    "SystemExit": (lambda: SystemExit(7), SystemExit),
    "KeyboardInterrupt": (KeyboardInterrupt, KeyboardInterrupt),
    "str-raises": (lambda: StrRaises(), StrRaises),
}


def _faulty(name: str, fault: str) -> Codelet:
    """``name``'s codelet, but it scribbles on its first tile, then raises ``fault``."""
    raise_fault = FAULTS[fault][0]

    def kernel(*tiles):
        tiles[-1][...] = -12345  # a partial write: the failed task's tiles are not trusted
        raise raise_fault()

    return host_codelet(f"random_graph:{name}:faulty", kernel)


def _random_graph(rng) -> list[tuple[str, list[int]]]:
    names = sorted(OPS)
    graph = []
    for _ in range(int(rng.integers(10, 30))):
        name = names[int(rng.integers(len(names)))]
        tiles = rng.choice(TILES, size=len(OPS[name][0]), replace=False)
        graph.append((name, [int(t) for t in tiles]))
    return graph


def _replay(initial, graph, failed: set[int]):
    """NumPy values of the graph's tiles and which the failures reach: a task that failed, or
    that reads a tile the failures reached, leaves the tiles it writes reached; a task that
    writes a tile (``W``/``RW``) from clean inputs makes it clean again."""
    values = [a.copy() for a in initial]
    reached = [False] * TILES
    not_run = set()
    for index, (name, tiles) in enumerate(graph):
        modes, kernel = OPS[name]
        if index in failed or any(reached[t] for t, m in zip(tiles, modes) if READS[m]):
            not_run.add(index)
            for t, m in zip(tiles, modes):
                if WRITES[m]:
                    reached[t] = True
            continue
        kernel(*[values[t] for t in tiles])
        for t, m in zip(tiles, modes):
            if m is W or m is RW:
                reached[t] = False
    return values, reached, not_run


class SpillFault:
    """The spill folder's writes number ``first`` .. ``first + count - 1`` (once armed) write
    half their bytes, then fail with ENOSPC, as on a full disk."""

    def __init__(self, directory: str, first: int, count: int) -> None:
        self.directory = os.path.realpath(directory)
        self.first, self.count = first, count
        self.writes = 0
        self.armed = False

    def open(self, path, mode="r", *args, **kwargs):
        file = open(path, mode, *args, **kwargs)
        if self.armed and "w" in mode and os.path.dirname(os.path.realpath(path)) == self.directory:
            self.writes += 1
            if self.first <= self.writes < self.first + self.count:
                return _HalfWrite(file)
        return file


class _HalfWrite:
    def __init__(self, file) -> None:
        self.file = file

    def write(self, data) -> int:
        data = memoryview(data).cast("B")
        self.file.write(data[: len(data) // 2])
        self.file.flush()
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.file.close()


CASES = [
    (scheduler, limited, fault)
    for scheduler in ("eager", "dmda", "sync")
    for limited in (False, True)
    for fault in (*FAULTS, "spill")
    if limited or fault != "spill"
]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(("scheduler", "limited", "fault"), CASES)
def test_a_fault_in_a_random_graph(
    make_runtime, within_deadline, monkeypatch, tmp_path, scheduler, limited, fault, seed, raised
):
    rng = np.random.default_rng([seed, CASES.index((scheduler, limited, fault))])
    spill_dir = tmp_path / "spill"
    settings = {"host_mem_limit": LIMIT, "spill_dir": str(spill_dir)} if limited else {}
    runtime = make_runtime(scheduler, **settings)
    shape = BIG if limited else SMALL
    initial = [rng.integers(-3, 4, size=shape) for _ in range(TILES)]
    handles = [DataHandle(shape, np.int64, a.copy()) for a in initial]
    graph = _random_graph(rng)
    spill = None
    if fault == "spill":
        spill = SpillFault(str(spill_dir), int(rng.integers(1, 5)), int(rng.integers(1, 4)))
        monkeypatch.setattr(spill_module, "open", spill.open, raising=False)
    fault_at = None if fault == "spill" else int(rng.integers(len(graph)))

    def run_graph():
        if spill is not None:
            spill.armed = True
        tasks = []
        for index, (name, tiles) in enumerate(graph):
            codelet = _faulty(name, fault) if index == fault_at else CODELETS[name]
            modes = OPS[name][0]
            tasks.append(runtime.submit(codelet, [(handles[t], m) for t, m in zip(tiles, modes)]))
        error = raised(runtime.wait_all)
        if spill is not None:
            spill.armed = False
        return tasks, error

    tasks, error = within_deadline(run_graph)
    failed = [t for t in tasks if t.state is TaskState.FAILED]
    roots = [
        i for i, t in enumerate(tasks) if t in failed and not isinstance(t.error, TaskCancelled)
    ]
    if fault_at is not None:
        assert roots == [fault_at]
        task = tasks[fault_at]
        assert isinstance(error, TaskError) and isinstance(error, FAULTS[fault][1]), error
        assert f"'random_graph:{graph[fault_at][0]}:faulty' (#{task.seq})" in str(error)
    else:  # a failed spill write fails the task that needed the room, naming both
        for index in roots:
            assert isinstance(tasks[index].error, OSError), tasks[index].error
            assert tasks[index].error.errno == errno.ENOSPC
            assert str(spill_dir) in str(tasks[index].error)
        assert (error is None) == (not roots)
        if roots:
            named = [i for i in roots if f"(#{tasks[i].seq}) on tiles" in str(error)]
            assert named and str(error) == str(tasks[named[0]].error)
    values, reached, not_run = _replay(initial, graph, set(roots))
    assert {i for i, t in enumerate(tasks) if t in failed} <= not_run

    def read_back():
        for index, handle in enumerate(handles):
            problem = raised(runtime.wait_handles, [handle])
            if reached[index]:
                assert problem is not None, f"tile {index} was reached by the failure"
            else:
                assert problem is None, f"tile {index} lost: {problem!r}"
                np.testing.assert_array_equal(handle.host_array(), values[index])

    within_deadline(read_back)
    if limited:  # no partial spill file of these tiles is left behind (the runtime also
        # adopts, and may spill, tiles that earlier tests left alive: their sizes differ)
        ours = {f"tile-{os.getpid()}-{handle.id}.bin" for handle in handles}
        sizes = [os.path.getsize(spill_dir / n) for n in os.listdir(spill_dir) if n in ours]
        assert all(size == 64 * 128 * 8 for size in sizes), sizes
    # the runtime goes on: the tiles the failure did not reach still compute
    clean = [h for h, r in zip(handles, reached) if not r]
    for a, b in zip(clean, clean[1:]):
        runtime.submit(CODELETS["add"], [(a, R), (b, RW)])
    within_deadline(runtime.wait_handles, clean)
    within_deadline(runtime.shutdown)
    if limited:
        assert os.listdir(spill_dir) == []
