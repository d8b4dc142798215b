"""The ``Runtime``: sequential task flow, dependency inference, workers, waits and errors."""

from __future__ import annotations

import gc
import itertools
import threading
import time
from collections.abc import Iterable, Sequence

from numtile.config import Config
from numtile.cuda_driver import CudaUnavailableError, gpu_possible
from numtile.runtime.access import READS, WRITES, Access
from numtile.runtime.blas_threads import limit_kernel_blas_threads
from numtile.runtime.codelet import Codelet
from numtile.runtime.handle import HOST, NO_TASKS, DataHandle, InvalidatedError, set_manager
from numtile.runtime.perfmodel import PerfModels, footprint
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
_PRUNE_READERS = 64  # drop finished readers of a handle once this many pile up


class RuntimeShutdownError(RuntimeError):
    """Raised when work is submitted to a runtime that was shut down."""


class Runtime(WorkerSupervision):
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
        self.restrict = self.config.restrict
        self._where: dict[Codelet, frozenset] = {}
        self.gpus = self._start_gpus()
        self.ncuda = len(self.gpus)
        self.kinds = ["cpu"] * self.ncpu + ["cuda"] * self.ncuda  # one per worker
        self.worker_names = [f"cpu{i}" for i in range(self.ncpu)] + [g.name for g in self.gpus]
        self.manager = None
        if self.gpus or self.config.host_mem_limit is not None:
            from numtile.runtime.manager import MemoryManager

            self.manager = MemoryManager(
                self.config.host_mem_limit, self.config.spill_dir, self.gpus
            )
        self.models = PerfModels(self.config.cache_dir)
        self.scheduler = SCHEDULER_CLASSES[self.config.scheduler](
            self.kinds, self.models, self.where
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
        if not self.scheduler.inline:
            for worker, kind in enumerate(self.kinds):
                loop = self._worker_loop if kind == "cpu" else self._cuda_worker_loop
                thread = threading.Thread(
                    target=self._worker_main,
                    args=(loop, worker),
                    name=f"numtile-{self.worker_names[worker]}",
                    daemon=True,
                )
                thread.start()
                self._workers.append(thread)

    def _start_gpus(self) -> list:
        """The GPU memory nodes asked for (``ncuda``, ``restrict``), checked up front."""
        if self.restrict == "cpu" or self.config.ncuda == 0:
            if self.restrict == "cuda":
                raise ValueError("restrict='cuda' but NUMTILE_NCUDA=0 asks for no GPU")
            return []
        if self.config.ncuda < 0 and self.restrict != "cuda" and not gpu_possible():
            return []  # the common CPU-only case: do not even import numba.cuda
        from numtile.runtime.cuda import CudaNode, detect_gpus

        ncuda = detect_gpus(self.config.ncuda)
        if ncuda == 0 and self.restrict == "cuda":
            raise CudaUnavailableError(
                "restrict='cuda' but no GPU was found (set NUMTILE_NCUDA=1 to use Numba's "
                "CUDA simulator under NUMBA_ENABLE_CUDASIM=1)"
            )
        if ncuda and self.config.scheduler == "sync":
            raise ValueError("the sync scheduler runs everything inline on CPU: use eager or dmda")
        return [CudaNode(i, self.config.cuda_mem_limit) for i in range(ncuda)]

    def where(self, codelet: Codelet) -> frozenset:
        """The worker kinds that may run ``codelet`` under ``restrict``."""
        kinds = self._where.get(codelet)
        if kinds is None:
            has_cuda = codelet.cuda is not None and self.ncuda > 0
            if self.restrict == "cuda" and has_cuda:
                kinds = frozenset({"cuda"})
            elif has_cuda and codelet.cpu is not None and not codelet.control:
                kinds = frozenset({"cpu", "cuda"})
            elif has_cuda and not codelet.control:
                kinds = frozenset({"cuda"})
            else:
                kinds = frozenset({"cpu"})
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
        handles = [h for h, _ in accesses]
        modes = [m for _, m in accesses]
        task = Task(codelet, handles, modes, args, priority, next(self._seq), name)
        if self.manager is not None and not codelet.control:
            self._check_fits(task)
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

    def _check_fits(self, task: Task) -> None:
        """Refuse, at submission, a task whose tiles exceed every node it may run on."""
        need = sum({h.id: h.nbytes for h in task.handles}.values())
        kinds = self.where(task.codelet)
        limits = []
        if "cpu" in kinds:
            limits.append(self.config.host_mem_limit)
        if "cuda" in kinds:
            limits += [g.capacity for g in self.gpus]
        if all(limit is not None and need > limit for limit in limits):
            from numtile.runtime.manager import OutOfMemoryError, format_bytes

            raise OutOfMemoryError(
                f"{task.describe()} needs {format_bytes(need)} for its tiles, more than the "
                f"memory limit ({', '.join(format_bytes(x) for x in limits)}): use smaller "
                "tiles or raise NUMTILE_HOST_MEM_LIMIT / NUMTILE_CUDA_MEM_LIMIT"
            )

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
                    buffers, pins = self.manager.acquire(task, HOST)
                task.start = time.perf_counter()
                task.codelet.cpu(*buffers, *task.args)
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

    def _cuda_worker_loop(self, worker: int) -> None:
        """A GPU worker: stage inputs (h2d stream), launch (compute stream), and while the
        kernel runs, take the next task and start uploading its inputs."""
        gpu = self.gpus[worker - self.ncpu]
        with gpu.device:
            task = self.scheduler.pop(worker)
            staged = None
            while task is not None:
                if staged is None and ACC not in task.modes:
                    staged = self._stage(task, gpu, wait=True)
                running = self._launch(task, gpu, staged)
                following = self.scheduler.try_pop(worker)
                following_staged = None
                if following is not None:
                    following_staged = self._stage(following, gpu, wait=False)
                self._finish_cuda(task, worker, gpu, running)
                if following is None:
                    following = self.scheduler.pop(worker)
                task, staged = following, following_staged

    def _stage(self, task: Task, gpu, wait: bool):
        """Pin and upload ``task``'s tiles on ``gpu``: (buffers, pins, event, error) or None
        when it must wait (a prefetch that does not fit yet, or accumulate tiles whose lock
        is taken at launch)."""
        if task.cancelled_by is not None:
            return None
        if not wait and ACC in task.modes:
            return None
        try:
            acquired = self.manager.acquire(task, gpu.id, wait=wait)
        except BaseException as exc:
            return (None, [], None, exc)
        if acquired is None:
            return None
        buffers, pins = acquired
        return (buffers, pins, gpu.event_after_uploads(), None)

    def _launch(self, task: Task, gpu, staged):
        """Launch ``task`` on the compute stream; returns what ``_finish_cuda`` needs."""
        task.state = TaskState.RUNNING
        locks = None
        if task.cancelled_by is not None:
            return None
        if ACC in task.modes:
            locks = _accumulate_locks(task)
            if staged is None:
                staged = self._stage(task, gpu, wait=True)
        buffers, pins, event, error = staged
        task.start = time.perf_counter()
        if error is None:
            try:
                event.wait(gpu.compute)
                task.codelet.cuda(gpu.ops, *buffers, *task.args)
            except BaseException as exc:
                error = exc
        return (pins, locks, error)

    def _finish_cuda(self, task: Task, worker: int, gpu, running) -> None:
        task.worker = worker
        if running is None:  # cancelled before it could run
            task.end = task.start = time.perf_counter()
            self._complete(task, worker, _cancelled(task))
            return
        pins, locks, error = running
        try:  # also after a failed launch: kernels it did start must end before unpinning
            gpu.compute.synchronize()
        except BaseException as exc:  # an error inside the kernel surfaces here
            error = error or exc
        task.end = time.perf_counter()
        failed_writes = None
        if error is not None:
            text = exception_text(error)
            error = task_error(f"{task.describe()} on {gpu.name} raised {text}", error)
            failed_writes = [(h, gpu.id) for h, m in zip(task.handles, task.modes) if WRITES[m]]
        self.manager.release(pins, failed_writes)
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
                self.models.record(footprint(task, self.kinds[worker]), elapsed)
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
    locks = [
        lock
        for _, lock in sorted(
            {h.id: h.lock for h, m in zip(task.handles, task.modes) if m is ACC}.items()
        )
    ]
    for lock in locks:
        lock.acquire()
    return locks


def _root(error: BaseException) -> BaseException:
    """The failure that caused ``error``: itself unless it is a cancellation."""
    if isinstance(error, TaskCancelled) and error.root is not None:
        return error.root
    return error


_INVALIDATE = Codelet("invalidate", cpu=lambda handle: handle.drop_replicas(), control=True)
_WONT_USE = Codelet(
    "wont_use", cpu=lambda manager, handle: manager.evict_early(handle), control=True
)
