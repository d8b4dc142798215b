"""GPU memory nodes for the runtime: device, streams, allocation, copies.

Each GPU worker owns a ``CudaNode``: a compute stream and separate host-to-device and
device-to-host copy streams. Inputs of a task are uploaded on the ``h2d`` stream as soon as
the worker takes the task, and the compute stream waits for them through an event, so
uploads for the next task overlap the current kernel (``runtime/gpu_worker.py``). What a
codelet's kernel receives on a GPU comes from the backends table (``numtile.backends``).

Nothing here is imported unless a GPU (or Numba's CUDA simulator) is asked for; it needs
``numba.cuda`` (through ``numtile.cuda_driver``) and no kernel package.
"""

from __future__ import annotations

import math

import numpy as np

from numtile.cuda_driver import SIMULATOR, CudaUnavailableError, require
from numtile.runtime.gpu_worker import cuda_worker_loop


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


class CudaNode:
    """One GPU as a memory node and a worker's execution context (``id``: its memory node
    id, given by the runtime)."""

    def __init__(self, index: int, limit: int | None) -> None:
        cuda = require()
        self.cuda = cuda
        self.id: int | None = None
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

    def run_worker(self, runtime, worker: int) -> None:
        """The loop of the worker that computes on this GPU."""
        cuda_worker_loop(runtime, worker, self)

    def allocate(self, shape: tuple[int, ...], dtype: np.dtype):
        with self.device:
            return self.cuda.device_array(shape, dtype)

    def pinned_array(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """Page-locked host memory under this GPU's context (its copies into it are faster)."""
        with self.device:
            return self.cuda.pinned_array(shape, dtype)

    def upload(self, host: np.ndarray, device, sync: bool) -> None:
        with self.device:
            device.copy_to_device(host, stream=self.h2d)
            if sync:
                self.h2d.synchronize()

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
