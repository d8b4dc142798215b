"""The GPU worker loop survives any exception too (under Numba's CUDA simulator)."""

from __future__ import annotations

import numpy as np
import pytest

from numtile.cuda_driver import available
from numtile.runtime import Access, Codelet, DataHandle, TaskError

pytestmark = pytest.mark.skipif(not available(), reason="needs a GPU or the CUDA simulator")
RW = Access.RW
GPU = 1  # memory node of the first GPU


def _raise(make):
    def launch(ops, x):
        raise make()

    return launch


@pytest.mark.parametrize("scheduler", ["eager", "dmda"])
@pytest.mark.parametrize(
    ("make", "kind"),
    [(lambda: SystemExit(2), SystemExit), (KeyboardInterrupt, KeyboardInterrupt)],
)
def test_a_base_exception_on_a_gpu_fails_only_its_task(
    make_runtime, within_deadline, raised, scheduler, make, kind
):
    runtime = make_runtime(scheduler, ncpu=1, ncuda=1, restrict="cuda")
    bad = DataHandle((4,), np.float64, np.zeros(4))
    task = runtime.submit(
        Codelet("test_gpu_fault", implementations={"cuda": _raise(make)}), [(bad, RW)]
    )
    error = within_deadline(raised, runtime.wait_all)
    assert isinstance(error, TaskError) and isinstance(error, kind)
    assert f"'test_gpu_fault' (#{task.seq})" in str(error) and "on cuda0 raised" in str(error)
    state = runtime.manager.nodes[GPU]
    assert state.pinned_bytes == 0 and GPU not in bad.replicas  # released, nothing half-written
    fill = Codelet(
        "test_gpu_fill",
        implementations={"cpu": lambda ops, x: x.fill(3.0), "cuda": lambda ops, x: x[:].fill(3)},
    )
    good = DataHandle((4,), np.float64, np.zeros(4))
    runtime.submit(fill, [(good, RW)])
    within_deadline(runtime.wait_all)  # the GPU worker is still there
    np.testing.assert_array_equal(good.host_array(), 3.0)
    assert all(thread.is_alive() for thread in runtime._workers)
