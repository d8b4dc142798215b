"""``ops_cpu.empty``: scratch buffers reused per thread, never while an array still uses them."""

import threading

import numpy as np
import pytest

from numtile.ops_cpu import scratch


@pytest.fixture(autouse=True)
def fresh_cache():
    scratch._cache.buffers = []
    yield
    scratch._cache.buffers = []


def test_a_freed_scratch_buffer_is_handed_out_again_whatever_its_shape_and_dtype():
    a = scratch.empty((512, 256), np.float32)
    address = a.ctypes.data
    del a
    b = scratch.empty(300_000, np.uint8)  # smaller: carved from the same buffer
    assert b.ctypes.data == address and b.shape == (300_000,) and b.dtype == np.uint8
    b[:] = 7
    assert (b == 7).all()


def test_a_buffer_in_use_is_never_handed_out_twice():
    shape = (256, 256)
    first = scratch.empty(shape, np.float64)
    view = first[10:20]  # a view keeps the buffer in use after the array itself is gone
    del first
    second = scratch.empty(shape, np.float64)
    assert not np.shares_memory(view, second)
    view[:] = 1.0
    second[:] = 2.0
    assert (view == 1.0).all() and (second == 2.0).all()


def test_the_smallest_free_buffer_that_fits_is_chosen():
    big = scratch.empty(4 << 20, np.uint8)
    small = scratch.empty(1 << 20, np.uint8)
    big_address, small_address = big.ctypes.data, small.ctypes.data
    del big, small
    assert scratch.empty(1 << 19, np.uint8).ctypes.data == small_address
    assert scratch.empty(2 << 20, np.uint8).ctypes.data == big_address


def test_small_scratch_is_plain_numpy_and_not_kept():
    a = scratch.empty(100, np.float32)
    assert a.base is None and a.shape == (100,)
    assert scratch._cache.buffers == []


def test_free_buffers_beyond_the_cap_are_let_go(monkeypatch):
    monkeypatch.setattr(scratch, "CACHE_BYTES", 3 << 20)
    held = [scratch.empty(1 << 20, np.uint8) for _ in range(5)]  # all in use: all kept
    assert sum(b.nbytes for b in scratch._cache.buffers) == 5 << 20
    del held
    scratch.empty(1 << 20, np.uint8)
    assert sum(b.nbytes for b in scratch._cache.buffers) <= 3 << 20


def test_each_thread_keeps_its_own_buffers():
    mine = scratch.empty(1 << 20, np.uint8)
    address = mine.ctypes.data
    del mine
    seen = []
    thread = threading.Thread(target=lambda: seen.append(scratch.empty(1 << 20, np.uint8)))
    thread.start()
    thread.join()
    assert seen[0].ctypes.data != address
    assert scratch.empty(1 << 20, np.uint8).ctypes.data == address
