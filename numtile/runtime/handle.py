"""``DataHandle``: one logical tile, with a replica per memory node.

A replica present is valid: a write drops the others, so the coherency state of a replica
follows from which replicas exist (the only one is modified, several are shared copies).
"""

from __future__ import annotations

import gc
import itertools
import math
import threading
import weakref
from typing import TYPE_CHECKING

import numpy as np

from numtile.runtime.access import WRITES
from numtile.runtime.pool import POOL, sole_owner

if TYPE_CHECKING:
    from numtile.runtime.task import Task

HOST = 0  # memory node id of host RAM; GPUs are 1, 2, ...
DISK = -1  # spill files of a limited host memory (the replica is the file's path)


class InvalidatedError(RuntimeError):
    """Raised when a tile is read after ``invalidate()`` dropped its contents."""


_handle_ids = itertools.count()
NO_TASKS: list = []  # a shared empty task list: only ever replaced, never appended to
# the running runtime's ``MemoryManager`` when some memory node is limited or a GPU is in use;
# None (the CPU-only default) keeps every tile in host RAM with no accounting at all
MANAGER = None
# handles given host data while no manager was running: the next manager counts them (tiles
# computed without a manager are counted when a task next touches them; the big ones, which
# would matter, are also kept here)
_UNMANAGED: weakref.WeakSet = weakref.WeakSet()
_UNMANAGED_LOCK = threading.Lock()


def set_manager(manager) -> None:
    """Make ``manager`` (or None) the one every handle reports to; it adopts the host tiles
    of the live handles made without one."""
    global MANAGER
    MANAGER = manager
    if manager is not None:
        POOL.clear()  # free buffers kept for reuse would be host memory outside its limit
        if _UNMANAGED:  # (a full collection costs ~1 s in a heap of 650k objects)
            gc.collect()  # tiles that only reference cycles keep alive are garbage: not adopted
        with _UNMANAGED_LOCK:
            handles = list(_UNMANAGED)
            _UNMANAGED.clear()
        manager.adopt(handles)


# deferred readers: objects (tensors whose tasks are not submitted yet) that will read a
# handle's current value once they ``materialise()``; a task that writes the handle first
# materialises them, so they read the value they were given, and ``Runtime.wait_all``
# materialises them all. Set once a reader is registered (until then ``submit`` skips the
# check).
DEFERRED_READS = [False]
_DEFERRED: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # id -> reader, in order


def defer_read(handles, reader) -> None:
    """Have ``reader.materialise()`` run before any task writing one of ``handles`` is
    submitted, and before ``wait_all`` waits (``reader`` is held weakly: dropped unused, it
    costs nothing)."""
    DEFERRED_READS[0] = True
    _DEFERRED[id(reader)] = reader
    for handle in handles:
        readers = handle.deferred_readers
        if readers is None:
            readers = handle.deferred_readers = weakref.WeakValueDictionary()
        readers[id(reader)] = reader


def forget_reader(handles, reader) -> None:
    """Undo ``defer_read`` (``reader`` materialised)."""
    _DEFERRED.pop(id(reader), None)
    for handle in handles:
        if handle.deferred_readers:
            handle.deferred_readers.pop(id(reader), None)


def materialise_readers(accesses) -> None:
    """Materialise the deferred readers of every handle that ``accesses`` writes (the check
    ``Runtime.submit`` makes before a task, or a direct host write, changes a tile)."""
    for handle, mode in accesses:
        readers = handle.deferred_readers
        if readers and WRITES[mode]:
            handle.deferred_readers = None
            for reader in list(readers.values()):
                reader.materialise()


def materialise_all() -> None:
    """Materialise every deferred reader, the newest first (so that a reader inlines the
    older ones it alone holds instead of reading their tiles)."""
    while _DEFERRED:
        for key in reversed(list(_DEFERRED.keys())):  # ids: no reference keeps one alive
            reader = _DEFERRED.pop(key, None)
            if reader is not None:
                reader.materialise()
            del reader  # a reader held here is no temporary the next one may inline


def track_without_manager(handle: DataHandle) -> None:
    """Remember ``handle``'s host tile for the next memory manager to count."""
    with _UNMANAGED_LOCK:
        _UNMANAGED.add(handle)


class DataHandle:
    """One tile of data that the runtime tracks and moves.

    A handle owns its replicas (one array per memory node; a replica present is valid, since
    a write drops the others) and the dependency state that sequential task flow needs: the
    tasks that produced its current value (``writers``) and the tasks that read that value
    since (``readers``).

    >>> h = DataHandle((2, 3), np.float32)
    >>> h.nbytes
    24
    """

    __slots__ = (
        "id",
        "shape",
        "dtype",
        "nbytes",
        "replicas",
        "writers",
        "readers",
        "accumulating",
        "accumulate_base",
        "accumulate_readers",
        "lock",
        "invalidated",
        "error",
        # under MPI only (``runtime/distributed/front.py``), left unset otherwise: the owner
        # rank, the ranks holding the current value, and the rank that wrote it
        "owner",
        "ranks",
        "holder",
        "deferred_readers",  # None, or id -> object to materialise before a write (defer_read)
        "__weakref__",
    )

    def __init__(self, shape: tuple[int, ...], dtype, data: np.ndarray | None = None) -> None:
        self.id = next(_handle_ids)
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.nbytes = math.prod(self.shape) * self.dtype.itemsize
        self.replicas: dict[int, np.ndarray] = {}
        if data is not None:
            assert data.shape == self.shape and data.dtype == self.dtype
            assert data.flags.c_contiguous
            self.replicas[HOST] = data
            if MANAGER is not None:
                MANAGER.register(self)
            else:
                track_without_manager(self)
        self.writers: list[Task] = []  # tasks whose completion defines the current value
        self.readers: list[Task] = []  # tasks reading the current value
        self.accumulating = None  # the codelet while ``writers`` is a group of ACCUMULATE tasks
        self.accumulate_base: list[Task] = NO_TASKS  # writers every task of that group waits for
        self.accumulate_readers: list[Task] = NO_TASKS  # readers every task of that group waits for
        self.lock: threading.Lock | None = None  # serialises ACCUMULATE tasks (made on demand)
        self.invalidated = False
        self.error: BaseException | None = None  # set when the task writing it failed
        self.deferred_readers: weakref.WeakValueDictionary | None = None

    def host_replica(self) -> np.ndarray:
        """The host replica, allocated on first use: without a memory manager (the CPU-only
        default) host RAM is the only memory node, so there is nothing to copy or track."""
        data = self.replicas.get(HOST)
        if data is None:
            if self.nbytes >= POOL.min_bytes:  # checked here too: the tiny-tile path stays cheap
                data = POOL.allocate(self.shape, self.dtype)
                track_without_manager(self)
            else:
                data = np.empty(self.shape, self.dtype)
            self.replicas[HOST] = data
        return data

    def host_array(self) -> np.ndarray:
        """The host replica, for reading once the tasks that write it are done."""
        if MANAGER is not None:
            return MANAGER.host_array(self)
        return self.host_replica()

    def drop_replicas(self) -> None:
        """Forget every replica (after ``invalidate``): memory is released, nothing written back."""
        if MANAGER is not None:
            MANAGER.drop_all(self)
            return
        self._recycle()
        self.replicas.clear()

    def _recycle(self) -> None:
        if self.nbytes < POOL.min_bytes:
            return
        data = self.replicas.get(HOST)
        # held by the dict and the local name only: nobody else can see the buffer again
        if data is not None and sole_owner(data, holders=2):
            POOL.release(data)

    def __del__(self) -> None:
        try:
            if MANAGER is not None:
                MANAGER.note_dead(self)
                return
            self._recycle()
        except Exception:  # never raise from a finaliser (e.g. at interpreter exit)
            pass

    def __repr__(self) -> str:
        return f"DataHandle(#{self.id}, shape={self.shape}, dtype={self.dtype})"
