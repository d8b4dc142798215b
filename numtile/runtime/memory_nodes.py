"""The memory manager's per-node state: host RAM as a node, the pins a task holds, and the
accounting of one node (bytes used, LRU order, pins, and on a limited host the free tile
buffers kept for reuse)."""

from __future__ import annotations

import collections
import math
import sys
import weakref
from typing import TYPE_CHECKING

import numpy as np

from numtile.runtime.handle import HOST
from numtile.runtime.host_malloc import MMAP_THRESHOLD, huge_page_buffer, is_tile_mapping

if TYPE_CHECKING:
    from numtile.runtime.arena import HostArena


class HostNode:
    """Host RAM: NumPy buffers, page-locked for the ones GPUs write back into."""

    def __init__(self, capacity: int | None, pinned: bool) -> None:
        self.id = HOST
        self.name = "host"
        self.capacity = capacity
        self.pinned = pinned
        self.arena: HostArena | None = None  # a limited host's tile buffers (arena.py)

    def allocate(self, shape: tuple[int, ...], dtype: np.dtype, gpu=None):
        """A host buffer; page-locked (under ``gpu``'s context) when that GPU copies into it
        (write-backs and downloads: pinning every tile would cost more than it saves); on a
        limited host, of huge pages from 2 MiB on (``host_malloc.huge_page_buffer``)."""
        if gpu is not None and self.pinned and math.prod(shape):
            return gpu.pinned_array(shape, dtype)
        if self.capacity is None:
            return np.empty(shape, dtype)
        nbytes = math.prod(shape) * dtype.itemsize
        buffer = None
        if self.arena is not None and nbytes >= MMAP_THRESHOLD:
            buffer = self.arena.allocate(nbytes, dtype=dtype)
        if buffer is None:  # small (from malloc's heap), or no free range holds it
            buffer = huge_page_buffer(nbytes).view(dtype)
        return buffer.reshape(shape)


class Pins(list):
    """The (handle, node) pairs a task holds, plus the host buffers its asynchronous uploads
    read (``keep``): alive until the task is released, even if a write drops the replica.
    No ``__init__``: the defaults are the class's (list's own is C, made for every task)."""

    keep: tuple = ()  # grown by ``+=``: an instance's own tuple from the first upload
    # (node, bytes held, bytes counted as used) of scratch reserved for the task
    scratch: tuple[int, int, int] | None = None


class NodeState:
    """Accounting of one node: bytes used, peak, LRU order of resident tiles, pins.

    On a limited host, the buffers of evicted and dead tiles are kept for reuse (``free``,
    ``pooled`` bytes), keyed by size so that a buffer serves any shape and dtype of its byte
    count: fresh memory costs a page fault per 4 KiB on first touch, which under a limit
    (where every tile is its own mapping, ``host_malloc``) cost gpt2-small training 2 GB of
    page faults a step. They count against the limit like tiles, and are the first memory
    given back when room is needed, and at most ``pool_limit`` bytes of them are kept.
    """

    def __init__(self, node) -> None:
        self.node = node
        # the host's arena (made before its state: read on every reuse, not looked up)
        self.arena: HostArena | None = getattr(node, "arena", None)
        self.used = 0  # tiles (and reserved scratch), not the pooled buffers
        self.peak = 0  # of used + pooled
        self.lru: collections.OrderedDict[int, weakref.ref] = collections.OrderedDict()
        # handle id -> tasks holding it, absent at 0 (a dict: Counter's __missing__ is Python)
        self.pins: dict[int, int] = {}
        self.pinned_bytes = 0
        self.evictions = 0
        self.free: collections.OrderedDict[int, list[np.ndarray]] = collections.OrderedDict()
        self._pooled = 0
        self.pool_limit = 0
        self.reused = 0  # allocations served from ``free``

    @property
    def resident(self) -> int:
        return self.used + self.pooled

    def note_peak(self) -> None:
        self.peak = max(self.peak, self.used + self.pooled)

    @property
    def pooled(self) -> int:
        """Bytes of free buffers kept resident (in an arena: its resident bytes no tile
        holds), counted against the limit."""
        arena = self.arena
        return self._pooled if arena is None else arena.pooled

    @pooled.setter
    def pooled(self, value: int) -> None:
        self._pooled = value  # the arena keeps its own count

    def has_buffer(self, nbytes: int) -> bool:
        """Whether ``nbytes`` fit in memory kept for reuse, without making room: a pooled
        buffer of that size for ``take``, resident free pages of the arena."""
        if self.arena is not None:
            return nbytes >= MMAP_THRESHOLD and self.arena.fits(nbytes)
        return nbytes in self.free

    def take(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray | None:
        """A free buffer viewed as ``shape`` and ``dtype`` (no longer pooled), or None."""
        nbytes = math.prod(shape) * dtype.itemsize
        free = self.free.get(nbytes)
        if free is None:
            return None
        owner = free.pop()
        if not free:
            del self.free[nbytes]
        self.pooled -= nbytes
        self.reused += 1
        return owner.reshape(-1).view(np.uint8).view(dtype).reshape(shape)

    def give(self, array: np.ndarray) -> None:
        """Keep the memory of ``array`` (from ``owner_alone``) for reuse."""
        arena = self.arena
        if arena is not None:
            if arena.holds(array if array.base is None else array.base):
                arena.keep(array)  # the next tile of its size takes it back (arena.py)
            return  # another buffer (a fallback mapping) is simply dropped
        owner = array if array.base is None else array.base
        self.free.setdefault(owner.nbytes, []).append(owner)
        self.free.move_to_end(owner.nbytes)
        self.pooled += owner.nbytes
        while self.pooled > self.pool_limit and self.release_one():
            pass

    def release_one(self, keep: int | None = None) -> bool:
        """Give one free buffer back to the system (of the least recently pooled size, not
        ``keep`` bytes if another will do); False when none is left. In an arena: the
        resident whole free chunks of one free range."""
        arena = self.arena
        if arena is not None:
            return arena.release(keep) > 0
        for key in [k for k in self.free if k != keep] + ([keep] if keep in self.free else []):
            free = self.free[key]
            array = free.pop()
            if not free:
                del self.free[key]
            self.pooled -= array.nbytes
            return True
        return False


def owner_alone(array: np.ndarray, holders: int) -> bool:
    """True if nothing but the ``holders`` known references keeps ``array``'s memory alive:
    ``array`` owns it, or is the only view of a NumPy array that does (one ``take`` or
    ``HostNode.allocate`` made; that array may view a ``huge_page_buffer`` mapping)."""
    # getrefcount also counts this function's parameter and its own argument
    if sys.getrefcount(array) > holders + 2:
        return False
    owner = array.base
    if owner is None:
        return True
    # the owner: referenced by ``array.base`` (and getrefcount's argument) only
    return (
        type(owner) is np.ndarray
        and (owner.base is None or is_tile_mapping(owner))
        and owner.nbytes == array.nbytes
        and sys.getrefcount(owner) <= 3
    )


def counters(manager) -> dict:
    """A ``MemoryManager``'s report (its lock held): bytes moved per route, evictions, spills
    and peak bytes per node."""
    out = {
        "transferred_bytes": dict(manager.transfers),
        "transfer_seconds": dict(manager.transfer_seconds),
        "nodes": {
            s.node.name: {
                "capacity": s.node.capacity,
                "used": s.used,
                "peak": s.peak,
                "evictions": s.evictions,
                "pooled": s.pooled,
                "reused": s.reused,
            }
            for s in manager.nodes.values()
        },
    }
    if manager.spill is not None:
        out["spill"] = {
            "directory": manager.spill.directory,
            "writes": manager.spill.writes,
            "bytes_written": manager.transfers["host->disk"],
            "reads": manager.spill.reads,
            "bytes_read": manager.transfers["disk->host"],
            "prefetched": manager.prefetches,
            "wait_seconds": dict(manager.waits),
        }
    return out
