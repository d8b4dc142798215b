"""The LU cases of ``compare_linalg.py`` (issue 14), timed in the same run:

LU/solve float64 n x n (b: n x 1) vs scipy.linalg.lu_factor + lu_solve, 2 threads  [<= 0.9]
                                  vs dask.array.linalg.solve, best chunk   [<= 0.6]
                                  (and the workers' busy fraction during it) [>= 90%]
Every implementation (each numtile tile, each dask chunk) runs once per round and the rounds
alternate, so on a shared machine whose load drifts the peers see about the same load. The
rounds also time the GEMM bound: the LU's flops done as 512 x 512 x 512 dgemms by one thread
per worker (the kernels' library, oneMKL or OpenBLAS, single-threaded), the time the
factorisation would take if every flop ran at the machine's tile GEMM rate under the same load.
lu_ooc: LU/solve float64 4096 with the host limit 4x below its working set, against no limit
(fresh processes; the ratio is time, limited / unlimited)                  [<= 2.0]
"""

from __future__ import annotations

import math
import os
import sys

import numpy as np
from threadpoolctl import threadpool_limits

import numtile as nt

CORES = os.cpu_count() or 1


def _gflops(flops: float, seconds: float) -> str:
    return f"{flops / seconds / 1e9:.1f} GFLOP/s"


def _interleaved_medians(runs: dict, repeat: int) -> dict:
    """Median wall time of each of ``runs`` (name -> fn), after one untimed run of each, timed
    in ``repeat`` rounds that call every fn once: on a shared machine whose load drifts, each
    round's peers see about the same load."""
    import statistics
    import time

    for fn in runs.values():
        fn()
    times = {name: [] for name in runs}
    for _ in range(repeat):
        for name, fn in runs.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def _lu_busy(ta, tb, a, b) -> str:
    """The workers' busy fractions during one more solve, whose residual is checked."""
    runtime = nt.get_runtime()
    busy_before, start = list(runtime.busy), runtime.elapsed
    x = nt.linalg.solve(ta, tb).to_numpy()
    wall = runtime.elapsed - start
    residual = np.linalg.norm(a @ x - b) / (np.linalg.norm(a) * np.linalg.norm(x))
    assert residual < 1e-12, residual
    return ", ".join(
        f"{100 * (after - before) / wall:.0f}%" for after, before in zip(runtime.busy, busy_before)
    )


def _gemm_bound(flops: float, threads: int, tile: int = 512):
    """A function doing ``flops`` as tile x tile x tile dgemms on ``threads`` threads (1 BLAS
    thread each, the GIL released), as the LU's workers would at their GEMM rate."""
    import threading

    from numtile.ops_cpu.matmul import gemm

    count = math.ceil(flops / (2.0 * tile**3) / threads)
    rng = np.random.default_rng(4)
    operands = [rng.standard_normal((3, tile, tile)) for _ in range(threads)]

    def work(a, b, c):
        for _ in range(count):
            gemm(a, b, c, False, False, -1e-3, 1.0)

    def run():
        with threadpool_limits(1):
            pool = [threading.Thread(target=work, args=tuple(o)) for o in operands]
            for thread in pool:
                thread.start()
            for thread in pool:
                thread.join()

    return run


def bench_lu(n: int, tiles: list[int], repeat: int, dask_chunks: list[int]) -> list[dict]:
    """LU + solve of an n x n float64 system: SciPy (2 threads), numtile at each of ``tiles``
    and dask at each of ``dask_chunks``, all timed in the same interleaved rounds."""
    import scipy.linalg

    rng = np.random.default_rng(3)
    a = rng.standard_normal((n, n))
    b = rng.standard_normal((n, 1))
    flops = 2.0 * n**3 / 3.0 + 2.0 * n**2
    threads = min(2, CORES)

    def scipy_solve():
        with threadpool_limits(threads):
            scipy.linalg.lu_solve(scipy.linalg.lu_factor(a), b)

    runs, inputs = {"scipy": scipy_solve, "gemm bound": _gemm_bound(flops, threads)}, {}
    for tile in tiles:
        ta = nt.from_numpy(a, tile_shape=None if tile is None else (tile, tile))
        tb = nt.from_numpy(b, tile_shape=(ta.tile_shape[0], 1))
        inputs[ta.tile_shape[0]] = (ta, tb)
        runs[("numtile", ta.tile_shape[0])] = lambda ta=ta, tb=tb: nt.linalg.solve(ta, tb).wait()
    try:
        import dask
        import dask.array as da
    except ImportError:
        print("dask not installed: skipping the dask peer (pip install 'numtile[bench]')")
        dask_chunks = []
    for chunk in dask_chunks:
        x, y = da.from_array(a, chunks=(chunk, chunk)), da.from_array(b, chunks=(chunk, 1))

        def dask_solve(x=x, y=y):
            with threadpool_limits(1), dask.config.set(scheduler="threads", num_workers=CORES):
                da.linalg.solve(x, y).compute()

        runs[("dask", chunk)] = dask_solve
    seconds = _interleaved_medians(runs, repeat)
    dask_best = min(((t, key[1]) for key, t in seconds.items() if key[0] == "dask"), default=None)
    rows = [
        {
            "case": f"lu/solve f64 {n}",
            "impl": f"scipy lu_factor+solve ({threads} thr)",
            "seconds": seconds["scipy"],
            "rate": _gflops(flops, seconds["scipy"]),
        }
    ]
    rows.append(
        {
            "case": f"lu/solve f64 {n}",
            "impl": f"GEMM bound (512 tiles, {threads} x 1 thr)",
            "seconds": seconds["gemm bound"],
            "rate": _gflops(flops, seconds["gemm bound"]),
        }
    )
    if dask_best is not None:
        rows.append(
            {
                "case": f"lu/solve f64 {n}",
                "impl": f"dask solve (chunk {dask_best[1]}, BLAS 1 thr)",
                "seconds": dask_best[0],
                "rate": _gflops(flops, dask_best[0]),
            }
        )
    for tile, (ta, tb) in inputs.items():
        t_nt = seconds[("numtile", tile)]
        busy = _lu_busy(ta, tb, a, b)
        peers = [("scipy", seconds["scipy"]), ("bound", seconds["gemm bound"])]
        for peer, t_peer in peers + ([("dask", dask_best[0])] if dask_best is not None else []):
            rows.append(
                {
                    "case": f"lu/solve f64 {n} (tile {tile})",
                    "impl": f"numtile vs {peer} (busy {busy})",
                    "seconds": t_nt,
                    "rate": _gflops(flops, t_nt),
                    "ratio": t_nt / t_peer,
                }
            )
    return rows


LU_CHILD = """
import json, statistics, sys, time
import numpy as np
import numtile as nt
n, tile, repeat = (int(v) for v in sys.argv[1:4])
runtime = nt.init()  # NUMTILE_HOST_MEM_LIMIT / NUMTILE_SPILL_DIR come from the environment
rng = np.random.default_rng(3)
a, b = rng.standard_normal((n, n)), rng.standard_normal((n, 1))
ta, tb = nt.from_numpy(a, tile_shape=(tile, tile)), nt.from_numpy(b, tile_shape=(tile, 1))
times = []
for _ in range(repeat + 1):  # the first run compiles and warms the pool
    start = time.perf_counter()
    x = nt.linalg.solve(ta, tb).to_numpy()
    times.append(time.perf_counter() - start)
residual = np.linalg.norm(a @ x - b) / (np.linalg.norm(a) * np.linalg.norm(x))
counters = runtime.manager.counters() if runtime.manager is not None else {}
print(json.dumps({"seconds": statistics.median(times[1:]), "residual": residual,
                  "counters": counters}))
"""


def bench_lu_out_of_core(n: int, tile: int, repeat: int, factor: int = 4) -> list[dict]:
    """LU + solve with the host limit ``factor`` times below its working set (the matrix, its
    factor and the right-hand sides: 2 n^2 float64) and without, each in a fresh process."""
    import json
    import subprocess
    import tempfile

    working_set = 2 * n * n * 8
    limit = working_set // factor
    flops = 2.0 * n**3 / 3.0 + 2.0 * n**2
    results = {}
    for label, value in (("no limit", None), (f"host limit {limit >> 20} MiB", limit)):
        env = dict(os.environ)
        env.pop("NUMTILE_HOST_MEM_LIMIT", None)
        with tempfile.TemporaryDirectory(prefix="numtile-lu-ooc-") as spill:
            if value is not None:
                env.update(NUMTILE_HOST_MEM_LIMIT=str(value), NUMTILE_SPILL_DIR=spill)
            command = [sys.executable, "-c", LU_CHILD, str(n), str(tile), str(repeat)]
            out = subprocess.run(command, env=env, capture_output=True, text=True)
        if out.returncode:
            raise RuntimeError(f"lu ooc {label}: the child failed:\n{out.stderr[-3000:]}")
        result = json.loads(out.stdout.strip().splitlines()[-1])
        assert result["residual"] < 1e-12, result["residual"]
        results[label] = result
        host = result["counters"].get("nodes", {}).get("host", {})
        spill = result["counters"].get("spill", {})
        print(f"lu ooc {label}: {result['seconds']:.2f} s, host {host}, spill {spill}", flush=True)
    case = f"lu ooc f64 {n} (tile {tile}, {factor}x limit)"
    unlimited = results["no limit"]["seconds"]
    return [
        {
            "case": case,
            "impl": f"numtile, {label}",
            "seconds": result["seconds"],
            "rate": _gflops(flops, result["seconds"]),
            "ratio": result["seconds"] / unlimited if label != "no limit" else None,
        }
        for label, result in results.items()
    ]
