"""Ranks on one host compile each Numba kernel once, not once each.

Every rank runs the same program, so with an empty Numba cache all the ranks of a host
compile the same kernels at the same moment: P times the CPU of one process, on cores the
ranks share (3 ranks on 2 loaded cores took 132 s to start the distributed test program,
most of it compiling, against its 240 s limit). Holding a per-host file lock around each
compile of a cached kernel makes the first rank compile and write it to the cache while the
others wait, then load it from there (Numba's ``Dispatcher.compile`` looks in the disk cache
before compiling). Kernels without a disk cache compile without the lock.

The order of the locks is always Numba's in-process compiler lock, then the file lock (the
file lock is taken inside the other), so no two threads or ranks wait for each other in a
cycle; nested compiles (a kernel's callees) take neither again. The lock is the launch's
(``lock_path(launch)``, a name rank 0 draws): other numtile programs of the host keep
compiling on their own.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import tempfile

_installed: list[str] = []  # the lock file, once installed


def lock_path(launch: str) -> str:
    """The lock file of the compiles of the ranks of ``launch`` on this host."""
    return os.path.join(tempfile.gettempdir(), f"numtile-compile-{launch}.lock")


def compile_once_per_host(path: str) -> None:
    """Make this process's cached Numba compiles take the lock file ``path`` (once)."""
    if _installed:
        return
    from numba.core import dispatcher
    from numba.core.caching import NullCache
    from numba.core.compiler_lock import global_compiler_lock

    original = dispatcher.Dispatcher.compile
    depth = [0]  # compiles in progress in this process (under Numba's lock: one thread)

    def compile(self, sig):
        if isinstance(self._cache, NullCache):
            return original(self, sig)
        with global_compiler_lock:
            fd = None
            if depth[0] == 0:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
                fcntl.flock(fd, fcntl.LOCK_EX)
            depth[0] += 1
            try:
                return original(self, sig)
            finally:
                depth[0] -= 1
                if fd is not None:
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    os.close(fd)

    dispatcher.Dispatcher.compile = compile
    _installed.append(path)
    atexit.register(_remove, path)  # a rank still compiling then only loses the sharing


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.remove(path)
