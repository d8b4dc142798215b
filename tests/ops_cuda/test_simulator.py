"""The test suite's fixes of the CUDA simulator's races (tests/cudasim.py)."""

import threading
import time

import numpy as np
import pytest

pytest.importorskip("numba.cuda.simulator")

from numba.cuda.simulator.kernelapi import FakeCUDAShared  # noqa: E402


def _allocate_together(shared, threads=4):
    """Each of ``threads`` threads asks for the shared array of one calling line at once."""
    barrier = threading.Barrier(threads)
    arrays = []

    def thread():
        barrier.wait()
        arrays.append(shared.array(8, np.float64))

    workers = [threading.Thread(target=thread) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return arrays


def test_threads_allocating_together_share_one_array(monkeypatch):
    # a slow allocation holds every thread between the lookup and the store, where the
    # simulator's own code gives each thread its own array
    empty = np.empty

    def slow_empty(*args, **kwargs):
        time.sleep(0.02)
        return empty(*args, **kwargs)

    monkeypatch.setattr(np, "empty", slow_empty)
    arrays = _allocate_together(FakeCUDAShared(0))
    assert len(arrays) == 4
    assert all(array is arrays[0] for array in arrays)


def test_each_calling_line_has_its_own_array():
    shared = FakeCUDAShared(0)
    first = shared.array(4, np.float32)
    second = shared.array(4, np.float32)
    assert first is not second
    assert [shared.array(4, np.float32) for _ in range(2)][0] is not first
    assert first.dtype == np.float32 and first.shape == (4,)


def _device_function():
    return cuda  # noqa: F821 - the module global that the swap replaces


def test_the_cuda_module_stays_swapped_until_the_last_thread_leaves():
    # thread A enters a device function, B enters, A leaves while B is still inside: B must
    # still see the launch's fake module (the simulator's own swap restores the real one)
    from numba import cuda as real
    from numba.cuda.simulator import kernel, kernelapi

    assert kernel.swapped_cuda_module is kernelapi.swapped_cuda_module  # patched in both
    globs = _device_function.__globals__
    globs["cuda"] = real
    fake = object()
    inside, a_left, seen = threading.Barrier(2), threading.Event(), []

    def thread_a():
        with kernelapi.swapped_cuda_module(_device_function, fake):
            inside.wait()
        a_left.set()

    def thread_b():
        with kernelapi.swapped_cuda_module(_device_function, fake):
            inside.wait()
            a_left.wait()
            seen.append(_device_function())

    workers = [threading.Thread(target=thread_a), threading.Thread(target=thread_b)]
    try:
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert seen == [fake]
        assert _device_function() is real  # the last one out restored it
    finally:
        del globs["cuda"]
