"""Numba's disk cache for numtile's kernels, keyed by every kernel source file at once.

Numba stamps a cached function with the hash of the one file that defines it. A kernel inlines
helpers from other files (``fastmath_pow`` into ``elementwise``, ``qr._geqrf`` into
``tsqr.qr_leaf``) and bakes in constants from ``opcodes``, so after an edit to a helper the
cache still hands back the old machine code. That is wrong results at best, and a crash when
the old code calls a LAPACK symbol that numtile no longer registers (a stale ``qr_leaf`` that
still called ``geqrf`` did exactly that). Installing a new numtile over an old one leaves
the old ``__pycache__`` files behind too.

``use_kernel_stamps()`` puts locators in front of Numba's own for the files of the kernel
packages: the same cache directories, but the stamp is one digest of all those sources, so
any edit to any of them recompiles every kernel on its next use (once; the new code is then
cached). Files outside the kernel packages keep Numba's usual per-file stamp.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from numba.core import caching

PACKAGE = Path(__file__).resolve().parent
# the sources any kernel may compile in: both kernel packages and the neutral modules
# they import
KERNEL_PACKAGES = ("ops_cpu", "ops_cuda")
KERNEL_MODULES = ("opcodes.py", "config.py", "complex_math.py", "cuda_driver.py", "kernel_cache.py")


def kernel_sources() -> list[Path]:
    """Every source file whose edit may change a compiled kernel, in a fixed order."""
    files = [PACKAGE / name for name in KERNEL_MODULES if (PACKAGE / name).exists()]
    for package in KERNEL_PACKAGES:
        files.extend(sorted((PACKAGE / package).rglob("*.py")))
    return files


@functools.lru_cache(maxsize=1)
def sources_digest() -> bytes:
    """SHA-256 over the names and contents of ``kernel_sources()`` (computed once a process)."""
    digest = hashlib.sha256()
    for path in kernel_sources():
        digest.update(path.relative_to(PACKAGE).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.digest()


def is_kernel_source(py_file: str) -> bool:
    """Whether ``py_file`` belongs to one of the kernel packages."""
    try:
        relative = Path(py_file).resolve().relative_to(PACKAGE)
    except ValueError:
        return False
    return relative.parts[0] in KERNEL_PACKAGES


class _KernelStamp:
    """Mixin: a Numba locator that takes only kernel files and stamps them all with one digest."""

    def get_source_stamp(self):
        return sources_digest()

    @classmethod
    def from_function(cls, py_func, py_file):
        if not is_kernel_source(py_file):
            return None
        return super().from_function(py_func, py_file)


# one per Numba locator that reads a source file, in Numba's order (a cache directory the
# user named comes first, then the package's __pycache__, then the user-wide one)
LOCATORS = tuple(
    type(f"Kernel{base.__name__}", (_KernelStamp, base), {})
    for base in (
        caching.UserProvidedCacheLocator,
        caching.InTreeCacheLocator,
        caching.UserWideCacheLocator,
    )
)


def use_kernel_stamps() -> None:
    """Put numtile's locators in front of Numba's (idempotent). Must run before a kernel
    module is imported: Numba picks a function's locator when ``@njit(cache=True)`` runs."""
    impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl  # renamed in Numba 0.61
    classes = impl._locator_classes
    if classes[: len(LOCATORS)] != list(LOCATORS):
        classes[:] = list(LOCATORS) + [c for c in classes if c not in LOCATORS]


use_kernel_stamps()  # on import: the kernel packages import this module before any kernel
