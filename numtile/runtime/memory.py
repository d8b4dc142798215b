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
re-entrant lock, released only to wait for a spill file's transfer, which I/O threads run
(``spill_io.py``, with the reuse of evicted buffers and the prefetch of the next tasks'
tiles); the runtime uses the manager only when some node is limited or a GPU is in use, so
the CPU-only default pays nothing.
"""

from __future__ import annotations

import collections
import operator
import threading
import time
import weakref
from itertools import repeat
from typing import TYPE_CHECKING

from numtile.runtime.access import READS, WRITES
from numtile.runtime.arena import host_arena
from numtile.runtime.handle import DISK, HOST, DataHandle, track_without_manager
from numtile.runtime.host_malloc import prefault, unmap_freed_tiles
from numtile.runtime.memory_nodes import HostNode, NodeState, Pins, counters
from numtile.runtime.room import OutOfMemoryError, no_room
from numtile.runtime.spill import Spill, SpillError
from numtile.runtime.spill_io import SpillIO, SpillTraffic

if TYPE_CHECKING:
    import numpy as np

    from numtile.runtime.task import Task
    from numtile.runtime.trace import Tracer


POOL_FRACTION = 8  # a limited host keeps up to 1/8 of its limit in free buffers for reuse
ARENA_MIN = 256 << 20  # from this limit on, tile buffers come from an arena (arena.py)
_REGISTER_WAIT_SECONDS = 60.0  # a user tile waits this long for running tasks to free room
_ID = operator.attrgetter("id")
_NBYTES = operator.attrgetter("nbytes")


class MemoryManager(SpillTraffic):
    """Capacity, eviction and transfers for every memory node of one runtime."""

    def __init__(
        self, host_limit: int | None, spill_dir: str | None, gpus: list, arena: bool = True
    ) -> None:
        self.lock = threading.RLock()
        self.freed = threading.Condition(self.lock)
        self.host = HostNode(host_limit, pinned=bool(gpus))
        if arena and host_limit is not None and host_limit >= ARENA_MIN:
            self.host.arena = host_arena(host_limit)
        self.nodes = {HOST: NodeState(self.host)}
        for gpu in gpus:
            self.nodes[gpu.id] = NodeState(gpu)
        self.spill = None
        self.io: SpillIO | None = None
        self.writing: dict[int, object] = {}  # handle id -> its SpillJob (spill_io.py)
        self.reading: dict[int, object] = {}
        self.leaving = 0  # bytes being written to spill files
        self.prefetches = 0
        self.waits: collections.Counter[str] = collections.Counter()  # seconds, by reason
        if host_limit is not None:
            self.spill = Spill(spill_dir, host_limit)
            unmap_freed_tiles()  # an evicted tile must leave resident memory, not just the count
            self.io = SpillIO(self.spill, self._finish)
            self.nodes[HOST].pool_limit = host_limit // POOL_FRACTION
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
                elif self._untrack(handle_id, nbytes, node) and node == HOST:
                    self._recycle(data, holders=2)  # ``data`` and the pair in ``replicas``
            del replicas, data

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
        state.note_peak()

    def _untrack(self, handle_id: int, nbytes: int, node: int) -> bool:
        state = self.nodes.get(node)
        if state is not None and state.lru.pop(handle_id, None) is not None:
            state.used -= nbytes
            return True
        return False

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
                            no_room(self.nodes[node], handle.nbytes, handle, held=False)
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
        elif self._untrack(handle.id, handle.nbytes, node) and node == HOST:
            self._recycle(data, holders=1)

    def _set_written(self, handle: DataHandle, node: int) -> None:
        """The replica on ``node`` is being written: every other one is stale, drop it."""
        job = self.writing.get(handle.id)
        if job is not None:
            job.stale = True  # its file is removed when the write ends
        for other in list(handle.replicas):
            if other != node:
                self._drop(handle, other)

    # -- eviction -----------------------------------------------------------------------------

    def _make_room(self, node: int, nbytes: int, exclude=(), keep=None) -> bool:
        """Evict unpinned LRU replicas until ``nbytes`` more fit on ``node``; False if not
        (a limited host: ``_make_host_room``, which keeps pooled buffers of kind ``keep``)."""
        state = self.nodes[node]
        capacity = state.node.capacity
        if capacity is None:
            return True
        if node == HOST and self.io is not None:
            return self._make_host_room(nbytes, exclude, keep)
        skip = {h.id for h in exclude}
        while state.used + nbytes > capacity:
            victim = None
            for handle_id, ref in state.lru.items():  # oldest first
                if handle_id in skip or handle_id in state.pins:
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
        """Drop ``handle``'s GPU replica on ``node``, written back to host first if it is the
        only one (a limited host's evictions go to disk in ``_make_host_room``)."""
        if len(handle.replicas) == 1:
            pins = Pins([(handle, node)])  # chosen by no other eviction while host makes room
            self._pin(handle, node)
            try:
                self._fetch(handle, HOST, True, False, None, pins)
            finally:
                self._unpin(pins)
            if HOST not in handle.replicas or handle.id in self.nodes[node].pins:
                return  # written on the GPU meanwhile: it stays
        self._drop(handle, node)
        self.nodes[node].evictions += 1

    def _allocate(self, handle, node: int, exclude=(), task=None, gpu=None):
        state = self.nodes[node]
        reuse = node == HOST and gpu is None
        data = self._from_arena(handle, exclude, task) if reuse else None
        if data is None and reuse and state.free:
            data = state.take(handle.shape, handle.dtype)  # counted already: no room to make
        if data is not None:
            return data
        self._room_for(handle, node, handle.nbytes, exclude, task)
        if reuse and state.free:  # an evicted tile's buffer, kept for this one
            data = state.take(handle.shape, handle.dtype)
            if data is not None:
                return data
        if node == HOST:
            return state.node.allocate(handle.shape, handle.dtype, gpu)
        return state.node.allocate(handle.shape, handle.dtype)

    # -- transfers ----------------------------------------------------------------------------

    def _count(self, route: str, nbytes: int, start: float, end: float | None = None) -> None:
        end = time.perf_counter() if end is None else end
        self.transfers[route] += nbytes
        self.transfer_seconds[route] += end - start
        if self.tracer is not None:
            self.tracer.record_transfer(route, start, end, nbytes)

    def _copy(self, handle, src: int, src_data, dst: int, dst_data, sync: bool):
        """Copy one valid replica between host and a GPU (disk reads are ``spill_io``'s)."""
        start = time.perf_counter()
        if src == HOST:
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
        """A valid replica of ``handle`` on ``node`` (lock held, released while a spill file
        is read; ``handle`` pinned there)."""
        while handle.id in self.reading:  # its read-back is in flight: that is the host copy
            self._wait_read(handle)
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
                if source == DISK and node == HOST:  # by the reader thread, lock released
                    self._start_read(handle, task)
                    return self._fetch(handle, node, reads, writes, task, pins)
                if node != HOST:  # the upload reads host: hold it till done
                    pins.append((handle, HOST))
                    self._pin(handle, HOST)
                    if source != HOST:  # disk or another GPU: through host
                        self._fetch(handle, HOST, True, False, task, pins)
                        source = HOST
            gpu = self.nodes[source].node if source is not None and source > HOST else None
            data = self._allocate(handle, node, exclude=(handle,), task=task, gpu=gpu)
            if source is not None:
                self._copy(handle, source, handle.replicas[source], node, data, sync=node == HOST)
                if node != HOST:
                    pins.keep += (handle.replicas[source],)
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
        handles = task.handles
        # C-level maps, not comprehensions: this runs for every task under a limit
        distinct = dict(zip(map(_ID, handles), handles)).values()
        scratch = task.scratch_bytes()
        capacity, need = state.node.capacity, scratch + sum(map(_NBYTES, distinct))
        if capacity is not None and need > capacity:
            raise OutOfMemoryError(no_room(state, need, task, held=False, scratch=scratch))
        with self.lock:
            if self.dead:
                self._reap()
            # others' pinned tiles cannot be evicted: wait until ours fit beside them (they
            # fit whatever is pinned of them already while all of them fit)
            while (
                capacity is not None
                and state.pinned_bytes + need > capacity
                and not self._admits(state, distinct, scratch)
            ):
                if not wait:
                    return None
                self._wait_freed("admission")  # a running task will unpin its tiles
                self._reap()
            pins = Pins(zip(distinct, repeat(node)))
            self._pin_all(distinct, node)
            try:
                if scratch:  # first: its tiles' reads may wait, and others' admission count it
                    self._reserve(task, node, scratch, distinct, pins)
                if node == HOST and self.io is not None and self.spilled:  # every read first
                    for h, mode in zip(task.handles, task.modes):
                        on_disk_only = DISK in h.replicas and len(h.replicas) == 1
                        if READS[mode] and on_disk_only and h.id not in self.reading:
                            self._start_read(h, task)
                buffers = []
                lru, reading, writing = state.lru, self.reading, self.writing
                for h, m in zip(task.handles, task.modes):
                    data = h.replicas.get(node)
                    if data is not None and h.id in lru and h.id not in reading:  # _fetch's hit
                        lru.move_to_end(h.id)
                        if WRITES[m] and (len(h.replicas) > 1 or h.id in writing):
                            self._set_written(h, node)
                    else:
                        data = self._fetch(h, node, READS[m], WRITES[m], task, pins)
                    buffers.append(data)
            except BaseException:
                self._unpin(pins)
                raise
        if node == HOST and self.io is not None:  # the pages of its outputs, one call a tile
            for buffer, mode in zip(buffers, task.modes):
                if not READS[mode]:
                    prefault(buffer)
        return buffers, pins

    def _reserve(self, task: Task, node: int, nbytes: int, tiles, pins: Pins) -> None:
        """Hold ``nbytes`` of scratch on ``node`` for ``task`` (its tiles are pinned there):
        evict other tiles to make room; counted as used and held until ``_unpin``."""
        state = self.nodes[node]
        state.pinned_bytes += nbytes  # held from now on; used once there is room
        pins.scratch = (node, nbytes, 0)
        try:
            room = self._make_room(node, nbytes, exclude=tiles)
        except SpillError as exc:
            exc.add_note(f"while making room for the scratch of {task.describe()}")
            raise
        if not room:
            raise OutOfMemoryError(no_room(self.nodes[node], nbytes, task, scratch=nbytes))
        state.used += nbytes
        state.note_peak()
        pins.scratch = (node, nbytes, nbytes)

    def _pin(self, handle: DataHandle, node: int) -> None:
        self._pin_all((handle,), node)

    def _pin_all(self, handles, node: int) -> None:
        """Count one more holder of each of ``handles`` (distinct) on ``node``."""
        state = self.nodes[node]
        pins = state.pins
        for handle in handles:
            count = pins.get(handle.id, 0)
            if not count:
                state.pinned_bytes += handle.nbytes
            pins[handle.id] = count + 1

    def _unpin(self, pins: list) -> None:
        for handle, node in pins:
            state = self.nodes[node]
            count = state.pins[handle.id] - 1
            if count <= 0:
                del state.pins[handle.id]
                state.pinned_bytes -= handle.nbytes
            else:
                state.pins[handle.id] = count
        if getattr(pins, "scratch", None) is not None:
            node, pinned, used = pins.scratch
            pins.scratch = None
            self.nodes[node].used -= used
            self.nodes[node].pinned_bytes -= pinned
        if self.freed._waiters:  # CPython's Condition: notify_all costs a call even with none
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
            self._admit_read(handle)
            pins = Pins([(handle, HOST)])
            self._pin(handle, HOST)
            try:
                return self._fetch(handle, HOST, True, False, None, pins)
            finally:
                self._unpin(pins)

    def drop_all(self, handle: DataHandle) -> None:
        """``invalidate``: forget every replica, nothing written back."""
        with self.lock:
            self._settle(handle)
            for node in list(handle.replicas):
                self._drop(handle, node)

    def evict_early(self, handle: DataHandle) -> None:
        """``wont_use``: move ``handle`` off the GPUs now (to host), and first in line on host
        (not written to its spill file before it must leave: writing the AdamW moments of
        gpt2-small ahead doubled the bytes written, most of which were never read back)."""
        with self.lock:
            self._reap()
            for node in [n for n in handle.replicas if n > HOST]:
                if handle.id not in self.nodes[node].pins:
                    self._evict(handle, node)
            host = self.nodes[HOST]
            if handle.id in host.lru:
                host.lru.move_to_end(handle.id, last=False)

    def close(self, bring_home: bool = True) -> None:
        """Shut down: tiles still alive come back to host RAM (from the GPUs and the spill
        files, which are removed), so tensors outlive the runtime; ``bring_home=False`` (at
        interpreter exit) skips that work. Spill transfers in flight end first (at exit,
        the queued ones are dropped)."""
        if self.io is not None and not bring_home:
            self.io.closing = True
            self.io.stop(timeout=5.0)
        with self.lock:
            self._reap()
            if bring_home:
                self.host.capacity = None  # no limit any more: nothing is evicted now
                self.nodes[HOST].free.clear()
                self.nodes[HOST].pooled = 0
                while self.writing or self.reading:
                    self.freed.wait(timeout=1.0)
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
        if self.io is not None and bring_home:
            self.io.stop()
        if self.spill is not None:
            self.spill.close()

    # -- reporting ----------------------------------------------------------------------------

    def counters(self) -> dict:
        """Bytes moved per route, evictions, spills and peak bytes per node."""
        with self.lock:
            self._reap()
            return counters(self)
