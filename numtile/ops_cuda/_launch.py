"""Launch helpers shared by the CUDA kernels: availability, block and grid sizes.

Every 1-D kernel is a grid-stride loop launched as ``kernel[grid(n), block(), stream]``:
``block()`` threads per block (``NUMTILE_CUDA_BLOCK``) and just enough blocks to cover
``n`` items, capped so huge tiles reuse threads instead of launching millions of blocks.
"""

from __future__ import annotations

import math

from numtile.config import Config


class CudaUnavailableError(RuntimeError):
    """Raised when CUDA is asked for where there is no usable GPU (or no numba-cuda)."""


def _simulator() -> bool:
    try:
        from numba import config
    except ImportError:  # pragma: no cover - numba is a hard dependency
        return False
    return bool(getattr(config, "ENABLE_CUDASIM", False))


SIMULATOR = _simulator()
# the simulator runs every thread as a Python thread: few blocks keep it fast, and grid-stride
# loops make any count correct
MAX_BLOCKS = 2 if SIMULATOR else 8192


def require():
    """Return the ``numba.cuda`` module, or raise ``CudaUnavailableError`` saying why."""
    try:
        from numba import cuda
    except ImportError as exc:
        raise CudaUnavailableError(
            f"CUDA support needs numba-cuda ({exc}); install it with: pip install 'numtile[cuda]'"
        ) from None
    if not cuda.is_available():
        raise CudaUnavailableError(
            "no CUDA GPU is usable here (numba.cuda.is_available() is False); run on a machine "
            "with an NVIDIA GPU and driver, set NUMBA_ENABLE_CUDASIM=1 to use Numba's CUDA "
            "simulator, or use the CPU backend (NUMTILE_NCUDA=0)"
        )
    return cuda


def available() -> bool:
    try:
        require()
    except CudaUnavailableError:
        return False
    return True


def block() -> int:
    """Threads per block of the 1-D grid-stride kernels."""
    return Config.defaults().cuda_block


def grid(n: int) -> int:
    """Blocks for ``n`` items: at least one, at most ``MAX_BLOCKS``."""
    return max(1, min(MAX_BLOCKS, math.ceil(n / block())))
