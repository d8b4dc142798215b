"""A failing task: its error is re-raised at the next wait, dependents are cancelled."""

import numpy as np
import pytest

from numtile.config import Config
from numtile.runtime import (
    Access,
    Codelet,
    DataHandle,
    Runtime,
    RuntimeShutdownError,
    TaskCancelled,
    TaskError,
)

R, W, RW = Access.R, Access.W, Access.RW


def _boom(ops, x):
    raise ValueError("bad tile value")


BOOM = Codelet("test_boom", implementations={"cpu": _boom})


@pytest.fixture(params=["eager", "dmda", "sync"])
def runtime(request, tmp_path):
    rt = Runtime(Config(ncpu=2, scheduler=request.param, cache_dir=str(tmp_path)))
    yield rt
    rt.shutdown()


def test_error_is_raised_at_wait_naming_task_and_tiles(runtime):
    h = DataHandle((2, 3), np.float64, np.zeros((2, 3)))
    runtime.submit(BOOM, [(h, RW)])
    with pytest.raises(TaskError) as info:
        runtime.wait_all()
    message = str(info.value)
    assert "test_boom" in message and f"#{h.id}[2, 3]" in message and "bad tile value" in message
    assert isinstance(info.value, ValueError)  # the original type still catches it
    assert isinstance(info.value.__cause__, ValueError)
    runtime.wait_all()  # raised once, then cleared


def test_dependents_are_cancelled_and_independent_work_goes_on(runtime):
    ran = []
    record = Codelet("test_record_run", implementations={"cpu": lambda ops, x, y: ran.append(1)})
    fill = Codelet("test_fill_ones", implementations={"cpu": lambda ops, x: x.fill(1)})
    bad = DataHandle((1,), np.float64, np.zeros(1))
    downstream = DataHandle((1,), np.float64, np.zeros(1))
    fine = DataHandle((1,), np.float64, np.zeros(1))
    runtime.submit(BOOM, [(bad, RW)])
    runtime.submit(record, [(bad, R), (downstream, W)])
    runtime.submit(fill, [(fine, W)])
    with pytest.raises(ValueError, match="bad tile value"):
        runtime.wait_handles([downstream])  # the root cause, not the cancellation
    assert ran == []
    runtime.wait_handles([fine])
    assert fine.host_array()[0] == 1
    runtime.wait_all()  # an error reported by wait_handles is not raised a second time
    # the runtime stays usable, and overwriting the failed tile clears its error
    runtime.submit(fill, [(bad, W)])
    runtime.wait_handles([bad])
    assert bad.host_array()[0] == 1


def test_reading_a_failed_tile_later_is_cancelled(runtime):
    bad = DataHandle((1,), np.float64, np.zeros(1))
    out = DataHandle((1,), np.float64, np.zeros(1))
    runtime.submit(BOOM, [(bad, RW)])
    with pytest.raises(TaskError):
        runtime.wait_all()
    copy = Codelet("test_copy_tile", implementations={"cpu": lambda ops, x, y: np.copyto(y, x)})
    task = runtime.submit(copy, [(bad, R), (out, W)])
    with pytest.raises(TaskError):
        runtime.wait_all()
    assert isinstance(task.error, TaskCancelled)


def test_submit_after_shutdown_raises(tmp_path):
    rt = Runtime(Config(ncpu=1, scheduler="eager", cache_dir=str(tmp_path)))
    rt.shutdown()
    h = DataHandle((1,), np.float64, np.zeros(1))
    with pytest.raises(RuntimeShutdownError, match="shut down"):
        rt.submit(BOOM, [(h, RW)])
