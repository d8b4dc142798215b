"""The QR and singular-value cases of ``compare_linalg.py`` (issue 14), timed in the same run:

QR float64 n x n (Q and R)        vs numpy.linalg.qr, 2 threads           [<= 1.0]
                                  vs dask.array.linalg.qr (one chunk column: for a square
                                  matrix dask needs chunks as wide as the matrix)
TSQR float64 m x n (Q and R)      vs numpy.linalg.qr, 2 threads           [<= 0.8]
                                  vs dask.array.linalg.qr (tsqr), best chunk  [<= 0.6]
svdvals float64 m x n             vs numpy.linalg.svd(compute_uv=False), dask svd's S
(each numtile row quotes the workers' busy fraction during one more run)   [>= 90%]
"""

from __future__ import annotations

import os

import numpy as np
from common import median_time
from threadpoolctl import threadpool_limits

import numtile as nt

CORES = os.cpu_count() or 1
THREADS = min(2, CORES)


def _progress(text: str) -> None:
    print(text, flush=True)


def _rate(flops: float, seconds: float) -> str:
    return f"{flops / seconds / 1e9:.1f} GFLOP/s"


def busy_fraction(run) -> str:
    """Each worker's busy share of the wall time of one ``run()`` (which waits)."""
    runtime = nt.get_runtime()
    before, start = list(runtime.busy), runtime.elapsed
    run()
    wall = runtime.elapsed - start
    return ", ".join(f"{100 * (b - a) / wall:.0f}%" for b, a in zip(runtime.busy, before))


def _dask_rows(case, flops, numtile_seconds, build, chunks, repeat, label):
    """The best of ``build(chunk).compute()`` over ``chunks`` (dask threads, BLAS 1 thread)."""
    try:
        import dask
    except ImportError:
        print("dask not installed: skipping the dask peer (pip install 'numtile[bench]')")
        return []
    best = None
    for chunk in chunks:
        try:
            graph = build(chunk)
        except (ValueError, NotImplementedError) as error:
            print(f"dask {label} chunk {chunk}: {error}")
            continue
        with threadpool_limits(1), dask.config.set(scheduler="threads", num_workers=CORES):
            seconds = median_time(lambda graph=graph: dask.compute(*graph), repeat)
        _progress(f"dask {label} chunk {chunk}: {seconds:.2f} s")
        if best is None or seconds < best[0]:
            best = (seconds, chunk)
    if best is None:
        return []
    seconds, chunk = best
    return [
        {
            "case": case,
            "impl": f"dask {label} (chunk {chunk}, BLAS 1 thr)",
            "seconds": seconds,
            "rate": _rate(flops, seconds),
            "ratio": numtile_seconds / seconds,
        }
    ]


def _numpy_and_numtile_rows(case, flops, numpy_impl, t_numpy, busy, t_nt) -> list[dict]:
    """The NumPy row and the numtile row (its ratio against NumPy) of one case."""
    return [
        {"case": case, "impl": numpy_impl, "seconds": t_numpy, "rate": _rate(flops, t_numpy)},
        {
            "case": case,
            "impl": f"numtile (busy {busy})",
            "seconds": t_nt,
            "rate": _rate(flops, t_nt),
            "ratio": t_nt / t_numpy,
        },
    ]


def _qr_flops(m: int, n: int) -> float:
    """geqrf + orgqr of the first n columns: 2 (2 m n^2 - 2/3 n^3)."""
    return 2 * (2.0 * m * n * n - 2.0 * n**3 / 3.0)


def _check_qr(a, q, r) -> None:
    residual = np.linalg.norm(q @ r - a) / np.linalg.norm(a)
    assert residual < 1e-12, residual


def bench_qr(m: int, n: int, tile: tuple[int, int], repeat: int, chunks: list[int]):
    """QR with Q and R (numpy's default 'reduced' mode) of an m x n float64 matrix."""
    import dask.array as da

    a = np.random.default_rng(4).standard_normal((m, n))
    x = nt.from_numpy(a, tile_shape=tile)
    flops = _qr_flops(m, n)
    with threadpool_limits(THREADS):
        t_numpy = median_time(lambda: np.linalg.qr(a), repeat)
    _progress(f"numpy qr {m}x{n}: {t_numpy:.2f} s")

    def run():
        q, r = nt.linalg.qr(x)
        nt.wait_all()
        return q, r

    t_nt = median_time(run, repeat)
    _progress(f"numtile qr {m}x{n}: {t_nt:.2f} s")
    busy = busy_fraction(run)
    q, r = run()
    _check_qr(a, q.to_numpy(), r.to_numpy())
    name = "tsqr" if tile[1] >= n else "qr"
    case = f"{name} f64 {m}x{n} (tile {tile[0]}x{tile[1]})"
    rows = _numpy_and_numtile_rows(
        case, flops, f"numpy.linalg.qr ({THREADS} thr)", t_numpy, busy, t_nt
    )
    # dask's qr is TSQR over one column of chunks (rows per chunk >= columns)
    rows += _dask_rows(
        case,
        flops,
        t_nt,
        lambda c: da.linalg.qr(da.from_array(a, chunks=(c, n))),
        chunks,
        repeat,
        "qr",
    )
    return rows


def bench_svdvals(m: int, n: int, tile: tuple[int, int], repeat: int, chunks: list[int]):
    import dask.array as da

    a = np.random.default_rng(5).standard_normal((m, n))
    x = nt.from_numpy(a, tile_shape=tile)
    flops = 2.0 * m * n * n  # the TSQR's R dominates
    with threadpool_limits(THREADS):
        t_numpy = median_time(lambda: np.linalg.svd(a, compute_uv=False), repeat)
    t_nt = median_time(lambda: nt.linalg.svdvals(x).wait(), repeat)
    _progress(f"svdvals {m}x{n}: numpy {t_numpy:.2f} s, numtile {t_nt:.2f} s")
    busy = busy_fraction(lambda: nt.linalg.svdvals(x).wait())
    expected = np.linalg.svd(a, compute_uv=False)
    np.testing.assert_allclose(nt.linalg.svdvals(x).to_numpy(), expected, rtol=1e-10)
    case = f"svdvals f64 {m}x{n} (tile {tile[0]}x{tile[1]})"
    rows = _numpy_and_numtile_rows(
        case, flops, f"numpy svd(compute_uv=False) {THREADS}thr", t_numpy, busy, t_nt
    )
    rows += _dask_rows(
        case,
        flops,
        t_nt,
        lambda c: (da.linalg.svd(da.from_array(a, chunks=(c, n)))[1],),
        chunks,
        repeat,
        "svd S",
    )
    return rows
