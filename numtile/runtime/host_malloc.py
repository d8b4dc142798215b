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
"""

from __future__ import annotations

import ctypes
import platform

_M_MMAP_THRESHOLD = -3  # glibc's malloc.h
MMAP_THRESHOLD = 1 << 17  # glibc's initial threshold: buffers this large get their own mapping
_done = False


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
