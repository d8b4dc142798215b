"""Dependency inference for sequential task flow: which earlier tasks a new task waits for.

Each handle keeps the tasks that produced its current value (``writers``) and those that
read it since (``readers``). A reader waits for the writers (read-after-write); a writer
waits for the writers and the readers before it (write-after-write, write-after-read);
``ACCUMULATE`` tasks of one codelet on one handle form a group that waits for what came
before the group but not for each other (they take the handle's lock when they run instead).
Accumulations of different codelets need not commute (a sum into a tile assembled from copied
pieces, a max after a sum), so an accumulation of another codelet opens a new group that
waits for the previous one.
"""

from __future__ import annotations

import threading

from numtile.runtime.access import READS, Access
from numtile.runtime.handle import NO_TASKS, InvalidatedError
from numtile.runtime.task import Task, TaskState

R, RW, ACC = Access.R, Access.RW, Access.ACCUMULATE
DONE = TaskState.DONE
_PRUNE_READERS = 64  # drop finished readers of a handle once this many pile up


def infer_dependencies(task: Task) -> dict[Task, bool]:
    """Sequential task flow: update each handle's writer/reader lists.

    Returns the unfinished (or failed) predecessors, each mapped to whether ``task``
    reads data it produced: only such data dependencies propagate a failure, the
    others only order the tasks.
    """
    for handle, mode in zip(task.handles, task.modes):  # check all before changing any
        if handle.invalidated and READS[mode]:
            raise InvalidatedError(
                f"{handle!r} was invalidated; its contents are gone and cannot be read "
                f"by {task.describe()}"
            )
    predecessors: dict[Task, bool] = {}
    for handle, mode in zip(task.handles, task.modes):
        if mode is R:
            for pred in handle.writers:
                if pred.state is not DONE:
                    predecessors[pred] = True
            readers = handle.readers
            if len(readers) >= _PRUNE_READERS:
                readers = handle.readers = [t for t in readers if not t.finished]
            readers.append(task)
        elif mode is ACC:
            if handle.lock is None:
                handle.lock = threading.Lock()
            if handle.accumulating is not task.codelet or handle.readers:  # open a new group
                handle.accumulate_base = handle.writers
                handle.accumulate_readers = handle.readers
                handle.writers = []
                handle.readers = []
                handle.accumulating = task.codelet
            for pred in handle.accumulate_base:
                if pred.state is not DONE:
                    predecessors[pred] = True
            for pred in handle.accumulate_readers:
                if pred.state is not DONE and pred not in predecessors:
                    predecessors[pred] = False
            handle.writers.append(task)
        else:  # W or RW
            data = mode is RW
            for pred in handle.writers:
                if pred.state is not DONE and (data or pred not in predecessors):
                    predecessors[pred] = data
            for pred in handle.readers:
                if pred.state is not DONE and pred not in predecessors:
                    predecessors[pred] = False
            handle.writers = [task]
            handle.readers = []
            if handle.accumulating is not None:
                handle.accumulating = None
                handle.accumulate_base = handle.accumulate_readers = NO_TASKS
            handle.invalidated = False
    predecessors.pop(task, None)  # a task touching one handle twice does not wait on itself
    return predecessors
