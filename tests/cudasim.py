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
"""

from __future__ import annotations

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
