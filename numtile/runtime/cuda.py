"""GPU memory nodes for the runtime: device, streams, allocation, copies, kernel namespace.

Each GPU worker owns a ``CudaNode``: a compute stream and separate host-to-device and
device-to-host copy streams. Inputs of a task are uploaded on the ``h2d`` stream as soon as
the worker takes the task, and the compute stream waits for them through an event, so
uploads for the next task overlap the current kernel. ``StreamOps`` is what a codelet's
``kernel`` receives on a GPU: ``numtile.ops_cuda`` with the compute stream bound.

Nothing here is imported unless a GPU (or Numba's CUDA simulator) is asked for.
"""

from __future__ import annotations

import functools
import inspect
import math
import types

import numpy as np

from numtile.cuda_driver import SIMULATOR, CudaUnavailableError, require


def detect_gpus(requested: int) -> int:
    """How many GPU workers to start: ``requested`` (> 0), or every GPU found when it is -1
    (the runtime has already seen a driver's device files before importing this module).

    Under Numba's CUDA simulator nothing is found unless asked for explicitly (the simulator
    runs kernels in Python threads: far too slow to be picked by default).
    """
    if requested < 0:
        if SIMULATOR:
            return 0
        try:
            return len(require().gpus)
        except CudaUnavailableError:
            return 0
    cuda = require()
    found = len(cuda.gpus)
    if requested > found:
        raise CudaUnavailableError(f"NUMTILE_NCUDA={requested} GPUs asked for, {found} found")
    return requested


def _parameters(function) -> set[str]:
    try:
        return set(inspect.signature(function).parameters)
    except (TypeError, ValueError):  # builtins and classes without a signature
        return set()


class StreamOps:
    """``numtile.ops_cuda`` (or one of its modules) with ``stream=`` bound: a codelet calls
    ``ops.gemm(a, b, c, ...)`` the same way on either backend."""

    def __init__(self, stream, module=None) -> None:
        if module is None:
            import numtile.ops_cuda as module
        self.stream = stream
        self._module = module

    def __getattr__(self, name: str):
        value = getattr(self._module, name)
        if isinstance(value, types.ModuleType):  # a submodule, e.g. ops.nn
            bound = StreamOps(self.stream, value)
        elif callable(value) and "stream" in _parameters(value):  # a kernel launcher
            bound = functools.partial(value, stream=self.stream)
        else:
            bound = value  # constants such as op codes
        self.__dict__[name] = bound
        return bound

    # helpers beyond kernels, with the same meaning as their ``ops_cpu`` twins

    def empty(self, shape, dtype):
        """Scratch device memory (rarely needed: kernels get their outputs)."""
        return require().device_array(shape, dtype, stream=self.stream)

    def to_host(self, array) -> np.ndarray:
        """A host copy of a small device array (synchronises the stream)."""
        out = array.copy_to_host(stream=self.stream)
        self.stream.synchronize()
        return out

    def potrf(self, a) -> int:
        """Cholesky of one tile, returning LAPACK's ``info`` like the CPU twin."""
        info = require().device_array(1, np.int64, stream=self.stream)
        self._module.potrf(a, info, stream=self.stream)
        return int(self.to_host(info)[0])


class CudaNode:
    """One GPU as a memory node and a worker's execution context."""

    kind = "cuda"

    def __init__(self, index: int, limit: int | None) -> None:
        cuda = require()
        self.cuda = cuda
        self.index = index
        self.id = index + 1  # memory node id (0 is host)
        self.name = f"cuda{index}"
        self.device = cuda.gpus[index]
        with self.device:
            self.compute = cuda.stream()
            self.h2d = cuda.stream()
            self.d2h = cuda.stream()
            free = cuda.current_context().get_memory_info().free
        if limit is not None:
            self.capacity = limit
        elif free is None or math.isinf(free):  # the simulator: no real memory to count
            self.capacity = None
        else:  # leave room for the CUDA context, cuBLAS workspaces and fragmentation
            self.capacity = int(free * 0.9)
        self.ops = StreamOps(self.compute)

    def allocate(self, shape: tuple[int, ...], dtype: np.dtype):
        with self.device:
            return self.cuda.device_array(shape, dtype)

    def upload(self, host: np.ndarray, device, stream, sync: bool) -> None:
        with self.device:
            device.copy_to_device(host, stream=stream)
            if sync:
                stream.synchronize()

    def download(self, device, host: np.ndarray) -> None:
        with self.device:
            # the d2h stream is not ordered after h2d: a replica whose upload is still in
            # flight (a stage abandoned half way) must land before it is read back
            self._event_after(self.h2d).wait(self.d2h)
            device.copy_to_host(host, stream=self.d2h)
            self.d2h.synchronize()

    def event_after_uploads(self):
        """An event the compute stream waits on: every upload issued so far has landed."""
        return self._event_after(self.h2d)

    def _event_after(self, stream):
        """An event recorded on ``stream``, without timing data (cheaper to record and wait on;
        the simulator's events take no arguments)."""
        event = self.cuda.event() if SIMULATOR else self.cuda.event(timing=False)
        event.record(stream)
        return event

    def __repr__(self) -> str:
        return f"CudaNode({self.name}, capacity={self.capacity})"
