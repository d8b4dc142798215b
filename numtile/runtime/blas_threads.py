"""Keep BLAS single-threaded inside the kernels, so each worker thread owns exactly one core.

Importing this module also loads SciPy's BLAS (the library the kernels call where oneMKL is
missing), so that threadpoolctl finds it, through ``load_scipy_blas_for_numba``.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys

import scipy
from threadpoolctl import ThreadpoolController

_CYTHON_MODULES = ("cython_blas", "cython_lapack")


def load_scipy_blas_for_numba() -> None:
    """Load SciPy's BLAS and pass Numba's one check of it without ``scipy.linalg``'s 0.3 s.

    Numba's CPU target imports ``scipy.linalg.cython_blas`` once, when its first kernel
    loads, only to see that it imports. That import runs ``scipy.linalg``'s package
    ``__init__``, whose array-API layer reads every attribute of NumPy and so imports
    ``numpy.f2py``, ``numpy.testing`` and ``numpy.ma``: 0.3 s of a 2 s start-up. Here the
    two Cython modules load by themselves (which loads the BLAS library they link), Numba
    runs its check against them, and they leave ``sys.modules`` again, so a later
    ``import scipy.linalg`` (ours in ``kernel_blas`` without oneMKL, or a user's) loads the
    package as usual and gets the same module objects (a Cython module is created once a
    process).
    """
    if "scipy.linalg" in sys.modules:
        return
    directory = os.path.join(os.path.dirname(scipy.__file__), "linalg")
    added = []
    try:
        for name in _CYTHON_MODULES:
            full_name = f"scipy.linalg.{name}"
            found = importlib.machinery.PathFinder.find_spec(name, [directory])
            if full_name in sys.modules or found is None:
                continue
            spec = importlib.util.spec_from_file_location(full_name, found.origin)
            module = importlib.util.module_from_spec(spec)
            sys.modules[full_name] = module
            added.append(full_name)
            spec.loader.exec_module(module)
        import numba.np.arraymath  # noqa: F401  (Numba's check: `import scipy.linalg.cython_blas`)
    finally:
        for full_name in added:
            del sys.modules[full_name]


load_scipy_blas_for_numba()


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
