"""Spill files: tiles evicted from a limited host memory, one raw file per tile.

The memory manager (``runtime/memory.py``) decides what to evict; this module only writes,
reads and removes the files, and turns a failed write into a ``SpillError`` naming the folder.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import numpy as np

from numtile.runtime.handle import DataHandle


class SpillError(OSError):
    """A tile evicted from limited host RAM could not be written to the spill folder (disk
    full, quota, I/O error): an ``OSError`` with the original ``errno``, whose message names
    the folder and the host memory limit. The tile stays in RAM, no partial file is left."""


def format_bytes(n: float) -> str:
    """``1536`` -> ``'1.5 KiB'``.

    >>> format_bytes(3 << 20)
    '3.0 MiB'
    """
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover


def _bytes_of(array: np.ndarray) -> np.ndarray:
    """A contiguous ``array``'s bytes as a flat uint8 view (a ``memoryview`` cannot be taken
    of dtypes outside the buffer protocol, such as ml_dtypes' bfloat16)."""
    return array.reshape(-1).view(np.uint8)


class Spill:
    """Tiles evicted from a limited host memory, one raw file per tile."""

    def __init__(self, directory: str | None, limit: int | None = None) -> None:
        self.limit = limit
        self.owned = directory is None
        if directory is None:
            directory = tempfile.mkdtemp(prefix="numtile-spill-")
        try:
            os.makedirs(directory, exist_ok=True)
            probe = tempfile.NamedTemporaryFile(dir=directory, prefix=".probe-", delete=True)
            probe.close()
        except OSError as exc:
            raise OSError(
                f"the spill directory {directory!r} is not writable ({exc}); set "
                "NUMTILE_SPILL_DIR to a writable directory"
            ) from None
        self.directory = directory
        self.writes = 0  # files written and read; their bytes are the manager's transfers
        self.reads = 0

    def path(self, handle: DataHandle) -> str:
        return os.path.join(self.directory, f"tile-{os.getpid()}-{handle.id}.bin")

    def write(self, handle: DataHandle, array: np.ndarray) -> str:
        """Write ``handle``'s tile to its file; on failure remove the partial file and raise
        ``SpillError`` (the caller keeps the tile in RAM)."""
        path = self.path(handle)
        try:
            with open(path, "wb") as f:
                f.write(_bytes_of(np.ascontiguousarray(array)))
        except BaseException as exc:  # a KeyboardInterrupt mid-write leaves no file either
            self.remove(path)
            if not isinstance(exc, OSError):
                raise
            limit = "unlimited" if self.limit is None else format_bytes(self.limit)
            raise SpillError(
                exc.errno,
                f"cannot spill tile #{handle.id} ({format_bytes(handle.nbytes)}) to the spill "
                f"folder {self.directory!r}: {exc.strerror or exc}. Host memory is limited to "
                f"{limit} (NUMTILE_HOST_MEM_LIMIT) and tiles beyond it go to that folder: free "
                "space there, set NUMTILE_SPILL_DIR to a larger folder, or raise the limit",
            ) from None  # the OSError's frames would keep this tile alive
        self.writes += 1
        return path

    def read(self, path: str, out: np.ndarray) -> None:
        with open(path, "rb") as f:
            if f.readinto(_bytes_of(out)) != out.nbytes:
                raise OSError(f"spill file {path} is truncated")
        self.reads += 1

    @staticmethod
    def remove(path: str) -> None:
        try:
            os.remove(path)
        except OSError:
            pass

    def close(self) -> None:
        """Remove the spill files: the whole folder if numtile made it, else this process's
        files only (the tiles of live handles are left at exit, when nothing reads them)."""
        if self.owned:
            shutil.rmtree(self.directory, ignore_errors=True)
            return
        prefix = f"tile-{os.getpid()}-"
        try:
            names = os.listdir(self.directory)
        except OSError:
            return
        for name in names:
            if name.startswith(prefix) and name.endswith(".bin"):
                self.remove(os.path.join(self.directory, name))
