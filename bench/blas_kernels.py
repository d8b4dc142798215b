"""The tile kernels' BLAS/LAPACK, OpenBLAS (SciPy's) against oneMKL: one thread, float64.

The library is chosen once per process (``NUMTILE_BLAS``), so each round runs one child
process per library, alternating, and every child times every kernel on the same inputs;
printed are the median over rounds of each child's best time (CPU time of the thread, which
other processes' load disturbs less than wall time), GFLOP/s and the MKL / OpenBLAS ratio.

Kernels (tile t, 512 by default; the LU panel as the first and middle panels of n = 8192):
  gemm        c -= a @ b (LU's and QR's update)         trsm  LU's unit lower solve, left
  trsm_right  Cholesky's b = b L^-T                     syrk  c -= a a^T (lower)
  potrf       Cholesky of a tile                        getrf_panel  getrf_tiles (16 / 8 tiles)
  geqrt, tpqrt, gemqrt, tpmqrt (QR, ib 32)              qr_leaf  TSQR's leaf (4096 x 1024)

Usage: python bench/blas_kernels.py [--tile 512] [--rounds 5] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np


def _cases(t: int) -> dict:
    """name -> (run, flops) on fresh copies of fixed inputs."""
    from numtile.ops_cpu import factorizations, lu, qr, tsqr
    from numtile.ops_cpu.matmul import gemm

    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal((t, t)) for _ in range(3))
    lower = np.tril(a) + t * np.eye(t)
    spd = a @ a.T + t * np.eye(t)
    ib = 32

    def panel(tiles):
        column = [rng.standard_normal((t, t)) for _ in range(tiles)]
        rows = tiles * t
        buffer = np.empty((t, lu.leading_dimension(rows, 8)))
        pivots, info = np.empty(t, np.int32), np.empty(1, np.int32)
        flops = rows * t * t - t**3 / 3
        return (lambda: lu.getrf_tiles([x.copy() for x in column], buffer, pivots, info)), flops

    factored, t_factor = a.copy(), np.empty((t, ib))
    qr.geqrt(factored, t_factor)
    top, bottom, t_pair = np.triu(b), c.copy(), np.empty((t, ib))
    qr.tpqrt(top, bottom, t_pair, False)
    tall = rng.standard_normal((4096, 1024))
    q, r, flag = np.empty((4096, 1024)), np.empty((1024, 1024)), np.empty(1, np.int64)
    cases = {
        "gemm": (lambda: gemm(a, b, c.copy(), False, False, -1.0, 1.0), 2 * t**3),
        "trsm": (lambda: factorizations.trsm(lower, b.copy(), True, True, False, True, 1.0), t**3),
        "trsm_right": (
            lambda: factorizations.trsm(lower, b.copy(), False, True, True, False, 1.0),
            t**3,
        ),
        "syrk": (lambda: factorizations.syrk(a, c.copy(), False, -1.0, 1.0), t**3),
        "potrf": (lambda: factorizations.potrf(spd.copy()), t**3 / 3),
        "getrf_panel_16": panel(16),
        "getrf_panel_8": panel(8),
        "geqrt": (lambda: qr.geqrt(a.copy(), np.empty((t, ib))), 4 / 3 * t**3),
        "tpqrt": (lambda: qr.tpqrt(np.triu(b), c.copy(), np.empty((t, ib)), False), 2 * t**3),
        "gemqrt": (lambda: qr.gemqrt(factored, t_factor, c.copy(), True), 2 * t**3),
        "tpmqrt": (
            lambda: qr.tpmqrt(bottom, t_pair, a.copy(), c.copy(), True, False),
            4 * t**3,
        ),
        "qr_leaf": (
            lambda: tsqr.qr_leaf(tall, q, r, flag, 0.0),
            4 * 4096 * 1024**2 - 4 / 3 * 1024**3,
        ),
    }
    return cases


def child(t: int, repeat: int) -> None:
    """Time every case in this process's library; print one JSON line of best CPU seconds."""
    from threadpoolctl import threadpool_limits

    from numtile.ops_cpu.kernel_blas import LIBRARY

    cases = _cases(t)
    best = {}
    with threadpool_limits(1):
        for name, (run, _flops) in cases.items():
            run()  # compile, warm the caches
            times = []
            for _ in range(repeat):
                start = time.thread_time()
                run()
                times.append(time.thread_time() - start)
            best[name] = min(times)
    print(json.dumps({"library": LIBRARY, "best": best}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tile", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.tile, args.repeat)
        return
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    runs = {"scipy": [], "mkl": []}
    command = [sys.executable, __file__, "--child", "--tile", str(args.tile)]
    for _ in range(args.rounds):
        for library in runs:
            env = dict(os.environ, NUMTILE_BLAS=library)
            out = subprocess.run(
                command + ["--repeat", str(args.repeat)], env=env, check=True,
                capture_output=True, text=True,
            ).stdout  # fmt: skip
            runs[library].append(json.loads(out.strip().splitlines()[-1])["best"])
    flops = {name: f for name, (_run, f) in _cases(args.tile).items()}
    print(f"tile {args.tile}, float64, 1 thread, median of {args.rounds} rounds' best CPU time")
    print(f"{'kernel':16} {'OpenBLAS ms':>12} {'GF/s':>6} {'MKL ms':>9} {'GF/s':>6} {'MKL/OB':>7}")
    for name in flops:
        scipy_s = statistics.median(run[name] for run in runs["scipy"])
        mkl_s = statistics.median(run[name] for run in runs["mkl"])
        print(
            f"{name:16} {scipy_s * 1e3:12.2f} {flops[name] / scipy_s / 1e9:6.1f} "
            f"{mkl_s * 1e3:9.2f} {flops[name] / mkl_s / 1e9:6.1f} {mkl_s / scipy_s:7.2f}"
        )


if __name__ == "__main__":
    main()
