"""Spill files written and read by I/O threads, off the memory manager's lock
(``runtime/spill_io.py``): tiles stay usable while their file is written, other workers run
while a tile is read back, I/O errors reach the task that needed the transfer without losing
the tile, and shutdown waits for (or drops) transfers in flight, leaving no file."""

from __future__ import annotations

import errno
import os
import threading
import time

import numpy as np
import pytest

import numtile as nt
from numtile.runtime import Access, Codelet, TaskError
from numtile.runtime.handle import DISK, HOST
from numtile.runtime.spill import Spill

pytestmark = pytest.mark.usefixtures("frozen_heap")

KiB = 1 << 10
TILE = 128 * KiB  # 16384 float64: buffers this large are reused (smaller come from the heap)
N = TILE // 8


class Gate:
    """Holds every spill ``write`` (or ``read``) at its start until ``open()``."""

    def __init__(self, monkeypatch, name: str) -> None:
        self.opened = threading.Event()
        self.entered = threading.Event()
        original = getattr(Spill, name)

        def gated(spill, *args):
            self.entered.set()
            assert self.opened.wait(30), "the gate was never opened"
            return original(spill, *args)

        monkeypatch.setattr(Spill, name, gated)

    def open(self) -> None:
        self.opened.set()


@pytest.fixture
def limited(tmp_path):
    """A two-worker runtime whose host holds ``tiles`` tiles, spilling into ``tmp_path``."""

    def start(tiles: int):
        return nt.init(
            ncpu=2, scheduler="eager", host_mem_limit=tiles * TILE, spill_dir=str(tmp_path)
        )

    yield start
    nt.shutdown(wait=False)
    nt.init()


def _tensor(seed: int, tiles: int):
    array = np.random.default_rng(seed).standard_normal(tiles * N)
    return array, nt.from_numpy(array, tile_shape=N)


def _settled(manager) -> None:
    """Wait until no spill transfer is in flight."""
    deadline = time.monotonic() + 20
    while manager.writing or manager.reading:
        assert time.monotonic() < deadline, "spill transfers never ended"
        time.sleep(0.01)


def _write_back(manager, handle) -> None:
    """Start writing ``handle``'s spill file, as an eviction for room does (its host copy
    stays until the write ends)."""
    with manager.lock:
        manager._start_write(handle, drop=False)


_ADD_ONE = Codelet("test_spill_io_add_one", kernel=lambda ops, x: np.add(x, 1.0, out=x))


def test_a_tile_is_read_and_written_while_its_file_is_written(
    limited, tmp_path, monkeypatch, within_deadline
):
    runtime = limited(tiles=8)
    manager = runtime.manager
    gate = Gate(monkeypatch, "write")
    a, x = _tensor(0, 2)
    first, second = x.handles
    _write_back(manager, first)  # held at the gate
    _write_back(manager, second)
    assert gate.entered.wait(10) and set(manager.writing) == {first.id, second.id}
    # the host copy stays valid and nothing waits for the file
    np.testing.assert_array_equal(within_deadline(x.to_numpy), a)
    np.testing.assert_array_equal(within_deadline((x * 2.0).to_numpy), 2.0 * a)
    runtime.submit(_ADD_ONE, [(second, Access.RW)])  # makes the file being written stale
    within_deadline(nt.wait_all)
    gate.open()
    _settled(manager)
    assert set(first.replicas) == {HOST, DISK}  # clean: RAM and a valid file
    assert set(second.replicas) == {HOST}  # the stale file was removed
    assert os.listdir(tmp_path) == [os.path.basename(first.replicas[DISK])]
    expected = a.copy()
    expected[N:] += 1.0
    np.testing.assert_array_equal(within_deadline(x.to_numpy), expected)
    b, y = _tensor(1, 8)  # needs all the room: the clean tile leaves without a write
    writes = manager.counters()["spill"]["writes"]
    assert HOST not in first.replicas and manager.counters()["spill"]["writes"] == writes
    np.testing.assert_array_equal(within_deadline(x.to_numpy), expected)
    np.testing.assert_array_equal(within_deadline(y.to_numpy), b)


def test_other_workers_run_while_a_tile_is_read_back(limited, monkeypatch, within_deadline):
    runtime = limited(tiles=6)
    a, x = _tensor(0, 1)
    b, y = _tensor(1, 4)
    c, z = _tensor(2, 2)  # x's tile went to disk
    assert all(set(h.replicas) == {DISK} for h in x.handles)
    gate = Gate(monkeypatch, "read")
    # its task (on one worker) waits for its tile, held at the gate (submitted now, not
    # deferred to run fused with a later op: tiletensor/auto_fusion.py)
    doubled = (x * 2.0).materialise()
    assert gate.entered.wait(10)
    # the lock is free meanwhile: another worker runs tasks on tiles in RAM
    np.testing.assert_array_equal(within_deadline((z + 1.0).to_numpy), c + 1.0)
    assert all(HOST not in h.replicas for h in x.handles)
    gate.open()
    np.testing.assert_array_equal(within_deadline(doubled.to_numpy), 2.0 * a)
    np.testing.assert_array_equal(within_deadline(y.to_numpy), b)
    assert runtime.manager.nodes[HOST].pinned_bytes == 0


def test_a_failed_read_fails_its_task_and_loses_nothing(limited, monkeypatch, within_deadline):
    runtime = limited(tiles=4)
    a, x = _tensor(0, 4)
    b, y = _tensor(1, 4)  # x is on disk only
    assert all(set(h.replicas) == {DISK} for h in x.handles)

    def broken(spill, path, out):
        raise OSError(errno.EIO, "injected read error", path)

    monkeypatch.setattr(Spill, "read", broken)
    with pytest.raises(TaskError, match="injected read error") as info:
        within_deadline((x * 2.0).to_numpy)
    assert isinstance(info.value, OSError) and info.value.errno == errno.EIO
    del info
    with pytest.raises(OSError, match="injected read error"):
        within_deadline(x.to_numpy)  # a read outside any task raises it as it is
    _settled(runtime.manager)
    host = runtime.manager.nodes[HOST]
    assert host.pinned_bytes == 0 and host.used <= 4 * TILE
    assert all(DISK in h.replicas for h in x.handles)  # the files are still the tiles
    monkeypatch.undo()
    np.testing.assert_array_equal(within_deadline(x.to_numpy), a)
    np.testing.assert_array_equal(within_deadline((x * 2.0).to_numpy), 2.0 * a)
    np.testing.assert_array_equal(within_deadline(y.to_numpy), b)


@pytest.mark.parametrize("wait", [True, False])
def test_shutdown_with_writes_in_flight(limited, tmp_path, monkeypatch, within_deadline, wait):
    runtime = limited(tiles=8)
    gate = Gate(monkeypatch, "write")
    a, x = _tensor(0, 4)
    for handle in x.handles:
        _write_back(runtime.manager, handle)  # four writes queued, the first held
    assert gate.entered.wait(10)
    threading.Timer(0.2, gate.open).start()
    within_deadline(nt.shutdown, wait)
    assert os.listdir(tmp_path) == []  # no spill file left either way
    assert not any(t.name.startswith("spill-") and t.is_alive() for t in threading.enumerate())
    if wait:  # the tiles came home: the tensor outlives the runtime
        assert all(set(h.replicas) == {HOST} for h in x.handles)
        nt.init()
        np.testing.assert_array_equal(within_deadline(x.to_numpy), a)


def test_evicted_buffers_are_reused_and_next_tiles_prefetched(limited, within_deadline):
    runtime = limited(tiles=8)
    arrays, tensors = zip(*(_tensor(seed, 8) for seed in range(4)))  # 4x the limit
    results = [t * 2.0 + 1.0 for t in tensors]
    for array, result in zip(arrays, results):
        np.testing.assert_array_equal(within_deadline(result.to_numpy), array * 2.0 + 1.0)
    counters = runtime.manager.counters()
    host = counters["nodes"]["host"]
    assert host["peak"] <= 8 * TILE
    assert host["reused"] > 0  # buffers of evicted and dead tiles served new ones
    assert counters["spill"]["prefetched"] > 0
