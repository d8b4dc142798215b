"""CUDA tile kernels: the ``@cuda.jit`` twins of ``numtile.ops_cpu``.

Each public function has the name and signature of its ``ops_cpu`` twin plus a keyword-only
``stream`` (``0``: the default stream). Arrays are device arrays (``numba.cuda``
``DeviceNDArray``, or the simulator's stand-in under ``NUMBA_ENABLE_CUDASIM=1``). A function
only launches work on ``stream``: it never synchronises and never allocates its outputs.

Importing this package needs ``numba.cuda`` but no GPU; launching needs a GPU or the
simulator (``require()`` says which is missing).
"""

from numtile.ops_cuda._launch import SIMULATOR, CudaUnavailableError, available, require

__all__ = ["SIMULATOR", "CudaUnavailableError", "available", "require"]
