"""Task traces (Chrome/Perfetto JSON) and the per-worker / per-codelet summary."""

from __future__ import annotations

import json
import os
import tempfile
import threading
from typing import TYPE_CHECKING

from numtile.runtime.codelet import REGISTRY
from numtile.runtime.spill import format_bytes

if TYPE_CHECKING:
    from numtile.runtime.engine import Runtime
    from numtile.runtime.task import Task


class Tracer:
    """Collects one event per finished task: worker, codelet, start, end, tiles."""

    def __init__(self, origin: float, worker_names: list[str] | None = None) -> None:
        self.origin = origin
        self.worker_names = worker_names or []
        self.events: list[tuple] = []
        self.transfers: list[tuple] = []  # (route, start, end, bytes)
        self._lock = threading.Lock()

    def record_transfer(self, route: str, start: float, end: float, nbytes: int) -> None:
        with self._lock:
            self.transfers.append((route, start, end, nbytes))

    def record(self, task: Task) -> None:
        event = (
            task.worker,
            task.name or task.codelet.name,
            task.start,
            task.end,
            task.seq,
            [h.id for h in task.handles],
            task.error is None,
        )
        with self._lock:
            self.events.append(event)

    def chrome_trace(self) -> dict:
        """The events in Chrome trace-event format (load in Perfetto or chrome://tracing)."""
        events = [
            {"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "numtile"}},
        ]
        for worker in sorted({e[0] for e in self.events}):
            events.append(
                {
                    "name": "thread_name",
                    "ph": "M",
                    "pid": 0,
                    "tid": worker,
                    "args": {"name": self._worker_name(worker)},
                }
            )
        routes = sorted({t[0] for t in self.transfers})
        first_row = max([e[0] for e in self.events] + [len(self.worker_names)], default=0) + 1
        rows = {route: first_row + i for i, route in enumerate(routes)}
        for route, row in rows.items():  # transfers get rows of their own: overlap is visible
            events.append(
                {
                    "name": "thread_name",
                    "ph": "M",
                    "pid": 0,
                    "tid": row,
                    "args": {"name": f"copy {route}"},
                }
            )
        for route, start, end, nbytes in self.transfers:
            events.append(
                {
                    "name": route,
                    "cat": "transfer",
                    "ph": "X",
                    "pid": 0,
                    "tid": rows[route],
                    "ts": (start - self.origin) * 1e6,
                    "dur": max(end - start, 0.0) * 1e6,
                    "args": {"bytes": nbytes},
                }
            )
        for worker, name, start, end, seq, tiles, ok in self.events:
            events.append(
                {
                    "name": name,
                    "cat": "task" if ok else "failed",
                    "ph": "X",
                    "pid": 0,
                    "tid": worker,
                    "ts": (start - self.origin) * 1e6,
                    "dur": max(end - start, 0.0) * 1e6,
                    "args": {"task": seq, "tiles": tiles},
                }
            )
        return {"traceEvents": events, "displayTimeUnit": "ms"}

    def _worker_name(self, worker: int) -> str:
        if 0 <= worker < len(self.worker_names):
            return self.worker_names[worker]
        return f"worker{worker}"

    def write(self, path: str) -> None:
        directory = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(self.chrome_trace(), f)
        os.replace(tmp, path)


def summary(runtime: Runtime) -> str:
    """Busy time per worker and time / GFLOP/s per codelet since the runtime started."""
    elapsed = max(runtime.elapsed, 1e-12)
    workers = ", ".join(f"{n} {kind} worker(s)" for kind, n in runtime.worker_counts.items() if n)
    lines = [
        f"numtile runtime: {workers}, scheduler {runtime.scheduler.name}, "
        f"{elapsed:.3f} s since start"
    ]
    lines.append(f"{'worker':<10}{'busy s':>10}{'busy %':>9}")
    for worker, busy in enumerate(runtime.busy):
        name = runtime.worker_names[worker]
        lines.append(f"{name:<10}{busy:>10.3f}{100 * busy / elapsed:>8.1f}%")
    lines.append(f"{'codelet':<22}{'calls':>9}{'seconds':>10}{'GFLOP/s':>10}")
    for codelet in sorted(REGISTRY.values(), key=lambda c: -c.seconds):
        if codelet.calls == 0:
            continue
        rate = (
            codelet.total_flops / codelet.seconds / 1e9
            if codelet.seconds and codelet.total_flops
            else 0.0
        )
        rate_text = f"{rate:>10.1f}" if codelet.total_flops else f"{'-':>10}"
        lines.append(f"{codelet.name:<22}{codelet.calls:>9}{codelet.seconds:>10.3f}{rate_text}")
    if runtime.manager is not None:
        lines.append(memory_summary(runtime.manager.counters()))
    if runtime.distributed is not None:  # this rank's MPI traffic
        from numtile.runtime.distributed.observe import summary_line

        lines.append(summary_line(runtime.distributed))
    return "\n".join(lines)


def memory_summary(counters: dict) -> str:
    """Limit, use, peak and evictions per memory node, bytes and bandwidth per route, spills:
    the text of ``MemoryManager.counters()``."""
    c = counters
    lines = [f"{'memory node':<12}{'limit':>12}{'in use':>12}{'peak':>12}{'evictions':>11}"]
    for name, n in c["nodes"].items():
        limit = format_bytes(n["capacity"]) if n["capacity"] is not None else "none"
        lines.append(
            f"{name:<12}{limit:>12}{format_bytes(n['used']):>12}"
            f"{format_bytes(n['peak']):>12}{n['evictions']:>11}"
        )
    for route, nbytes in sorted(c["transferred_bytes"].items()):
        seconds = c["transfer_seconds"][route]
        rate = nbytes / seconds / 1e9 if seconds > 0 else 0.0
        lines.append(f"moved {route:<14}{format_bytes(nbytes):>12}  {rate:6.2f} GB/s")
    if "spill" in c:
        s = c["spill"]
        lines.append(
            f"spill {s['directory']}: {s['writes']} writes ({format_bytes(s['bytes_written'])})"
            f", {s['reads']} reads ({format_bytes(s['bytes_read'])})"
        )
    return "\n".join(lines)
