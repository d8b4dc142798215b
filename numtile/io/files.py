"""Writing output files safely: atomic replacement, and checking a path before the work.

``atomic_output`` writes to a temporary file next to the target and renames it onto the
target once complete and synced; ``check_writable`` tells, before a long run, whether the
file it will write at the end (a checkpoint, a trace) can be written at all.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
from collections.abc import Iterator


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike) -> Iterator[str]:
    """Yield a temporary path next to ``path``; on success sync it and rename it onto ``path``.

    On any exception (``KeyboardInterrupt`` included) the temporary file is removed and
    ``path`` is left as it was. Temporary files that earlier writes of ``path`` left behind
    when their process was killed are removed first (not those of a process still running).

    >>> import os, tempfile
    >>> target = os.path.join(tempfile.mkdtemp(), "out.txt")
    >>> with atomic_output(target) as tmp:
    ...     _ = open(tmp, "w").write("done")
    >>> open(target).read()
    'done'
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    _remove_stale_temporaries(directory, os.path.basename(path))
    name = f".{os.path.basename(path)}.{os.getpid()}.{secrets.token_hex(6)}.tmp"
    tmp = os.path.join(directory, name)
    os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))  # umask applies
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        raise
    if hasattr(os, "O_DIRECTORY"):  # make the rename itself durable (POSIX only)
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _remove_stale_temporaries(directory: str, base: str) -> None:
    """Remove ``.base.[PID.]HEX.tmp`` files in ``directory`` whose writing process is gone."""
    pattern = re.compile(rf"\.{re.escape(base)}\.(?:(\d+)\.)?[0-9a-f]{{12}}\.tmp")
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        match = pattern.fullmatch(name)
        if match is None or (match[1] is not None and _process_alive(int(match[1]))):
            continue
        with contextlib.suppress(OSError):
            os.remove(os.path.join(directory, name))


def _process_alive(pid: int) -> bool:
    """True when process ``pid`` runs (ours included: a save of ours is never stale here)."""
    if pid == os.getpid():
        return False  # one process writes one path at a time: an own leftover is stale
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # it exists (another user's) or we cannot tell: keep its file
    return True


def check_writable(path: str | os.PathLike, what: str = "output") -> str:
    """Check, before any work, that a file can be written at ``path``; return it as a string.

    Raises ``IsADirectoryError`` when ``path`` is a folder, ``FileNotFoundError`` when its
    folder does not exist, and ``PermissionError``/``OSError`` (read-only file system, no
    permission, no space for a file) when a file cannot be created in that folder; each
    message starts with ``what`` and names the path. The check creates and removes a small
    temporary file, so it holds for root and for read-only mounts alike.

    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> check_writable(os.path.join(folder, "ckpt.h5"), "--checkpoint") == folder + "/ckpt.h5"
    True
    >>> check_writable(folder, "--checkpoint")
    Traceback (most recent call last):
    IsADirectoryError: --checkpoint ... is a folder, not a file name (e.g. .../out.h5)
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path)) or "."
    if os.path.isdir(path):
        raise IsADirectoryError(
            f"{what} {path} is a folder, not a file name (e.g. {os.path.join(path, 'out.h5')})"
        )
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"{what} {path}: its folder {directory} does not exist")
    probe = os.path.join(directory, f".numtile-write-check.{secrets.token_hex(6)}.tmp")
    try:
        os.close(os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except OSError as exc:
        raise type(exc)(
            exc.errno, f"{what} {path}: cannot write in {directory} ({exc.strerror})"
        ) from None
    os.remove(probe)
    return path
