"""``MpiNode``: the backends table's ``mpi`` row, one worker that moves tiles between ranks.

Sends and receives are tasks of their own (``SEND`` reads a tile, ``RECEIVE`` writes the
local replica), scheduled like any other, but only on this kind: its one worker posts them
as ``Isend``/``Irecv`` and, instead of waiting, goes on posting and testing, so computing
workers never block on the network. A task is complete when its request is. This worker is
the only thread that calls MPI. Tiles stay in host RAM (``holds_tiles`` is False: the memory
manager sees no node here).

A send whose tile could not be computed (a task it depends on failed) sends, instead, the
failure's text on the transfer's second tag: the receiving task fails naming the rank and
the task, and so does everything waiting for it, on every rank, instead of hanging. A task
that raises also sends a notice to every other rank, so their next wait raises too.
"""

from __future__ import annotations

import os
import queue
import secrets
import sys
import threading
import time
from typing import TYPE_CHECKING

import numpy as np

from numtile.config import Config
from numtile.runtime.codelet import Codelet
from numtile.runtime.handle import HOST
from numtile.runtime.task import Task, TaskCancelled, TaskError, TaskState

if TYPE_CHECKING:
    from numtile.runtime.engine import Runtime

CHECK_TAG = 0  # the submission checks of the waits (``sequence.py``): pickled, to every rank
NOTICE_TAG = 1  # "a task failed on my rank": pickled text, to every other rank
# Pauses between polls. Each wake-up of the loop costs ~50-130 us of a core (a timed wait
# in this VM, then Python), whatever it finds: with 1,100 polls a Cholesky n=4096 took 0.13 s
# of CPU per rank from its one worker's 0.4 s. So the loop sleeps until a transfer task is
# ready, a worker runs out of tasks (then a receive may be what it waits for), a wait's
# exchange starts or a failure is to be told; between those, with requests in flight, it
# polls every ``Config.mpi_max_poll`` seconds while every worker computes (a completed
# receive is only needed when a worker is free), and from 20 us doubling up to 1 ms while a
# worker waits or an exchange runs (latency then matters and the core is free). A busy rank's
# pace does not delay its peers: a receive completes on the receiver's polls alone (MPICH
# copies a large message out of the sender's memory, CMA; measured: 2 and 48 MiB received
# 3-23 ms after posting while the sender made no MPI call for 0.5 s). At the former 5 ms,
# GPT-2 mini's ~100 receives posted early kept 2 ranks polling ~600 times a step.
_IDLE_SLEEP = 1e-2  # nothing in flight: only a peer's failure notice may wait this long
_BUSY_SLEEP = 2e-5
_WAITING_POLL = 1e-3
_FAILURE_POLL = 0.01  # seconds between looks for a sender's failure (rare; one probe each)


class RemoteTaskError(TaskError):
    """A task on another rank failed; the message names that rank and task."""


def _raw(buffer: np.ndarray) -> np.ndarray:
    """The bytes of a C-contiguous tile, as MPI sends them (any dtype, any shape)."""
    return buffer.reshape(-1).view(np.uint8)


def _post_send(node: MpiNode, tile: np.ndarray, peer: int, tag: int):
    return node.comm.Isend([_raw(tile), node.MPI.BYTE], peer, tag)


def _post_receive(node: MpiNode, tile: np.ndarray, peer: int, tag: int):
    return node.comm.Irecv([_raw(tile), node.MPI.BYTE], peer, tag)


def transfer_codelets(kind: str) -> tuple[Codelet, Codelet]:
    """The send and receive codelets of the worker kind ``kind`` (the ``mpi`` row)."""
    send = Codelet(f"{kind}_send", implementations={kind: _post_send})
    receive = Codelet(f"{kind}_receive", implementations={kind: _post_receive})
    return send, receive


class MpiNode:
    """This process's place in ``MPI.COMM_WORLD``: rank, size, host, and the transfer loop."""

    name = "mpi"
    capacity = None
    holds_tiles = False

    def __init__(self, config: Config) -> None:
        from mpi4py import MPI  # only a distributed runtime gets here

        self.MPI = MPI
        self.comm = MPI.COMM_WORLD
        self.rank = self.comm.Get_rank()
        self.nranks = self.comm.Get_size()
        self.host = MPI.Get_processor_name()
        self.hosts = self.comm.allgather(self.host)  # once at start: ``numtile info``
        launch = self.comm.bcast(f"{os.getpid()}-{secrets.token_hex(4)}")  # rank 0's name
        if self.hosts.count(self.host) > 1:  # ranks sharing this host share its compiles
            from numtile.runtime.distributed.compiles import compile_once_per_host, lock_path

            compile_once_per_host(lock_path(launch))
        # data tags 2, 4, 6, ...; the tag after each carries the failure that replaces it
        self.tag_pairs = (self.comm.Get_attr(MPI.TAG_UB) - 2) // 2
        self.bytes_sent = 0
        self.bytes_received = 0
        self.sends = self.receives = 0  # messages of tile data
        self.polls = 0  # looks at the requests in flight
        self._notices: queue.SimpleQueue = queue.SimpleQueue()
        self._exchanges: queue.SimpleQueue = queue.SimpleQueue()
        self.send = self.receive = None  # set by ``attach`` (they need the row's kind)
        self.max_poll = config.mpi_max_poll
        self._wake = threading.Event()  # ends the transfer loop's pause
        self._waiting_workers = 0  # workers blocked for want of a task
        self._worker_waits = False  # a worker ran out of tasks since the loop last looked
        self._counting = threading.Lock()
        if sys.excepthook is sys.__excepthook__:
            sys.excepthook = self._abort_on_uncaught

    def _abort_on_uncaught(self, kind, value, traceback) -> None:
        """An exception ends this rank's program: the others would wait for its tiles
        forever, so print it and abort them all (``mpi4py -m``'s behaviour)."""
        sys.__excepthook__(kind, value, traceback)
        sys.stderr.write(f"numtile: uncaught exception on rank {self.rank}: MPI.Abort\n")
        sys.stderr.flush()
        # mpiexec forwards each rank's output asynchronously: give it time to pass the
        # message on before the abort tears the job down (it was lost now and then)
        time.sleep(0.5)
        self.comm.Abort(1)

    def tags(self, transfer: int) -> tuple[int, int]:
        """The data tag and the failure tag of the ``transfer``-th transfer of the program."""
        tag = 2 + 2 * (transfer % self.tag_pairs)
        return tag, tag + 1

    def attach(self, runtime: Runtime) -> None:
        """Put the owner-computes front before ``runtime.submit`` (called at start)."""
        from numtile.runtime.distributed.front import Distributed

        kind = next(k for k, n in zip(runtime.kinds, runtime.nodes) if n is self)
        self.send, self.receive = transfer_codelets(kind)
        runtime.distributed = Distributed(runtime, self)
        runtime.failure_listener = self.notify_failure
        self._watch(runtime.scheduler, runtime)

    def _watch(self, scheduler, runtime: Runtime) -> None:
        """Wake the transfer loop when ``scheduler`` takes a transfer task and when a worker
        finds no task (it blocks in ``pop``: counted while it does). The workers' threads
        start after this and take the shadowing methods."""
        push, pop, try_pop = scheduler.push, scheduler.pop, scheduler.try_pop
        transfers = (self.send, self.receive)

        def push_waking(task: Task) -> None:
            push(task)
            if task.codelet in transfers:
                self._wake.set()

        def pop_waking(worker: int) -> Task | None:
            task = try_pop(worker)
            if task is not None or runtime.closed:
                return task
            with self._counting:
                self._waiting_workers += 1
            self._worker_waits = True
            self._wake.set()
            try:
                return pop(worker)
            finally:
                with self._counting:
                    self._waiting_workers -= 1

        scheduler.push = push_waking  # instance attributes shadow the methods
        scheduler.pop = pop_waking

    def notify_failure(self, task: Task, error: BaseException) -> None:
        """A task failed here: tell the other ranks (from the transfer loop's thread)."""
        if isinstance(error, RemoteTaskError):
            return
        text = str(error)
        if "on rank" not in text:
            text = f"on rank {self.rank}: {text}"
            if isinstance(error, TaskError) and len(error.args) == 1:
                error.args = (text,)  # the error read here names the rank too
        self._notices.put(text)
        self._wake.set()

    # -- the worker's loop --------------------------------------------------------------------

    def run_worker(self, runtime: Runtime, worker: int) -> None:
        """Post the transfer tasks handed to this worker and complete them as their requests
        finish; relay failure notices both ways. Ends when the runtime closes."""
        ops = runtime.ops[worker]
        try_pop = runtime.scheduler.try_pop
        in_flight: list[_Transfer] = []
        notices: list = []
        exchange = None
        idle = 0  # polls in a row that completed nothing
        probed = 0.0  # when the receives last looked for their senders' failures
        while not runtime.closed:
            self._wake.clear()  # (before looking: a task pushed after this ends the pause)
            task = try_pop(worker)
            if task is not None:
                in_flight.append(self._post(runtime, worker, ops, task))
                idle = 0
                continue
            if self._worker_waits:  # a new reason to look soon
                self._worker_waits = False
                idle = 0
            # each MPI call after a pause costs 20-40 us (cold caches, MPICH's progress), so a
            # poll makes only those it needs: the peers' notices are looked for with the
            # senders' failures, every _FAILURE_POLL seconds
            now = time.monotonic()
            probe = now - probed >= _FAILURE_POLL
            if probe:
                probed = now
            if probe or notices or not self._notices.empty():
                notices = self._relay_notices(runtime, notices, probe)
            if exchange is not None or not self._exchanges.empty():
                exchange = self._progress_exchange(exchange)
            done = self._completed(in_flight, probe)
            self.polls += 1
            for transfer in done:
                in_flight.remove(transfer)
                self._finish(runtime, worker, transfer)
            idle = 0 if done else idle + 1
            if exchange is not None or in_flight and self._waiting_workers:
                pause = min(_BUSY_SLEEP * 2 ** min(idle, 30), _WAITING_POLL, self.max_poll)
            elif in_flight:
                pause = self.max_poll
            else:
                pause = _IDLE_SLEEP
            self._wake.wait(pause)
        for transfer in in_flight:
            transfer.error = transfer.error or TaskCancelled(
                f"{transfer.task.describe()} cancelled by runtime shutdown"
            )
            self._finish(runtime, worker, transfer)

    def _completed(self, in_flight: list[_Transfer], probe: bool) -> list[_Transfer]:
        """The transfers of ``in_flight`` that are done: one ``Testsome`` over their requests
        (a test per request from Python cost ~0.2 ms a pass with 70 receives in flight, a
        core's quarter at this loop's pace); with ``probe``, also the receives whose sender
        sent its failure instead."""
        done = [t for t in in_flight if t.request is None or probe and t.sender_failed(self)]
        waiting = [t for t in in_flight if t.request is not None and t not in done]
        if waiting:
            indices = self.MPI.Request.Testsome([t.request for t in waiting])
            done += [waiting[i] for i in indices or ()]
        return done

    def _post(self, runtime: Runtime, worker: int, ops, task: Task) -> _Transfer:
        task.worker = worker
        task.state = TaskState.RUNNING
        task.start = time.perf_counter()
        peer, tag = task.args
        handle = task.handles[0]
        sending = task.codelet is self.send
        if task.cancelled_by is not None:  # only a send can be: its tile's writer failed
            text = str(task.cancelled_by)
            if "on rank" not in text:
                text = f"on rank {self.rank}: {text}"
            request = self.comm.isend(text, peer, tag + 1)
            return _Transfer(task, request, None, None, TaskCancelled(text, task.cancelled_by))
        pins = None
        try:
            if runtime.manager is None:
                tile = handle.host_replica()
            else:
                (tile,), pins = runtime.manager.acquire(task, HOST)
            request = task.codelet.implementation(runtime.kinds[worker])(ops, tile, peer, tag)
        except BaseException as exc:
            return _Transfer(task, None, pins, None, exc)
        if sending:
            self.bytes_sent += handle.nbytes
            self.sends += 1
        else:
            self.bytes_received += handle.nbytes
            self.receives += 1
        return _Transfer(task, request, pins, None if sending else (peer, tag + 1), None)

    def _finish(self, runtime: Runtime, worker: int, transfer: _Transfer) -> None:
        task = transfer.task
        task.end = time.perf_counter()
        if transfer.pins is not None:
            runtime.manager.release(transfer.pins)
        error = transfer.error
        if error is not None and not isinstance(error, TaskError):
            error = TaskError(f"{task.describe()} raised {type(error).__name__}: {error}")
        runtime._complete(task, worker, error)

    def exchange(self, payload, timeout: float, root: int | None = None) -> dict:
        """Send ``payload`` to every other rank and return theirs, {rank: payload}; with a
        ``root``, only to it, which alone receives (a gather). From the program thread: the
        transfer loop does the MPI calls. ``TimeoutError`` naming the ranks that sent
        nothing within ``timeout`` seconds."""
        others = [p for p in range(self.nranks) if p != self.rank]
        if root is None:
            exchange = _Exchange(payload, others, others)
        elif root == self.rank:
            exchange = _Exchange(payload, [], others)
        else:
            exchange = _Exchange(payload, [root], [])
        self._exchanges.put(exchange)
        self._wake.set()
        if not exchange.done.wait(timeout):
            missing = sorted(set(exchange.sources) - set(exchange.received))
            raise TimeoutError(
                f"rank {self.rank} waited {timeout:g} s at a wait for rank(s) "
                f"{', '.join(map(str, missing))}, which did not reach it (did the ranks run "
                f"different programs? NUMTILE_MPI_CHECK_TIMEOUT sets the limit)"
            )
        return exchange.received

    def _progress_exchange(self, exchange: _Exchange | None) -> _Exchange | None:
        """Post the next exchange and collect the peers' payloads (one exchange at a time)."""
        if exchange is None:
            try:
                exchange = self._exchanges.get_nowait()
            except queue.Empty:
                return None
            exchange.sends = [
                self.comm.isend(exchange.payload, peer, CHECK_TAG) for peer in exchange.targets
            ]
        for peer in exchange.sources:
            if peer not in exchange.received and self.comm.iprobe(peer, CHECK_TAG):
                exchange.received[peer] = self.comm.recv(source=peer, tag=CHECK_TAG)
        exchange.sends = [request for request in exchange.sends if not request.Test()]
        if exchange.sends or len(exchange.received) < len(exchange.sources):
            return exchange
        exchange.done.set()
        return None

    def _relay_notices(self, runtime: Runtime, sending: list, probe: bool) -> list:
        """Send this rank's failure notices; with ``probe``, record the other ranks' as
        errors here."""
        while True:
            try:
                text = self._notices.get_nowait()
            except queue.Empty:
                break
            for peer in range(self.nranks):
                if peer != self.rank:
                    sending.append(self.comm.isend(text, peer, NOTICE_TAG))
        sending = [request for request in sending if not request.Test()]
        if not probe:
            return sending
        status = self.MPI.Status()
        while self.comm.iprobe(self.MPI.ANY_SOURCE, NOTICE_TAG, status):
            text = self.comm.recv(source=status.Get_source(), tag=NOTICE_TAG)
            with runtime._lock:
                runtime._errors.append(RemoteTaskError(text))
                runtime._done.notify_all()
        return sending


class _Exchange:
    """One exchange of pickled payloads (the submission checks, a trace's gather)."""

    def __init__(self, payload, targets: list[int], sources: list[int]) -> None:
        self.payload = payload
        self.targets = targets
        self.sources = sources
        self.sends: list = []
        self.received: dict = {}
        self.done = threading.Event()


class _Transfer:
    """One posted send or receive: its task, request, pinned tile and failure tag to watch."""

    __slots__ = ("task", "request", "pins", "failure", "error")

    def __init__(self, task, request, pins, failure, error) -> None:
        self.task = task
        self.request = request
        self.pins = pins
        self.failure = failure  # (peer, tag) where the sender's failure would come from
        self.error = error

    def sender_failed(self, node: MpiNode) -> bool:
        """True if the sender of this receive sent its failure instead (now its error)."""
        if self.failure is None or not node.comm.iprobe(*self.failure):
            return False
        text = node.comm.recv(source=self.failure[0], tag=self.failure[1])
        self.request.Cancel()
        self.request.Wait()
        self.error = RemoteTaskError(text)
        return True
