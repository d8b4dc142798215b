"""Whatever a task raises fails that task only: the worker lives on, waits never hang, and
the error names the task (issue 9, item 2)."""

from __future__ import annotations

import builtins
import gc
import sys
import threading
import weakref

import numpy as np
import pytest

from numtile.runtime import Access, DataHandle, TaskError
from tests.faults.helpers import host_codelet

R, RW = Access.R, Access.RW
MiB = 1 << 20


class StrRaises(Exception):
    """An exception whose ``__str__`` itself fails."""

    def __str__(self) -> str:
        raise ValueError("__str__ is broken")


class NoSubclasses(Exception):
    """An exception type that refuses to be subclassed (so no ``TaskError[...]`` mix)."""

    def __init_subclass__(cls, **kwargs):
        raise TypeError("final")


class NeedsTwo(Exception):
    """An exception type whose constructor takes other arguments than one message."""

    def __init__(self, code: int, where: str) -> None:
        super().__init__(code, where)


FAULTS = {
    "SystemExit": (lambda: SystemExit(3), SystemExit, "SystemExit: 3"),
    "KeyboardInterrupt": (KeyboardInterrupt, KeyboardInterrupt, "KeyboardInterrupt"),
    "GeneratorExit": (GeneratorExit, GeneratorExit, "GeneratorExit"),
    "str-raises": (
        lambda: StrRaises("x"),
        StrRaises,
        "StrRaises: StrRaises('x') (its __str__ raised ValueError)",
    ),
    "empty-str": (
        lambda: UnicodeDecodeError.__new__(UnicodeDecodeError),
        UnicodeDecodeError,
        "UnicodeDecodeError",
    ),
    "no-subclasses": (lambda: NoSubclasses("nope"), TaskError, "NoSubclasses: nope"),
    "needs-two": (lambda: NeedsTwo(7, "here"), TaskError, "NeedsTwo: (7, 'here')"),
}
if hasattr(builtins, "ExceptionGroup"):  # Python 3.11+: a type that needs two arguments
    FAULTS["group"] = (
        lambda: builtins.ExceptionGroup("two", [ValueError(1), KeyError(2)]),
        TaskError,
        "ExceptionGroup: two (2 sub-exceptions)",
    )


def _raiser(make):
    def kernel(x):
        x.fill(-1)  # a partial write before the failure
        raise make()

    return kernel


@pytest.mark.parametrize("scheduler", ["eager", "dmda", "sync"])
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_any_exception_fails_only_its_task(make_runtime, within_deadline, scheduler, fault, raised):
    make, kind, text = FAULTS[fault]
    runtime = make_runtime(scheduler, ncpu=1)
    bad = DataHandle((3,), np.float64, np.zeros(3))
    good = DataHandle((3,), np.float64, np.arange(3.0))
    task = runtime.submit(host_codelet(f"test_fault_{fault}", _raiser(make)), [(bad, RW)])
    add = host_codelet("test_fault_add_one", lambda x: np.add(x, 1, out=x))
    runtime.submit(add, [(good, RW)])

    def wait():
        try:
            runtime.wait_all()
        except BaseException as exc:  # SystemExit and KeyboardInterrupt included
            return exc
        return None

    error = within_deadline(wait)
    assert isinstance(error, TaskError) and isinstance(error, kind), type(error).__mro__
    message = str(error)
    assert f"'test_fault_{fault}' (#{task.seq})" in message and message.endswith(text), message
    assert repr(error)  # never raises either
    if kind is SystemExit:
        assert error.code == 3  # an uncaught one exits with the task's status
    # the single worker survived: later tasks run, and the failure was reported once
    runtime.submit(add, [(good, RW)])
    within_deadline(runtime.wait_all)
    assert good.host_array().tolist() == [2.0, 3.0, 4.0]
    assert all(thread.is_alive() for thread in runtime._workers)
    # the failed tile names the failure at every read, without hanging
    assert isinstance(within_deadline(lambda: raised(runtime.wait_handles, [bad])), kind)


def test_dependents_of_a_base_exception_are_cancelled(make_runtime, within_deadline, raised):
    runtime = make_runtime("eager")
    source = DataHandle((2,), np.float64, np.zeros(2))
    target = DataHandle((2,), np.float64, np.zeros(2))
    runtime.submit(host_codelet("test_fault_exit", _raiser(lambda: SystemExit(5))), [(source, RW)])
    copy = host_codelet("test_fault_copy", lambda x, y: np.copyto(y, x))
    runtime.submit(copy, [(source, R), (target, RW)])
    error = within_deadline(lambda: raised(runtime.wait_handles, [target]))
    assert isinstance(error, SystemExit) and "test_fault_exit" in str(error)
    assert target.host_array().tolist() == [0.0, 0.0]  # the copy never ran


def test_a_stored_task_error_keeps_no_tile_alive(make_runtime, within_deadline, tmp_path, raised):
    """A kept error (``sys.last_value``, a log) must not keep the failed task's tiles or
    handles alive through its traceback's frames."""
    runtime = make_runtime("eager", host_mem_limit=MiB, spill_dir=str(tmp_path / "spill"))
    seen = []

    def kernel(x, y):
        seen.append(weakref.ref(y))
        raise KeyboardInterrupt

    x = DataHandle((64,), np.float64, np.zeros(64))
    y = DataHandle((64,), np.float64, np.zeros(64))
    runtime.submit(host_codelet("test_fault_keeps", kernel), [(x, R), (y, RW)])
    error = within_deadline(lambda: raised(runtime.wait_all))
    assert isinstance(error, KeyboardInterrupt)
    handles = [weakref.ref(x), weakref.ref(y)]
    del x, y
    gc.collect()
    assert [ref() for ref in handles] == [None, None]
    runtime.manager.counters()  # the manager frees dead handles' tiles when it next looks
    assert seen[0]() is None  # the tile buffer the codelet's frame held
    # the task's traceback is kept as text, with the codelet's line
    notes = "".join(error.__cause__.__notes__)
    assert "in kernel" in notes and "raise KeyboardInterrupt" in notes


def test_worker_threads_keep_running_after_many_base_exceptions(
    make_runtime, within_deadline, raised
):
    runtime = make_runtime("eager")
    handles = [DataHandle((1,), np.float64, np.zeros(1)) for _ in range(40)]
    fail = host_codelet("test_fault_many", _raiser(lambda: SystemExit(1)))
    for handle in handles:
        runtime.submit(fail, [(handle, RW)])
    error = within_deadline(lambda: raised(runtime.wait_all))
    assert isinstance(error, SystemExit)
    assert "39 more task(s) failed" in "".join(getattr(error, "__notes__", []))
    assert all(thread.is_alive() for thread in runtime._workers)
    assert threading.active_count() >= len(runtime._workers)
    assert sys.exc_info() == (None, None, None)


def test_sync_scheduler_leaves_the_callers_own_exception_alone(make_runtime, within_deadline):
    """Under sync a task runs in the submitting thread: an exception that thread is handling
    becomes the task error's context, and must come out of it untouched."""
    runtime = make_runtime("sync")
    handle = DataHandle((2,), np.float64, np.zeros(2))

    def submit_while_handling():
        try:
            raise LookupError("the caller's own")
        except LookupError as outer:
            failing = host_codelet("test_fault_in_handler", _raiser(ValueError))
            runtime.submit(failing, [(handle, RW)])
            return outer

    outer = within_deadline(submit_while_handling)
    assert outer.__traceback__ is not None and not hasattr(outer, "__notes__")
    with pytest.raises(ValueError, match="test_fault_in_handler"):
        runtime.wait_all()
