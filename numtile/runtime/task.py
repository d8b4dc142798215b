"""``Task``: one codelet applied to some handles, plus the errors a task can raise."""

from __future__ import annotations

import copy
import enum
import functools
import linecache
import traceback
from typing import TYPE_CHECKING

from numtile.runtime.access import Access

if TYPE_CHECKING:
    from numtile.runtime.codelet import Codelet
    from numtile.runtime.handle import DataHandle


class TaskState(enum.IntEnum):
    WAITING = 0  # some predecessor has not finished
    READY = 1  # queued on a scheduler
    RUNNING = 2
    DONE = 3
    FAILED = 4  # raised, or cancelled because a predecessor failed


class TaskError(RuntimeError):
    """An exception raised inside a task, re-raised at the next wait naming the task."""

    # defined here so that the mixed ``TaskError[kind]`` classes of ``task_error`` keep their
    # message: ``kind``'s own ``__str__`` may print nothing (UnicodeDecodeError without its
    # fields) or raise
    def __str__(self) -> str:
        if len(self.args) == 1 and isinstance(self.args[0], str):
            return self.args[0]
        return RuntimeError.__str__(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r})"


class TaskCancelled(TaskError):
    """A task that did not run because a task it depends on failed (``root``)."""

    def __init__(self, message: str, root: BaseException | None = None) -> None:
        super().__init__(message)
        self.root = root


def task_error(message: str, cause: BaseException) -> TaskError:
    """A ``TaskError`` that is also an instance of ``cause``'s type where Python allows.

    So ``except numpy.linalg.LinAlgError`` still catches a failed Cholesky tile, and a task
    that called ``sys.exit()`` or raised ``KeyboardInterrupt`` is caught by ``except
    SystemExit`` / ``except KeyboardInterrupt`` (and by ``except TaskError``). A type that
    cannot be mixed in (instance layout, a constructor needing other arguments, a class that
    refuses subclasses) gives a plain ``TaskError``. ``cause`` (its ``__cause__``) keeps its
    traceback as text in a note, not its frames: stored errors must not keep tiles alive.
    """
    error = None
    try:
        error_class = _error_class(type(cause))
    except TypeError:  # an exception type that cannot be hashed (a metaclass's doing)
        error_class = None
    if error_class is not None:
        try:
            error = error_class(message)
        except Exception:  # a constructor of ``cause``'s type that needs more
            error = None
    if error is None:
        error = TaskError(message)
    if isinstance(cause, SystemExit) and isinstance(error, SystemExit):
        error.code = cause.code  # an uncaught one still exits with the task's status
    if isinstance(cause, OSError) and isinstance(error, OSError):  # errno == ENOSPC, ...
        error.errno, error.strerror = cause.errno, cause.strerror
        error.filename, error.filename2 = cause.filename, cause.filename2
    forget_frames(cause)
    error.__cause__ = cause
    return error


def raisable(error: BaseException) -> BaseException:
    """A copy of a stored ``error`` to raise at a wait (same type, message, notes, cause).

    Raising the stored instance itself would attach the waiting code's frames to it: the
    failed tile keeps its error, so those frames, their local tensors and, through the
    tensors, the error again would live on as a cycle that only a full garbage collection
    frees (tensors "freed" by the user would keep their memory and spill files meanwhile).

    >>> stored = task_error("task 'x' (#0) raised ValueError: bad", ValueError("bad"))
    >>> fresh = raisable(stored)
    >>> fresh is not stored, type(fresh) is type(stored), isinstance(fresh, ValueError)
    (True, True, True)
    """
    try:
        fresh = copy.copy(error)
    except Exception:  # a type that cannot be rebuilt from its args: raise it, frames and all
        return error.with_traceback(None)
    fresh.__cause__ = error.__cause__
    fresh.__traceback__ = None
    if hasattr(error, "__notes__"):
        fresh.__notes__ = list(error.__notes__)  # a note added to the copy stays there
    for name in ("code", "errno", "strerror", "filename", "filename2"):  # not in __dict__
        if hasattr(error, name):
            try:
                setattr(fresh, name, getattr(error, name))
            except AttributeError:
                pass
    return fresh


@functools.lru_cache(maxsize=256)
def _error_class(kind: type) -> type | None:
    """``TaskError[kind]``, made once per exception type; None where Python refuses."""
    try:
        return type(f"TaskError[{kind.__name__}]", (TaskError, kind), {})
    except Exception:  # incompatible layouts (some built-in exceptions), final classes
        return None


def exception_text(exc: BaseException) -> str:
    """``'ValueError: bad tile'``, for any exception: its type name alone when its message
    is empty, its ``repr`` (or a note) when its ``__str__`` raises.

    >>> exception_text(KeyError("x")), exception_text(KeyboardInterrupt())
    ("KeyError: 'x'", 'KeyboardInterrupt')
    """
    name = type(exc).__qualname__
    try:
        text = str(exc)
    except Exception as failure:
        try:
            text = f"{exc!r} (its __str__ raised {type(failure).__name__})"
        except Exception:
            text = f"(its __str__ and __repr__ raised {type(failure).__name__})"
    return f"{name}: {text}" if text else name


def forget_frames(exc: BaseException) -> None:
    """Replace ``exc``'s traceback (and its chained exceptions') with a note holding its text.

    A stored error must not keep frames: a frame holds its locals (the task's tiles and
    handles) and, through ``f_back``, every frame that called it (under the sync scheduler the
    user's own). The frames still running (the worker that caught ``exc``) are left out of the
    text; the walk stops at a chained exception still being handled by a running frame (the
    user's, under the sync scheduler: not ours to change).

    >>> try:
    ...     {}["missing"]
    ... except KeyError as exc:
    ...     error = exc
    >>> forget_frames(error)
    >>> error.__traceback__ is None, error.__notes__[0].splitlines()[0]
    (True, 'Traceback in the task (most recent call last):')
    """
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        tb = exc.__traceback__
        if tb is not None:
            lines = []
            for frame, line in traceback.walk_tb(tb):
                if _running(frame):
                    if len(seen) > 1:
                        return
                    continue
                code = frame.f_code
                source = linecache.getline(code.co_filename, line).strip()
                lines.append(f'  File "{code.co_filename}", line {line}, in {code.co_name}\n')
                if source:
                    lines.append(f"    {source}\n")
            exc.__traceback__ = None
            try:
                exc.add_note("Traceback in the task (most recent call last):\n" + "".join(lines))
            except Exception:  # a type that refuses notes keeps its message only
                pass
        exc = exc.__cause__ or exc.__context__


def _running(frame) -> bool:
    """True while ``frame`` executes; a finished one has its locals cleared on the way."""
    try:
        frame.clear()
    except RuntimeError:
        return True
    return False


class Task:
    """A codelet applied to handles with access modes; built by ``Runtime.submit``."""

    __slots__ = (
        "codelet",
        "handles",
        "modes",
        "args",
        "priority",
        "seq",
        "n_pending",
        "successors",
        "state",
        "error",
        "cancelled_by",
        "worker",
        "start",
        "end",
        "name",
        "awaited",
        "_scratch",
    )

    def __init__(
        self,
        codelet: Codelet,
        handles: list[DataHandle],
        modes: list[Access],
        args: tuple,
        priority: int,
        seq: int,
        name: str | None,
    ) -> None:
        self.codelet = codelet
        self.handles = handles
        self.modes = modes
        self.args = args
        self.priority = priority
        self.seq = seq
        self.n_pending = 0
        self.successors: list[tuple[Task, bool]] = []  # (task, reads what this one wrote)
        self.state = TaskState.WAITING
        self.error: BaseException | None = None
        self.cancelled_by: BaseException | None = None
        self.worker = -1
        self.start = 0.0
        self.end = 0.0
        self.name = name
        self.awaited = False  # a thread waits for this task (``Runtime.wait_handles``)
        self._scratch: int | None = None

    @property
    def finished(self) -> bool:
        return self.state >= TaskState.DONE

    def scratch_bytes(self) -> int:
        """The working memory the codelet declares for this call (``Codelet.scratch``),
        computed on the first call and kept (asked at submission under a limit, and again
        by the memory manager's ``acquire``)."""
        if self._scratch is None:
            scratch = self.codelet.scratch
            self._scratch = 0 if scratch is None else int(scratch(*self.handles, *self.args))
        return self._scratch

    def describe(self) -> str:
        """Human-readable name: codelet, sequence number and tiles touched."""
        tiles = ", ".join(
            f"#{h.id}{list(h.shape)}:{m.name}" for h, m in zip(self.handles, self.modes)
        )
        label = self.name or self.codelet.name
        return f"task {label!r} (#{self.seq}) on tiles [{tiles}]"

    def __lt__(self, other: Task) -> bool:  # heap order: higher priority, then program order
        return (-self.priority, self.seq) < (-other.priority, other.seq)

    def __repr__(self) -> str:
        return f"<Task {self.describe()} {self.state.name}>"
