"""Schedulers: ``eager`` (one priority queue), ``dmda`` (earliest expected finish), ``sync``."""

from __future__ import annotations

import heapq
import queue
import threading
from typing import TYPE_CHECKING

from numtile.runtime.perfmodel import PerfModels, footprint
from numtile.runtime.task import Task

if TYPE_CHECKING:
    from numtile.runtime.engine import Runtime


class EagerScheduler:
    """One priority queue shared by all workers: the first idle worker takes the top task."""

    name = "eager"
    inline = False

    def __init__(self, nworkers: int, models: PerfModels) -> None:
        self._heap: list[tuple[int, int, Task]] = []
        self._lock = threading.Lock()
        self._tokens: queue.SimpleQueue = queue.SimpleQueue()  # one token per queued task
        self._nworkers = nworkers
        self._stopping = False

    def push(self, task: Task) -> None:
        with self._lock:
            heapq.heappush(self._heap, (-task.priority, task.seq, task))
        self._tokens.put(None)

    def pop(self, worker: int) -> Task | None:
        self._tokens.get()
        with self._lock:
            if self._stopping or not self._heap:
                return None
            return heapq.heappop(self._heap)[2]

    def finished(self, task: Task, worker: int) -> None:
        pass

    def stop(self) -> list[Task]:
        with self._lock:
            self._stopping = True
            left = [entry[2] for entry in self._heap]
            self._heap.clear()
        for _ in range(self._nworkers):
            self._tokens.put(None)
        return left


class DmdaScheduler:
    """Deque-model-data-aware: each task goes to the worker with the earliest expected finish.

    Expected durations come from the history performance models (keyed by codelet and tile
    shapes). A worker's expected finish is the sum of the estimates of the tasks queued on
    or running at it. Data transfer costs are zero between CPU workers sharing host memory.
    While a codelet is uncalibrated, ties are broken by queue length.
    """

    name = "dmda"
    inline = False

    def __init__(self, nworkers: int, models: PerfModels) -> None:
        self.models = models
        self._lock = threading.Lock()
        self._heaps: list[list[tuple[int, int, Task]]] = [[] for _ in range(nworkers)]
        self._tokens = [queue.SimpleQueue() for _ in range(nworkers)]
        self._expected = [0.0] * nworkers  # seconds of queued + running work per worker
        self._estimates: dict[int, float] = {}  # task seq -> estimate charged to its worker
        self._stopping = False

    def transfer_cost(self, task: Task, worker: int) -> float:
        return 0.0  # CPU workers all read host memory directly

    def push(self, task: Task) -> None:
        estimate = self.models.estimate(footprint(task)) or 0.0
        with self._lock:
            best, best_key = 0, None
            for worker, expected in enumerate(self._expected):
                finish = expected + estimate + self.transfer_cost(task, worker)
                key = (finish, len(self._heaps[worker]))
                if best_key is None or key < best_key:
                    best, best_key = worker, key
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

    def __init__(self, nworkers: int, models: PerfModels) -> None:
        self.runtime: Runtime | None = None

    def push(self, task: Task) -> None:
        assert self.runtime is not None
        self.runtime._run(task, worker=0)

    def pop(self, worker: int) -> Task | None:
        return None

    def finished(self, task: Task, worker: int) -> None:
        pass

    def stop(self) -> list[Task]:
        return []


SCHEDULER_CLASSES = {cls.name: cls for cls in (EagerScheduler, DmdaScheduler, SyncScheduler)}
