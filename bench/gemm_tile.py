"""The per-tile GEMM (numtile.ops_cpu.gemm) against NumPy's and SciPy's, one BLAS thread.

Prints the BLAS libraries loaded (threadpoolctl) and which one the kernels call, then, all in
one process with the cases alternating and medians taken:
  tile      ops_cpu.gemm (c = a @ b, and Cholesky's c -= a @ b.T) vs numpy.matmul(out=) vs
            scipy.linalg.blas.?gemm, one thread, per size and dtype
  threads   the same GEMM run by `workers` threads at once (as the runtime's workers do):
            ops_cpu.gemm vs numpy.matmul, median time per product
  cholesky  numtile's Cholesky (n, tile) vs scipy.linalg.cholesky on one BLAS thread, and the
            median GEMM task of a traced run

Usage: python bench/gemm_tile.py [--sizes 512,1024] [--repeat 15] [--cholesky 4096:512]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time

import numpy as np
import scipy.linalg
import scipy.linalg.blas
from threadpoolctl import threadpool_info, threadpool_limits

import numtile as nt
from numtile.ops_cpu.kernel_blas import kernel_blas_library
from numtile.ops_cpu.matmul import gemm


def _alternating(cases: dict, repeat: int) -> dict:
    """Median seconds of each case, the cases run in turn `repeat` times after one warm-up."""
    for run in cases.values():
        run()
    times = {name: [] for name in cases}
    for _ in range(repeat):
        for name, run in cases.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def libraries() -> None:
    kernels = kernel_blas_library()
    for info in threadpool_info():
        if info["user_api"] != "blas":
            continue
        used = kernels is not None and os.path.samefile(info["filepath"], kernels)
        print(
            f"{info['filepath']}: {info['internal_api']} {info['version']} "
            f"{info.get('architecture')}, {info['num_threads']} threads"
            + (" <- the kernels" if used else "")
        )


def _tile_cases(n: int, dtype, rng) -> dict:
    a, b = (rng.standard_normal((n, n)).astype(dtype) for _ in range(2))
    c = np.zeros((n, n), dtype)
    fa, fb = np.asfortranarray(a), np.asfortranarray(b)
    blas = scipy.linalg.blas.sgemm if dtype == np.float32 else scipy.linalg.blas.dgemm
    return {
        "numpy.matmul": lambda: np.matmul(a, b, out=c),
        "scipy ?gemm": lambda: blas(1.0, fa, fb),
        "ops_cpu.gemm": lambda: gemm(a, b, c, False, False, 1.0, 0.0),
        "ops_cpu.gemm c-=ab^T": lambda: gemm(a, b, c, False, True, -1.0, 1.0),
    }


def tile(sizes: list[int], repeat: int) -> None:
    rng = np.random.default_rng(0)
    for n in sizes:
        for dtype in (np.float32, np.float64):
            with threadpool_limits(1):
                result = _alternating(_tile_cases(n, dtype, rng), repeat)
            flops = 2.0 * n**3
            text = "  ".join(
                f"{name} {s * 1e3:.2f} ms ({flops / s / 1e9:.0f} GF/s)"
                for name, s in result.items()
            )
            ratio = result["ops_cpu.gemm"] / result["numpy.matmul"]
            print(f"{n} {np.dtype(dtype).name}: {text}  | gemm/numpy {ratio:.2f}", flush=True)


def threads(n: int, workers: int, repeat: int) -> None:
    rng = np.random.default_rng(1)
    data = [tuple(rng.standard_normal((n, n)) for _ in range(3)) for _ in range(workers)]

    def concurrent(product):
        times, barrier = [], threading.Barrier(workers)

        def work(a, b, c):
            barrier.wait()
            for _ in range(repeat):
                start = time.perf_counter()
                product(a, b, c)
                times.append(time.perf_counter() - start)

        pool = [threading.Thread(target=work, args=operands) for operands in data]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()
        return statistics.median(times)

    cases = {
        "ops_cpu.gemm": lambda: concurrent(lambda a, b, c: gemm(a, b, c, False, True, -1.0, 1.0)),
        "numpy.matmul": lambda: concurrent(lambda a, b, c: np.matmul(a, b.T, out=c)),
    }
    with threadpool_limits(1):
        result = {name: statistics.median(run() for _ in range(3)) for name, run in cases.items()}
    text = "  ".join(f"{name} {s * 1e3:.2f} ms" for name, s in result.items())
    print(f"{workers} threads, {n} float64 each: {text} per product")


def cholesky(n: int, tile_size: int, repeat: int) -> None:
    rng = np.random.default_rng(2)
    m = rng.standard_normal((n, n))
    a = m @ m.T + n * np.eye(n)
    ta = nt.from_numpy(a, tile_shape=(tile_size, tile_size))

    def scipy_one_thread():
        with threadpool_limits(1):
            scipy.linalg.cholesky(a, lower=True)

    cases = {"numtile": lambda: nt.linalg.cholesky(ta).wait(), "scipy 1 thread": scipy_one_thread}
    result = _alternating(cases, repeat)
    path = os.path.join(tempfile.mkdtemp(), "cholesky.json")
    with nt.trace(path):
        nt.linalg.cholesky(ta).wait()
    with open(path) as file:
        events = json.load(file)
    events = events["traceEvents"] if isinstance(events, dict) else events
    tasks = [e["dur"] / 1e3 for e in events if e.get("ph") == "X" and e.get("name") == "gemm"]
    ratio = result["numtile"] / result["scipy 1 thread"]
    print(
        f"cholesky f64 {n} tile {tile_size}: numtile {result['numtile']:.3f} s, "
        f"scipy 1 thread {result['scipy 1 thread']:.3f} s, ratio {ratio:.2f}; "
        f"GEMM task median {statistics.median(tasks):.2f} ms ({len(tasks)} tasks)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="512,1024")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--cholesky", default="4096:512", help="n:tile, or '' to skip")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    nt.ones((1,)).wait()  # start the runtime: its BLAS limit is part of what is measured
    libraries()
    tile([int(s) for s in args.sizes.split(",")], args.repeat)
    threads(512, args.workers, max(3, args.repeat // 3))
    if args.cholesky:
        n, size = (int(s) for s in args.cholesky.split(":"))
        cholesky(n, size, max(3, args.repeat // 3))


if __name__ == "__main__":
    main()
