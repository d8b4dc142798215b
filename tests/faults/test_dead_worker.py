"""A worker thread that dies anyway (a bug in the runtime itself) is reported at the next
wait, naming the worker and why, instead of hanging it; ``init()`` starts afresh."""

from __future__ import annotations

import numpy as np
import pytest

import numtile as nt
from numtile.runtime import Access, DataHandle, WorkerDiedError
from numtile.runtime.scheduler import SCHEDULER_CLASSES, EagerScheduler
from tests.faults.helpers import host_codelet

RW = Access.RW
ADD_ONE = host_codelet("test_dead_add_one", lambda x: np.add(x, 1, out=x))


def _break_completion(runtime, message: str) -> None:
    """Make the runtime's own bookkeeping fail once, after the next task ran."""
    original = runtime._complete
    calls = []

    def failing(task, worker, error):
        calls.append(task)
        if len(calls) == 1:
            raise RuntimeError(message)
        return original(task, worker, error)

    runtime._complete = failing


@pytest.mark.parametrize("scheduler", ["eager", "dmda"])
def test_a_dead_worker_is_reported_by_every_wait(make_runtime, within_deadline, scheduler, raised):
    runtime = make_runtime(scheduler, ncpu=1)
    _break_completion(runtime, "bookkeeping bug")
    first = DataHandle((2,), np.float64, np.zeros(2))
    later = DataHandle((2,), np.float64, np.zeros(2))
    task = runtime.submit(ADD_ONE, [(first, RW)])
    runtime.submit(ADD_ONE, [(later, RW)])  # queued on the dead worker: never runs
    for wait in (runtime.wait_all, lambda: runtime.wait_handles([later])):
        error = within_deadline(lambda wait=wait: raised(wait))
        assert isinstance(error, WorkerDiedError), error
        message = str(error)
        assert "worker cpu0 died" in message and "bookkeeping bug" in message
        assert f"'test_dead_add_one' (#{task.seq})" in message  # the task it held
        assert "numtile.init()" in message
    assert task.finished  # failed, so nothing waits for it
    with pytest.raises(WorkerDiedError):
        runtime.submit(ADD_ONE, [(later, RW)])
    within_deadline(runtime.shutdown)  # no hang either


class _StopsAfterOneTask(EagerScheduler):
    """Hands each worker one task, then ends its loop as if the runtime were shut down."""

    def pop(self, worker: int):
        if getattr(self, "_handed", False):
            return None
        self._handed = True
        return super().pop(worker)


def test_a_worker_that_stops_is_noticed_within_seconds(
    make_runtime, within_deadline, monkeypatch, raised
):
    monkeypatch.setitem(SCHEDULER_CLASSES, "eager", _StopsAfterOneTask)
    runtime = make_runtime("eager", ncpu=1)
    handle = DataHandle((2,), np.float64, np.zeros(2))
    runtime.submit(ADD_ONE, [(handle, RW)])
    runtime.submit(ADD_ONE, [(handle, RW)])  # nobody is left to run this one
    error = within_deadline(lambda: raised(runtime.wait_all), seconds=10)
    assert isinstance(error, WorkerDiedError) and "worker cpu0 stopped" in str(error)


def test_init_starts_a_fresh_runtime_after_a_worker_died(within_deadline, raised):
    runtime = nt.init(ncpu=1, scheduler="eager")
    try:
        _break_completion(runtime, "bug in the runtime")
        x = nt.ones((4,), tile_shape=(2,))
        error = within_deadline(lambda: raised(nt.wait_all))
        assert isinstance(error, WorkerDiedError) and "bug in the runtime" in str(error)
        within_deadline(nt.init, 1)
        y = nt.ones((4,), tile_shape=(2,)) + 1
        assert within_deadline(y.to_numpy).tolist() == [2.0] * 4
        assert isinstance(within_deadline(lambda: raised(x.to_numpy)), WorkerDiedError)
    finally:
        within_deadline(nt.init)
