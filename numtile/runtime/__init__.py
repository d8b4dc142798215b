"""The task runtime: data handles, codelets, tasks, schedulers, workers and tracing."""

from numtile.runtime.access import Access
from numtile.runtime.codelet import REGISTRY, Codelet
from numtile.runtime.engine import Runtime, RuntimeShutdownError
from numtile.runtime.handle import HOST, DataHandle, InvalidatedError, ReplicaState
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
    "ReplicaState",
    "Runtime",
    "RuntimeShutdownError",
    "Task",
    "TaskCancelled",
    "TaskError",
    "TaskState",
    "WorkerDiedError",
    "get_runtime",
    "init",
    "runtime_summary",
    "shutdown",
    "trace",
    "wait_all",
]
