"""The process-wide runtime: started on first use, replaced by ``init``, stopped at exit."""

from __future__ import annotations

import atexit
import contextlib
import threading
import time
from collections.abc import Iterator

from numtile.config import Config, parse_bytes
from numtile.runtime.engine import Runtime, RuntimeShutdownError
from numtile.runtime.kinds import Backends, default_backends
from numtile.runtime.trace import Tracer, summary

_runtime: Runtime | None = None
_stopped = False  # shutdown() was called and init() not since
_lock = threading.Lock()


def get_runtime() -> Runtime:
    """The current runtime, started with ``Config()`` and the default backends table
    (``numtile.backends.BACKENDS``) on first use."""
    global _runtime
    runtime = _runtime
    if runtime is not None and not runtime.closed:
        return runtime
    with _lock:
        if _stopped:
            raise RuntimeShutdownError(
                "the numtile runtime was shut down; call numtile.init() to start a new one"
            )
        if _runtime is None or _runtime.closed:
            _runtime = Runtime(Config(), default_backends())
        return _runtime


def init(
    ncpu: int | None = None,
    scheduler: str | None = None,
    backends: Backends | None = None,
    **settings,
) -> Runtime:
    """(Re)start the runtime with ``ncpu`` workers and a scheduler (``eager|dmda|sync``).

    Any other ``Config`` field can be given too (``ncuda``, ``restrict``,
    ``host_mem_limit``, ``cuda_mem_limit``, ``spill_dir``, ``pool_bytes``, ``tile``, ...)
    and applies to this runtime (``get_runtime().config`` is that configuration); the rest
    is read from the ``NUMTILE_*`` environment variables. ``backends`` replaces the table of
    worker kinds (``numtile.backends.BACKENDS``).

    Tensors made before keep their data once their tasks have finished.

    >>> import numtile as nt
    >>> nt.init(ncpu=1, scheduler="sync").scheduler.name
    'sync'
    >>> _ = nt.init()
    """
    global _runtime, _stopped
    config = Config()
    if ncpu is not None:
        config.ncpu = ncpu
    if scheduler is not None:
        config.scheduler = scheduler
    for name, value in settings.items():
        if not hasattr(config, name):
            raise TypeError(f"init() got an unknown setting {name!r}")
        if name.endswith("_limit") and isinstance(value, str):
            try:
                value = parse_bytes(value)
            except ValueError as exc:
                raise ValueError(f"{name}: {exc}") from None
        setattr(config, name, value)
    config.__post_init__()
    with _lock:
        if _runtime is not None:
            _runtime.shutdown(wait=True)
        _runtime = Runtime(config, default_backends() if backends is None else backends)
        _stopped = False
        return _runtime


def shutdown(wait: bool = True) -> None:
    """Finish (``wait``) or cancel queued work, stop the workers; ``init()`` starts again."""
    global _stopped
    with _lock:
        if _runtime is not None:
            _runtime.shutdown(wait=wait)
        _stopped = True


def wait_all() -> None:
    """Block until every submitted task has run; re-raise the first task error."""
    get_runtime().wait_all()


def runtime_summary(file=None) -> str:
    """Print and return busy time per worker and GFLOP/s per codelet.

    >>> import numtile as nt
    >>> "worker" in nt.runtime_summary(file=open("/dev/null", "w"))
    True
    """
    text = summary(get_runtime())
    print(text, file=file)
    return text


@contextlib.contextmanager
def trace(path: str) -> Iterator[Tracer]:
    """Record every task run inside the block and write a Chrome/Perfetto trace to ``path``.

    >>> import numtile as nt, os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "run.json")
    >>> with nt.trace(path):
    ...     _ = (nt.ones((4, 4), tile_shape=(2, 2)) + 1).to_numpy()
    >>> os.path.getsize(path) > 0
    True
    """
    runtime = get_runtime()
    tracer = Tracer(time.perf_counter(), runtime.worker_names)
    runtime.tracer = tracer
    if runtime.manager is not None:
        runtime.manager.tracer = tracer
    try:
        yield tracer
        runtime.wait_all()
    finally:
        runtime.tracer = None
        if runtime.manager is not None:
            runtime.manager.tracer = None
        if runtime.distributed is not None:  # one file for every rank, written by rank 0
            from numtile.runtime.distributed.observe import write_trace

            write_trace(runtime.distributed, tracer, path)
        else:
            tracer.write(path)


@atexit.register
def _shutdown_at_exit() -> None:
    if _runtime is not None:
        _runtime.shutdown(wait=False)
