"""numtile against its peers, timed in the same run on this machine.

Cases (issue targets in brackets, ratio = numtile time / peer time):
  matmul float32 n x n              vs NumPy ``@`` with all cores          [<= 1.1]
  cholesky float64 n x n            vs scipy.linalg.cholesky, all cores     [<= 1.0]
                                    vs dask.array.linalg.cholesky, best chunk, 1 BLAS thread
                                                                           [<= 0.5]
  LU/solve float64 n x n (b: n x 1) vs scipy.linalg.lu_factor + lu_solve, 2 threads  [<= 0.9]
                                    vs dask.array.linalg.solve, best chunk   [<= 0.6]
                                    (and the busy fraction of the workers during it) [>= 90%]
                                    (every implementation, each numtile tile of --lu-tile and
                                    each dask chunk once per round, rounds interleaved)
  lu_ooc: LU/solve float64 4096, the host limit 4x below its working set, vs no limit
                                    (fresh processes; the ratio is time, limited / unlimited)
                                                                           [<= 2.0]
  (the LU cases live in ``lu_cases.py``)
  QR f64 8192 x 8192, TSQR f64 65536 x 1024, svdvals f64 65536 x 512: see ``qr_cases.py``
                                    (vs numpy.linalg.qr / svd and dask.array.linalg)
  vector_norm complex128 n x n, ord 2 and 1: the moduli read in the reduction kernels, against
                                    the former path (a tiled |z| first), NumPy's
                                    ``linalg.norm`` and torch's ``linalg.vector_norm``
  tiny tasks: x + 1 over 20,000 one-element tiles vs Dask threaded, bare ThreadPoolExecutor
                                                                           [>= 40,000 tasks/s]
  gelu float32 (64M)                vs one @njit(parallel=True) call       [<= 1.2]
  start-up: a fresh interpreter doing a matmul and a few elementwise ops, with an empty
  Numba cache (cold) and again (warm)                                      [< 20 s, < 2 s]

The tile kernels' BLAS/LAPACK is oneMKL where it loads, else SciPy's OpenBLAS (``NUMTILE_BLAS``
forces one; the header line names it): run once with each for an A/B of the library.

Usage: python bench/compare_linalg.py [--quick] [--repeat N] [--cases matmul,cholesky,lu,...]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import math
import os
import sys

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import median_time, print_table  # noqa: E402
from lu_cases import bench_lu, bench_lu_out_of_core  # noqa: E402
from qr_cases import bench_qr, bench_svdvals  # noqa: E402

import numtile as nt  # noqa: E402
from numtile.ops_cpu.kernel_blas import kernel_blas_description  # noqa: E402

CORES = os.cpu_count() or 1


def _gflops(flops: float, seconds: float) -> str:
    return f"{flops / seconds / 1e9:.1f} GFLOP/s"


def bench_matmul(n: int, tile: int, repeat: int) -> list[dict]:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    ta = nt.from_numpy(a, tile_shape=None if tile is None else (tile, tile))
    tb = nt.from_numpy(b, tile_shape=None if tile is None else (tile, tile))
    tile = ta.tile_shape[0]
    flops = 2.0 * n**3
    with threadpool_limits(CORES):
        t_numpy = median_time(lambda: a @ b, repeat)
    t_nt = median_time(lambda: (ta @ tb).wait(), repeat)
    err = np.abs((ta @ tb).to_numpy() - a @ b).max() / np.abs(a @ b).max()
    assert err < 1e-4, err
    case = f"matmul f32 {n} (tile {tile})"
    return [
        {
            "case": case,
            "impl": f"numpy @ ({CORES} threads)",
            "seconds": t_numpy,
            "rate": _gflops(flops, t_numpy),
        },
        {
            "case": case,
            "impl": "numtile",
            "seconds": t_nt,
            "rate": _gflops(flops, t_nt),
            "ratio": t_nt / t_numpy,
        },
    ]


def _spd(n: int) -> np.ndarray:
    rng = np.random.default_rng(1)
    m = rng.standard_normal((n, n))
    return m @ m.T / n + np.eye(n) * 2


def bench_cholesky(n: int, tile: int, repeat: int, dask_chunks: list[int]) -> list[dict]:
    import scipy.linalg

    a = _spd(n)
    ta = nt.from_numpy(a, tile_shape=None if tile is None else (tile, tile))
    tile = ta.tile_shape[0]
    flops = n**3 / 3.0
    with threadpool_limits(CORES):
        t_scipy = median_time(lambda: scipy.linalg.cholesky(a, lower=True), repeat)
    t_nt = median_time(lambda: nt.linalg.cholesky(ta).wait(), repeat)
    ref = np.linalg.cholesky(a)
    err = np.abs(nt.linalg.cholesky(ta).to_numpy() - ref).max()
    assert err < 1e-8 * n, err
    case = f"cholesky f64 {n} (tile {tile})"
    rows = [
        {
            "case": case,
            "impl": f"scipy.linalg ({CORES} threads)",
            "seconds": t_scipy,
            "rate": _gflops(flops, t_scipy),
        },
        {
            "case": case,
            "impl": "numtile",
            "seconds": t_nt,
            "rate": _gflops(flops, t_nt),
            "ratio": t_nt / t_scipy,
        },
    ]
    try:
        import dask
        import dask.array as da
    except ImportError:
        print("dask not installed: skipping the dask peer (pip install 'numtile[bench]')")
        return rows
    best = None
    for chunk in dask_chunks:
        x = da.from_array(a, chunks=(chunk, chunk))
        with threadpool_limits(1), dask.config.set(scheduler="threads", num_workers=CORES):
            t = median_time(lambda x=x: da.linalg.cholesky(x, lower=True).compute(), repeat)
        if best is None or t < best[0]:
            best = (t, chunk)
    t_dask, chunk = best
    rows.append(
        {
            "case": case,
            "impl": f"dask (chunk {chunk}, BLAS 1 thread)",
            "seconds": t_dask,
            "rate": _gflops(flops, t_dask),
            "ratio": t_nt / t_dask,
        }
    )
    return rows


def bench_tiny_tasks(ntasks: int, repeat: int) -> list[dict]:
    x = nt.from_numpy(np.zeros(ntasks), tile_shape=(1,))
    t_nt = median_time(lambda: (x + 1).wait(), repeat)
    case = f"x + 1 over {ntasks} one-element tiles"
    rows = [
        {"case": case, "impl": "numtile", "seconds": t_nt, "rate": f"{ntasks / t_nt:,.0f} tasks/s"}
    ]
    values = [np.zeros(1) for _ in range(ntasks)]
    with concurrent.futures.ThreadPoolExecutor(CORES) as pool:

        def bare():
            for f in [pool.submit(np.add, v, 1) for v in values]:
                f.result()

        t_pool = median_time(bare, repeat)
    rows.append(
        {
            "case": case,
            "impl": "ThreadPoolExecutor (no deps)",
            "seconds": t_pool,
            "rate": f"{ntasks / t_pool:,.0f} tasks/s",
            "ratio": t_nt / t_pool,
        }
    )
    try:
        import dask
        import dask.array as da
    except ImportError:
        return rows
    dx = da.from_array(np.zeros(ntasks), chunks=1)
    with dask.config.set(scheduler="threads", num_workers=CORES):
        t_dask = median_time(lambda: (dx + 1).compute(), max(1, repeat // 2))
    rows.append(
        {
            "case": case,
            "impl": "dask threaded",
            "seconds": t_dask,
            "rate": f"{ntasks / t_dask:,.0f} tasks/s",
            "ratio": t_nt / t_dask,
        }
    )
    return rows


def bench_complex_norm(n: int, tile: int, repeat: int) -> list[dict]:
    import torch

    rng = np.random.default_rng(3)
    a = rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))
    x, ta = nt.from_numpy(a, tile_shape=(tile, tile)), torch.from_numpy(a)
    rows = []
    for order in (2, 1):
        case = f"vector_norm c128 {n}^2 ord {order}"
        impls = {
            "NumPy linalg.norm": lambda o=order: np.linalg.norm(a.ravel(), ord=o),
            f"torch ({torch.get_num_threads()} threads)": lambda o=order: float(
                torch.linalg.vector_norm(ta, ord=o)
            ),
            "numtile, |z| tile first (former)": lambda o=order: nt.linalg.vector_norm(
                nt.abs(x), ord=o
            ).item(),
            "numtile": lambda o=order: nt.linalg.vector_norm(x, ord=o).item(),
        }
        expected = np.linalg.norm(a.ravel(), ord=order)
        np.testing.assert_allclose(impls["numtile"](), expected, rtol=1e-12)
        times = {name: median_time(f, repeat) for name, f in impls.items()}
        peer = times["NumPy linalg.norm"]
        for name, seconds in times.items():
            row = {"case": case, "impl": name, "seconds": seconds}
            row["rate"] = f"{a.nbytes / seconds / 1e9:.1f} GB/s"
            if name.startswith("numtile"):
                row["ratio"] = seconds / peer
            rows.append(row)
    return rows


def bench_gelu(size: int, repeat: int) -> list[dict]:
    from numba import njit, prange

    @njit(parallel=True, cache=True)
    def gelu_parallel(x, out):
        c = math.sqrt(2.0 / math.pi)
        for i in prange(x.shape[0]):
            v = x[i]
            out[i] = 0.5 * v * (1.0 + math.tanh(c * (v + 0.044715 * v * v * v)))

    x = np.random.default_rng(2).standard_normal(size, dtype=np.float32)
    out = np.empty_like(x)
    tx = nt.from_numpy(x)
    t_peer = median_time(lambda: gelu_parallel(x, out), repeat)
    t_nt = median_time(lambda: nt.gelu_tanh(tx).wait(), repeat)
    np.testing.assert_allclose(nt.gelu_tanh(tx).to_numpy()[:1000], out[:1000], rtol=1e-5, atol=1e-6)
    case = f"gelu f32 {size / 2**20:.0f}M (tile {tx.tile_shape[0]})"
    gbytes = 2 * x.nbytes / 1e9
    return [
        {
            "case": case,
            "impl": "@njit(parallel=True)",
            "seconds": t_peer,
            "rate": f"{gbytes / t_peer:.1f} GB/s",
        },
        {
            "case": case,
            "impl": "numtile",
            "seconds": t_nt,
            "rate": f"{gbytes / t_nt:.1f} GB/s",
            "ratio": t_nt / t_peer,
        },
    ]


STARTUP_SCRIPT = """
import numpy as np
import numtile as nt
a = nt.from_numpy(np.ones((300, 200), np.float32), tile_shape=(128, 128))
b = nt.from_numpy(np.ones((200, 100), np.float32), tile_shape=(128, 128))
c = nt.tanh(a @ b) * 2.0 + 1.0
assert float(nt.sum(c).item()) > 0
"""


def bench_startup() -> list[dict]:
    import subprocess
    import tempfile
    import time

    rows = []
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, NUMTILE_CACHE_DIR=cache)
        for label in ("cold (empty Numba cache)", "warm (cached kernels)"):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", STARTUP_SCRIPT], env=env, check=True)
            rows.append(
                {
                    "case": "start-up: matmul + 3 elementwise ops",
                    "impl": label,
                    "seconds": time.perf_counter() - start,
                    "rate": "",
                }
            )
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import numpy, scipy.linalg"], check=True)
    rows.append(
        {
            "case": "start-up: matmul + 3 elementwise ops",
            "impl": "import numpy, scipy",
            "seconds": time.perf_counter() - start,
            "rate": "",
        }
    )
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--cases", default="matmul,cholesky,lu,qr,tsqr,svdvals,norm,tiny,gelu,startup"
    )
    parser.add_argument("--matmul-tile", type=int, default=None)
    parser.add_argument("--cholesky-tile", type=int, default=None)
    parser.add_argument(
        "--lu-tile", default=None, help="numtile LU tiles, comma-separated (default tiling)"
    )
    parser.add_argument("--lu-n", type=int, default=None, help="LU size (8192; 512 --quick)")
    parser.add_argument(
        "--lu-chunks", default=None, help="dask LU chunks (1024,2048,4096; 128,256 --quick)"
    )
    parser.add_argument("--qr-n", type=int, default=None, help="QR size (8192; 512 --quick)")
    parser.add_argument("--qr-tile", type=int, default=None, help="QR tile (512; 128 --quick)")
    parser.add_argument("--tsqr", default=None, help="TSQR MxN (65536x1024; 8192x256 --quick)")
    parser.add_argument("--svd", default=None, help="svdvals MxN (65536x512; 8192x128 --quick)")
    parser.add_argument("--tall-chunks", default=None, help="dask row chunks for tsqr/svdvals")
    args = parser.parse_args(argv)
    cases = set(args.cases.split(","))
    quick = args.quick
    nt.init()
    print(
        f"numtile {nt.__version__}: {nt.get_runtime().ncpu} workers, "
        f"scheduler {nt.get_runtime().scheduler.name}, {CORES} cores; tile kernels' BLAS: "
        f"{kernel_blas_description()}"
    )
    rows = []
    if "matmul" in cases:
        n = 512 if quick else 4096
        rows += bench_matmul(n, args.matmul_tile or (256 if quick else None), args.repeat)
    if "cholesky" in cases:
        n = 512 if quick else 8192
        tile = args.cholesky_tile or (128 if quick else None)
        chunks = [128, 256] if quick else [1024, 2048, 4096]
        rows += bench_cholesky(n, tile, args.repeat, chunks)
    if "lu" in cases:
        n = args.lu_n or (512 if quick else 8192)
        tiles = [int(t) for t in args.lu_tile.split(",")] if args.lu_tile else None
        tiles = tiles or [128 if quick else None]
        chunks = [128, 256] if quick else [1024, 2048, 4096]
        if args.lu_chunks:
            chunks = [int(c) for c in args.lu_chunks.split(",")]
        rows += bench_lu(n, tiles, args.repeat, chunks)
    if "lu_ooc" in cases:
        n = args.lu_n or (512 if quick else 4096)
        tile = int(args.lu_tile.split(",")[0]) if args.lu_tile else (64 if quick else 512)
        rows += bench_lu_out_of_core(n, tile, args.repeat)
    if "qr" in cases:
        n = args.qr_n or (512 if quick else 8192)
        tile = args.qr_tile or (128 if quick else 512)
        rows += bench_qr(n, n, (tile, tile), args.repeat, [n])
    for name, default, quick_default, bench in [
        ("tsqr", "65536x1024", "8192x256", bench_qr),
        ("svdvals", "65536x512", "8192x128", bench_svdvals),
    ]:
        if name in cases:
            text = getattr(args, "svd" if name == "svdvals" else name)
            m, n = (int(v) for v in (text or (quick_default if quick else default)).split("x"))
            tiles = [m // 16, m // 8, m // 4] if m >= 16 * n else [m // 4]
            if args.tall_chunks:
                tiles = [int(c) for c in args.tall_chunks.split(",")]
            rows += bench(m, n, (m // 16, n), args.repeat, [c for c in tiles if c >= n])
    if "norm" in cases:
        rows += bench_complex_norm(512 if quick else 4096, 128 if quick else 512, args.repeat)
    if "tiny" in cases:
        rows += bench_tiny_tasks(2000 if quick else 20000, args.repeat)
    if "gelu" in cases:
        rows += bench_gelu((1 << 20) if quick else (64 << 20), args.repeat)
    if "startup" in cases:
        rows += bench_startup()
    print("\nall cases, same run:")
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
