"""Workers that never die silently: a dead worker thread is reported at the next wait.

Every exception a task raises (``SystemExit`` and ``KeyboardInterrupt`` included) fails only
that task, in the worker loops. Should a worker thread still end while the runtime runs (a
bug in the runtime itself), ``WorkerSupervision`` marks the runtime broken, fails the task the
worker held and wakes the waiters; waits also check every second that the worker threads are
alive. From then on every wait and submit raises ``WorkerDiedError`` naming the worker and
why, and ``numtile.init()`` starts a fresh runtime.
"""

from __future__ import annotations

import time

from numtile.runtime.task import Task, exception_text, forget_frames

_WORKER_CHECK_SECONDS = 1.0  # a wait checks this often that the workers are still alive


class WorkerDiedError(RuntimeError):
    """A worker thread of the runtime ended while the runtime was running (a bug in the
    runtime, not a task: every exception a task raises fails only that task). Raised by every
    wait and submit until ``numtile.init()`` starts a new runtime."""


class WorkerSupervision:
    """The ``Runtime``'s part that watches its worker threads (mixed into ``Runtime``)."""

    def _worker_main(self, loop, worker: int) -> None:
        """Run one worker's loop; should it ever raise (a bug in the runtime: a task's own
        exceptions fail only that task), report it instead of leaving waits to hang."""
        try:
            loop(worker)
        except BaseException as exc:
            self._worker_died(worker, exc)

    def _worker_died(self, worker: int, exc: BaseException) -> None:
        """Mark the runtime broken (waits and submits raise ``WorkerDiedError``, naming the
        worker and why) and fail the task the worker held, so that nothing waits for it."""
        task = _task_in(exc.__traceback__)
        doing = f" while running {task.describe()}" if task is not None else ""
        error = WorkerDiedError(
            f"numtile worker {self.worker_names[worker]} died{doing}: {exception_text(exc)}; "
            "tasks queued on it will not run: call numtile.init() to start a new runtime"
        )
        forget_frames(exc)  # the dead loop's frames hold tiles
        error.__cause__ = exc
        with self._lock:
            if self._broken is None:
                self._broken = error
            self._done.notify_all()
        if task is not None and not task.finished:
            task.end = task.end or time.perf_counter()
            try:
                self._complete(task, worker, error)
            except BaseException:  # the bug may be in _complete itself: waits still raise
                pass

    def _check_workers(self) -> None:
        """(lock held) Notice a worker thread that ended without ``_worker_died`` seeing it."""
        if self.closed or self._broken is not None:
            return
        for worker, thread in enumerate(self._workers):
            if not thread.is_alive():
                self._broken = WorkerDiedError(
                    f"numtile worker {self.worker_names[worker]} stopped while the runtime "
                    "was running; tasks queued on it will not run: call numtile.init() to "
                    "start a new runtime"
                )
                return

    def _raise_broken(self) -> None:
        """Raise a fresh copy of the dead-worker error (a copy: tracebacks do not pile up)."""
        error = self._broken
        raise WorkerDiedError(str(error)) from error.__cause__

    def _wait_for_a_task(self) -> None:
        """(lock held) Wait until some task finishes, checking the workers every second."""
        if not self._done.wait(_WORKER_CHECK_SECONDS):
            self._check_workers()
        if self._broken is not None:
            self._raise_broken()


def _task_in(tb) -> Task | None:
    """The innermost unfinished task named ``task`` in a traceback's frames (a dead worker's)."""
    found = None
    while tb is not None:
        candidate = tb.tb_frame.f_locals.get("task")
        if isinstance(candidate, Task) and not candidate.finished:
            found = candidate
        tb = tb.tb_next
    return found
