"""Shutdown, tracing, summaries and persisted performance models."""

import json
import subprocess
import sys
import threading
import time

import numpy as np

from numtile.config import Config
from numtile.runtime import Access, Codelet, DataHandle, Runtime
from numtile.runtime.perfmodel import footprint
from numtile.runtime.trace import Tracer, summary

RW = Access.RW


def test_interpreter_exits_promptly_with_work_pending():
    script = """
import time, numpy as np
from numtile.runtime import Access, Codelet, DataHandle, get_runtime
slow = Codelet("slow", implementations={"cpu": lambda ops, x: time.sleep(0.2)})
h = DataHandle((1,), np.float64, np.zeros(1))
rt = get_runtime()
for _ in range(100):
    rt.submit(slow, [(h, Access.RW)])
print("submitted", flush=True)
"""
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "submitted" in result.stdout
    assert time.perf_counter() - start < 15  # 100 x 0.2 s would be 20 s: pending work dropped


def test_shutdown_cancels_queued_work_and_joins_workers(tmp_path):
    rt = Runtime(Config(ncpu=2, scheduler="eager", cache_dir=str(tmp_path)))
    release = threading.Event()
    slow = Codelet("test_release_wait", implementations={"cpu": lambda ops, x: release.wait(5)})
    h = DataHandle((1,), np.float64, np.zeros(1))
    tasks = [rt.submit(slow, [(h, RW)]) for _ in range(5)]
    workers = list(rt._workers)
    assert len(workers) == 2 and all(w.is_alive() for w in workers)
    threading.Timer(0.1, release.set).start()
    rt.shutdown(wait=False)
    assert all(t.finished for t in tasks)
    assert sum(t.error is not None for t in tasks) >= 3  # queued ones were cancelled
    assert not any(w.is_alive() for w in workers)


def test_trace_records_every_task(tmp_path):
    rt = Runtime(Config(ncpu=2, scheduler="eager", cache_dir=str(tmp_path)))
    rt.tracer = Tracer(time.perf_counter())
    work = Codelet(
        "test_traced",
        implementations={"cpu": lambda ops, x: x.__iadd__(1)},
        flops=lambda shape: 2.0,
    )
    handles = [DataHandle((3,), np.float64, np.zeros(3)) for _ in range(4)]
    for h in handles:
        for _ in range(3):
            rt.submit(work, [(h, RW)])
    rt.wait_all()
    path = tmp_path / "trace.json"
    rt.tracer.write(str(path))
    events = [e for e in json.loads(path.read_text())["traceEvents"] if e["ph"] == "X"]
    assert len(events) == 12
    assert {e["name"] for e in events} == {"test_traced"}
    assert {e["tid"] for e in events} <= {0, 1}
    assert all(e["dur"] >= 0 for e in events)
    text = summary(rt)
    assert "test_traced" in text and "cpu0" in text and "cpu1" in text
    assert work.calls >= 12 and work.total_flops >= 24.0
    rt.shutdown()


def test_dmda_persists_performance_models(tmp_path):
    rt = Runtime(Config(ncpu=2, scheduler="dmda", cache_dir=str(tmp_path)))
    work = Codelet("test_modelled", implementations={"cpu": lambda ops, x: time.sleep(0.001)})
    h = DataHandle((5, 2), np.float32, np.zeros((5, 2), np.float32))
    task = rt.submit(work, [(h, RW)])
    key = footprint(task, "cpu")  # (before it runs: a finished task forgets its tiles)
    for _ in range(3):
        rt.submit(work, [(h, RW)])
    rt.wait_all()
    rt.shutdown()
    assert "5x2" in key and "test_modelled" in key
    reloaded = Runtime(Config(ncpu=1, scheduler="dmda", cache_dir=str(tmp_path)))
    estimate = reloaded.models.estimate(key)
    assert estimate is not None and 0.0005 < estimate < 0.5
    reloaded.shutdown()


def test_dmda_balances_calibrated_work(tmp_path):
    """Once calibrated, equal tasks are spread over both workers."""
    rt = Runtime(Config(ncpu=2, scheduler="dmda", cache_dir=str(tmp_path)))
    work = Codelet("test_balance", implementations={"cpu": lambda ops, x: time.sleep(0.002)})
    handles = [DataHandle((1,), np.float64, np.zeros(1)) for _ in range(8)]
    for h in handles:
        rt.submit(work, [(h, RW)])
    rt.wait_all()
    tasks = [rt.submit(work, [(h, RW)]) for h in handles]
    rt.wait_all()
    workers = [t.worker for t in tasks]
    assert workers.count(0) >= 2 and workers.count(1) >= 2
    rt.shutdown()
