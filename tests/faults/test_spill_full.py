"""A full spill folder (issue 9, item 7): errors name the folder and the limit, tiles still
in RAM stay readable, nothing partial is left, and freeing tensors makes room again."""

from __future__ import annotations

import builtins
import errno
import gc
import os
import subprocess
import weakref

import numpy as np
import pytest

import numtile as nt
from numtile.runtime import Access, Codelet, TaskError
from numtile.runtime import spill as spill_module
from numtile.runtime.handle import HOST
from numtile.runtime.spill import SpillError

pytestmark = pytest.mark.usefixtures("frozen_heap")

KiB = 1 << 10
TILE = 64 * KiB  # (32, 256) float64
LIMIT = 4 * TILE  # host RAM: one tensor of 4 tiles


class SmallDisk:
    """A fake file system of ``capacity`` bytes for the spill folder: a write that does not fit
    writes what fits (a partial file) and raises ``OSError(ENOSPC)``, as a full disk does."""

    def __init__(self, directory: str, capacity: int) -> None:
        self.directory = os.path.realpath(directory)
        self.capacity = capacity

    def used(self) -> int:
        names = os.listdir(self.directory)
        return sum(os.path.getsize(os.path.join(self.directory, name)) for name in names)

    def open(self, path, mode="r", *args, **kwargs):
        file = builtins.open(path, mode, *args, **kwargs)
        inside = os.path.dirname(os.path.realpath(path)) == self.directory
        return _Limited(file, self) if inside and "w" in mode else file


class _Limited:
    def __init__(self, file, disk: SmallDisk) -> None:
        self.file, self.disk = file, disk

    def write(self, data) -> int:
        data = memoryview(data).cast("B")
        self.file.flush()
        free = max(0, self.disk.capacity - self.disk.used())
        if len(data) > free:
            self.file.write(data[:free])
            self.file.flush()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return self.file.write(data)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.file.close()


@pytest.fixture(params=["fake", "tmpfs"])
def full_spill_dir(request, tmp_path, monkeypatch):
    """A spill folder with room for 4 tiles: a fake (always) or a real tmpfs (as root)."""
    directory = tmp_path / "spill"
    directory.mkdir()
    if request.param == "fake":
        disk = SmallDisk(str(directory), 4 * TILE)
        monkeypatch.setattr(spill_module, "open", disk.open, raising=False)
        yield str(directory)
        return
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = ["mount", "-t", "tmpfs", "-o", f"size={4 * TILE + 4 * KiB}", "tmpfs", str(directory)]
    if subprocess.run(mount, capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield str(directory)
    finally:
        nt.shutdown(wait=False)  # nothing may keep files open on it
        subprocess.run(["umount", "-l", str(directory)], capture_output=True)
        nt.init()


def _start(spill_dir: str):
    gc.collect()  # tensors of earlier tests die before the limited runtime starts
    runtime = nt.init(ncpu=2, scheduler="eager", host_mem_limit=LIMIT, spill_dir=spill_dir)
    # the tests fill RAM and disk to the byte: anything else tracked would spill first
    nodes = runtime.manager.counters()["nodes"]
    held = {name: node["used"] for name, node in nodes.items() if node["used"]}
    assert not held, f"a fresh runtime already holds tiles: {held}, {runtime.manager.nodes}"
    return runtime


def _tensor(seed: int):
    array = np.random.default_rng(seed).standard_normal((128, 256))  # 4 tiles of 64 KiB
    return array, nt.from_numpy(array, tile_shape=(32, 256))


def _no_partial_files(spill_dir: str) -> list[int]:
    sizes = [os.path.getsize(os.path.join(spill_dir, n)) for n in os.listdir(spill_dir)]
    assert all(size == TILE for size in sizes), sizes
    return sizes


def test_from_numpy_on_a_full_spill_folder(full_spill_dir, within_deadline):
    _start(full_spill_dir)
    a, x = _tensor(0)
    b, y = _tensor(1)  # x goes to disk: the folder is full now
    with pytest.raises(SpillError) as info:
        _tensor(2)
    error = info.value
    assert isinstance(error, OSError) and error.errno == errno.ENOSPC
    message = str(error)
    assert full_spill_dir in message and "256.0 KiB" in message, message
    assert "NUMTILE_HOST_MEM_LIMIT" in message and "NUMTILE_SPILL_DIR" in message
    del info, error
    assert len(_no_partial_files(full_spill_dir)) == 4
    np.testing.assert_array_equal(within_deadline(y.to_numpy), b)  # still in RAM
    del y
    gc.collect()
    np.testing.assert_array_equal(within_deadline(x.to_numpy), a)  # back from disk
    within_deadline(nt.shutdown)
    assert os.listdir(full_spill_dir) == []


def test_a_task_that_must_spill_fails_naming_itself(full_spill_dir, within_deadline):
    _start(full_spill_dir)
    a, x = _tensor(0)
    b, y = _tensor(1)
    z = y * 2.0  # its output tiles need RAM: y's would have to go to the full disk
    with pytest.raises(TaskError) as info:
        within_deadline(z.to_numpy)
    error = info.value
    assert isinstance(error, OSError) and error.errno == errno.ENOSPC
    assert "task '" in str(error) and full_spill_dir in str(error)
    del info, error
    _no_partial_files(full_spill_dir)
    np.testing.assert_array_equal(within_deadline(y.to_numpy), b)
    # z keeps its error (for its next read): that error must not keep y's tiles alive
    inputs = [weakref.ref(h) for h in y.handles]
    del y
    gc.collect()
    assert all(ref() is None for ref in inputs)
    np.testing.assert_array_equal(within_deadline(x.to_numpy), a)
    with pytest.raises(OSError, match="task '"):
        within_deadline(z.to_numpy)


def test_reading_a_spilled_tensor_when_ram_and_disk_are_full(full_spill_dir, within_deadline):
    _start(full_spill_dir)
    a, x = _tensor(0)
    b, y = _tensor(1)
    with pytest.raises(SpillError, match="cannot spill tile"):
        within_deadline(x.to_numpy)  # reading x back needs RAM that only the disk could give
    _no_partial_files(full_spill_dir)
    np.testing.assert_array_equal(within_deadline(y.to_numpy), b)
    del y
    gc.collect()
    np.testing.assert_array_equal(within_deadline(x.to_numpy), a)


def test_scratch_that_must_spill_fails_naming_its_task_and_holds_nothing(
    full_spill_dir, within_deadline
):
    runtime = _start(full_spill_dir)
    a, x = _tensor(0)
    b, y = _tensor(1)  # RAM and disk are full
    double = Codelet(
        "test_scratch_double",
        implementations={"cpu": lambda ops, tile: np.multiply(tile, 2, out=tile)},
        scratch=lambda tile: TILE,  # room for it means spilling another tile of y
    )
    runtime.submit(double, [(y.tile((0, 0)), Access.RW)])
    with pytest.raises(TaskError, match=r"task 'test_scratch_double' .* cannot spill tile"):
        within_deadline(y.to_numpy)
    host = runtime.manager.nodes[HOST]
    assert host.pinned_bytes == 0 and host.used == LIMIT  # the failed task holds nothing
    _no_partial_files(full_spill_dir)
    del x
    gc.collect()  # room on disk again: the same task runs
    runtime.submit(double, [(y.tile((1, 0)), Access.RW)])
    within_deadline(nt.wait_all)
    doubled = within_deadline(runtime.manager.host_array, y.tile((1, 0)))
    np.testing.assert_array_equal(doubled, 2 * b[32:64])


def test_spill_files_leave_a_user_folder_without_bringing_tiles_home(tmp_path, within_deadline):
    spill_dir = tmp_path / "spill"
    _start(str(spill_dir))
    tensors = [_tensor(seed)[1] for seed in range(3)]
    assert len(os.listdir(spill_dir)) == 8
    within_deadline(nt.shutdown, False)  # what interpreter exit does
    assert os.listdir(spill_dir) == []
    del tensors
    nt.init()


def test_an_interrupted_spill_write_leaves_no_partial_file(
    tmp_path, monkeypatch, within_deadline, raised
):
    spill_dir = tmp_path / "spill"
    _start(str(spill_dir))
    a, x = _tensor(0)

    def interrupted_open(path, mode="r", *args, **kwargs):
        file = builtins.open(path, mode, *args, **kwargs)
        if "w" in mode:
            file.write(b"half a tile")
            file.close()
            raise KeyboardInterrupt
        return file

    monkeypatch.setattr(spill_module, "open", interrupted_open, raising=False)
    error = within_deadline(raised, _tensor, 1)  # evicting x's first tile is interrupted
    assert isinstance(error, KeyboardInterrupt)
    assert os.listdir(spill_dir) == []
    monkeypatch.undo()
    np.testing.assert_array_equal(within_deadline(x.to_numpy), a)  # x stayed in RAM
    nt.init()
