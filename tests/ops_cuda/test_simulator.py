"""The test suite's fix of the CUDA simulator's shared arrays (tests/cudasim.py)."""

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
