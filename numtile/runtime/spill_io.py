"""Spill traffic off the memory manager's lock: two I/O threads and the tile states they drive.

Under ``NUMTILE_HOST_MEM_LIMIT`` every tile beyond the limit goes through a spill file
(``spill.py``). Writing and reading those files under the manager's lock stalled every
worker for the whole transfer (gpt2-small bf16-mixed training moves ~1.3 GB a step). Here one
thread writes evicted tiles and another reads spilled ones back; the manager's lock is held
only to change the tile states:

- *being written* (``writing``): the host replica stays valid and readable while its file is
  written. When the write ends, the file becomes the ``DISK`` replica; the host one is then
  dropped if the write was for room (``drop``) and nothing pins the tile, else it stays as a
  *clean* copy, which later eviction drops at no cost. A task that writes the tile meanwhile
  makes the file stale: it is removed when the write ends.
- *being read* (``reading``): a host buffer is counted and pinned for the tile; the task that
  needs it waits for that read only (the lock released), other workers go on.

Room on the host is made in this order: free room, pooled buffers (``memory_nodes``), clean
copies (instant), then writes of the least recently used tiles, waited for. Nothing is
written ahead of need (writing the AdamW moments ahead doubled the bytes written, most never
read back); ``prefetch`` starts reading the tiles of the next ready tasks while there is room
for them without waiting. An I/O error fails the task (or read) that needed that transfer, with the
exception the file operation raised; the tile keeps its other replica, so nothing is lost.
"""

from __future__ import annotations

import queue
import threading
import time

from numtile.runtime.access import READS
from numtile.runtime.handle import DISK, HOST, DataHandle
from numtile.runtime.host_malloc import MMAP_THRESHOLD, prefault
from numtile.runtime.memory_nodes import owner_alone
from numtile.runtime.room import OutOfMemoryError, no_room
from numtile.runtime.spill import SpillError

_VICTIM_SCAN = 64  # least recently used tiles looked at for a clean or same-size victim


class SpillJob:
    """One tile's file transfer: ``write`` (``array`` -> a new file) or ``read`` (``path``
    -> ``array``); ``done`` and ``error`` are set under the manager's lock."""

    __slots__ = ("kind", "handle", "array", "path", "drop", "stale", "done", "error", "times")

    def __init__(self, kind: str, handle: DataHandle, array, path=None, drop=False) -> None:
        self.kind = kind
        self.handle = handle
        self.array = array
        self.path = path
        self.drop = drop  # a write for room: drop the host replica once the file is written
        self.stale = False  # the tile was written while its file was: the file is discarded
        self.done = False
        self.error: BaseException | None = None
        self.times = (0.0, 0.0)


class SpillIO:
    """A writer and a reader thread running ``SpillJob``s; ``finish(job)`` is called in the
    thread once its transfer is over (the manager takes its lock there)."""

    def __init__(self, spill, finish) -> None:
        self.spill = spill
        self.finish = finish
        self.closing = False
        self.queues = {"write": queue.SimpleQueue(), "read": queue.SimpleQueue()}
        self.threads = [
            threading.Thread(target=self._loop, args=(q,), name=f"spill-{kind}", daemon=True)
            for kind, q in self.queues.items()
        ]
        for thread in self.threads:
            thread.start()

    def submit(self, job: SpillJob) -> None:
        self.queues[job.kind].put(job)

    def _loop(self, jobs: queue.SimpleQueue) -> None:
        while True:
            job = jobs.get()
            if job is None:
                return
            start = time.perf_counter()
            try:
                if self.closing:
                    raise RuntimeError("the runtime shut down before this spill transfer ran")
                if job.kind == "write":
                    job.path = self.spill.write(job.handle, job.array)
                else:
                    prefault(job.array)  # its pages in one call, not one fault each
                    self.spill.read(job.path, job.array)
            except BaseException as exc:  # even a KeyboardInterrupt: the waiter re-raises it
                job.error = exc.with_traceback(None)  # its frames would keep the tile alive
            job.times = (start, time.perf_counter())
            self.finish(job)
            job = None

    def stop(self, timeout: float | None = None) -> None:
        """Let the queued jobs finish (or fail at once when ``closing``) and end the threads."""
        for q in self.queues.values():
            q.put(None)
        for thread in self.threads:
            thread.join(timeout)


class SpillTraffic:
    """The host <-> disk half of ``MemoryManager`` (see the module docstring)."""

    # -- making room on a limited host --------------------------------------------------------

    def _host_victims(self, skip: set, size: int | None):
        """Eviction candidates among the least recently used host tiles that may leave (not
        pinned, not being written): (clean of ``size`` bytes, whose buffer the caller reuses
        as it is; clean; of ``size`` bytes; the least recently used), None where there is none.
        Clean tiles (their file is valid) leave at no cost."""
        state = self.nodes[HOST]
        clean_sized = clean = sized = oldest = None
        for seen, (handle_id, ref) in enumerate(state.lru.items()):
            if seen >= _VICTIM_SCAN and oldest is not None:
                break
            if handle_id in skip or handle_id in state.pins or handle_id in self.writing:
                continue
            handle = ref()
            if handle is None:
                continue
            oldest = oldest or handle
            if DISK in handle.replicas:
                clean = clean or handle
                if handle.nbytes == size:
                    clean_sized = handle
                    break
            elif handle.nbytes == size:
                sized = sized or handle
        return clean_sized, clean, sized, oldest

    def _make_host_room(self, nbytes: int, exclude=(), keep=None) -> bool:
        """Make ``nbytes`` fit under the host limit (lock held, released while waiting for
        writes); raise the error of a write this call needed, False if nothing can leave.
        ``keep``: the size of the buffer the caller will take from the pool."""
        state = self.nodes[HOST]
        if state.resident + nbytes <= state.node.capacity:  # the common case: room already
            return True
        skip = {h.id for h in exclude}
        started: list[SpillJob] = []
        while state.resident + nbytes > state.node.capacity:
            if keep is not None and state.has_buffer(keep):  # taken by the caller: no more
                return True
            clean_sized, clean, sized, oldest = self._host_victims(skip, keep)
            if clean_sized is not None or (clean is not None and not state.pooled):
                self._drop(clean_sized or clean, HOST)
                state.evictions += 1
                continue
            if state.release_one(keep):
                continue
            if clean is not None:
                self._drop(clean, HOST)
                state.evictions += 1
                continue
            victim = sized or oldest
            if victim is not None and state.used - self.leaving + nbytes > state.node.capacity:
                started.append(self._start_write(victim, drop=True))
                continue
            failed = next((job for job in started if job.error is not None), None)
            if failed is not None:
                while not all(job.done for job in started):  # no file half written after it
                    self._wait_freed("room")
                raise failed.error
            if not self.writing:
                return False
            self._wait_freed("room")  # a write ends (or a task unpins its tiles)
            self._reap()
        return True

    def _from_arena(self, handle, exclude, task):
        """``handle``'s host buffer from the arena (arena.py): in resident free pages if a
        range holds them, else where the pages it adds fit under the limit once room is made
        for them (evictions move the best place: planned again after each); None without an
        arena, for a tile under ``MMAP_THRESHOLD`` (malloc's) or where no free range of the
        arena holds it (the caller maps a buffer of its own)."""
        state = self.nodes[HOST]
        arena, capacity = state.arena, state.node.capacity
        if arena is None or capacity is None or handle.nbytes < MMAP_THRESHOLD:
            return None
        data = arena.reuse(handle.nbytes, handle.dtype, handle.shape)  # a dropped tile's
        if data is not None:
            state.reused += 1
            return data
        while True:
            plan = arena.plan(handle.nbytes)
            if plan is None:
                return None
            start, growth = plan
            if not growth or state.resident + growth <= capacity:
                state.reused += not growth
                return arena.allocate(handle.nbytes, plan, handle.dtype).reshape(handle.shape)
            self._room_for(handle, HOST, growth, exclude, task)

    def _room_for(self, handle, node: int, nbytes: int, exclude, task) -> None:
        """Make room for ``nbytes`` of ``handle``'s buffer on ``node`` (any node, for
        ``_allocate`` and ``_from_arena``), or raise: the spill error with a note naming the
        tile and who wanted it, ``OutOfMemoryError`` where nothing can leave."""
        state = self.nodes[node]
        try:
            room = self._make_room(node, nbytes, exclude, keep=handle.nbytes)
        except SpillError as exc:
            who = task.describe() if task is not None else "a read"
            exc.add_note(f"while making room on {state.node.name} for {handle!r} ({who})")
            raise
        if not room:
            raise OutOfMemoryError(no_room(state, handle.nbytes, task))

    def _start_write(self, handle: DataHandle, drop: bool) -> SpillJob:
        job = SpillJob("write", handle, handle.replicas[HOST], drop=drop)
        self.writing[handle.id] = job
        self.leaving += handle.nbytes
        self.io.submit(job)
        return job

    # -- reading back -------------------------------------------------------------------------

    def _start_read(self, handle: DataHandle, task=None) -> SpillJob:
        """Count and pin a host buffer for ``handle`` (on disk only) and queue its read."""
        job = SpillJob("read", handle, None, path=handle.replicas[DISK])
        self.reading[handle.id] = job  # before any wait: a second reader joins this one
        self._pin(handle, HOST)
        try:
            job.array = self._allocate(handle, HOST, exclude=(handle,), task=task)
        except BaseException as exc:
            del self.reading[handle.id]
            job.error, job.done = exc, True
            self._unpin([(handle, HOST)])
            raise
        self._track(handle, HOST)
        self.io.submit(job)
        return job

    def _wait_read(self, handle: DataHandle) -> None:
        """Wait (lock released) for the read of ``handle`` in flight; raise its error."""
        job = self.reading[handle.id]
        while not job.done:
            self._wait_freed("read")
        if job.error is not None:
            raise job.error

    def _admit_read(self, handle: DataHandle) -> None:
        """Wait (lock held) until ``handle`` fits on host beside the tiles that running tasks
        hold, as ``acquire`` admits a task: a read that pinned past them could take the room
        an admitted task's allocation counts on, and that task would fail."""
        state = self.nodes[HOST]
        capacity = state.node.capacity
        if capacity is None or handle.id in state.pins or handle.nbytes > capacity:
            return
        while not self._admits(state, (handle,)):
            self._wait_freed("admission")
            self._reap()

    @staticmethod
    def _admits(state, handles, scratch: int = 0) -> bool:
        """True where ``handles`` (those not pinned on ``state``'s node yet) and ``scratch``
        bytes fit under its capacity beside what running tasks hold pinned (admission, for a
        task in ``acquire`` and for a read in ``_admit_read``)."""
        pins = state.pins
        extra = scratch + sum(h.nbytes for h in handles if h.id not in pins)
        return state.pinned_bytes + extra <= state.node.capacity

    def prefetch(self, tasks) -> None:
        """Start reading back the spilled tiles ``tasks`` (ready, about to run) will read,
        each only if the room for it is there without waiting for a write."""
        if not tasks:
            return
        with self.lock:
            for task in tasks:
                for handle, mode in zip(task.handles, task.modes):
                    if (
                        not READS[mode]
                        or HOST in handle.replicas
                        or DISK not in handle.replicas
                        or handle.id in self.reading
                    ):
                        continue
                    host = self.nodes[HOST]
                    if host.pinned_bytes + handle.nbytes > host.node.capacity:
                        return  # the room admitted tasks hold (see ``acquire``)
                    if not self._room_now(handle.nbytes):
                        return
                    self._start_read(handle, task)
                    self.prefetches += 1

    def _room_now(self, nbytes: int) -> bool:
        """Room for ``nbytes`` on host from free room, a pooled buffer of that size or clean
        tiles only (lock held; nothing written, no wait)."""
        state = self.nodes[HOST]
        while state.resident + nbytes > state.node.capacity and not state.has_buffer(nbytes):
            clean_sized, clean, _, _ = self._host_victims(set(), nbytes)
            if clean_sized or clean:
                self._drop(clean_sized or clean, HOST)
                state.evictions += 1
            elif not state.release_one(nbytes):
                return False
        return True

    # -- the I/O threads' side ----------------------------------------------------------------

    def _finish(self, job: SpillJob) -> None:
        """A transfer ended (called in its I/O thread): update the tile's state."""
        handle = job.handle
        with self.lock:
            state = self.nodes[HOST]
            if job.kind == "write":
                del self.writing[handle.id]
                self.leaving -= handle.nbytes
                if job.error is None:
                    self._count("host->disk", handle.nbytes, *job.times)
                    if job.stale or HOST not in handle.replicas:
                        self.spill.remove(job.path)
                    else:
                        handle.replicas[DISK] = job.path
                        self.spilled[handle.id] = handle
                        if job.drop and handle.id not in state.pins:  # I/O: host is limited
                            job.array = None
                            self._drop(handle, HOST)
                            state.evictions += 1
            else:
                del self.reading[handle.id]
                if job.error is None:
                    self._count("disk->host", handle.nbytes, *job.times)
                    handle.replicas[HOST] = job.array
                else:
                    self._untrack(handle.id, handle.nbytes, HOST)
                    data, job.array = job.array, None
                    self._recycle(data, holders=1)
            job.array = None
            job.done = True
            if job.kind == "read":
                self._unpin([(handle, HOST)])  # notifies the waiters
            else:
                self.freed.notify_all()

    def _recycle(self, data, holders: int) -> None:
        """Keep a dropped host buffer for reuse if nothing else references it (lock held);
        not one under malloc's mmap threshold: from the heap, it costs no page faults."""
        if self.spill is None or data.nbytes < MMAP_THRESHOLD:
            return
        state = self.nodes[HOST]
        if owner_alone(data, holders + 1):
            state.give(data)
            state.note_peak()
        elif state.arena is not None and state.arena.owns(data):
            state.arena.disown(data)  # resident till its last view dies: counted as pooled
            state.note_peak()

    def _wait_freed(self, reason: str) -> None:
        """Wait (lock released) for a transfer or a task to end, the time counted in
        ``waits[reason]``: "room" (writes for room), "read" (a tile's read-back), "admission"
        (room that running tasks hold)."""
        start = time.perf_counter()
        self.freed.wait(timeout=1.0)
        self.waits[reason] += time.perf_counter() - start

    def _settle(self, handle: DataHandle) -> None:
        """Wait (lock released) until no transfer of ``handle`` is in flight."""
        while handle.id in self.writing or handle.id in self.reading:
            self.freed.wait(timeout=1.0)
