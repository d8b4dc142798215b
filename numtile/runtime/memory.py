"""The memory manager: a capacity per memory node, LRU eviction, write-back and disk spill.

Memory nodes are host RAM (``HOST``, id 0), each GPU (ids 1, 2, ...) and, for host data
evicted under ``NUMTILE_HOST_MEM_LIMIT``, files in a spill directory (``DISK``, id -1).
A replica present in ``handle.replicas`` is always valid: writing a tile on one node drops
its replicas on the others, so "the only valid copy" is simply "the only replica".

When a task's tiles do not fit on its node, the least recently used replicas that no
running or prefetching task holds are evicted: written back first (GPU -> host, host ->
disk) when they are the only copy. A codelet may declare the scratch memory a call
allocates beside its tiles (``Codelet.scratch``: a gathered matrix, LAPACK's workspace): that
many bytes are reserved on the task's node, evicting other tiles as for a tile, from before
the task starts until it ends, and count in ``used`` and ``peak``. A task fails only when
its own tiles and scratch exceed the node's capacity. Everything here runs under one
re-entrant lock; the runtime uses the manager only when some node is limited or a GPU is in
use, so the CPU-only default pays nothing.
"""

from __future__ import annotations

import collections
import math
import threading
import time
import weakref
from typing import TYPE_CHECKING

import numpy as np

from numtile.runtime.access import READS, WRITES
from numtile.runtime.handle import DISK, HOST, DataHandle, track_without_manager
from numtile.runtime.host_malloc import unmap_freed_tiles
from numtile.runtime.room import OutOfMemoryError, scratch_text, tile_bytes
from numtile.runtime.spill import Spill, SpillError, format_bytes

if TYPE_CHECKING:
    from numtile.runtime.task import Task
    from numtile.runtime.trace import Tracer


_REGISTER_WAIT_SECONDS = 60.0  # a user tile waits this long for running tasks to free room


class HostNode:
    """Host RAM: NumPy buffers, page-locked for the ones GPUs write back into."""

    def __init__(self, capacity: int | None, pinned: bool) -> None:
        self.id = HOST
        self.name = "host"
        self.capacity = capacity
        self.pinned = pinned

    def allocate(self, shape: tuple[int, ...], dtype: np.dtype, gpu=None):
        """A host buffer; page-locked (under ``gpu``'s context) when that GPU copies into it
        (write-backs and downloads: pinning every tile would cost more than it saves)."""
        if gpu is not None and self.pinned and math.prod(shape):
            return gpu.pinned_array(shape, dtype)
        return np.empty(shape, dtype)


class Pins(list):
    """The (handle, node) pairs a task holds, plus the host buffers its asynchronous uploads
    read (``keep``): alive until the task is released, even if a write drops the replica."""

    def __init__(self, pairs) -> None:
        super().__init__(pairs)
        self.keep: list = []
        self.scratch: tuple[int, int] | None = None  # (node, bytes) reserved for the task


class NodeState:
    """Accounting of one node: bytes used, peak, LRU order of resident tiles, pins."""

    def __init__(self, node) -> None:
        self.node = node
        self.used = 0
        self.peak = 0
        self.lru: collections.OrderedDict[int, weakref.ref] = collections.OrderedDict()
        self.pins: collections.Counter[int] = collections.Counter()  # handle id -> tasks
        self.pinned_bytes = 0
        self.evictions = 0


class MemoryManager:
    """Capacity, eviction and transfers for every memory node of one runtime."""

    def __init__(self, host_limit: int | None, spill_dir: str | None, gpus: list) -> None:
        self.lock = threading.RLock()
        self.freed = threading.Condition(self.lock)
        self.host = HostNode(host_limit, pinned=bool(gpus))
        self.nodes = {HOST: NodeState(self.host)}
        for gpu in gpus:
            self.nodes[gpu.id] = NodeState(gpu)
        self.spill = None
        if host_limit is not None:
            self.spill = Spill(spill_dir, host_limit)
            unmap_freed_tiles()  # an evicted tile must leave resident memory, not just the count
        self.transfers: collections.Counter[str] = collections.Counter()  # "a->b" -> bytes
        self.transfer_seconds: collections.Counter[str] = collections.Counter()
        self.dead: collections.deque = collections.deque()  # (id, replicas) of dead handles
        self.spilled: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # id -> handle
        self.tracer: Tracer | None = None

    # -- bookkeeping --------------------------------------------------------------------------

    def _reap(self) -> None:
        """Forget the replicas of handles that died since the last call (lock held)."""
        while self.dead:
            handle_id, nbytes, replicas = self.dead.popleft()
            for node, data in replicas:
                if node == DISK:
                    Spill.remove(data)
                else:
                    self._untrack(handle_id, nbytes, node)

    def note_dead(self, handle: DataHandle) -> None:
        """Called from ``DataHandle.__del__`` in any thread: lock-free, processed later."""
        if handle.replicas:
            self.dead.append((handle.id, handle.nbytes, tuple(handle.replicas.items())))

    def _track(self, handle: DataHandle, node: int) -> None:
        state = self.nodes[node]
        if handle.id in state.lru:
            state.lru.move_to_end(handle.id)
            return
        state.lru[handle.id] = weakref.ref(handle)
        state.used += handle.nbytes
        state.peak = max(state.peak, state.used)

    def _untrack(self, handle_id: int, nbytes: int, node: int) -> None:
        state = self.nodes.get(node)
        if state is not None and state.lru.pop(handle_id, None) is not None:
            state.used -= nbytes

    def register(self, handle: DataHandle) -> None:
        """Account for replicas made outside the manager (a tile built from user data)."""
        with self.lock:
            self._reap()
            for node in list(handle.replicas):
                if node in self.nodes and handle.id not in self.nodes[node].lru:
                    capacity = self.nodes[node].node.capacity
                    if capacity is not None and handle.nbytes > capacity:
                        handle.replicas.clear()
                        raise OutOfMemoryError(
                            self._no_room(handle.nbytes, node, handle, held=False)
                            + ": use smaller tiles"
                        )
                    try:
                        self._wait_for_room(node, handle)
                    except SpillError:
                        handle.replicas.clear()  # the tile that failed holds no memory
                        raise
                    self._track(handle, node)

    def _wait_for_room(self, node: int, handle: DataHandle) -> None:
        """Make room for a tile made outside the manager; while running tasks pin too much,
        wait for them to finish (lock held), as ``acquire`` does. A worker thread (a task
        making a tile) does not wait: its own pins could be what is in the way; it goes over
        the limit until the running tasks end."""
        worker = threading.current_thread().name.startswith("numtile-")
        deadline = time.monotonic() + _REGISTER_WAIT_SECONDS
        while not self._make_room(node, handle.nbytes, exclude=(handle,)):
            if worker or time.monotonic() > deadline:
                return
            self.freed.wait(timeout=0.1)
            self._reap()

    def adopt(self, handles) -> None:
        """Account for the host tiles of ``handles`` made before this manager existed (a
        tensor created before the runtime started, or kept from the previous runtime)."""
        with self.lock:
            self._reap()
            for handle in handles:
                if HOST in handle.replicas and handle.id not in self.nodes[HOST].lru:
                    try:
                        self._make_room(HOST, handle.nbytes, exclude=(handle,))
                    except SpillError:
                        pass  # over the limit for now: the next allocation spills (or says why)
                    self._track(handle, HOST)

    def _drop(self, handle: DataHandle, node: int) -> None:
        data = handle.replicas.pop(node, None)
        if node == DISK:
            if data is not None:
                Spill.remove(data)
        else:
            self._untrack(handle.id, handle.nbytes, node)

    def _set_written(self, handle: DataHandle, node: int) -> None:
        """The replica on ``node`` is being written: every other one is stale, drop it."""
        for other in list(handle.replicas):
            if other != node:
                self._drop(handle, other)

    # -- eviction -----------------------------------------------------------------------------

    def _make_room(self, node: int, nbytes: int, exclude=()) -> bool:
        """Evict unpinned LRU replicas until ``nbytes`` more fit on ``node``; False if not."""
        state = self.nodes[node]
        capacity = state.node.capacity
        if capacity is None:
            return True
        skip = {h.id for h in exclude}
        while state.used + nbytes > capacity:
            victim = None
            for handle_id, ref in state.lru.items():  # oldest first
                if handle_id in skip or state.pins[handle_id]:
                    continue
                victim = ref()
                if victim is None:  # died, not yet reaped
                    continue
                break
            if victim is None:
                return False
            self._evict(victim, node)
        return True

    def _evict(self, handle: DataHandle, node: int) -> None:
        """Drop ``handle``'s replica on ``node``, writing it back first if it is the only one."""
        data = handle.replicas[node]
        sole = len(handle.replicas) == 1
        if sole and node != HOST:  # GPU -> host
            self._fetch(handle, HOST, True, False, None, Pins([]))
        elif sole:  # host -> disk
            if self.spill is None:  # cannot happen: only a limited host evicts
                raise RuntimeError("host eviction without a spill directory")
            start = time.perf_counter()
            handle.replicas[DISK] = self.spill.write(handle, data)
            self.spilled[handle.id] = handle
            self._count("host->disk", handle.nbytes, start)
        self._drop(handle, node)
        self.nodes[node].evictions += 1

    def _allocate(self, handle, node: int, exclude=(), task=None, gpu=None):
        state = self.nodes[node]
        try:
            room = self._make_room(node, handle.nbytes, exclude)
        except SpillError as exc:
            who = task.describe() if task is not None else "a read"
            exc.add_note(f"while making room on {state.node.name} for {handle!r} ({who})")
            raise
        if not room:
            raise OutOfMemoryError(self._no_room(handle.nbytes, node, task))
        if node == HOST:
            return state.node.allocate(handle.shape, handle.dtype, gpu)
        return state.node.allocate(handle.shape, handle.dtype)

    def _no_room(self, nbytes: int, node: int, who, held: bool = True, scratch: int = 0) -> str:
        """``who`` (a task, a handle or None) needs ``nbytes`` (``scratch`` of them for its
        working memory) that ``node`` cannot give."""
        state = self.nodes[node]
        if who is None:
            who = "a tile"
        elif not isinstance(who, DataHandle):
            who = who.describe()
        text = (
            f"{who} needs {format_bytes(nbytes)}{scratch_text(scratch)} on {state.node.name} "
            f"but its limit is {format_bytes(state.node.capacity)}"
        )
        if held:
            text += f" ({format_bytes(state.pinned_bytes)} held by running tasks)"
        return text

    # -- transfers ----------------------------------------------------------------------------

    def _count(self, route: str, nbytes: int, start: float) -> None:
        end = time.perf_counter()
        self.transfers[route] += nbytes
        self.transfer_seconds[route] += end - start
        if self.tracer is not None:
            self.tracer.record_transfer(route, start, end, nbytes)

    def _copy(self, handle, src: int, src_data, dst: int, dst_data, sync: bool):
        """Copy one valid replica to another node (host in between for disk and GPU pairs)."""
        start = time.perf_counter()
        if src == DISK:
            if dst != HOST:
                raise AssertionError("disk data goes to host first")
            self.spill.read(src_data, dst_data)
            self._count("disk->host", handle.nbytes, start)
        elif src == HOST:
            gpu = self.nodes[dst].node
            gpu.upload(src_data, dst_data, sync)
            self._count(f"host->{gpu.name}", handle.nbytes, start)
        elif dst == HOST:
            gpu = self.nodes[src].node
            gpu.download(src_data, dst_data)
            self._count(f"{gpu.name}->host", handle.nbytes, start)
        else:
            raise AssertionError("GPU to GPU copies go through host")

    def _fetch(self, handle: DataHandle, node: int, reads: bool, writes: bool, task, pins):
        """A valid replica of ``handle`` on ``node`` (lock held; ``handle`` pinned there)."""
        data = handle.replicas.get(node)
        if data is not None:
            if handle.id not in self.nodes[node].lru:  # made before this manager: count it
                self._make_room(node, handle.nbytes, exclude=(handle,))
            self._track(handle, node)  # most recently used
        else:
            source = None
            if reads and handle.replicas:  # prefer host, then a GPU, then disk
                for candidate in (HOST, *[n for n in handle.replicas if n > HOST], DISK):
                    if candidate in handle.replicas:
                        source = candidate
                        break
                if node != HOST and source != HOST:  # disk or another GPU: through host
                    self._fetch(handle, HOST, True, False, task, pins)
                    source = HOST
            if source == HOST and node != HOST:  # the upload reads host: hold it till done
                pins.append((handle, HOST))
                self._pin(handle, HOST)
            gpu = self.nodes[source].node if source is not None and source > HOST else None
            data = self._allocate(handle, node, exclude=(handle,), task=task, gpu=gpu)
            if source is not None:
                self._copy(handle, source, handle.replicas[source], node, data, sync=node == HOST)
                if node != HOST:
                    pins.keep.append(handle.replicas[source])
            handle.replicas[node] = data
            self._track(handle, node)
        if writes:
            self._set_written(handle, node)
        return data

    # -- the runtime's entry points ---------------------------------------------------------

    def acquire(self, task: Task, node: int, wait: bool = True) -> tuple[list, list] | None:
        """Fetch (and pin) every tile of ``task`` on ``node``; returns (buffers, pins).

        Waits while other tasks hold the memory this one needs (returns None instead when
        not ``wait``: a prefetch must not block the worker that would free it); raises
        ``OutOfMemoryError`` when the task's own tiles exceed the node's capacity.
        """
        state = self.nodes[node]
        distinct = {h.id: h for h in task.handles}
        scratch = task.scratch_bytes()
        need = tile_bytes(task) + scratch
        capacity = state.node.capacity
        if capacity is not None and need > capacity:
            raise OutOfMemoryError(self._no_room(need, node, task, held=False, scratch=scratch))
        with self.lock:
            self._reap()
            while capacity is not None:
                # others' pinned tiles cannot be evicted: wait until ours fit beside them
                extra = scratch + sum(h.nbytes for i, h in distinct.items() if not state.pins[i])
                if state.pinned_bytes + extra <= capacity:
                    break
                if not wait:
                    return None
                self.freed.wait(timeout=1.0)  # a running task will unpin its tiles
                self._reap()
            pins = Pins((h, node) for h in distinct.values())
            for h in distinct.values():
                self._pin(h, node)
            try:
                buffers = [
                    self._fetch(h, node, READS[m], WRITES[m], task, pins)
                    for h, m in zip(task.handles, task.modes)
                ]
                if scratch:
                    self._reserve(task, node, scratch, distinct.values(), pins)
            except BaseException:
                self._unpin(pins)
                raise
        return buffers, pins

    def _reserve(self, task: Task, node: int, nbytes: int, tiles, pins: Pins) -> None:
        """Hold ``nbytes`` of scratch on ``node`` for ``task`` (its tiles are pinned there):
        evict other tiles to make room; counted as used and held until ``_unpin``."""
        state = self.nodes[node]
        try:
            room = self._make_room(node, nbytes, exclude=tiles)
        except SpillError as exc:
            exc.add_note(f"while making room for the scratch of {task.describe()}")
            raise
        if not room:
            raise OutOfMemoryError(self._no_room(nbytes, node, task, scratch=nbytes))
        state.used += nbytes
        state.pinned_bytes += nbytes
        state.peak = max(state.peak, state.used)
        pins.scratch = (node, nbytes)

    def _pin(self, handle: DataHandle, node: int) -> None:
        state = self.nodes[node]
        if not state.pins[handle.id]:
            state.pinned_bytes += handle.nbytes
        state.pins[handle.id] += 1

    def _unpin(self, pins: list) -> None:
        for handle, node in pins:
            state = self.nodes[node]
            state.pins[handle.id] -= 1
            if state.pins[handle.id] <= 0:
                del state.pins[handle.id]
                state.pinned_bytes -= handle.nbytes
        if getattr(pins, "scratch", None) is not None:
            node, nbytes = pins.scratch
            pins.scratch = None
            self.nodes[node].used -= nbytes
            self.nodes[node].pinned_bytes -= nbytes
        self.freed.notify_all()

    def release(self, pins: list, failed_writes: list | None = None) -> None:
        """Unpin a finished task's tiles; drop the replicas a failed task was writing."""
        with self.lock:
            self._unpin(pins)
            for handle, node in failed_writes or ():
                if node != HOST:
                    self._drop(handle, node)

    def host_array(self, handle: DataHandle) -> np.ndarray:
        """A valid host replica of ``handle`` (fetched from a GPU or disk if needed)."""
        with self.lock:
            self._reap()
            pins = Pins([(handle, HOST)])
            self._pin(handle, HOST)
            try:
                return self._fetch(handle, HOST, True, False, None, pins)
            finally:
                self._unpin(pins)

    def drop_all(self, handle: DataHandle) -> None:
        """``invalidate``: forget every replica, nothing written back."""
        with self.lock:
            for node in list(handle.replicas):
                self._drop(handle, node)

    def evict_early(self, handle: DataHandle) -> None:
        """``wont_use``: move ``handle`` off the GPUs now (to host), and first in line on host."""
        with self.lock:
            self._reap()
            for node in [n for n in handle.replicas if n > HOST]:
                if not self.nodes[node].pins[handle.id]:
                    self._evict(handle, node)
            host = self.nodes[HOST]
            if handle.id in host.lru:
                host.lru.move_to_end(handle.id, last=False)

    def close(self, bring_home: bool = True) -> None:
        """Shut down: tiles still alive come back to host RAM (from the GPUs and the spill
        files, which are removed), so tensors outlive the runtime; ``bring_home=False`` (at
        interpreter exit) skips that work."""
        with self.lock:
            self._reap()
            if bring_home:
                self.host.capacity = None  # no limit any more: nothing is evicted now
                for node, state in self.nodes.items():
                    if node == HOST:
                        continue
                    for ref in list(state.lru.values()):
                        handle = ref()
                        if handle is not None and node in handle.replicas:
                            pins = Pins([])
                            self._fetch(handle, HOST, True, False, None, pins)
                            self._drop(handle, node)
                for handle in list(self.spilled.values()):
                    if DISK in handle.replicas:
                        self._fetch(handle, HOST, True, False, None, Pins([]))
                        self._drop(handle, DISK)
                for ref in self.nodes[HOST].lru.values():  # the next manager counts them
                    handle = ref()
                    if handle is not None:
                        track_without_manager(handle)
        if self.spill is not None:
            self.spill.close()

    # -- reporting ----------------------------------------------------------------------------

    def counters(self) -> dict:
        """Bytes moved per route, evictions, spills and peak bytes per node."""
        with self.lock:
            self._reap()
            out = {
                "transferred_bytes": dict(self.transfers),
                "transfer_seconds": dict(self.transfer_seconds),
                "nodes": {
                    s.node.name: {
                        "capacity": s.node.capacity,
                        "used": s.used,
                        "peak": s.peak,
                        "evictions": s.evictions,
                    }
                    for s in self.nodes.values()
                },
            }
            if self.spill is not None:
                out["spill"] = {
                    "directory": self.spill.directory,
                    "writes": self.spill.writes,
                    "bytes_written": self.transfers["host->disk"],
                    "reads": self.spill.reads,
                    "bytes_read": self.transfers["disk->host"],
                }
            return out
