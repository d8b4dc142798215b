"""What a task needs room for on a limited memory node: its distinct tiles plus the scratch
memory its codelet declares (``Codelet.scratch``), and the refusal, at submission, of a task
that fits under no limit it may run under. The memory manager (``memory.py``) reserves both
while the task runs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from numtile.runtime.handle import DataHandle
from numtile.runtime.spill import format_bytes

if TYPE_CHECKING:
    from numtile.runtime.task import Task


class OutOfMemoryError(MemoryError):
    """A task's own tiles (and scratch) do not fit in its memory node's capacity."""


def tile_bytes(task: Task) -> int:
    """The bytes of ``task``'s distinct tiles."""
    return sum({h.id: h.nbytes for h in task.handles}.values())


def scratch_text(scratch: int) -> str:
    """How a message names the scratch part of the bytes a task needs."""
    return f" ({format_bytes(scratch)} of it scratch)" if scratch else ""


def no_room(state, nbytes: int, who, held: bool = True, scratch: int = 0) -> str:
    """The message: ``who`` (a task, a handle or None) needs ``nbytes`` (``scratch`` of them
    for its working memory) that the node of ``state`` (a ``NodeState``) cannot give."""
    if who is None:
        who = "a tile"
    elif not isinstance(who, DataHandle):
        who = who.describe()
    text = (
        f"{who} needs {format_bytes(nbytes)}{scratch_text(scratch)} on {state.node.name} "
        f"but its limit is {format_bytes(state.node.capacity)}"
    )
    if held:
        text += f" ({format_bytes(state.pinned_bytes)} held by running tasks)"
    return text


def check_fits(task: Task, limits: list) -> None:
    """Raise ``OutOfMemoryError`` if ``task``'s tiles and scratch exceed every limit (None:
    unlimited) of the nodes it may run on."""
    scratch = task.scratch_bytes()
    need = tile_bytes(task) + scratch
    if all(limit is not None and need > limit for limit in limits):
        limit = ", ".join(format_bytes(x) for x in limits)
        what = " for its tiles and scratch" if scratch else " for its tiles"
        raise OutOfMemoryError(
            f"{task.describe()} needs {format_bytes(need)}{what}{scratch_text(scratch)}, more "
            f"than the memory limit ({limit}): use smaller tiles or raise "
            "NUMTILE_HOST_MEM_LIMIT / NUMTILE_CUDA_MEM_LIMIT"
        )
