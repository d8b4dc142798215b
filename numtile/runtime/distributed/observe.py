"""Traces and summaries under MPI: one Chrome trace for all ranks, bytes per rank.

``nt.trace(path)`` on every rank records each rank's own tasks; when the block ends every
rank sends its events to rank 0, which writes one file: a process per rank (``rank 1
(host)``), a row per worker, and the MPI worker's transfers split into a ``send`` and a
``receive`` row. Timestamps are aligned on the wall clock (exact on one machine; across
machines as good as their clock synchronisation). ``runtime_summary()`` prints, on each
rank, the bytes that rank sent and received.
"""

from __future__ import annotations

import json
import os
import tempfile
import time

from numtile.runtime.distributed.sequence import check_timeout
from numtile.runtime.spill import format_bytes


def summary_line(front) -> str:
    """This rank's traffic, for ``runtime_summary()``."""
    node = front.node
    return (
        f"mpi rank {front.rank} of {front.nranks} ({node.host}): sent "
        f"{format_bytes(node.bytes_sent)} in {node.sends} message(s), received "
        f"{format_bytes(node.bytes_received)} in {node.receives} message(s)"
    )


def write_trace(front, tracer, path: str) -> None:
    """Gather every rank's trace events on rank 0 and write them there as one file."""
    wall_origin = time.time() - (time.perf_counter() - tracer.origin)
    mpi_worker = front.runtime.nodes.index(front.node)
    trace = tracer.chrome_trace()
    workers = front.runtime.worker_names
    payload = (front.rank, front.node.host, wall_origin, mpi_worker, workers, trace)
    gathered = front.node.exchange(payload, check_timeout(), root=0)
    if front.rank != 0:
        return
    gathered[0] = payload
    base = payload[2]
    events = []
    for rank in sorted(gathered):
        _, host, origin, mpi, workers, trace = gathered[rank]
        shift = (origin - base) * 1e6
        events.extend(_rank_events(rank, host, shift, mpi, workers, trace["traceEvents"]))
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f)
    os.replace(tmp, path)


def _rank_events(rank, host, shift: float, mpi: int, workers: list, events: list) -> list:
    """One rank's events as process ``rank``: a row per worker, the transfers on a send and
    a receive row."""
    last = max([e.get("tid", 0) for e in events] + [len(workers)])
    send_row, receive_row = last + 1, last + 2
    out = [
        {"name": "process_name", "ph": "M", "pid": rank, "args": {"name": f"rank {rank} ({host})"}}
    ]
    for row, name in ((send_row, "mpi send"), (receive_row, "mpi receive")):
        out.append(
            {"name": "thread_name", "ph": "M", "pid": rank, "tid": row, "args": {"name": name}}
        )
    for worker, name in enumerate(workers):
        if worker != mpi:
            out.append(_row_name(rank, worker, name))
    for event in events:
        if event["ph"] == "M" and event["name"] in ("process_name", "thread_name"):
            if event["name"] == "process_name" or event.get("tid", 0) < len(workers):
                continue  # named above
        event = dict(event, pid=rank)
        if "ts" in event:
            event["ts"] += shift
        if event.get("tid") == mpi and event["ph"] == "X":
            sending = event["name"].startswith("send")
            event["tid"] = send_row if sending else receive_row
            event["cat"] = "mpi"
        out.append(event)
    return out


def _row_name(rank: int, row: int, name: str) -> dict:
    return {"name": "thread_name", "ph": "M", "pid": rank, "tid": row, "args": {"name": name}}
