"""Under a host memory limit, freed tiles leave the process's resident memory (glibc)."""

import mmap
import platform
import resource
import subprocess
import sys

import numpy as np
import pytest

from numtile.runtime.host_malloc import (
    HUGE_PAGE,
    MMAP_THRESHOLD,
    huge_page_buffer,
    is_tile_mapping,
    prefault,
)
from numtile.runtime.memory_nodes import HostNode, owner_alone

pytestmark = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc's malloc"
)

SCRIPT = """
import sys
import numpy as np
import numtile as nt

def resident():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) << 10 for line in f if line.startswith("VmRSS"))

nt.init(ncpu=1, host_mem_limit=1 << 30, spill_dir=sys.argv[1])
MiB = 1 << 20
np.ones(8 * MiB, np.uint8)  # freed at once: glibc then serves buffers up to 8 MiB from its heap
tiles = [np.ones(MiB, np.uint8) for _ in range(64)]
guard = np.ones(MiB // 4, np.uint8)  # a buffer above them on the heap: no trimming
before = resident()
del tiles
print(before - resident())
"""


def test_freed_tile_buffers_give_their_pages_back_under_a_limit(tmp_path):
    # in a fresh process: glibc's threshold has not moved yet. Without the limit (glibc's
    # moving threshold) the 64 MiB stay resident here: the test measured 0 bytes given back
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    assert int(run.stdout.split()[-1]) >= 60 << 20  # of the 64 MiB freed


def _vm_flags(address: int) -> list[str]:
    """The VmFlags of the mapping holding ``address`` (/proc/self/smaps)."""
    with open("/proc/self/smaps") as f:
        inside = False
        for line in f:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                low, high = (int(x, 16) for x in head.split("-"))
                inside = low <= address < high
            elif inside and head == "VmFlags:":
                return line.split()[1:]
    raise AssertionError(f"no mapping holds {address:#x}")


@pytest.mark.parametrize("nbytes", [(2 << 20) + 3 * 4096, 9 << 20])
def test_large_tile_buffers_are_marked_for_huge_pages(nbytes):
    buffer = huge_page_buffer(nbytes)
    assert buffer.nbytes == nbytes and buffer.flags.writeable and is_tile_mapping(buffer)
    start = buffer.ctypes.data
    assert start % HUGE_PAGE == 0
    assert "hg" in _vm_flags(start)  # MADV_HUGEPAGE on the aligned part
    assert "hg" not in _vm_flags(start + nbytes - 1)  # not the tail under 2 MiB
    buffer[:] = 7
    assert int(buffer.sum(dtype=np.int64)) == 7 * nbytes


def test_small_buffers_stay_on_the_heap_and_middle_ones_map_small_pages():
    buffer = huge_page_buffer(MMAP_THRESHOLD - 1)
    assert buffer.base is None and not is_tile_mapping(buffer)
    buffer = huge_page_buffer(HUGE_PAGE - 4096)
    assert is_tile_mapping(buffer) and "hg" not in _vm_flags(buffer.ctypes.data)


def test_a_limited_host_recycles_its_mapped_buffers_and_no_file_mapping(tmp_path):
    node = HostNode(64 << 20, pinned=False)
    tile = node.allocate((768, 768), np.dtype(np.float32))  # 2.25 MiB: mapped
    assert is_tile_mapping(tile.base)
    alone = owner_alone(tile, 1)  # (pytest's assertion rewriting would hold references)
    assert alone
    view = tile[:2]
    alone = owner_alone(tile, 1)
    assert not alone  # another view holds the memory
    del view
    path = tmp_path / "user.bin"
    path.write_bytes(bytes(4 << 20))
    with open(path, "r+b") as f, mmap.mmap(f.fileno(), 0) as mapping:
        user = np.frombuffer(mapping, np.uint8).view(np.float32)
        alone = owner_alone(user, 1)
        assert not alone  # a user's file: never handed out as a tile
        del user


def _faults_writing(array: np.ndarray) -> int:
    """Minor page faults this thread takes to write every byte of ``array``."""
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    array[...] = 1
    return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before


@pytest.mark.skipif(not hasattr(resource, "RUSAGE_THREAD"), reason="per-thread counters")
def test_prefault_brings_in_the_small_pages_of_a_tile_buffer_at_once():
    nbytes = 256 * 4096  # 1 MiB: 4 KiB pages
    assert _faults_writing(huge_page_buffer(nbytes).view(np.float32)) >= 200  # one a page
    tile = huge_page_buffer(nbytes).view(np.float32).reshape(512, 512)
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    prefault(tile)
    taken = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before
    if taken == 0 and _faults_writing(tile) > 0:
        pytest.skip("this kernel has no MADV_POPULATE_WRITE (Linux 5.14)")
    assert _faults_writing(tile) <= 2
    assert float(tile.sum()) == 512 * 512


def test_prefault_leaves_other_arrays_alone():
    heap = np.zeros(1 << 20, np.uint8)
    prefault(heap)  # not a tile mapping: nothing happens, nothing raises
    prefault(heap[:10])
    prefault(huge_page_buffer(4 << 20))  # huge pages: faulted on first touch, as before
