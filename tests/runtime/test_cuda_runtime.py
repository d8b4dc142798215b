"""GPU workers, device memory limits and transfers, under Numba's CUDA simulator.

The codelets here carry their own tiny kernels, so these tests check the runtime alone
(streams, staging, eviction, write-back, errors); tests/ops_cuda checks the real kernels.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from numba import cuda

import numtile as nt
from numtile.ops_cuda import SIMULATOR, CudaUnavailableError, available
from numtile.runtime import Access, Codelet, DataHandle, TaskError
from numtile.runtime.handle import HOST
from numtile.runtime.memory import OutOfMemoryError

pytestmark = pytest.mark.skipif(not available(), reason="needs a GPU or the CUDA simulator")
simulator_only = pytest.mark.skipif(not SIMULATOR, reason="needs the CUDA simulator")

R, W, RW, ACC = Access.R, Access.W, Access.RW, Access.ACCUMULATE
N = 50  # float64 elements per tile: 400 bytes
GPU = 1  # memory node of the first GPU


@cuda.jit
def _affine(x, y, a, b):
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        y[i] = a * x[i] + b


@cuda.jit
def _add_into(x, y):
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        y[i] += x[i]


@cuda.jit
def _out_of_bounds(x):
    x[x.size + 1000] = 1.0  # the simulator raises IndexError, a GPU reports an error


AFFINE = Codelet(
    "test_affine",
    implementations={
        "cpu": lambda ops, x, y, a, b: np.add(a * x, b, out=y),
        "cuda": lambda ops, x, y, a, b: _affine[2, 8, ops.stream](x, y, a, b),
    },
)
ADD = Codelet(
    "test_add_into",
    implementations={
        "cpu": lambda ops, x, y: np.add(y, x, out=y),
        "cuda": lambda ops, x, y: _add_into[2, 8, ops.stream](x, y),
    },
)
BAD = Codelet(
    "test_bad_kernel",
    implementations={"cuda": lambda ops, x: _out_of_bounds[1, 1, ops.stream](x)},
)


@pytest.fixture
def gpu_runtime():
    def start(**settings):
        settings.setdefault("ncpu", 1)
        settings.setdefault("ncuda", 1)
        return nt.init(**settings)

    yield start
    nt.init()


def _tiles(count, start=0.0):
    return [DataHandle((N,), np.float64, np.full(N, start + i)) for i in range(count)]


@pytest.mark.parametrize("scheduler", ["eager", "dmda"])
def test_gpu_only_with_a_limit_smaller_than_the_data(gpu_runtime, scheduler):
    runtime = gpu_runtime(restrict="cuda", cuda_mem_limit=4 * N * 8, scheduler=scheduler)
    xs, ys = _tiles(8), [DataHandle((N,), np.float64) for _ in range(8)]
    for x, y in zip(xs, ys):
        runtime.submit(AFFINE, [(x, R), (y, W)], (2.0, 1.0))
    for y in ys:  # a second kernel on results, some already written back and evicted
        runtime.submit(ADD, [(xs[1], R), (y, RW)])
    runtime.wait_all()
    for i, y in enumerate(ys):
        np.testing.assert_array_equal(y.host_array(), 2.0 * i + 1.0 + 1.0)
    counters = runtime.manager.counters()
    gpu = counters["nodes"]["cuda0"]
    assert gpu["peak"] <= 4 * N * 8 and gpu["evictions"] > 0
    assert counters["transferred_bytes"]["cuda0->host"] > 0  # written back before eviction
    assert runtime.busy[runtime.worker_names.index("cuda0")] > 0
    assert runtime.busy[0] == 0  # restrict="cuda": the CPU worker ran nothing


@pytest.mark.parametrize("scheduler", ["eager", "dmda"])
def test_cpu_and_gpu_workers_share_tiles_and_accumulate(gpu_runtime, scheduler):
    runtime = gpu_runtime(scheduler=scheduler)
    total = DataHandle((N,), np.float64, np.zeros(N))
    parts = _tiles(12, start=1.0)
    for x in parts:  # accumulations from both kinds of worker, in any order
        runtime.submit(ADD, [(x, R), (total, ACC)])
    ys = [DataHandle((N,), np.float64) for _ in parts]
    for x, y in zip(parts, ys):
        runtime.submit(AFFINE, [(total, R), (y, W)], (1.0, 0.0))
        runtime.submit(ADD, [(x, R), (y, RW)])
    runtime.wait_all()
    expected = sum(range(1, 13))
    np.testing.assert_array_equal(total.host_array(), expected)
    for i, y in enumerate(ys):
        np.testing.assert_array_equal(y.host_array(), expected + 1.0 + i)


@simulator_only  # a real GPU does not check bounds: the planted bug would corrupt memory
def test_a_failing_kernel_names_the_task_and_frees_its_device_memory(gpu_runtime):
    runtime = gpu_runtime(restrict="cuda")
    x = DataHandle((N,), np.float64, np.zeros(N))
    runtime.submit(BAD, [(x, RW)])
    with pytest.raises(TaskError, match=r"test_bad_kernel.*cuda0"):
        runtime.wait_all()
    state = runtime.manager.nodes[GPU]
    assert state.pinned_bytes == 0 and not state.pins
    assert GPU not in x.replicas and state.used == 0
    y = DataHandle((N,), np.float64)  # the runtime is still usable
    runtime.submit(AFFINE, [(DataHandle((N,), np.float64, np.ones(N)), R), (y, W)], (1.0, 1.0))
    runtime.wait_all()
    np.testing.assert_array_equal(y.host_array(), 2.0)


def test_a_tile_larger_than_the_gpu_limit_fails_at_submission(gpu_runtime):
    runtime = gpu_runtime(restrict="cuda", cuda_mem_limit=N * 8)
    x, y = _tiles(1)[0], DataHandle((N,), np.float64)
    with pytest.raises(OutOfMemoryError, match=r"needs 800 B .* limit \(400 B\)"):
        runtime.submit(AFFINE, [(x, R), (y, W)], (1.0, 0.0))


def test_wont_use_moves_a_tile_off_the_gpu(gpu_runtime):
    runtime = gpu_runtime(restrict="cuda")
    x, y = _tiles(1)[0], DataHandle((N,), np.float64)
    runtime.submit(AFFINE, [(x, R), (y, W)], (2.0, 0.0))
    runtime.wont_use(y)
    runtime.wait_all()
    assert set(y.replicas) == {HOST}
    np.testing.assert_array_equal(y.host_array(), 0.0)


def test_trace_has_worker_and_copy_rows(gpu_runtime, tmp_path):
    runtime = gpu_runtime(restrict="cuda")
    path = tmp_path / "trace.json"
    x, y = _tiles(1, start=3.0)[0], DataHandle((N,), np.float64)
    with nt.trace(str(path)):
        runtime.submit(AFFINE, [(x, R), (y, W)], (1.0, 0.0))
    np.testing.assert_array_equal(y.host_array(), 3.0)
    events = json.loads(path.read_text())["traceEvents"]
    rows = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert {"cuda0", "copy host->cuda0"} <= rows


def test_asking_for_more_gpus_than_exist_fails_at_start():
    with pytest.raises(CudaUnavailableError, match="2 GPUs asked for, 1 found"):
        nt.init(ncpu=1, ncuda=2)
    nt.init()


@simulator_only
def test_simulator_gpus_are_not_used_unless_asked_for():
    runtime = nt.init(ncpu=1)
    assert runtime.ncuda == 0 and runtime.manager is None
    nt.init()


def test_gpu_and_host_limits_together_spill_write_backs_to_disk(gpu_runtime, tmp_path):
    """GPU evictions need host room, which a host limit makes by spilling to disk."""
    runtime = gpu_runtime(
        restrict="cuda",
        cuda_mem_limit=4 * N * 8,
        host_mem_limit=6 * N * 8,
        spill_dir=str(tmp_path),
    )
    xs, ys = _tiles(10), [DataHandle((N,), np.float64) for _ in range(10)]
    for x, y in zip(xs, ys):
        runtime.submit(AFFINE, [(x, R), (y, W)], (3.0, -1.0))
    runtime.wait_all()
    for i, y in enumerate(ys):
        np.testing.assert_array_equal(y.host_array(), 3.0 * i - 1.0)
    counters = runtime.manager.counters()
    assert counters["nodes"]["cuda0"]["peak"] <= 4 * N * 8
    assert counters["nodes"]["host"]["peak"] <= 6 * N * 8
    assert counters["spill"]["writes"] > 0 and counters["spill"]["reads"] > 0


def test_dmda_charges_the_transfer_of_missing_tiles():
    from numtile.runtime.perfmodel import PerfModels
    from numtile.runtime.scheduler import DmdaScheduler
    from numtile.runtime.task import Task

    on_gpu = DataHandle((1000,), np.float64)
    on_gpu.replicas[GPU] = object()  # only the GPU holds it
    on_host = DataHandle((1000,), np.float64, np.zeros(1000))
    scheduler = DmdaScheduler(
        ["cpu", "cuda"], PerfModels(None), lambda c: {"cpu", "cuda"}, nodes=[HOST, GPU]
    )
    task = Task(ADD, [on_gpu, on_host], [R, RW], (), 0, 0, None)
    cpu_cost, gpu_cost = scheduler.transfer_cost(task, 0), scheduler.transfer_cost(task, 1)
    assert cpu_cost == pytest.approx(8000 / scheduler.bandwidth["cuda"])  # bring on_gpu home
    assert gpu_cost == pytest.approx(8000 / scheduler.bandwidth["cuda"])  # upload on_host
    on_host.replicas[GPU] = object()
    assert scheduler.transfer_cost(task, 1) == 0.0
    assert scheduler.transfer_cost(task, 0) == pytest.approx(cpu_cost)


def test_tiles_on_the_gpu_outlive_the_runtime(gpu_runtime):
    runtime = gpu_runtime(restrict="cuda")
    x, y = _tiles(1, start=5.0)[0], DataHandle((N,), np.float64)
    runtime.submit(AFFINE, [(x, R), (y, W)], (2.0, 0.0))
    runtime.wait_all()
    assert set(y.replicas) == {GPU}  # only the GPU holds the result
    nt.init()
    assert set(y.replicas) == {HOST}
    np.testing.assert_array_equal(y.host_array(), 10.0)
