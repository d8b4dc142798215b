"""The ``Runtime``: sequential task flow, workers of every kind, waits and errors.

Which kinds of worker exist, what their codelets receive and where their data lives comes
from the backends table the runtime is started with (``runtime/kinds.py``); dependency
inference is in ``runtime/dependencies.py``, the GPU worker's loop in
``runtime/gpu_worker.py``.
"""

from __future__ import annotations

import functools
import gc
import itertools
import threading
import time
from collections.abc import Iterable, Sequence

from numtile.config import Config
from numtile.runtime import handle as data_handles
from numtile.runtime.access import WRITES, Access
from numtile.runtime.blas_threads import limit_kernel_blas_threads
from numtile.runtime.codelet import Codelet
from numtile.runtime.dependencies import infer_dependencies
from numtile.runtime.handle import HOST, DataHandle, InvalidatedError, set_manager
from numtile.runtime.kinds import Backends, default_backends, host_kind
from numtile.runtime.perfmodel import PerfModels, footprint
from numtile.runtime.pool import POOL
from numtile.runtime.scheduler import SCHEDULER_CLASSES
from numtile.runtime.supervision import WorkerDiedError, WorkerSupervision
from numtile.runtime.task import (
    Task,
    TaskCancelled,
    TaskError,
    TaskState,
    exception_text,
    raisable,
    task_error,
)
from numtile.runtime.trace import Tracer

R, W, RW, ACC = Access.R, Access.W, Access.RW, Access.ACCUMULATE
DONE, FAILED = TaskState.DONE, TaskState.FAILED
_NO_HANDLES: list = []  # shared, never mutated: the handles of a finished task


class RuntimeShutdownError(RuntimeError):
    """Raised when work is submitted to a runtime that was shut down."""


class Runtime(WorkerSupervision):
    """Runs tasks submitted in program order as soon as their inputs are ready.

    Each ``submit`` names the handles a task touches and how; the runtime infers
    read-after-write, write-after-read and write-after-write dependencies and hands ready
    tasks to the scheduler, whose workers (one thread per core, one per GPU) run them.
    ``backends`` is the table of worker kinds (``numtile.backends.BACKENDS`` by default).
    ``runtime.ncpu``, ``runtime.ncuda``, ... count the workers of each kind.

    >>> import numpy as np
    >>> rt = Runtime(Config(ncpu=2, scheduler="eager"))
    >>> h = DataHandle((3,), np.float64, np.zeros(3))
    >>> inc = Codelet("doctest_inc", kernel=lambda ops, x: np.add(x, 1, out=x))
    >>> tasks = [rt.submit(inc, [(h, Access.RW)]) for _ in range(5)]
    >>> rt.wait_handles([h]); h.host_array().tolist()
    [5.0, 5.0, 5.0]
    >>> rt.shutdown()
    """

    def __init__(self, config: Config | None = None, backends: Backends | None = None) -> None:
        self.config = config or Config()
        self.backends = dict(default_backends() if backends is None else backends)
        self.host_kind = host_kind(self.backends)
        self.restrict = self.config.restrict
        computing = sorted(kind for kind, row in self.backends.items() if row.generic)
        if self.restrict is not None and self.restrict not in computing:
            raise ValueError(
                f"unknown restrict value {self.restrict!r}; expected one of {computing} or unset"
            )
        self._where: dict[Codelet, frozenset] = {}
        self.distributed = None  # the owner-computes front under MPI (runtime/distributed/)
        self.failure_listener = None  # called with (task, error) when a task raises
        workers = self._start_workers()
        self.kinds = [kind for kind, _ in workers]  # one per worker
        self.nodes = [node for _, node in workers]  # memory node per worker, None: host RAM
        # the nodes whose memory holds tiles (the MPI node moves tiles but keeps them on host)
        self.devices = [n for n in self.nodes if n is not None and getattr(n, "holds_tiles", True)]
        self.worker_counts = {kind: self.kinds.count(kind) for kind in self.backends}
        self.ops = [self.backends[kind].ops(node) for kind, node in workers]
        self.worker_names = [
            f"{kind}{self.kinds[:worker].count(kind)}" if node is None else node.name
            for worker, (kind, node) in enumerate(workers)
        ]
        # the byte limits a task's tiles must fit in, per kind: host RAM's or each device's
        self._limits = {kind: [] for kind in self.worker_counts}
        for kind, node in workers:
            limits = self._limits[kind]
            if node is not None:
                limits.append(node.capacity)
            elif not limits:
                limits.append(self.config.host_mem_limit)
        self.manager = None
        if self.devices or self.config.host_mem_limit is not None:
            from numtile.runtime.memory import MemoryManager

            self.manager = MemoryManager(
                self.config.host_mem_limit,
                self.config.spill_dir,
                self.devices,
                arena=self.config.host_arena,
            )
        POOL.resize(self.config.pool_bytes)
        self.models = PerfModels(self.config.cache_dir)
        self.scheduler = SCHEDULER_CLASSES[self.config.scheduler](
            self.kinds, self.models, self.where, [HOST if n is None else n.id for n in self.nodes]
        )
        if self.scheduler.inline:
            self.scheduler.runtime = self
        self._model_aware = self.scheduler.name == "dmda"
        self._lock = threading.Lock()
        self._done = threading.Condition(self._lock)
        self._waiters = 0
        self._seq = itertools.count()
        self._unfinished = 0
        self._errors: list[TaskError] = []
        self._broken: WorkerDiedError | None = None  # set when a worker thread died
        self.tracer: Tracer | None = None
        self.busy = [0.0] * len(self.kinds)
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
        if self.manager is not None:
            set_manager(self.manager)
        for node in self.nodes:
            attach = getattr(node, "attach", None)
            if attach is not None:  # a node that changes how tasks are submitted (MPI's)
                attach(self)
        if not self.scheduler.inline:
            for worker, node in enumerate(self.nodes):
                if node is None:  # computes in host RAM
                    loop = self._worker_loop
                else:  # the node's own loop (a GPU's: stage, launch, prefetch)
                    loop = functools.partial(node.run_worker, self)
                thread = threading.Thread(
                    target=self._worker_main,
                    args=(loop, worker),
                    name=f"numtile-{self.worker_names[worker]}",
                    daemon=True,
                )
                thread.start()
                self._workers.append(thread)

    def __getattr__(self, name: str):
        # ``ncpu``, ``ncuda``, ...: the number of workers of each kind, as Config names them
        counts = self.__dict__.get("worker_counts")
        if counts is not None and name.startswith("n") and name[1:] in counts:
            return counts[name[1:]]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _start_workers(self) -> list[tuple[str, object]]:
        """(kind, memory node or None for host RAM) per worker, in table order, checked up
        front: under ``restrict`` only that kind and the host kind start."""
        inline = SCHEDULER_CLASSES[self.config.scheduler].inline
        workers = []
        for kind, backend in self.backends.items():
            if self.restrict is not None and kind != self.restrict and not backend.host:
                continue
            count = backend.workers(self.config, kind == self.restrict)
            if count and backend.start_node is not None and inline:
                raise ValueError(
                    f"the {self.config.scheduler} scheduler runs everything inline in the "
                    f"submitting thread, with no {kind} worker: use eager or dmda"
                )
            for index in range(count):
                node = None
                if backend.start_node is not None:
                    node = backend.start_node(index, self.config)
                    node.id = 1 + sum(n is not None for _, n in workers)  # 0 is host RAM
                workers.append((kind, node))
        return workers

    def where(self, codelet: Codelet) -> frozenset:
        """The worker kinds that may run ``codelet`` under ``restrict``."""
        kinds = self._where.get(codelet)
        if kinds is None:
            if codelet.control:
                kinds = frozenset({self.host_kind})
            else:
                running = {k for k, n in self.worker_counts.items() if n}
                kinds = frozenset(
                    k
                    for k in running
                    if (
                        codelet.implementation(k)
                        if self.backends[k].generic
                        else k in codelet.implementations
                    )
                )
                if self.restrict in kinds:
                    kinds = frozenset({self.restrict})
                if not kinds:
                    raise ValueError(
                        f"codelet {codelet.name!r} has no implementation for the workers "
                        f"running ({', '.join(sorted(running))}); it has "
                        f"{', '.join(sorted(codelet.implementations))}"
                    )
            self._where[codelet] = kinds
        return kinds

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
        if self._broken is not None:
            self._raise_broken()
        if codelet not in self._where:
            self.where(codelet)  # a codelet nothing here can run is refused now
        if data_handles.DEFERRED_READS[0]:  # tensors yet to run may read tiles it writes
            data_handles.materialise_readers(accesses)
        handles, modes = [h for h, _ in accesses], [m for _, m in accesses]
        task = Task(codelet, handles, modes, args, priority, next(self._seq), name)
        if self.manager is not None and not codelet.control:
            self._check_fits(task)
        with self._lock:
            predecessors = infer_dependencies(task)
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

    def _check_fits(self, task: Task) -> None:
        """Refuse, at submission, a task whose tiles and scratch exceed every node it may use."""
        from numtile.runtime.room import check_fits

        check_fits(
            task, [limit for kind in self.where(task.codelet) for limit in self._limits[kind]]
        )

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
            error = _cancelled(task)
        else:
            if ACC in task.modes:
                locks = _accumulate_locks(task)
            pins = None
            try:
                if task.codelet.control:
                    buffers = []
                elif self.manager is None:
                    buffers = [h.host_replica() for h in task.handles]
                else:
                    if self.manager.spilled:  # the next tasks' spilled tiles, read meanwhile
                        self.manager.prefetch(self.scheduler.peek(worker))
                    buffers, pins = self.manager.acquire(task, HOST)
                task.start = time.perf_counter()
                kernel = task.codelet.implementation(self.kinds[worker])
                kernel(self.ops[worker], *buffers, *task.args)
                task.end = time.perf_counter()
            except BaseException as exc:  # even SystemExit: re-raised at the next wait
                task.end = time.perf_counter()
                error = task_error(f"{task.describe()} raised {exception_text(exc)}", exc)
            finally:
                buffers = None  # the tiles are unpinned now: let eviction really free them
                if pins is not None:
                    self.manager.release(pins)
                for lock in locks or ():
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
                if self.failure_listener is not None and not isinstance(error, TaskCancelled):
                    self.failure_listener(task, error)
            for succ, data in task.successors:
                if error is not None and data and succ.cancelled_by is None:
                    succ.cancelled_by = _root(error)
                succ.n_pending -= 1
                if succ.n_pending == 0:
                    succ.state = TaskState.READY
                    ready.append(succ)
            task.successors = []
            self._unfinished -= 1
            if self._waiters and (task.awaited or not self._unfinished):  # not every task
                self._done.notify_all()
        if self._model_aware:
            self.scheduler.finished(task, worker)
            if error is None:
                self.models.record(footprint(task, self.kinds[worker]), elapsed)
        if error is None and codelet.flops is not None:
            codelet.total_flops += codelet.task_flops(task.handles, task.args)
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
        data_handles.materialise_all()  # deferred tensors submit their tasks first
        with self._lock:
            if self._broken is not None:
                self._raise_broken()
            self._waiters += 1
            try:
                while self._unfinished:
                    self._wait_for_a_task()
            finally:
                self._waiters -= 1
        self.raise_errors()

    def wait_handles(self, handles: Iterable[DataHandle]) -> None:
        """Block until the tasks that write ``handles`` have finished (not other tasks)."""
        with self._lock:
            if self._broken is not None:
                self._raise_broken()
            pending = [t for h in handles for t in h.writers if not t.finished]
            for task in pending:  # their ends wake the waiters (``_complete``)
                task.awaited = True
            if pending:
                self._waiters += 1
                try:
                    for task in pending:
                        while not task.finished:
                            self._wait_for_a_task()
                finally:
                    self._waiters -= 1
        for handle in handles:
            if handle.invalidated:
                raise InvalidatedError(f"{handle!r} was invalidated; its contents are gone")
            if handle.error is not None:
                root = _root(handle.error)
                self._forget_error(root)
                raise raisable(root)

    def raise_errors(self) -> None:
        """Raise (and clear) the first recorded task error, counting the others."""
        with self._lock:
            errors, self._errors = self._errors, []
        if errors:
            roots = [e for e in errors if not isinstance(e, TaskCancelled)] or errors
            first = raisable(roots[0])
            if len(errors) > 1:
                first.add_note(f"{len(errors) - 1} more task(s) failed or were cancelled")
            try:
                raise first
            finally:
                del first  # this frame is in its traceback: no cycle keeping the caller's tiles

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
        """Hint that ``handle`` will not be used soon: once its pending tasks are done it
        leaves the GPUs (written back to host) and is first in line for eviction on host."""
        if self.manager is not None:
            self.submit(_WONT_USE, [(handle, R)], args=(self.manager, handle))

    # -- lifecycle --------------------------------------------------------------------------

    def shutdown(self, wait: bool = True) -> None:
        """Stop the workers (finishing queued work if ``wait``) and persist the models."""
        if self.closed:
            return
        if wait:
            try:
                self.wait_all()
            except (TaskError, WorkerDiedError):
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
        if self.manager is not None:
            self.manager.close(bring_home=wait)
            set_manager(None)
        gc.set_threshold(*self._old_gc)
        self.models.save()

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.started_at


def _cancelled(task: Task) -> TaskCancelled:
    return TaskCancelled(
        f"{task.describe()} was cancelled because a task it depends on failed: {task.cancelled_by}",
        root=task.cancelled_by,
    )


def _accumulate_locks(task: Task) -> list:
    """Take the locks of ``task``'s ACCUMULATE tiles, in handle order (no deadlock)."""
    by_id = {h.id: h.lock for h, m in zip(task.handles, task.modes) if m is ACC}
    locks = [lock for _, lock in sorted(by_id.items())]
    for lock in locks:
        lock.acquire()
    return locks


def _root(error: BaseException) -> BaseException:
    """The failure that caused ``error``: itself unless it is a cancellation."""
    if isinstance(error, TaskCancelled) and error.root is not None:
        return error.root
    return error


_INVALIDATE = Codelet("invalidate", kernel=lambda ops, handle: handle.drop_replicas(), control=True)
_WONT_USE = Codelet(
    "wont_use", kernel=lambda ops, manager, handle: manager.evict_early(handle), control=True
)
