"""``Distributed``: owner computes, in front of ``Runtime.submit`` (StarPU-MPI's model).

Every rank sees every task of the program, in the same order, and keeps the same small
record per tile: its ``owner`` (a rank, ``ALL`` for a replicated tile, or unset: a tile
whose owner is the rank that first computes it), the ranks holding its current value
(``ranks``; unset: every rank) and the rank that wrote that value (``holder``). From that
record alone, without any message, each rank decides the same things:

- where a task runs: on the owner of the first tile it writes (every rank when that tile is
  replicated); a tile without an owner takes the rank of the task's first owned tile;
- which tiles travel: for each tile the task reads, to each running rank that lacks the
  current value, from its holder. The holder submits a ``SEND`` task reading the tile, the
  receiver a ``RECEIVE`` task writing its local replica: both are ordered by the ordinary
  dependency inference, so a send leaves once the tile's last local writer finished, and the
  received replica stays valid (no second transfer) until the tile is written again;
- the tags: the number of the transfer in the program, the same on both sides.

The other ranks skip the task itself. ``wait_handles`` (what ``to_numpy`` and every host
read call) first brings the tiles to every rank, so results read the same everywhere.

Three refinements: accumulations that are sums run where their inputs are and are reduced
on the tile's owner (``reduce.py``); a fill of a tile without an owner is deferred, and run
by each rank that later needs the tile, with no message (``CONSTANT_FILLS``); and each wait
first compares a checksum of the submission sequence between the ranks (``sequence.py``).
"""

from __future__ import annotations

import contextlib
import itertools
import time
from typing import TYPE_CHECKING

from numtile.runtime.access import READS, WRITES, Access
from numtile.runtime.distributed.reduce import Reductions, accumulates
from numtile.runtime.distributed.sequence import SubmissionLog, check_timeout
from numtile.runtime.handle import DataHandle

if TYPE_CHECKING:
    from numtile.runtime.distributed.node import MpiNode
    from numtile.runtime.engine import Runtime

R, W, ACC = Access.R, Access.W, Access.ACCUMULATE
ALL = -1  # the owner of a replicated tile
# codelets that only write a constant (``fill``, by name: the runtime knows no tile codelet).
# One writing a tile that has no owner (``zeros`` inside an op: a gradient's start, a
# partial's identity) would run on every rank, though only the rank whose task then reads
# the tile needs it (a 49 MiB zero-fill per rank and step on GPT-2 mini, at each of 2 ranks):
# it is deferred instead, and each rank that later reads the tile runs it there, no message.
CONSTANT_FILLS = {"fill"}


class _Constant:
    """The holder of a tile whose value is a deferred fill: any rank can make it locally."""

    __slots__ = ("codelet", "args")

    def __init__(self, codelet, args) -> None:
        self.codelet = codelet
        self.args = args


def _unowned_overwrite(accesses) -> bool:
    """True if ``accesses`` overwrite one tile that has no owner (a deferrable fill)."""
    if len(accesses) != 1:
        return False
    handle, mode = accesses[0]
    return mode is W and getattr(handle, "owner", None) is None


class Distributed:
    """The owner-computes front of a runtime started under MPI (``runtime.distributed``)."""

    def __init__(self, runtime: Runtime, node: MpiNode) -> None:
        self.runtime = runtime
        self.node = node
        self.rank = node.rank
        self.nranks = node.nranks
        self.hosts = node.hosts
        self.everyone = tuple(range(node.nranks))
        self.transfers = itertools.count()
        self.tasks = 0  # tasks of the program seen (run here or skipped)
        self.log = SubmissionLog()
        self.reductions = Reductions(self)
        self.closing = False
        self._submit = runtime.submit
        self._wait_handles = runtime.wait_handles
        self._wait_all = runtime.wait_all
        self._shutdown = runtime.shutdown
        runtime.submit = self.submit  # the instance attributes shadow the methods
        runtime.wait_handles = self.wait_handles
        runtime.wait_all = self.wait_all
        runtime.shutdown = self.shutdown

    def submit(self, codelet, accesses, args=(), priority=0, name=None):
        """``Runtime.submit`` on every rank: run here if this rank computes the task (its
        task is returned), else only move what it must (None)."""
        if codelet.control:  # the runtime's own hints: every rank applies them to its replica
            for handle, mode in accesses:
                if mode is W:  # invalidate: the contents, partial sums included, are gone
                    handle.ranks = None
                    self.reductions.open.pop(handle.id, None)
            return self._submit(codelet, accesses, args, priority, name)
        self.tasks += 1
        self.log.record(codelet, accesses)
        reductions = self.reductions
        contributor = reductions.contributor(codelet, accesses, args)
        if reductions.open:  # a tile read or written otherwise ends its accumulations
            for handle, mode in accesses:
                if reductions.pending(handle) and not accumulates(codelet, mode, args):
                    reductions.flush(handle)
        if contributor is not None:
            return reductions.contribute(contributor, codelet, accesses, args, priority, name)
        if codelet.name in CONSTANT_FILLS and _unowned_overwrite(accesses):
            handle = accesses[0][0]  # no rank holds it yet; each makes it when it needs it
            handle.ranks, handle.holder = frozenset(), _Constant(codelet, args)
            return None
        running = self.executors(accesses)
        for handle, mode in accesses:
            if READS[mode]:
                self.bring(handle, running)
        for handle, mode in accesses:
            if WRITES[mode]:
                if running is self.everyone:
                    handle.ranks = None
                else:
                    if getattr(handle, "owner", None) is None:
                        handle.owner = running[0]
                    handle.ranks = frozenset(running)
                    handle.holder = running[0]
        if self.rank in running:
            return self._submit(codelet, accesses, args, priority, name)
        return None

    def executors(self, accesses) -> tuple[int, ...]:
        """The ranks that run a task touching ``accesses``."""
        for handle, mode in accesses:
            if WRITES[mode]:
                owner = getattr(handle, "owner", None)
                if owner is not None:
                    return self.everyone if owner == ALL else (owner,)
                break
        for handle, _ in accesses:
            owner = getattr(handle, "owner", None)
            if owner is not None and owner != ALL:
                return (owner,)
        return self.everyone

    def bring(self, handle: DataHandle, ranks) -> None:
        """Transfer ``handle``'s current value to those of ``ranks`` that lack it."""
        holding = getattr(handle, "ranks", None)
        if holding is None:
            return
        missing = [r for r in ranks if r not in holding]
        if not missing:
            return
        holder = handle.holder
        if type(holder) is _Constant:  # each rank that needs it fills its own replica
            if self.rank in missing:
                self._submit(holder.codelet, [(handle, W)], holder.args)
            handle.ranks = holding.union(missing)
            return
        for rank in missing:
            tag, _ = self.node.tags(next(self.transfers))
            if self.rank == holder:
                self._submit(
                    self.node.send, [(handle, R)], (rank, tag), name=f"send to rank {rank}"
                )
            elif self.rank == rank:
                self._submit(
                    self.node.receive, [(handle, W)], (holder, tag), name=f"receive from {holder}"
                )
        handle.ranks = holding.union(missing)

    def wait_handles(self, handles) -> None:
        """Bring ``handles`` to every rank, then wait for them here (every rank calls it)."""
        handles = list(handles)
        self.send_to(handles, self.everyone)
        self._wait_handles(handles)

    def gather(self, handles, root: int) -> bool:
        """Bring ``handles`` to rank ``root`` alone and wait for them there (every rank calls
        it; the others only send what they hold): True on ``root``."""
        handles = list(handles)
        self.send_to(handles, (root,))
        if self.rank != root:
            return False
        self._wait_handles(handles)
        return True

    def send_to(self, handles, ranks) -> None:
        """Check the submission sequences, end the tiles' open sums, and submit the transfers
        that bring ``handles``' current values to ``ranks`` (every rank calls it)."""
        self.check_sequence()
        reductions = self.reductions
        for handle in handles:
            if reductions.open and reductions.pending(handle):
                reductions.flush(handle)
            self.bring(handle, ranks)

    @contextlib.contextmanager
    def local_waits(self):
        """Inside the block, ``wait_handles`` waits here only (the caller brought the tiles
        to this rank; the others do not wait with it): one rank writing a checkpoint."""
        self.runtime.wait_handles = self._wait_handles
        try:
            yield
        finally:
            self.runtime.wait_handles = self.wait_handles

    def wait_all(self) -> None:
        """Compare the submission sequences, then wait for every task here."""
        if not self.closing:
            self.check_sequence()
        self._wait_all()

    def shutdown(self, wait: bool = True) -> None:
        self.closing = True  # ranks may stop in different places (an exception unwinding)
        if not wait and not self.runtime.closed:  # at exit, too
            self.finish(check_timeout())
        self._shutdown(wait)

    def finish(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for this rank's tasks, without raising; True if
        they all finished. A read waits for a tile's writers, not for the sends that carry
        it to the other ranks: a program's last sends leave after its last wait, and a rank
        that exited then (``shutdown(wait=False)`` at exit cancelled what was queued) left a
        peer waiting forever for a receive."""
        runtime = self.runtime
        deadline = time.monotonic() + timeout
        with runtime._lock:
            runtime._waiters += 1
            try:
                while runtime._unfinished and runtime._broken is None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    runtime._done.wait(min(left, 1.0))
            finally:
                runtime._waiters -= 1
        return True

    def check_sequence(self) -> None:
        """Every rank submitted the same tasks so far, or ``SubmissionMismatchError`` naming
        the first that differs (on every rank); a rank that never comes: ``TimeoutError``."""
        if self.nranks == 1 or self.log.count == self.log.agreed and self.log.count:
            return
        timeout = check_timeout()
        mine = self.log.state()
        theirs = self.node.exchange(mine, timeout)
        if all(state == mine for state in theirs.values()):
            self.log.agree()
            return
        recent = self.node.exchange(self.log.recent, timeout)
        differing = {peer: recent[peer] for peer, state in theirs.items() if state != mine}
        raise self.log.report(self.rank, differing)


def place(handle: DataHandle, owner: int) -> None:
    """Give a new ``handle`` its owner; its value starts on the owner (everywhere for ALL)."""
    handle.owner = owner
    if owner == ALL:
        handle.ranks = None
    else:
        handle.ranks = frozenset((owner,))
        handle.holder = owner
