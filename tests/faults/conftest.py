"""Fault-injection helpers: nothing may hang, so every test runs under a deadline."""

from __future__ import annotations

import faulthandler
import threading

import pytest

from numtile.config import Config
from numtile.runtime import Runtime

DEADLINE_SECONDS = 20.0  # far above what any test here needs (they take well under a second)


@pytest.fixture(autouse=True)
def _dump_and_exit_if_stuck():
    """Backstop for hangs outside ``within_deadline`` (fixtures, teardown): print every
    thread's stack and end the test process, rather than wait forever."""
    faulthandler.dump_traceback_later(6 * DEADLINE_SECONDS, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


def within_deadline(function, *args, seconds: float = DEADLINE_SECONDS):
    """``function(*args)`` in a helper thread; fails the test if it has not returned within
    ``seconds`` (a hang), re-raises what it raised. A ``BaseException`` that is not an
    ``Exception`` (a ``KeyboardInterrupt`` that escaped) fails the test instead of reaching
    pytest's own thread, where it would stop the whole session."""
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["value"] = function(*args)
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run, name="test-deadline", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"{getattr(function, '__name__', function)} hung for more than {seconds} s")
    error = outcome.pop("error", None)
    if error is None:
        return outcome.get("value")
    try:
        if not isinstance(error, Exception):
            raise AssertionError(f"{type(error).__name__} escaped: {error}") from error
        raise error
    finally:
        del error  # else this frame, in the error's traceback, would keep it (and tiles) alive


def raised(function, *args) -> BaseException | None:
    """What ``function(*args)`` raised (``SystemExit`` and ``KeyboardInterrupt`` too: caught
    here, never re-raised), or None; without its traceback, whose frames would hold the
    calling test's tiles in a cycle."""
    try:
        function(*args)
    except BaseException as exc:
        return exc.with_traceback(None)
    return None


@pytest.fixture(name="raised")
def raised_fixture():
    """``raised(function, *args)``: see ``raised``."""
    return raised


@pytest.fixture(name="within_deadline")
def within_deadline_fixture():
    """``within_deadline(function, *args, seconds=...)``: see ``within_deadline``."""
    return within_deadline


@pytest.fixture(name="make_runtime")
def make_runtime_fixture(tmp_path):
    """``make_runtime(scheduler, ncpu=2, **config)``: a private runtime, shut down at the end
    (under a deadline: a shutdown that hangs fails the test too)."""
    started: list[Runtime] = []

    def make(scheduler: str = "eager", ncpu: int = 2, **settings) -> Runtime:
        settings.setdefault("cache_dir", str(tmp_path / "cache"))
        runtime = Runtime(Config(ncpu=ncpu, scheduler=scheduler, **settings))
        started.append(runtime)
        return runtime

    yield make
    for runtime in started:
        within_deadline(runtime.shutdown)
