"""The loop of a GPU worker: stage a task's tiles, launch it, prefetch the next one.

A GPU worker stages a task's inputs on its node's host-to-device stream, launches the
kernel on the compute stream (which waits for the uploads through an event) and, while the
kernel runs, takes its next task and starts uploading that task's inputs, so uploads
overlap compute. ``CudaNode.run_worker`` runs ``cuda_worker_loop``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from numtile.runtime.access import WRITES, Access
from numtile.runtime.engine import _accumulate_locks, _cancelled
from numtile.runtime.task import Task, TaskState, exception_text, task_error

if TYPE_CHECKING:
    from numtile.runtime.cuda import CudaNode
    from numtile.runtime.engine import Runtime

ACC = Access.ACCUMULATE


def cuda_worker_loop(runtime: Runtime, worker: int, gpu: CudaNode) -> None:
    """A GPU worker: stage inputs (h2d stream), launch (compute stream), and while the
    kernel runs, take the next task and start uploading its inputs."""
    with gpu.device:
        task = runtime.scheduler.pop(worker)
        staged = None
        while task is not None:
            if staged is None and ACC not in task.modes:
                staged = _stage(runtime, task, gpu, wait=True)
            running = _launch(runtime, task, worker, gpu, staged)
            following = runtime.scheduler.try_pop(worker)
            following_staged = None
            if following is not None:
                following_staged = _stage(runtime, following, gpu, wait=False)
            _finish_cuda(runtime, task, worker, gpu, running)
            if following is None:
                following = runtime.scheduler.pop(worker)
            task, staged = following, following_staged


def _stage(runtime: Runtime, task: Task, gpu: CudaNode, wait: bool):
    """Pin and upload ``task``'s tiles on ``gpu``: (buffers, pins, event, error) or None
    when it must wait (a prefetch that does not fit yet, or accumulate tiles whose lock
    is taken at launch)."""
    if task.cancelled_by is not None:
        return None
    if not wait and ACC in task.modes:
        return None
    try:
        acquired = runtime.manager.acquire(task, gpu.id, wait=wait)
    except BaseException as exc:
        return (None, [], None, exc)
    if acquired is None:
        return None
    buffers, pins = acquired
    return (buffers, pins, gpu.event_after_uploads(), None)


def _launch(runtime: Runtime, task: Task, worker: int, gpu: CudaNode, staged):
    """Launch ``task`` on the compute stream; returns what ``_finish_cuda`` needs."""
    task.state = TaskState.RUNNING
    locks = None
    if task.cancelled_by is not None:
        return None
    if ACC in task.modes:
        locks = _accumulate_locks(task)
        if staged is None:
            staged = _stage(runtime, task, gpu, wait=True)
    buffers, pins, event, error = staged
    task.start = time.perf_counter()
    if error is None:
        try:
            event.wait(gpu.compute)
            kernel = task.codelet.implementation(runtime.kinds[worker])
            kernel(runtime.ops[worker], *buffers, *task.args)
        except BaseException as exc:
            error = exc
    return (pins, locks, error)


def _finish_cuda(runtime: Runtime, task: Task, worker: int, gpu: CudaNode, running) -> None:
    task.worker = worker
    if running is None:  # cancelled before it could run
        task.end = task.start = time.perf_counter()
        runtime._complete(task, worker, _cancelled(task))
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
    runtime.manager.release(pins, failed_writes)
    for lock in locks or ():
        lock.release()
    runtime._complete(task, worker, error)
