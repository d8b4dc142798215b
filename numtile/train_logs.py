"""Training logs people can look at: ``numtile train --log-dir DIR``.

Every step of a run writes its scalars twice into ``DIR``: as TensorBoard scalars through
``tensorboardX`` (an ``events.out.tfevents.*`` file; view them with
``tensorboard --logdir DIR``), and as one JSON object per line of ``DIR/metrics.jsonl``
(``step``, ``wall_time`` and the same names as the TensorBoard tags):

- ``train/loss``: the step's mean loss over its micro-batches (nats/token)
- ``val/loss``: the validation loss, on the steps that evaluate (``--eval-every``)
- ``train/learning_rate``: the learning rate the step used
- ``perf/tokens_per_s``, ``perf/mfu``: the step's throughput and model FLOP utilisation
- ``memory/NODE/bytes_in_use``: bytes of tiles held on each memory node (``host``,
  ``cuda:0``, ...), as the memory manager counts them; a CPU run with no memory limit has no
  manager, and then ``memory/host/bytes_in_use`` is the process's resident memory

A resumed run appends: events and lines of steps after the checkpoint's (written by the
run that was stopped after it) are dropped first, so each step appears once.
"""

from __future__ import annotations

import json
import os
import time

__all__ = ["METRICS_FILE", "TrainingLog", "memory_in_use"]

METRICS_FILE = "metrics.jsonl"


def memory_in_use(runtime) -> dict[str, int]:
    """Bytes in use per memory node of ``runtime`` (a ``numtile`` runtime).

    >>> import numtile as nt
    >>> sorted(memory_in_use(nt.get_runtime()))
    ['host']
    """
    manager = getattr(runtime, "manager", None)
    if manager is not None:
        return {name: node["used"] for name, node in manager.counters()["nodes"].items()}
    return {"host": _resident_bytes()}


def _resident_bytes() -> int:
    """The process's resident set size (Linux ``/proc``; else the peak from ``resource``)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class TrainingLog:
    """The scalars of one run, into ``log_dir`` (TensorBoard events and ``metrics.jsonl``).

    The folder is made (and checked) when the log is made; the event file is opened at the
    first ``log``. ``start_step``: the step a resumed run starts from (later records of an
    earlier run are dropped).

    >>> import json, os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> log = TrainingLog(folder)
    >>> log.log(1, {"train/loss": 2.5, "train/learning_rate": 1e-3})
    >>> log.close()
    >>> json.loads(open(os.path.join(folder, METRICS_FILE)).read())["train/loss"]
    2.5
    """

    def __init__(self, log_dir: str | os.PathLike, start_step: int = 0) -> None:
        try:
            import tensorboardX  # noqa: F401  (checked now, not after the first step)
        except ImportError:
            raise ImportError(
                "--log-dir needs tensorboardX: pip install tensorboardX (or 'numtile[logs]')"
            ) from None
        self.log_dir = os.fspath(log_dir)
        if os.path.exists(self.log_dir) and not os.path.isdir(self.log_dir):
            raise NotADirectoryError(f"--log-dir {self.log_dir} is a file, not a folder")
        os.makedirs(self.log_dir, exist_ok=True)
        self.metrics_path = os.path.join(self.log_dir, METRICS_FILE)
        if not os.access(self.log_dir, os.W_OK):
            raise PermissionError(f"--log-dir {self.log_dir} is not writable")
        self.start_step = start_step
        _drop_records_after(self.metrics_path, start_step)
        self.writer = None
        self.metrics = None

    def log(self, step: int, scalars: dict[str, float]) -> None:
        """Write ``scalars`` (tag -> number) of ``step``: one event each, one JSON line."""
        if self.writer is None:
            from tensorboardX import SummaryWriter

            purge = self.start_step + 1 if self.start_step else None
            # tensorboardX names the file by the second and the host: a resumed run started
            # in the same second would overwrite the first run's file without a suffix
            suffix = f".{time.time_ns()}.{os.getpid()}"
            self.writer = SummaryWriter(self.log_dir, purge_step=purge, filename_suffix=suffix)
            self.metrics = open(self.metrics_path, "a", encoding="utf-8")
        now = time.time()
        for tag, value in scalars.items():
            self.writer.add_scalar(tag, value, step, walltime=now)
        record = {"step": step, "wall_time": now, **{k: float(v) for k, v in scalars.items()}}
        self.metrics.write(json.dumps(record) + "\n")
        self.metrics.flush()
        self.writer.flush()

    def log_step(self, step: int, loss: float, learning_rate: float, tokens_per_s: float,
                 mfu: float, val_loss: float | None, runtime) -> None:  # fmt: skip
        """``log`` the scalars of a training step (``val_loss`` None: not evaluated) and the
        bytes in use per memory node of ``runtime``."""
        scalars = {
            "train/loss": loss,
            "train/learning_rate": learning_rate,
            "perf/tokens_per_s": tokens_per_s,
            "perf/mfu": mfu,
        }
        if val_loss is not None:
            scalars["val/loss"] = val_loss
        for node, used in memory_in_use(runtime).items():
            scalars[f"memory/{node}/bytes_in_use"] = used
        self.log(step, scalars)

    def close(self) -> None:
        """Flush and close the event file and ``metrics.jsonl``."""
        if self.writer is not None:
            self.writer.close()
            self.metrics.close()
            self.writer = self.metrics = None


def _drop_records_after(path: str, step: int) -> None:
    """Keep the lines of ``path`` (a metrics.jsonl) up to ``step``; unreadable lines go too."""
    if not os.path.isfile(path):
        return
    kept = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                if json.loads(line)["step"] <= step:
                    kept.append(line)
            except (ValueError, KeyError, TypeError):
                continue
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.writelines(kept)
    os.replace(tmp, path)
