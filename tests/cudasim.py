"""A fix for Numba's CUDA simulator that the kernel tests need.

The simulator runs each CUDA thread of a block as a Python thread. ``cuda.shared.array``
finds the block's array by the calling line in a dict, and allocates it (``np.empty``) when it
is not there yet: a lookup, then a store, with no lock. When two threads of a block's first
launch interleave between the two, each gets its own "shared" array: writes of one thread are
invisible to the other, and a block reduction reads uninitialised memory. That is how
``test_reduce_accumulate_matches_numpy[cuda-rows-max-float32-(19, 2, 1)]`` failed once in CI:
3 of 19 maxima equal to the same stale value, all in the block that allocated first.

``lock_shared_arrays()`` makes the lookup and the store one step under a lock. The array is
still keyed by the kernel's calling line (file and line number), as the simulator does.

A second race is in ``swapped_cuda_module``, which every thread runs around each call of a
device function: it puts the launch's fake ``cuda`` module into the function's globals, and
puts the real one back on the way out. Two threads of a block interleave there: one iterates
the globals while another changes them (CI: "dictionary changed size during iteration"), and
the first thread out restores the real module under a thread still inside the function
(numba-cuda PR #690). ``lock_swapped_modules()`` counts the threads inside per globals dict
under a lock: the first one in swaps, the last one out restores.

And a speed-up: ``quick_blocks()`` runs a block's threads from a pool, waiting at
``syncthreads`` on a barrier instead of the simulator's polling loop (same rule, same errors;
tests/ops_cuda/test_simulator_blocks.py).
"""

from __future__ import annotations

import functools
import sys
import threading
from contextlib import contextmanager

import numpy as np
from numba.core import types
from numba.np import numpy_support

_LOCK = threading.Lock()


def _shared_array(self, shape, dtype):
    if shape == 0:  # dynamic shared memory: one buffer, nothing to allocate
        return _ORIGINAL[0](self, shape, dtype)
    if isinstance(dtype, types.Type):
        dtype = numpy_support.as_dtype(dtype)
    caller = sys._getframe(1)
    key = (caller.f_code.co_filename, caller.f_lineno)
    with _LOCK:
        array = self._allocations.get(key)
        if array is None:
            array = self._allocations[key] = np.empty(shape, dtype)
    return array


_ORIGINAL = []


def lock_shared_arrays() -> None:
    """Patch the simulator's ``FakeCUDAShared.array`` (once per process)."""
    from numba.cuda.simulator import kernelapi

    if not _ORIGINAL:
        _ORIGINAL.append(kernelapi.FakeCUDAShared.array)
        kernelapi.FakeCUDAShared.array = _shared_array


_SWAPS: dict[int, list] = {}  # id(globals) -> [threads inside, the names swapped, real module]


@contextmanager
def _counted_swap(fn, fake_cuda_module):
    from numba import cuda

    globs = fn.__globals__
    key = id(globs)
    with _LOCK:
        entry = _SWAPS.get(key)
        if entry is None:
            names = [name for name, value in list(globs.items()) if value is cuda]
            entry = _SWAPS[key] = [0, names, cuda]
            for name in names:
                globs[name] = fake_cuda_module
        entry[0] += 1
    try:
        yield
    finally:
        with _LOCK:
            entry[0] -= 1
            if not entry[0]:
                del _SWAPS[key]
                for name in entry[1]:
                    globs[name] = entry[2]


def lock_swapped_modules() -> None:
    """Patch the simulator's ``swapped_cuda_module`` (where it is defined and where the
    kernel launcher imported it), once per process."""
    from numba.cuda.simulator import kernel, kernelapi

    if kernelapi.swapped_cuda_module is not _counted_swap:
        kernelapi.swapped_cuda_module = _counted_swap
        kernel.swapped_cuda_module = _counted_swap


class _BlockBarrier:
    """``syncthreads`` of one simulated block: the threads that arrive wait, without polling,
    until every thread still running has arrived; a thread that ends leaves the count (as the
    simulator's polling loop ignores finished threads), and one that fails aborts the others
    (each then raises at its ``syncthreads``, as the simulator's abort flag makes them). The
    launching thread waits in ``join`` until no thread of the block runs."""

    def __init__(self, parties: int):
        self._condition = threading.Condition(threading.Lock())
        self._live = parties
        self._waiting = 0
        self._generation = 0
        self.aborted = False
        self.error = None  # (exception, traceback) of the first thread that raised

    def _release(self) -> None:
        self._waiting = 0
        self._generation += 1
        self._condition.notify_all()

    def wait(self) -> None:
        with self._condition:
            if self.aborted:
                raise RuntimeError("abort flag set on syncthreads call")
            self._waiting += 1
            if self._waiting == self._live:
                self._release()
            else:
                generation = self._generation
                while generation == self._generation and not self.aborted:
                    self._condition.wait()
            if self.aborted:
                raise RuntimeError("abort flag set on syncthreads clear")

    def leave(self, error) -> None:
        with self._condition:
            self._live -= 1
            if error is not None and not self.aborted:
                self.aborted, self.error = True, error
                self._condition.notify_all()
            elif not self._live or (self._waiting and self._waiting == self._live):
                self._release()

    def join(self) -> None:
        with self._condition:
            while self._live:
                self._condition.wait()


class _Pool:
    """Idle simulator threads, reused from block to block (starting a thread took most of a
    small kernel's launch)."""

    def __init__(self):
        self._idle: list = []
        self._lock = threading.Lock()

    def take(self, count: int) -> list:
        with self._lock:
            first = max(len(self._idle) - count, 0)
            taken = self._idle[first:]
            del self._idle[first:]
        return taken + [_pooled_thread_class()(self) for _ in range(count - len(taken))]

    def give_back(self, thread) -> None:
        with self._lock:
            self._idle.append(thread)


@functools.cache
def _pooled_thread_class():
    from numba.cuda.simulator.kernel import BlockThread, Dim3

    class PooledThread(BlockThread):
        """A simulator thread (``cuda.threadIdx`` and the rest read it, as
        ``threading.current_thread()``) that runs one block's kernel after another."""

        def __init__(self, pool):
            threading.Thread.__init__(self, daemon=True)
            self._pool = pool
            self._assigned = threading.Lock()
            self._assigned.acquire()
            self._job = None
            self.start()

        def assign(self, job, manager, block_index, thread_index) -> None:
            self._manager, self.blockIdx = manager, Dim3(*block_index)
            self.threadIdx = Dim3(*thread_index)
            block = manager._block_dim
            self.thread_id = thread_index[0] + block[0] * (
                thread_index[1] + block[1] * thread_index[2]
            )
            self.exception, self.abort, self.debug = None, False, manager._debug
            self.syncthreads_blocked = False
            self._job = job
            self._assigned.release()

        def run(self) -> None:
            alive = True
            while alive:
                self._assigned.acquire()
                manager, errors, alive = self._manager, np.geterr(), False
                try:
                    self._job()
                    alive = True
                except Exception as e:
                    # as BlockThread.run words it
                    where = f"tid={list(self.threadIdx)} ctaid={list(self.blockIdx)}"
                    message = where if str(e) == "" else f"{where}: {e}"
                    self.exception = (type(e)(message), sys.exc_info()[2])
                    alive = True
                finally:  # (anything else ends the thread, as it ends a simulator thread)
                    np.seterr(**errors)  # (a debug launch sets divide="raise")
                    self._job = None
                    error = self.exception
                    if alive:
                        self._pool.give_back(self)
                    manager.barrier.leave(error)

        def syncthreads(self) -> None:
            self._manager.barrier.wait()

    return PooledThread


_POOL = _Pool()


def _run_block(self, grid_point, *args) -> None:
    # BlockManager.run: the block's threads from the pool, waiting on a _BlockBarrier
    def job():
        if self._debug:
            np.seterr(divide="raise")
        self._f(*args)

    points = list(np.ndindex(*self._block_dim))
    self.barrier = _BlockBarrier(len(points))
    for thread, point in zip(_POOL.take(len(points)), points, strict=True):
        thread.assign(job, self, grid_point, point)
    self.barrier.join()
    if self.barrier.error is not None:
        error, traceback = self.barrier.error
        raise error.with_traceback(traceback)


_ARRAY_NAMES: dict[type, frozenset] = {}


def _kernel_array_attribute(self, name):
    # the simulator's FakeWithinKernelCUDAArray.__getattr__, with dir() of the array's type
    # computed once instead of at every attribute read (a.shape in a kernel)
    array = self._item._ary
    try:
        names = _ARRAY_NAMES.get(type(array)) if type(array) is np.ndarray else None
        if names is None:
            names = frozenset(dir(array))
            if type(array) is np.ndarray:
                _ARRAY_NAMES[np.ndarray] = names
        if name in names:
            value = getattr(array, name)
        else:
            value = self._item.__getitem__(name)
        return self._FakeWithinKernelCUDAArray__wrap_if_fake(value)
    except Exception as e:
        if not isinstance(e, AttributeError):
            raise AttributeError(name) from e


_SIMULATOR: list = []  # BlockManager.run as the simulator defines it


def quick_blocks() -> None:
    """Patch the simulator (once per process) to run blocks without its polling loop.

    The simulator's ``BlockManager.run`` polls its threads in a loop that holds the GIL until
    every live thread of the block has reached ``syncthreads``; each round waits for threads
    to get the GIL back from that loop, which made a 4 x 4 block's ``syncthreads`` cost
    milliseconds. Here the threads wait on a barrier (``_BlockBarrier``, the same rule: every
    live thread has arrived) and the launching thread joins them. And a kernel's ``a.shape``
    called ``dir()`` on the array each time."""
    from numba.cuda.simulator import kernel
    from numba.cuda.simulator.cudadrv import devicearray

    if _SIMULATOR:
        return
    _SIMULATOR.append(kernel.BlockManager.run)
    kernel.BlockManager.run = _run_block
    devicearray.FakeWithinKernelCUDAArray.__getattr__ = _kernel_array_attribute
