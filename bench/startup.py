"""Start-up time of numtile: a fresh interpreter with an empty Numba cache (cold, as in a fresh
clone) and again with the cache it filled (warm), for a one-liner and a typical script.

Each run is a child ``python -c``; the figures are the child's CPU seconds (user + sys) and
its wall time. Issue 13's targets: cold < 20 s CPU, warm < 2 s. ``--profile`` prints, per
kernel and signature, the seconds Numba spent compiling it (or loading it from the cache),
from Numba's compile events, inclusive of what it inlines and calls.

The children import a fresh copy of the package (the one this interpreter finds), as in a
fresh clone: the cold run compiles its Python bytecode and the warm run reads it, as an
installed package does, even where the caller sets ``PYTHONDONTWRITEBYTECODE`` (each run
would otherwise compile numtile's sources again).

Usage: python bench/startup.py [--repeat N] [--scripts one-liner,typical] [--profile]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

SCRIPTS = {
    "one-liner": """
import numtile as nt
(nt.ones((300, 200), tile_shape=(128, 128)) + 1).to_numpy()
""",
    "typical": """
import numpy as np
import numtile as nt
rng = np.random.default_rng(0)
x = nt.from_numpy(rng.standard_normal((300, 200)), tile_shape=(128, 128))
w = nt.from_numpy(rng.standard_normal((200, 100)), tile_shape=(128, 128))
y = x @ w
totals = [nt.sum(y, axis=0), nt.mean(y), nt.max(y, axis=1), nt.min(x)]
positive = y > 0
z = nt.where(positive, nt.sqrt(y), nt.exp(y * 0.1))
logs = nt.log(nt.abs(y) + 1.0)
kept = y[positive]
share = nt.mean(positive.astype(y.dtype))
close = nt.all((z >= 0) & (logs <= 10.0))
[t.to_numpy() for t in (*totals, z, logs, kept, share, close)]
""",
}

# Run in the child before the script under --profile: seconds per (kernel, signature) from
# Numba's compile events, printed at exit, largest first.
PROFILER = """
import atexit, collections, threading, time
from numba.core import event
_seconds = collections.Counter()
_stacks = threading.local()
class _Compiles(event.Listener):
    def on_start(self, ev):
        if not hasattr(_stacks, "items"):
            _stacks.items = []
        _stacks.items.append(time.perf_counter())
    def on_end(self, ev):
        elapsed = time.perf_counter() - _stacks.items.pop()
        dispatcher = ev.data["dispatcher"]
        name = getattr(dispatcher, "__qualname__", None) or dispatcher.py_func.__qualname__
        _seconds[(name, str(ev.data["args"]))] += elapsed
event.register("numba:compile", _Compiles())
@atexit.register
def _report():
    for (name, args), seconds in _seconds.most_common():
        print(f"  {seconds:7.2f} s  {name}{args}"[:160])
    total = sum(_seconds.values())
    print(f"  {total:7.2f} s  (sum; a nested compile counts in its caller's too)")
"""


PACKAGE = os.path.dirname(importlib.util.find_spec("numtile").origin)
_NO_BYTECODE = shutil.ignore_patterns("__pycache__", "*.pyc")


def run_child(code: str, env: dict) -> tuple[float, float, str]:
    """(CPU seconds, wall seconds, stdout) of ``python -c code`` in ``env``."""
    start = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True
    )
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise RuntimeError(f"child failed ({process.returncode}):\n{code}")
    return usage.ru_utime + usage.ru_stime, wall, output


def measure(name: str, repeat: int, profile: bool) -> list[dict]:
    """Cold then warm runs of script ``name``, ``repeat`` times each (a fresh cache per cold)."""
    code = (PROFILER if profile else "") + SCRIPTS[name]
    runs = {"cold": [], "warm": []}
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, NUMBA_CACHE_DIR=cache, NUMTILE_CACHE_DIR=cache)
            # a fresh copy of the package, as a clone: the cold run compiles its bytecode
            # and the warm run reads it, whatever the caller's PYTHONDONTWRITEBYTECODE says
            shutil.copytree(PACKAGE, os.path.join(cache, "numtile"), ignore=_NO_BYTECODE)
            env["PYTHONPATH"] = os.pathsep.join(filter(None, (cache, env.get("PYTHONPATH"))))
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            for label in runs:
                cpu, wall, output = run_child(code, env)
                runs[label].append((cpu, wall))
                if profile:
                    print(f"{name}, {label}: {cpu:.1f} s CPU, {wall:.1f} s wall\n{output}")
    return [
        {
            "script": name,
            "run": label,
            "cpu": statistics.median(c for c, _ in samples),
            "wall": statistics.median(w for _, w in samples),
            "all": ", ".join(f"{c:.1f}" for c, _ in samples),
        }
        for label, samples in runs.items()
    ]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scripts", default=",".join(SCRIPTS))
    parser.add_argument("--profile", action="store_true", help="compile seconds per kernel")
    args = parser.parse_args(argv)
    rows = []
    for name in args.scripts.split(","):
        rows += measure(name, args.repeat, args.profile)
    print(f"load average {os.getloadavg()[0]:.1f}; medians of {args.repeat}")
    print(f"{'script':<12}{'run':<6}{'CPU s':>8}{'wall s':>8}   CPU s of each run")
    for row in rows:
        figures = f"{row['cpu']:>8.2f}{row['wall']:>8.2f}"
        print(f"{row['script']:<12}{row['run']:<6}{figures}   {row['all']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
