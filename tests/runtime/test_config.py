"""Every ``Config`` field given to ``nt.init`` takes effect for that runtime."""

from __future__ import annotations

import dataclasses
import gc
import os
import weakref

import numpy as np
import pytest

import numtile as nt
from numtile.config import Config
from numtile.cuda_driver import available
from numtile.runtime import Access, Codelet, DataHandle
from numtile.runtime.handle import HOST

needs_cuda = pytest.mark.skipif(not available(), reason="needs a GPU or the CUDA simulator")
TILE_BYTES = 1 << 20  # above the pool's 128 KiB floor

# the fields checked below, one test each (tile and tile_1d: the tensors' defaults, checked
# with the tensors in tests/tiletensor)
CHECKED = {
    "ncpu",
    "scheduler",
    "cache_dir",
    "gc_threshold",
    "pool_bytes",
    "tile",
    "tile_1d",
    "ncuda",
    "restrict",
    "cuda_mem_limit",
    "host_mem_limit",
    "spill_dir",
    "cuda_block",
    "cuda_gemm_tile",
    "distributed",  # checked in tests/distributed/test_mpi.py (it starts MPI: a subprocess)
    "mpi_max_poll",  # below, and its effect under mpiexec: tests/distributed/program_scheduling
    "vml",  # the variable and its effect: tests/ops_cpu/test_mkl_vml.py
    "stream_stores",  # the variable and its effect: tests/ops_cpu/test_streaming.py
    "avx512",  # the variable and its effect: tests/ops_cpu/test_pow_avx512.py
    "auto_fuse",  # the variable and its effect: tests/tiletensor/test_auto_fusion.py
    "host_arena",  # its effect: tests/runtime/test_arena.py (arena on and off)
}


@pytest.fixture(autouse=True)
def _default_runtime_after():
    yield
    nt.init()


def test_every_field_has_a_check_here():
    assert {f.name for f in dataclasses.fields(Config)} == CHECKED


def test_mpi_max_poll_is_seconds_up_to_one(monkeypatch):
    assert Config(mpi_max_poll=0.002).mpi_max_poll == 0.002
    for bad in (0, -1.0, 2.0, float("nan"), True, "5e-3"):
        with pytest.raises(ValueError, match="NUMTILE_MPI_MAX_POLL"):
            Config(mpi_max_poll=bad)
    monkeypatch.setenv("NUMTILE_MPI_MAX_POLL", "0.25")
    assert Config().mpi_max_poll == 0.25
    monkeypatch.setenv("NUMTILE_MPI_MAX_POLL", "often")
    with pytest.raises(ValueError, match="NUMTILE_MPI_MAX_POLL='often' is not a number"):
        Config()


def test_the_runtime_keeps_the_config_it_was_given():
    runtime = nt.init(ncpu=1, tile=64, tile_1d=100)
    assert nt.get_runtime() is runtime
    assert runtime.config.tile == 64 and runtime.config.tile_1d == 100


def test_ncpu_starts_that_many_workers():
    runtime = nt.init(ncpu=3, ncuda=0)
    assert runtime.ncpu == 3 and len(runtime._workers) == 3
    assert runtime.worker_names == ["cpu0", "cpu1", "cpu2"]


@pytest.mark.parametrize("scheduler", ["eager", "dmda", "sync"])
def test_scheduler_is_the_one_asked_for(scheduler):
    runtime = nt.init(ncpu=1, scheduler=scheduler)
    assert runtime.scheduler.name == scheduler
    assert len(runtime._workers) == (0 if scheduler == "sync" else 1)  # sync runs inline


def test_cache_dir_receives_the_performance_models(tmp_path):
    runtime = nt.init(ncpu=1, scheduler="dmda", cache_dir=str(tmp_path))
    work = Codelet("test_config_modelled", implementations={"cpu": lambda ops, x: x.fill(1)})
    runtime.submit(work, [(DataHandle((2,), np.float64, np.zeros(2)), Access.RW)])
    nt.init()  # persisted at shutdown
    assert (tmp_path / "perfmodels.json").exists()


def test_gc_threshold_is_set_while_the_runtime_runs():
    before = gc.get_threshold()[0]
    nt.init(ncpu=1, gc_threshold=before + 12345)
    assert gc.get_threshold()[0] == before + 12345


def _recycled(pool_bytes: int) -> bool:
    """Whether a freed host tile comes back for the next tile of its shape."""
    nt.init(ncpu=1, ncuda=0, pool_bytes=pool_bytes)
    handle = DataHandle((TILE_BYTES // 8,), np.float64)
    freed = weakref.ref(handle.host_replica())
    del handle  # the pool keeps the buffer, or it is freed
    if freed() is None:
        return False
    return DataHandle((TILE_BYTES // 8,), np.float64).host_replica() is freed()


def test_pool_bytes_bounds_the_buffer_pool():
    assert _recycled(pool_bytes=4 * TILE_BYTES)
    assert not _recycled(pool_bytes=TILE_BYTES // 2)


def test_restrict_cpu_starts_no_gpu():
    runtime = nt.init(ncpu=1, restrict="cpu", ncuda=1)
    assert runtime.kinds == ["cpu"] and runtime.ncuda == 0 and runtime.manager is None


def test_host_mem_limit_and_spill_dir_go_to_the_memory_manager(tmp_path):
    runtime = nt.init(ncpu=1, ncuda=0, host_mem_limit=3 << 20, spill_dir=str(tmp_path))
    assert runtime.manager.nodes[HOST].node.capacity == 3 << 20
    assert runtime.manager.spill.directory == str(tmp_path)
    x = nt.from_numpy(np.ones(4 << 17), tile_shape=1 << 17)  # 4 MiB in 1 MiB tiles
    assert any(name.startswith("tile-") for name in os.listdir(tmp_path))  # spilled there
    np.testing.assert_array_equal(x.to_numpy(), 1.0)


@needs_cuda
def test_ncuda_and_cuda_mem_limit_shape_the_gpu_workers():
    runtime = nt.init(ncpu=1, ncuda=1, cuda_mem_limit=123456)
    assert runtime.ncuda == 1 and runtime.worker_names == ["cpu0", "cuda0"]
    assert runtime.manager.nodes[1].node.capacity == 123456


@needs_cuda
def test_cuda_block_and_gemm_tile_reach_the_kernels(monkeypatch):
    from numtile import ops_cuda

    calls = []
    monkeypatch.setattr(ops_cuda, "configure", lambda **shapes: calls.append(shapes), raising=False)
    nt.init(ncpu=1, ncuda=1, cuda_block=32, cuda_gemm_tile=8)
    assert calls == [{"block": 32, "gemm_tile": 8}]
