"""One thread, data in cache: x ** y through the broadcast kernel (``ops_cpu.binary.kernel``,
which gathers blocks for ``fastmath.broadcast_gathered``: scalar exponents, outer products,
strided reads) against the dense block kernel (``pow_blocks.power``) and NumPy, float32 and
float64; prints medians of the thread's CPU time in ns an element over interleaved rounds.

Usage: PYTHONPATH=. python bench/pow_broadcast.py [--rounds 11] [--size 65536]
"""

from __future__ import annotations

import argparse
import os
import time
from functools import partial

import numpy as np

from numtile import opcodes
from numtile.ops_cpu import elementwise, pow_blocks


def _broadcast(a, a_strides, b, b_strides, out, shape) -> None:
    elementwise.binary.kernel(a, a_strides, b, b_strides, out, shape, opcodes.POWER)


def _cases(n: int) -> dict[str, partial]:
    """name -> call, each writing n outputs."""
    rng = np.random.default_rng(0)
    side = int(np.sqrt(n))
    one, zero, size = np.array([1], np.int64), np.array([0], np.int64), np.array([n], np.int64)
    cases = {}
    for dtype in (np.float32, np.float64):
        tag = f"f{np.dtype(dtype).itemsize * 8}"
        x = rng.uniform(0.5, 4, n).astype(dtype)
        signed = rng.uniform(-4, 4, n).astype(dtype)
        y = rng.uniform(-3, 3, n).astype(dtype)
        out = np.empty(n, dtype)
        scalar = np.array([2.5], dtype)
        cases[f"{tag} x ** 2.5"] = partial(_broadcast, x, one, scalar, zero, out, size)
        cases[f"{tag} signed x ** 3"] = partial(
            _broadcast, signed, one, np.array([3.0], dtype), zero, out, size
        )
        grid = np.array([side, side], np.int64)
        outer = (x, np.array([1, 0], np.int64), y, np.array([0, 1], np.int64))
        cases[f"{tag} x[:, None] ** y"] = partial(_broadcast, *outer, out[: side * side], grid)
        cases[f"{tag} dense blocks"] = partial(pow_blocks.power, x, y, out)
        cases[f"{tag} numpy x ** 2.5"] = partial(np.power, x, scalar, out=out)
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--size", type=int, default=1 << 16)
    args = parser.parse_args()
    cases = _cases(args.size)
    for call in cases.values():  # compile
        call()
    calls_per_round = max(1, (1 << 21) // args.size)
    times: dict[str, list] = {name: [] for name in cases}
    for _ in range(args.rounds):
        for name, call in cases.items():
            start = time.thread_time()  # this thread's CPU time: not the other jobs'
            for _ in range(calls_per_round):
                call()
            times[name].append((time.thread_time() - start) / calls_per_round / args.size * 1e9)
    print(f"load {os.getloadavg()[0]:.2f}; CPU ns an element, medians of {args.rounds} rounds")
    for name, values in times.items():
        print(f"{name:24s} {np.median(values):6.2f}")


if __name__ == "__main__":
    main()
