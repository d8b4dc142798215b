"""``Task``: one codelet applied to some handles, plus the errors a task can raise."""

from __future__ import annotations

import enum
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


class TaskCancelled(TaskError):
    """A task that did not run because a task it depends on failed (``root``)."""

    def __init__(self, message: str, root: BaseException | None = None) -> None:
        super().__init__(message)
        self.root = root


def task_error(message: str, cause: BaseException) -> TaskError:
    """A ``TaskError`` that is also an instance of ``cause``'s type where Python allows.

    So ``except numpy.linalg.LinAlgError`` still catches a failed Cholesky tile.
    """
    kind = type(cause)
    try:
        error_class = type(f"TaskError[{kind.__name__}]", (TaskError, kind), {})
        error = error_class(message)
    except TypeError:  # incompatible layouts (some built-in exceptions): plain TaskError
        error = TaskError(message)
    error.__cause__ = cause
    return error


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

    @property
    def finished(self) -> bool:
        return self.state >= TaskState.DONE

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
