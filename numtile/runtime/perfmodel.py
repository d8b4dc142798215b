"""History-based performance models: mean duration per (codelet, tile footprint), persisted."""

from __future__ import annotations

import json
import os
import tempfile
import threading

from numtile.runtime.task import Task

MODEL_FILE = "perfmodels.json"


def footprint(task: Task, kind: str) -> str:
    """The key that makes two calls of a codelet comparable: its tiles' shapes and dtypes,
    and the kind of worker (``cpu``, ``cuda``, ...) that ran it."""
    tiles = ";".join(f"{'x'.join(map(str, h.shape))}:{h.dtype.str}" for h in task.handles)
    return f"{task.codelet.name}|{tiles}|{kind}"


class PerfModels:
    """Running mean of task durations keyed by ``footprint``, loaded from and saved to disk.

    >>> models = PerfModels(None)
    >>> models.record("gemm|2x2:<f4|cpu", 1.0); models.record("gemm|2x2:<f4|cpu", 3.0)
    >>> models.estimate("gemm|2x2:<f4|cpu")
    2.0
    """

    def __init__(self, cache_dir: str | None) -> None:
        self.path = os.path.join(cache_dir, MODEL_FILE) if cache_dir else None
        self._lock = threading.Lock()
        self.history: dict[str, list[float]] = {}  # key -> [count, mean seconds]
        if self.path and os.path.exists(self.path):
            try:
                with open(self.path) as f:
                    loaded = json.load(f)
                self.history = {k: [float(c), float(m)] for k, (c, m) in loaded.items()}
            except (OSError, ValueError, TypeError):
                self.history = {}  # a damaged model file only costs recalibration

    def record(self, key: str, seconds: float) -> None:
        with self._lock:
            entry = self.history.get(key)
            if entry is None:
                self.history[key] = [1.0, seconds]
            else:
                entry[0] += 1.0
                entry[1] += (seconds - entry[1]) / min(entry[0], 1000.0)

    def estimate(self, key: str) -> float | None:
        entry = self.history.get(key)
        return None if entry is None else entry[1]

    def save(self) -> None:
        if not self.path or not self.history:
            return
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(self.path), suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                json.dump(self.history, f)
            os.replace(tmp, self.path)
        except OSError:
            pass  # persisting models is an optimisation, never a failure
