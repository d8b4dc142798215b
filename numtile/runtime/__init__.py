"""The task runtime: data handles, codelets, tasks, schedulers, workers and tracing.

It imports no kernel package: the kinds of worker and what their codelets receive come from
the backends table it is started with (``numtile.backends``; see ``runtime/kinds.py``).
"""

from numtile.runtime.access import Access
from numtile.runtime.codelet import REGISTRY, Codelet
from numtile.runtime.engine import Runtime, RuntimeShutdownError
from numtile.runtime.handle import HOST, DataHandle, InvalidatedError
from numtile.runtime.kinds import WorkerKind
from numtile.runtime.session import (
    get_runtime,
    init,
    runtime_summary,
    shutdown,
    trace,
    wait_all,
)
from numtile.runtime.supervision import WorkerDiedError
from numtile.runtime.task import Task, TaskCancelled, TaskError, TaskState

__all__ = [
    "HOST",
    "REGISTRY",
    "Access",
    "Codelet",
    "DataHandle",
    "InvalidatedError",
    "Runtime",
    "RuntimeShutdownError",
    "Task",
    "TaskCancelled",
    "TaskError",
    "TaskState",
    "WorkerDiedError",
    "WorkerKind",
    "get_runtime",
    "init",
    "runtime_summary",
    "shutdown",
    "trace",
    "wait_all",
]
