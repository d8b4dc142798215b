"""Whether CUDA can be used here, without loading any kernel: a leaf module.

Both the runtime (to start GPU workers) and the CUDA kernels (to launch) ask it. Nothing
here imports ``numba.cuda`` until ``require()`` is called, so ``import numtile`` and a
CPU-only runtime never load it.
"""

from __future__ import annotations

import os


class CudaUnavailableError(RuntimeError):
    """Raised when CUDA is asked for where there is no usable GPU (or no numba-cuda)."""


def _simulator() -> bool:
    try:
        from numba import config
    except ImportError:  # pragma: no cover - numba is a hard dependency
        return False
    return bool(getattr(config, "ENABLE_CUDASIM", False))


SIMULATOR = _simulator()


def gpu_possible() -> bool:
    """Cheap test for an NVIDIA driver (or the CUDA simulator) before importing numba.cuda."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        return True
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/dxg")


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
    """True when ``require()`` would succeed."""
    try:
        require()
    except CudaUnavailableError:
        return False
    return True
