"""The ``Runtime``: sequential task flow, dependency inference, workers, waits and errors."""

from __future__ import annotations

import gc
import itertools
import threading
import time
from collections.abc import Iterable, Sequence

from numtile.config import Config
from numtile.runtime.access import READS, WRITES, Access
from numtile.runtime.blas_threads import limit_kernel_blas_threads
from numtile.runtime.codelet import Codelet
from numtile.runtime.handle import HOST, NO_TASKS, DataHandle, InvalidatedError
from numtile.runtime.perfmodel import PerfModels, footprint
from numtile.runtime.scheduler import SCHEDULER_CLASSES
from numtile.runtime.task import Task, TaskCancelled, TaskError, TaskState, task_error
from numtile.runtime.trace import Tracer

R, W, RW, ACC = Access.R, Access.W, Access.RW, Access.ACCUMULATE
DONE, FAILED = TaskState.DONE, TaskState.FAILED
_NO_HANDLES: list = []  # shared, never mutated: the handles of a finished task
_PRUNE_READERS = 64  # drop finished readers of a handle once this many pile up


class RuntimeShutdownError(RuntimeError):
    """Raised when work is submitted to a runtime that was shut down."""


class Runtime:
    """Runs tasks submitted in program order as soon as their inputs are ready.

    Each ``submit`` names the handles a task touches and how; the runtime infers
    read-after-write, write-after-read and write-after-write dependencies and hands ready
    tasks to the scheduler, whose workers (one thread per core) run them.

    >>> import numpy as np
    >>> rt = Runtime(Config(ncpu=2, scheduler="eager"))
    >>> h = DataHandle((3,), np.float64, np.zeros(3))
    >>> inc = Codelet("doctest_inc", cpu=lambda x: np.add(x, 1, out=x))
    >>> tasks = [rt.submit(inc, [(h, Access.RW)]) for _ in range(5)]
    >>> rt.wait_handles([h]); h.host_array().tolist()
    [5.0, 5.0, 5.0]
    >>> rt.shutdown()
    """

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or Config()
        self.ncpu = self.config.ncpu
        self.models = PerfModels(self.config.cache_dir)
        self.scheduler = SCHEDULER_CLASSES[self.config.scheduler](self.ncpu, self.models)
        if self.scheduler.inline:
            self.scheduler.runtime = self
        self._model_aware = self.scheduler.name == "dmda"
        self._lock = threading.Lock()
        self._done = threading.Condition(self._lock)
        self._waiters = 0
        self._seq = itertools.count()
        self._unfinished = 0
        self._errors: list[TaskError] = []
        self.tracer: Tracer | None = None
        self.busy = [0.0] * self.ncpu
        self.started_at = time.perf_counter()
        self.closed = False
        self._blas_limit = limit_kernel_blas_threads(1)
        # every task and tile is a few container objects that live until the task is done:
        # with CPython's default gen-0 threshold (700) the collector would re-scan them
        # over and over, tripling the cost of tiny tasks
        self._old_gc = gc.get_threshold()
        if self.config.gc_threshold > self._old_gc[0]:
            gc.set_threshold(self.config.gc_threshold, *self._old_gc[1:])
        self._workers: list[threading.Thread] = []
        if not self.scheduler.inline:
            for worker in range(self.ncpu):
                thread = threading.Thread(
                    target=self._worker_loop,
                    args=(worker,),
                    name=f"numtile-cpu{worker}",
                    daemon=True,
                )
                thread.start()
                self._workers.append(thread)

    # -- submission -------------------------------------------------------------------------

    def submit(
        self,
        codelet: Codelet,
        accesses: Sequence[tuple[DataHandle, Access]],
        args: tuple = (),
        priority: int = 0,
        name: str | None = None,
    ) -> Task:
        """Submit ``codelet(*tiles, *args)`` touching ``accesses`` [(handle, mode), ...]."""
        if self.closed:
            raise RuntimeShutdownError(
                "the numtile runtime was shut down; call numtile.init() to start a new one"
            )
        handles = [h for h, _ in accesses]
        modes = [m for _, m in accesses]
        task = Task(codelet, handles, modes, args, priority, next(self._seq), name)
        with self._lock:
            predecessors = self._infer_dependencies(task)
            self._unfinished += 1
            pending = 0
            for pred, data in predecessors.items():
                if pred.state is FAILED:
                    if data and task.cancelled_by is None:
                        task.cancelled_by = _root(pred.error)
                else:
                    pred.successors.append((task, data))
                    pending += 1
            task.n_pending = pending
            if pending == 0:
                task.state = TaskState.READY
        if pending == 0:
            self.scheduler.push(task)
        return task

    def _infer_dependencies(self, task: Task) -> dict[Task, bool]:
        """Sequential task flow: update each handle's writer/reader lists.

        Returns the unfinished (or failed) predecessors, each mapped to whether ``task``
        reads data it produced: only such data dependencies propagate a failure, the
        others only order the tasks.
        """
        for handle, mode in zip(task.handles, task.modes):  # check all before changing any
            if handle.invalidated and READS[mode]:
                raise InvalidatedError(
                    f"{handle!r} was invalidated; its contents are gone and cannot be read "
                    f"by {task.describe()}"
                )
        predecessors: dict[Task, bool] = {}
        for handle, mode in zip(task.handles, task.modes):
            if mode is R:
                for pred in handle.writers:
                    if pred.state is not DONE:
                        predecessors[pred] = True
                readers = handle.readers
                if len(readers) >= _PRUNE_READERS:
                    readers = handle.readers = [t for t in readers if not t.finished]
                readers.append(task)
            elif mode is ACC:
                if handle.lock is None:
                    handle.lock = threading.Lock()
                if not handle.accumulating or handle.readers:  # open a new group
                    handle.accumulate_base = handle.writers
                    handle.accumulate_readers = handle.readers
                    handle.writers = []
                    handle.readers = []
                    handle.accumulating = True
                for pred in handle.accumulate_base:
                    if pred.state is not DONE:
                        predecessors[pred] = True
                for pred in handle.accumulate_readers:
                    if pred.state is not DONE and pred not in predecessors:
                        predecessors[pred] = False
                handle.writers.append(task)
            else:  # W or RW
                data = mode is RW
                for pred in handle.writers:
                    if pred.state is not DONE and (data or pred not in predecessors):
                        predecessors[pred] = data
                for pred in handle.readers:
                    if pred.state is not DONE and pred not in predecessors:
                        predecessors[pred] = False
                handle.writers = [task]
                handle.readers = []
                if handle.accumulating:
                    handle.accumulating = False
                    handle.accumulate_base = handle.accumulate_readers = NO_TASKS
                handle.invalidated = False
        predecessors.pop(task, None)  # a task touching one handle twice does not wait on itself
        return predecessors

    # -- execution --------------------------------------------------------------------------

    def _worker_loop(self, worker: int) -> None:
        pop = self.scheduler.pop
        run = self._run
        while True:
            task = pop(worker)
            if task is None:
                return
            run(task, worker)

    def _run(self, task: Task, worker: int) -> None:
        """Execute one ready task on ``worker`` and release its successors."""
        task.worker = worker
        task.state = TaskState.RUNNING
        error = None
        locks = None
        if task.cancelled_by is not None:
            error = TaskCancelled(
                f"{task.describe()} was cancelled because a task it depends on failed: "
                f"{task.cancelled_by}",
                root=task.cancelled_by,
            )
        else:
            if ACC in task.modes:
                locks = sorted(
                    {h.id: h.lock for h, m in zip(task.handles, task.modes) if m is ACC}.items()
                )
                for _, lock in locks:
                    lock.acquire()
            try:
                buffers = [
                    h.acquire(HOST, WRITES[m], READS[m]) for h, m in zip(task.handles, task.modes)
                ]
                task.start = time.perf_counter()
                task.codelet.cpu(*buffers, *task.args)
                task.end = time.perf_counter()
            except Exception as exc:  # re-raised at the next wait, naming the task
                task.end = time.perf_counter()
                error = task_error(f"{task.describe()} raised {type(exc).__name__}: {exc}", exc)
            finally:
                if locks is not None:
                    for _, lock in locks:
                        lock.release()
        self._complete(task, worker, error)

    def _complete(self, task: Task, worker: int, error: BaseException | None) -> None:
        elapsed = task.end - task.start
        codelet = task.codelet
        ready = []
        with self._lock:
            if error is None:
                task.state = TaskState.DONE
                codelet.calls += 1
                codelet.seconds += elapsed
                self.busy[worker] += elapsed
                for handle, mode in zip(task.handles, task.modes):
                    if handle.error is not None and (mode is W or mode is RW):
                        handle.error = None
            else:
                task.state = TaskState.FAILED
                task.error = error
                self._errors.append(error)
                for handle, mode in zip(task.handles, task.modes):
                    if WRITES[mode]:
                        handle.error = error
            for succ, data in task.successors:
                if error is not None and data and succ.cancelled_by is None:
                    succ.cancelled_by = _root(error)
                succ.n_pending -= 1
                if succ.n_pending == 0:
                    succ.state = TaskState.READY
                    ready.append(succ)
            task.successors = []
            self._unfinished -= 1
            if self._waiters:
                self._done.notify_all()
        if self._model_aware:
            self.scheduler.finished(task, worker)
            if error is None:
                self.models.record(footprint(task), elapsed)
        if error is None and codelet.flops is not None:
            codelet.total_flops += codelet.flops(*[h.shape for h in task.handles], *task.args)
        if self.tracer is not None:
            self.tracer.record(task)
        # a finished task lives on as its handles' last writer or reader: drop its
        # references to the handles (no cycle, so dead tiles are freed and recycled at once)
        task.handles = _NO_HANDLES
        task.args = ()
        for succ in ready:
            if self.closed:  # nothing runs any more: cancel what became ready
                succ.end = succ.start
                self._complete(
                    succ,
                    worker,
                    RuntimeShutdownError(f"{succ.describe()} cancelled by runtime shutdown"),
                )
            else:
                self.scheduler.push(succ)

    # -- waiting ----------------------------------------------------------------------------

    def wait_all(self) -> None:
        """Block until every submitted task has finished; re-raise the first task error."""
        with self._lock:
            self._waiters += 1
            try:
                while self._unfinished:
                    self._done.wait()
            finally:
                self._waiters -= 1
        self.raise_errors()

    def wait_handles(self, handles: Iterable[DataHandle]) -> None:
        """Block until the tasks that write ``handles`` have finished (not other tasks)."""
        with self._lock:
            pending = [t for h in handles for t in h.writers if not t.finished]
            if pending:
                self._waiters += 1
                try:
                    for task in pending:
                        while not task.finished:
                            self._done.wait()
                finally:
                    self._waiters -= 1
        for handle in handles:
            if handle.invalidated:
                raise InvalidatedError(f"{handle!r} was invalidated; its contents are gone")
            if handle.error is not None:
                root = _root(handle.error)
                self._forget_error(root)
                raise root

    def raise_errors(self) -> None:
        """Raise (and clear) the first recorded task error, counting the others."""
        with self._lock:
            errors, self._errors = self._errors, []
        if errors:
            roots = [e for e in errors if not isinstance(e, TaskCancelled)] or errors
            first = roots[0]
            if len(errors) > 1:
                first.add_note(f"{len(errors) - 1} more task(s) failed or were cancelled")
            raise first

    def _forget_error(self, root: BaseException) -> None:
        """Drop ``root`` and the cancellations it caused: they have been reported."""
        with self._lock:
            self._errors = [e for e in self._errors if _root(e) is not root]

    # -- hints ------------------------------------------------------------------------------

    def invalidate(self, handle: DataHandle) -> None:
        """Contents no longer needed: drop every replica once pending readers are done."""
        self.submit(_INVALIDATE, [(handle, W)], args=(handle,))
        handle.invalidated = True

    def wont_use(self, handle: DataHandle) -> None:
        """Hint that ``handle`` will not be used soon: first in line for eviction."""
        handle.wont_use_hint = True

    # -- lifecycle --------------------------------------------------------------------------

    def shutdown(self, wait: bool = True) -> None:
        """Stop the workers (finishing queued work if ``wait``) and persist the models."""
        if self.closed:
            return
        if wait:
            try:
                self.wait_all()
            except TaskError:
                pass  # errors not yet waited for are dropped with the runtime
        self.closed = True
        left = self.scheduler.stop()
        for task in left:
            error = RuntimeShutdownError(f"{task.describe()} cancelled by runtime shutdown")
            self._complete(task, max(task.worker, 0), error)
        for thread in self._workers:
            thread.join(timeout=5.0)
        self._workers = []
        self._blas_limit.restore_original_limits()
        gc.set_threshold(*self._old_gc)
        self.models.save()

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.started_at


def _root(error: BaseException) -> BaseException:
    """The failure that caused ``error``: itself unless it is a cancellation."""
    if isinstance(error, TaskCancelled) and error.root is not None:
        return error.root
    return error


_INVALIDATE = Codelet("invalidate", cpu=lambda tile, handle: handle.drop_replicas())
