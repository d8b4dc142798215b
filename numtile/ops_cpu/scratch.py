"""Scratch buffers for codelets (``ops.empty``), reused by the thread that asked for them.

A codelet's working copies (a bfloat16 tile widened to float32, the float32 sum of a GEMM
before it is rounded) live for one call. From 128 KiB on, glibc's malloc maps each one on its
own and unmaps it when freed, so every call pays a page fault per 4 KiB of it (about 0.5 ms
of CPU a MiB): under ``NUMTILE_HOST_MEM_LIMIT``, where the runtime fixes malloc's threshold
there (``runtime/host_malloc.py``), gpt2-small's bf16-mixed training faulted 0.43 GB a step in
these copies alone. Here each thread keeps the buffers it was given, up to ``CACHE_BYTES``,
and hands one out again once nothing references it any more (its reference count says so):
a worker thread runs one task at a time, so its scratch is free again by its next task.
"""

from __future__ import annotations

import math
import sys
import threading

import numpy as np

SMALLEST = 1 << 17  # smaller scratch comes from malloc's heap, which reuses it at no cost
CACHE_BYTES = 64 << 20  # kept per thread: the scratch of gpt2-small's largest tasks
ALIGN = 64  # ``empty_many``'s arrays start on a cache line (Numba's own np.empty: 32 bytes)
_cache = threading.local()


def empty(shape, dtype=float) -> np.ndarray:
    """An uninitialised array, like ``np.empty``; from 128 KiB on, carved from a buffer this
    thread had before and no longer uses, where one is large enough.

    >>> a = empty((512, 256), np.float32)
    >>> address = a.ctypes.data
    >>> del a
    >>> empty((256, 512), np.float32).ctypes.data == address  # the same memory again
    True
    """
    dtype = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < SMALLEST:
        return np.empty(shape, dtype)
    buffers = getattr(_cache, "buffers", None)
    if buffers is None:
        buffers = _cache.buffers = []
        _cache.total = 0
    buffer = _smallest_free(buffers, nbytes)
    if buffer is None:
        buffer = np.empty(nbytes, np.uint8)
        buffers.insert(_first_of(buffers, nbytes), buffer)  # the list stays sorted by size
        _cache.total = getattr(_cache, "total", 0) + nbytes
    if _cache.total > CACHE_BYTES:
        _trim(buffers, keep=buffer)
    return buffer[:nbytes].view(dtype).reshape(shape)


def empty_many(*specs) -> list[np.ndarray]:
    """Uninitialised C-contiguous arrays of the (shape, dtype) ``specs``, carved from one
    ``empty`` buffer, each starting on an ``ALIGN``-byte boundary: the working arrays of one
    kernel call (the attention kernels' scores and head copies) in warm memory, for one
    lookup. The buffer is free again once none of them is referenced.

    >>> a, b = empty_many(((256, 256), np.float32), ((7,), np.float64))
    >>> a.shape, b.dtype.name, a.ctypes.data % ALIGN, b.ctypes.data % ALIGN
    ((256, 256), 'float64', 0, 0)
    >>> address = a.ctypes.data
    >>> del a, b
    >>> empty_many(((256, 256), np.float32))[0].ctypes.data == address
    True
    """
    layout, total = [], 0
    for shape, dtype in specs:
        dtype = np.dtype(dtype)
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        total = -(-total // ALIGN) * ALIGN
        nbytes = math.prod(shape) * dtype.itemsize
        layout.append((total, nbytes, shape, dtype))
        total += nbytes
    buffer = empty(total + ALIGN, np.uint8)
    shift = -buffer.ctypes.data % ALIGN
    return [
        buffer[shift + offset : shift + offset + nbytes].view(dtype).reshape(shape)
        for offset, nbytes, shape, dtype in layout
    ]


def _in_use(buffer: np.ndarray) -> bool:
    # references: the list, the caller's name, this parameter and getrefcount's argument;
    # each array carved from the buffer adds one (its ``base``)
    return sys.getrefcount(buffer) > 4


def _first_of(buffers: list, nbytes: int) -> int:
    """The index of the first buffer of at least ``nbytes`` in ``buffers`` (sorted by size)."""
    low, high = 0, len(buffers)
    while low < high:
        middle = (low + high) // 2
        if buffers[middle].nbytes < nbytes:
            low = middle + 1
        else:
            high = middle
    return low


def _smallest_free(buffers: list, nbytes: int) -> np.ndarray | None:
    """The smallest buffer of at least ``nbytes`` that no array uses, or None (``buffers``
    is sorted by size: the first free one from the first that fits)."""
    for index in range(_first_of(buffers, nbytes), len(buffers)):
        buffer = buffers[index]
        if not _in_use(buffer):
            return buffer
        buffer = None
    return None


def _trim(buffers: list, keep: np.ndarray) -> None:
    """Forget free buffers (the largest first) while the thread keeps more than
    ``CACHE_BYTES``; buffers in use stay."""
    total = sum(buffer.nbytes for buffer in buffers)
    leaving = []
    for index in sorted(range(len(buffers)), key=lambda i: -buffers[i].nbytes):
        if total <= CACHE_BYTES:
            break
        buffer = buffers[index]
        if buffer is not keep and not _in_use(buffer):
            leaving.append(index)
            total -= buffer.nbytes
        buffer = None
    for index in sorted(leaving, reverse=True):
        del buffers[index]
    _cache.total = total
