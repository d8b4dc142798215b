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
"""

from __future__ import annotations

import sys
import threading

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
