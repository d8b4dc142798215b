"""Host buffer pool: tiles freed by dead tensors are reused by new ones of the same shape.

Fresh memory costs a page fault per 4 KiB page on first touch (several ms for a 4 MiB
tile here), which would dominate short kernels; PyTorch's caching allocator avoids the
same cost the same way.
"""

from __future__ import annotations

import math
import sys
import threading

import numpy as np


class BufferPool:
    """Free host arrays keyed by (shape, dtype), up to ``capacity`` bytes in all.

    Arrays under ``min_bytes`` come from malloc's heap, which has no page faults to save:
    ``allocate`` returns a fresh one and ``release`` declines them.

    >>> pool = BufferPool(1 << 20, min_bytes=0)
    >>> a = pool.allocate((4,), np.dtype(np.float64)); pool.release(a)
    True
    >>> pool.allocate((4,), np.dtype(np.float64)) is a
    True
    """

    def __init__(self, capacity: int, min_bytes: int = 1 << 17) -> None:
        self.capacity = capacity
        self.min_bytes = min_bytes
        self.held = 0
        self._free: dict[tuple, list[np.ndarray]] = {}
        self._lock = threading.Lock()

    def allocate(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        if math.prod(shape) * dtype.itemsize < self.min_bytes:
            return np.empty(shape, dtype)
        key = (shape, dtype)
        with self._lock:
            free = self._free.get(key)
            if free:
                array = free.pop()
                self.held -= array.nbytes
                return array
        return np.empty(shape, dtype)

    def release(self, array: np.ndarray) -> bool:
        """Keep ``array`` for reuse if the pool has room; the caller must own it alone."""
        if array.nbytes == 0 or array.nbytes < self.min_bytes:
            return False
        with self._lock:
            if self.held + array.nbytes > self.capacity:
                return False
            self._free.setdefault((array.shape, array.dtype), []).append(array)
            self.held += array.nbytes
            return True

    def resize(self, capacity: int) -> None:
        """Hold at most ``capacity`` bytes from now on (free arrays beyond it are dropped)."""
        with self._lock:
            self.capacity = capacity
        if self.held > capacity:
            self.clear()

    def clear(self) -> None:
        """Drop every free array (a host memory limit must not leave memory outside it)."""
        with self._lock:
            self._free.clear()
            self.held = 0


# the process's pool for host tiles; each runtime sets its capacity from its Config
POOL = BufferPool(0)


def sole_owner(array: np.ndarray, holders: int) -> bool:
    """True if nothing but the ``holders`` known references keeps ``array`` alive."""
    # getrefcount also counts this function's parameter and its own argument
    return array.base is None and sys.getrefcount(array) <= holders + 2
