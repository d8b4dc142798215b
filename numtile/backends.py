"""Where the runtime meets the kernels: one row per kind of worker.

``BACKENDS`` maps each worker kind to a ``WorkerKind`` row (``numtile/runtime/kinds.py``):
the ops namespace a codelet's ``kernel(ops, *tiles, *args)`` receives on a worker of that
kind, how many workers of it a ``Config`` asks for, and the memory node each one uses.

- ``cpu``: ``numtile.ops_cpu`` itself, ``ncpu`` workers computing in host RAM; the host
  kind, which also runs the runtime's own bookkeeping tasks.
- ``cuda``: ``StreamOps``, ``numtile.ops_cuda`` with the worker's compute stream bound, one
  worker per GPU (``ncuda``), each on its ``CudaNode``. Starting a node hands the kernels
  the runtime's launch settings (``ops_cuda.configure(block=..., gemm_tile=...)``).

The runtime imports no kernel package and never names a kind: a new backend (or a new kind
of node) is one package plus one row here. Importing this module registers ``BACKENDS`` as
the table runtimes start with (``numtile`` imports it); ``numtile.init(backends=...)`` or
``Runtime(config, backends=...)`` start one with another table.

>>> sorted(BACKENDS), BACKENDS["cpu"].host
(['cpu', 'cuda', 'mpi'], True)
"""

from __future__ import annotations

import functools
import inspect
import types

import numpy as np

from numtile.config import Config
from numtile.cuda_driver import CudaUnavailableError, gpu_possible, require
from numtile.runtime.kinds import WorkerKind, register_default_backends


def _cpu_ops(node: None) -> types.ModuleType:
    """What a kernel receives on a CPU worker: the CPU kernels themselves."""
    from numtile import ops_cpu

    return ops_cpu


def _cpu_workers(config: Config, required: bool) -> int:
    return config.ncpu


def _parameters(function) -> set[str]:
    try:
        return set(inspect.signature(function).parameters)
    except (TypeError, ValueError):  # builtins and classes without a signature
        return set()


class StreamOps:
    """``numtile.ops_cuda`` (or one of its modules) with ``stream=`` bound: a codelet calls
    ``ops.gemm(a, b, c, ...)`` the same way on either backend.

    >>> import types
    >>> module = types.SimpleNamespace(scale=lambda x, stream=None: (x, stream), EXP=3)
    >>> ops = StreamOps("s0", module)
    >>> ops.scale(2), ops.EXP
    ((2, 's0'), 3)
    """

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


def _cuda_ops(node) -> StreamOps:
    """What a kernel receives on a GPU worker: the CUDA kernels on its compute stream."""
    return StreamOps(node.compute)


def _cuda_workers(config: Config, required: bool) -> int:
    """The GPUs asked for (``ncuda``; ``required`` under ``restrict='cuda'``), checked up front."""
    if config.ncuda == 0:
        if required:
            raise ValueError("restrict='cuda' but NUMTILE_NCUDA=0 asks for no GPU")
        return 0
    if config.ncuda < 0 and not required and not gpu_possible():
        return 0  # the common CPU-only case: do not even import numba.cuda
    from numtile.runtime.cuda import detect_gpus

    ncuda = detect_gpus(config.ncuda)
    if ncuda == 0 and required:
        raise CudaUnavailableError(
            "restrict='cuda' but no GPU was found (set NUMTILE_NCUDA=1 to use Numba's "
            "CUDA simulator under NUMBA_ENABLE_CUDASIM=1)"
        )
    return ncuda


def _start_cuda_node(index: int, config: Config):
    """GPU ``index`` as a memory node, its kernels launched with ``config``'s shapes."""
    from numtile import ops_cuda
    from numtile.runtime.cuda import CudaNode

    configure = getattr(ops_cuda, "configure", None)
    if configure is not None:
        configure(block=config.cuda_block, gemm_tile=config.cuda_gemm_tile)
    return CudaNode(index, config.cuda_mem_limit)


def _mpi_workers(config: Config, required: bool) -> int:
    """One transfer worker when distributed (asked for, or started by mpiexec with P > 1)."""
    from numtile.runtime.distributed import launched_by_mpi

    distributed = config.distributed
    if distributed is None:
        distributed = launched_by_mpi()
    return 1 if distributed else 0


def _start_mpi_node(index: int, config: Config):
    """This process's rank in ``MPI.COMM_WORLD`` as a node (imports mpi4py)."""
    from numtile.runtime.distributed.node import MpiNode

    return MpiNode(config)


BACKENDS: dict[str, WorkerKind] = {
    "cpu": WorkerKind(ops=_cpu_ops, workers=_cpu_workers, host=True),
    "cuda": WorkerKind(ops=_cuda_ops, workers=_cuda_workers, start_node=_start_cuda_node),
    "mpi": WorkerKind(
        ops=lambda node: node, workers=_mpi_workers, start_node=_start_mpi_node, generic=False
    ),
}

register_default_backends(BACKENDS)
