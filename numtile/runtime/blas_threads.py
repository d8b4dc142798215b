"""Keep BLAS single-threaded inside the kernels, so each worker thread owns exactly one core."""

from __future__ import annotations

import os

import scipy.linalg  # noqa: F401  (loads the BLAS that the kernels call, so it can be found)
from threadpoolctl import ThreadpoolController


class BlasLimit:
    """The thread counts changed by ``limit_kernel_blas_threads``, to restore at shutdown."""

    def __init__(self, changed: list[tuple[object, int]]) -> None:
        self.changed = changed

    def restore_original_limits(self) -> None:
        for controller, threads in self.changed:
            controller.set_num_threads(threads)
        self.changed = []


def limit_kernel_blas_threads(threads: int) -> BlasLimit:
    """Limit the BLAS libraries the kernels use (SciPy's) to ``threads`` threads.

    NumPy's own BLAS is left alone when it is a separate library, so user code outside
    the runtime (``numpy @``) keeps all its threads.

    >>> limit = limit_kernel_blas_threads(1); limit.restore_original_limits()
    """
    numpy_dir = os.path.dirname(__import__("numpy").__file__)
    changed = []
    for controller in ThreadpoolController().lib_controllers:
        if controller.user_api != "blas":
            continue
        path = controller.filepath or ""
        if path.startswith(numpy_dir) or os.sep + "numpy.libs" + os.sep in path:
            continue
        changed.append((controller, controller.get_num_threads()))
        controller.set_num_threads(threads)
    return BlasLimit(changed)
