"""Schedulers: ``eager`` (one priority queue), ``dmda`` (earliest expected finish), ``sync``.

A scheduler knows each worker's kind (a key of the backends table: ``cpu``, ``cuda``, ...)
and memory node (``HOST`` for a worker computing in host RAM), and asks the runtime's
``where(codelet)`` which kinds may run a task; it never tests a kind by name. ``pop``
blocks until a task is handed to the worker (None at shutdown); ``try_pop`` never blocks
(GPU workers use it to take their next task early and prefetch its inputs).
"""

from __future__ import annotations

import heapq
import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from numtile.runtime.handle import DISK, HOST
from numtile.runtime.perfmodel import PerfModels, footprint
from numtile.runtime.task import Task

if TYPE_CHECKING:
    from numtile.runtime.engine import Runtime

# assumed bandwidths (bytes/s) until transfers have been measured: host <-> a device node,
# host <-> spill files
_DEVICE_BANDWIDTH = 12e9
_DISK_BANDWIDTH = 1e9


class EagerScheduler:
    """One priority queue per set of worker kinds a task may use; an idle worker takes the
    best task it can run. With CPU workers only this is a single shared queue."""

    name = "eager"
    inline = False

    def __init__(
        self, kinds: list[str], models: PerfModels, where: Callable, nodes: list[int] | None = None
    ) -> None:
        self._kinds = kinds
        self._where = where
        self._mixed = len(set(kinds)) > 1
        self._heaps: dict[frozenset, list] = {}
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        self._tokens: queue.SimpleQueue = queue.SimpleQueue()  # one per task (single queue)
        self._stopping = False

    def push(self, task: Task) -> None:
        key = self._where(task.codelet) if self._mixed else None
        with self._lock:
            heapq.heappush(self._heaps.setdefault(key, []), (-task.priority, task.seq, task))
            if self._mixed:
                self._ready.notify_all()
        if not self._mixed:
            self._tokens.put(None)

    def _take(self, worker: int) -> Task | None:
        """Pop the best task ``worker`` may run (lock held)."""
        if not self._mixed:
            heap = self._heaps.get(None)
            return heapq.heappop(heap)[2] if heap else None
        kind = self._kinds[worker]
        best = None
        for kinds, heap in self._heaps.items():
            if heap and kind in kinds and (best is None or heap[0] < best[0]):
                best = heap
        return heapq.heappop(best)[2] if best is not None else None

    def pop(self, worker: int) -> Task | None:
        if not self._mixed:
            self._tokens.get()
            with self._lock:
                return None if self._stopping else self._take(worker)
        with self._lock:
            while not self._stopping:
                task = self._take(worker)
                if task is not None:
                    return task
                self._ready.wait()
            return None

    def try_pop(self, worker: int, timeout: float = 0.0) -> Task | None:
        """A task for ``worker`` if one is ready within ``timeout`` seconds, else None."""
        if not self._mixed:
            try:
                self._tokens.get(timeout=timeout) if timeout else self._tokens.get_nowait()
            except queue.Empty:
                return None
        with self._lock:
            if self._stopping:
                return None
            task = self._take(worker)
            if task is None and timeout and self._mixed:
                self._ready.wait(timeout)
                task = None if self._stopping else self._take(worker)
            return task

    def peek(self, worker: int) -> list[Task]:
        """The tasks likely to run next (the best ones of the shared queue; none when
        workers of several kinds share it)."""
        if self._mixed:
            return []
        with self._lock:
            return _best(self._heaps.get(None))

    def finished(self, task: Task, worker: int) -> None:
        pass

    def stop(self) -> list[Task]:
        with self._lock:
            self._stopping = True
            left = [entry[2] for heap in self._heaps.values() for entry in heap]
            self._heaps.clear()
            self._ready.notify_all()
        for _ in self._kinds:
            self._tokens.put(None)
        return left


class DmdaScheduler:
    """Deque-model-data-aware: each task goes to the worker with the earliest expected finish.

    Expected durations come from the history performance models (keyed by codelet, tile
    shapes and worker kind). A worker's expected finish is the sum of the estimates of the
    tasks queued on or running at it, plus the time to move the task's tiles that are not
    yet valid in the worker's memory node. While a codelet is uncalibrated on a kind of
    worker its estimate is zero there, so it gets tried; ties go to the shorter queue.
    """

    name = "dmda"
    inline = False

    def __init__(
        self, kinds: list[str], models: PerfModels, where: Callable, nodes: list[int] | None = None
    ) -> None:
        self.models = models
        self._kinds = kinds
        self._where = where
        self._nodes = list(nodes) if nodes is not None else [HOST] * len(kinds)
        # the kind of each device node, and the bandwidth of its link with host (by kind)
        self._node_kinds = {n: k for n, k in zip(self._nodes, kinds) if n != HOST}
        self._host_kinds = frozenset(k for n, k in zip(self._nodes, kinds) if n == HOST)
        self.bandwidth = {"disk": _DISK_BANDWIDTH}
        for kind in self._node_kinds.values():
            self.bandwidth[kind] = _DEVICE_BANDWIDTH
        self._lock = threading.Lock()
        self._heaps: list[list[tuple[int, int, Task]]] = [[] for _ in kinds]
        self._tokens = [queue.SimpleQueue() for _ in kinds]
        self._expected = [0.0] * len(kinds)  # seconds of queued + running work per worker
        self._estimates: dict[int, float] = {}  # task seq -> estimate charged to its worker
        self._stopping = False

    def transfer_cost(self, task: Task, worker: int) -> float:
        """Seconds to bring ``task``'s tiles that are not valid on the worker's node there."""
        node = self._nodes[worker]
        seconds = 0.0
        for handle in task.handles:
            replicas = handle.replicas
            if node in replicas or not replicas:
                continue
            if HOST not in replicas and DISK in replicas and len(replicas) == 1:
                seconds += handle.nbytes / self.bandwidth["disk"]  # read back from disk first
                if node == HOST:
                    continue
            device = node if node != HOST else next((n for n in replicas if n > HOST), None)
            link = self._node_kinds.get(device)
            bandwidth = self.bandwidth[link] if link is not None else _DEVICE_BANDWIDTH
            seconds += handle.nbytes / bandwidth  # one host <-> device copy
        return seconds

    def push(self, task: Task) -> None:
        allowed = self._where(task.codelet)
        estimates = {}
        for kind in allowed:
            estimate = self.models.estimate(footprint(task, kind))
            estimates[kind] = estimate or 0.0
        mixed = len(allowed) > 1 or not allowed <= self._host_kinds
        with self._lock:
            best, best_key = -1, None
            for worker, expected in enumerate(self._expected):
                kind = self._kinds[worker]
                if kind not in allowed:
                    continue
                finish = expected + estimates[kind]
                if mixed:
                    finish += self.transfer_cost(task, worker)
                key = (finish, len(self._heaps[worker]))
                if best_key is None or key < best_key:
                    best, best_key = worker, key
            estimate = estimates[self._kinds[best]]
            self._expected[best] += estimate
            self._estimates[task.seq] = estimate
            heapq.heappush(self._heaps[best], (-task.priority, task.seq, task))
        self._tokens[best].put(None)

    def pop(self, worker: int) -> Task | None:
        self._tokens[worker].get()
        with self._lock:
            if self._stopping or not self._heaps[worker]:
                return None
            return heapq.heappop(self._heaps[worker])[2]

    def try_pop(self, worker: int, timeout: float = 0.0) -> Task | None:
        tokens = self._tokens[worker]
        try:
            tokens.get(timeout=timeout) if timeout else tokens.get_nowait()
        except queue.Empty:
            return None
        with self._lock:
            if self._stopping or not self._heaps[worker]:
                return None
            return heapq.heappop(self._heaps[worker])[2]

    def peek(self, worker: int) -> list[Task]:
        """The tasks ``worker`` is likely to run next (the best of its queue)."""
        with self._lock:
            return _best(self._heaps[worker])

    def finished(self, task: Task, worker: int) -> None:
        with self._lock:
            self._expected[worker] = max(
                0.0, self._expected[worker] - self._estimates.pop(task.seq, 0.0)
            )

    def stop(self) -> list[Task]:
        with self._lock:
            self._stopping = True
            left = [entry[2] for heap in self._heaps for entry in heap]
            for heap in self._heaps:
                heap.clear()
        for tokens in self._tokens:
            tokens.put(None)
        return left


class SyncScheduler:
    """Runs every task inline in the submitting thread, in program order (for debugging)."""

    name = "sync"
    inline = True

    def __init__(
        self, kinds: list[str], models: PerfModels, where: Callable, nodes: list[int] | None = None
    ) -> None:
        self.runtime: Runtime | None = None
        self._kinds = kinds
        self._where = where
        self._worker: dict = {}  # codelet -> the first worker of a kind that may run it

    def push(self, task: Task) -> None:
        assert self.runtime is not None
        worker = self._worker.get(task.codelet)
        if worker is None:
            allowed = self._where(task.codelet)
            worker = next(w for w, kind in enumerate(self._kinds) if kind in allowed)
            self._worker[task.codelet] = worker
        self.runtime._run(task, worker=worker)

    def pop(self, worker: int) -> Task | None:
        return None

    def try_pop(self, worker: int, timeout: float = 0.0) -> Task | None:
        return None

    def peek(self, worker: int) -> list[Task]:
        return []

    def finished(self, task: Task, worker: int) -> None:
        pass

    def stop(self) -> list[Task]:
        return []


def _best(heap: list | None) -> list[Task]:
    """The best task of a priority heap and the better of its two children (the next best)."""
    if not heap:
        return []
    return [heap[0][2]] + ([min(heap[1:3])[2]] if len(heap) > 1 else [])


SCHEDULER_CLASSES = {cls.name: cls for cls in (EagerScheduler, DmdaScheduler, SyncScheduler)}
