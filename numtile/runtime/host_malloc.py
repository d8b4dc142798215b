"""Make freed tiles give their RAM back to the system while host memory is limited.

glibc's malloc serves a request of 128 KiB or more with a mapping of its own, unmapped when
it is freed; but each time such a block is freed it raises that threshold to the block's size
(up to 32 MiB), so once the first tiles are freed, the next ones come from the heap arenas
(one per worker thread), where freed memory stays in the process, fragmented by tiles of many
sizes. Under ``NUMTILE_HOST_MEM_LIMIT`` a tile evicted to a spill file would then leave the
memory manager's count but not the process's resident memory: gpt2-mini training under a
400 MiB limit peaked at 827 MB resident with the moving threshold and 613 MB with it fixed.
Setting it (``mallopt(M_MMAP_THRESHOLD)``, which also stops the adjustment) keeps every
tile-sized buffer in its own mapping, so freeing it gives its pages back at once.

Under a limit a tile's buffer is fresh memory whenever the pool (``memory_nodes``) has none of
its byte size, and its first touch costs a page fault per 4 KiB, at about 0.5 ms of CPU a MiB
(gpt2-small's bf16-mixed training under 1800 MiB faulted 1.5 GB a step, about 1 GB of it in
fresh tile buffers, the rest in kernels' temporaries). A limited host
node takes its tile buffers from ``huge_page_buffer`` instead: a private mapping
of its own, its 2 MiB-aligned part marked for transparent huge pages (``MADV_HUGEPAGE``, for
THP's ``madvise`` mode), so a fault brings 2 MiB at a time (64 MiB cost 32 ms of CPU
in 4 KiB pages and 10 ms in huge pages here). Only the pages a tile touches are resident, as
before: the alignment slack is address space, never touched.

A buffer under 2 MiB stays in 4 KiB pages, and a task that writes it faults once per page.
``prefault`` brings all of them in one call instead (``MADV_POPULATE_WRITE``, Linux 5.14):
0.30 against 0.54 ms of CPU a MiB here, the page clearing left. The memory manager calls it
for a task's tiles once it has them (outside its lock) and the spill reader before a read;
for huge pages it saves nothing (0.10-0.15 ms a MiB either way), so they fault as before.
"""

from __future__ import annotations

import ctypes
import mmap
import platform

import numpy as np

_M_MMAP_THRESHOLD = -3  # glibc's malloc.h
MMAP_THRESHOLD = 1 << 17  # glibc's initial threshold: buffers this large get their own mapping
HUGE_PAGE = 2 << 20  # x86-64's transparent huge page
MADV_POPULATE_WRITE = 23  # Linux's mman-common.h (5.14 on); not in Python's mmap before 3.13
_done = False
_HUGE = platform.system() == "Linux" and hasattr(mmap, "MADV_HUGEPAGE")
_populate = _HUGE  # until the kernel refuses MADV_POPULATE_WRITE


def unmap_freed_tiles() -> bool:
    """Fix glibc's mmap threshold at 128 KiB for the rest of the process (a process-wide
    setting; once per process). False where the C library is not glibc: nothing is changed.

    >>> unmap_freed_tiles() == (platform.libc_ver()[0] == "glibc")
    True
    """
    global _done
    if _done:
        return True
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL(None)
    _done = bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    return _done


class TileMapping(mmap.mmap):
    """An anonymous private mapping made by ``huge_page_buffer`` (the type marks buffers the
    pool may hand out again: a mapping of a user's file must never be). ``populated``: its
    pages were faulted in by ``prefault`` (they stay: a pooled buffer keeps its pages)."""

    populated = False


def huge_page_buffer(nbytes: int) -> np.ndarray:
    """A fresh uint8 buffer of ``nbytes``: from ``MMAP_THRESHOLD`` on a private mapping of
    its own (whatever malloc's threshold), whose 2 MiB-aligned pages, from 2 MiB on, are
    transparent huge pages; under the threshold, or where the OS has no ``MADV_HUGEPAGE``,
    ``np.empty``.

    >>> buffer = huge_page_buffer(5 << 20)
    >>> buffer.nbytes, buffer.dtype.name
    (5242880, 'uint8')
    """
    if nbytes < MMAP_THRESHOLD or not _HUGE:
        return np.empty(nbytes, np.uint8)
    if nbytes < HUGE_PAGE:
        mapping = TileMapping(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        return np.frombuffer(mapping, np.uint8, count=nbytes)
    mapping = TileMapping(-1, nbytes + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    start = np.frombuffer(mapping, np.uint8, count=1).ctypes.data
    offset = -start % HUGE_PAGE
    mapping.madvise(mmap.MADV_HUGEPAGE, offset, nbytes - nbytes % HUGE_PAGE)
    return np.frombuffer(mapping, np.uint8, count=nbytes, offset=offset)


def is_tile_mapping(array: np.ndarray) -> bool:
    """True if ``array`` is a buffer ``huge_page_buffer`` mapped (its base the mapping's view)."""
    return isinstance(getattr(array.base, "obj", None), TileMapping)


def prefault(array: np.ndarray) -> None:
    """Fault in every page of ``array`` now, if it views a ``huge_page_buffer`` mapping in
    4 KiB pages (under 2 MiB); other arrays, and kernels without ``MADV_POPULATE_WRITE``,
    are left alone.

    >>> tile = huge_page_buffer(1 << 20).view(np.float32)
    >>> prefault(tile)
    >>> float(tile.sum() * 0)  # the pages are there: reading or writing them faults no more
    0.0
    """
    global _populate
    owner = array.base
    mapping = getattr(getattr(owner, "base", None), "obj", None)
    if (
        not _populate
        or not isinstance(mapping, TileMapping)
        or mapping.populated
        or len(mapping) >= HUGE_PAGE
    ):
        return
    try:
        mapping.madvise(MADV_POPULATE_WRITE)
    except OSError:  # EINVAL: a kernel before 5.14
        _populate = False
    # a buffer reused from the pool has its pages already: walking them again for every
    # task that writes it cost gpt2-small 0.2 s of CPU a step (2.5 GB of tiles, 0.6 fresh)
    mapping.populated = True
