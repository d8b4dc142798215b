"""numtile's array API element-wise ops, reductions and scans against NumPy and dask.array,
timed side by side in one run (ratio = numtile time / peer time; issue 13's targets: <= 0.6 x
NumPy, whose ufuncs use one core, and <= 0.5 x dask.array with its best chunks, on 2 cores).

Cases:
  -x of 64M float32 (case neg: one read and one write an element and no maths, the floor that
  memory traffic sets for every one-in-one-out op on this machine); exp, sin, cos and x ** y
  of 64M float32; x * y + z of 64M float32 (fused automatically unless NUMTILE_AUTO_FUSE=0;
  case fused: as one nt.fuse kernel beside the ops run one by one and beside the plain
  expression fused automatically, those two called in turn); sin and x ** y of 16M float64
  (sin64, pow64: NumPy's float64 sin and pow are libm's, one call per element)
  sum and var over axis 0 of an 8192 x 8192 float64 matrix
  cumulative_sum of 64M float32
  where(x > 0, x, y) of 64M float32, and the boolean-mask assignment x[x > 0] = 0 (into a
  fresh copy of x, made inside the timing on both sides)
  sort and argsort of 16M float64 (against np.sort / np.argsort), unique_counts of 16M int64
  drawn from 1000 values (against np.unique(return_counts=True))

The axis cases also time the machine's read floor: the whole matrix read once, one thread per
core (``membw.py``'s vectorised sum); no reduction over it can take less time, and its ratio
to each peer is the best ratio any implementation could reach.

Each case runs in a process of its own (as asv runs each benchmark), so no case runs in a heap
that the cases before it left: in one process, the same sort measured 0.91x NumPy after the
axis cases and 0.55x alone (``--one-process`` runs them all in this one).

numtile and dask keep their results tiled (``wait()`` / ``persist()``: no gather into one
array); NumPy writes into a fresh array as its functions do. dask runs its threaded scheduler
with one worker per core and the best of a few chunk sizes.

Usage: python bench/compare_array_api.py [--quick] [--repeat N] [--cases exp,fma,sum,...]
                                        [--one-process]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import median_time, print_table  # noqa: E402
from membw import _parts, _stream_sum  # noqa: E402

import numtile as nt  # noqa: E402
from numtile.tiletensor import auto_fusion  # noqa: E402

CORES = os.cpu_count() or 1


def _dask():
    try:
        import dask
        import dask.array as da
    except ImportError:  # the ``bench`` extra
        return None, None
    dask.config.set(scheduler="threads", num_workers=CORES)
    return dask, da


def _rows(case, t_nt, t_numpy, dask_best, tile) -> list[dict]:
    rows = [
        {"case": case, "impl": f"numtile (tile {tile})", "seconds": t_nt},
        {"case": case, "impl": "NumPy (1 core)", "seconds": t_numpy, "ratio": t_nt / t_numpy},
    ]
    if dask_best is not None:
        t_dask, chunk = dask_best
        rows.append(
            {
                "case": case,
                "impl": f"dask (chunk {chunk})",
                "seconds": t_dask,
                "ratio": t_nt / t_dask,
            }
        )
    return rows


def _best_dask(da, arrays, function, chunks_list, repeat):
    """(median seconds, chunks) of ``function(*dask arrays).persist()`` at its best chunks."""
    if da is None:
        return None
    best = None
    for chunks in chunks_list:
        dask_arrays = [da.from_array(a, chunks=chunks).persist() for a in arrays]
        seconds = median_time(lambda inputs=dask_arrays: function(*inputs).persist(), repeat)
        if best is None or seconds < best[0]:
            best = (seconds, chunks)
    return best


# name -> (label, dtype, operands, function of numtile / NumPy / dask.array (module first))
ELEMENTWISE = {
    "neg": ("-x (streaming floor)", np.float32, 1, lambda m, x: -x),
    "exp": ("exp", np.float32, 1, lambda m, x: m.exp(x)),
    "fma": ("x * y + z", np.float32, 3, lambda m, x, y, z: x * y + z),
    "sin": ("sin", np.float32, 1, lambda m, x: m.sin(x)),
    "cos": ("cos", np.float32, 1, lambda m, x: m.cos(x)),
    "pow": ("x ** y", np.float32, 2, lambda m, x, y: x**y),
    "sin64": ("sin", np.float64, 1, lambda m, x: m.sin(x)),
    "pow64": ("x ** y", np.float64, 2, lambda m, x, y: x**y),
}


def bench_elementwise(name, n, tile, repeat, da) -> list[dict]:
    label, dtype, count, function = ELEMENTWISE[name]
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(n, dtype=np.float32).astype(dtype) for _ in range(count)]
    if name.startswith("pow"):  # positive bases, exponents in [-3, 3]: finite results
        arrays = [np.abs(arrays[0]) + dtype(0.5), arrays[1]]
    tensors = [nt.from_numpy(a, tile_shape=(tile,)) for a in arrays]
    with np.errstate(all="ignore"):
        check = (function(nt, *tensors).to_numpy(), function(np, *arrays))
    np.testing.assert_allclose(*check, rtol=1e-5 if dtype == np.float32 else 1e-13, atol=1e-6)
    t_nt = median_time(lambda: function(nt, *tensors).wait(), repeat)
    t_numpy = median_time(lambda: function(np, *arrays), repeat)
    chunks = [n // 16, n // 8, n // 4]
    dask_fn = lambda *inputs: function(da, *inputs)  # noqa: E731
    best = _best_dask(da, arrays, dask_fn, chunks, repeat) if da is not None else None
    bits = np.dtype(dtype).itemsize * 8
    return _rows(f"{label} f{bits} {n >> 20}M", t_nt, t_numpy, best, tile)


def bench_fused(n, tile, repeat, da) -> list[dict]:
    """x * y + z of 64M float32 as ONE nt.fuse kernel (one pass over memory), beside the
    unfused ops (two passes), NumPy and dask (which fuses blockwise), in the same run."""
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(n, dtype=np.float32) for _ in range(3)]
    tensors = [nt.from_numpy(a, tile_shape=(tile,)) for a in arrays]
    fused = nt.fuse(lambda x, y, z: x * y + z)
    previous = auto_fusion.set_enabled(False)  # the unfused ops: one pass over memory each
    try:
        unfused = (tensors[0] * tensors[1] + tensors[2]).to_numpy()
        t_unfused = median_time(lambda: (tensors[0] * tensors[1] + tensors[2]).wait(), repeat)
    finally:
        auto_fusion.set_enabled(previous)
    got = fused(*tensors).to_numpy()
    np.testing.assert_array_equal(got.view(np.int32), unfused.view(np.int32))  # bit for bit
    x, y, z = tensors
    auto = (x * y + z).to_numpy()  # fused automatically (unless NUMTILE_AUTO_FUSE=0)
    np.testing.assert_array_equal(auto.view(np.int32), unfused.view(np.int32))
    # nt.fuse and the automatic fusion of the plain expression, called in turn: the same
    # load for both
    t_fused, t_auto = _interleaved_times(
        [lambda: fused(x, y, z).wait(), lambda: (x * y + z).wait()], repeat
    )
    t_numpy = median_time(lambda: arrays[0] * arrays[1] + arrays[2], repeat)
    function = lambda x, y, z: x * y + z  # noqa: E731
    best = _best_dask(da, arrays, function, [n // 16, n // 8, n // 4], repeat)
    rows = _rows(f"x*y+z fused f32 {n >> 20}M", t_fused, t_numpy, best, tile)
    unfused_row = {"impl": "numtile unfused", "seconds": t_unfused, "ratio": t_fused / t_unfused}
    auto_row = {
        "impl": "numtile x * y + z (auto-fused)",
        "seconds": t_auto,
        "ratio": t_fused / t_auto,
    }
    case = rows[0]["case"]
    return rows[:1] + [{"case": case, **unfused_row}, {"case": case, **auto_row}] + rows[1:]


def _interleaved_times(functions, repeat) -> list[float]:
    """The median seconds of each of ``functions``, called in turn ``repeat`` times (after one
    untimed round)."""
    times: list[list[float]] = [[] for _ in functions]
    for round_ in range(repeat + 1):
        for function, seconds in zip(functions, times):
            start = time.perf_counter()
            function()
            if round_:
                seconds.append(time.perf_counter() - start)
    return [statistics.median(seconds) for seconds in times]


def read_floor(a: np.ndarray, repeat: int) -> float:
    """Median seconds to read all of ``a`` once, one thread per core (no reduction is faster)."""
    flat = a.reshape(-1)
    with ThreadPoolExecutor(CORES) as pool:
        parts = _parts(flat.size, CORES)
        return median_time(lambda: list(pool.map(lambda p: _stream_sum(flat[p]), parts)), repeat)


def bench_axis(name, n, tile, repeat, da) -> list[dict]:
    a = np.random.default_rng(0).standard_normal((n, n))
    x = nt.from_numpy(a, tile_shape=(tile, tile))
    # the same function of nt, np and dask.array: sum, var, max over axis 0, any(x > 2)
    function = AXIS_CASES[name]
    np.testing.assert_allclose(function(nt, x).to_numpy(), function(np, a), rtol=1e-9, atol=1e-9)
    t_nt = median_time(lambda: function(nt, x).wait(), repeat)
    t_numpy = median_time(lambda: function(np, a), repeat)
    chunks = [(n // 4, n // 4), (n // 2, n // 2), (n, n // 4)]
    best = _best_dask(da, [a], lambda v: function(da, v), chunks, repeat)
    label = "any(x > 2)" if name == "any" else name
    case = f"{label} axis 0 f64 {n}x{n}"
    t_floor = read_floor(a, repeat)
    floor = {"case": case, "impl": f"read floor ({CORES} threads)", "seconds": t_floor}
    floor["ratio"] = t_nt / t_floor
    return _rows(case, t_nt, t_numpy, best, (tile, tile)) + [floor]


AXIS_CASES = {
    "sum": lambda m, v: m.sum(v, axis=0),
    "var": lambda m, v: m.var(v, axis=0),
    "max": lambda m, v: m.max(v, axis=0),
    "any": lambda m, v: m.any(v > 2, axis=0),
}


def bench_cumulative_sum(n, tile, repeat, da) -> list[dict]:
    a = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    x = nt.from_numpy(a, tile_shape=(tile,))
    ours = nt.cumulative_sum(x).to_numpy()
    np.testing.assert_allclose(ours[-1000:], np.cumsum(a, dtype=np.float64)[-1000:], atol=5.0)
    t_nt = median_time(lambda: nt.cumulative_sum(x).wait(), repeat)
    t_numpy = median_time(lambda: np.cumsum(a), repeat)
    chunks = [n // 16, n // 8, n // 4]
    best = _best_dask(da, [a], lambda v: da.cumsum(v), chunks, repeat)
    return _rows(f"cumulative_sum f32 {n >> 20}M", t_nt, t_numpy, best, tile)


def bench_where(n, tile, repeat, da) -> list[dict]:
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(n, dtype=np.float32) for _ in range(2))
    x, y = (nt.from_numpy(v, tile_shape=(tile,)) for v in (a, b))
    np.testing.assert_array_equal(nt.where(x > 0, x, y).to_numpy(), np.where(a > 0, a, b))
    t_nt = median_time(lambda: nt.where(x > 0, x, y).wait(), repeat)
    t_numpy = median_time(lambda: np.where(a > 0, a, b), repeat)
    chunks = [n // 16, n // 8, n // 4]
    best = _best_dask(da, [a, b], lambda u, v: da.where(u > 0, u, v), chunks, repeat)
    return _rows(f"where(x > 0, x, y) f32 {n >> 20}M", t_nt, t_numpy, best, tile)


def bench_mask_assignment(n, tile, repeat) -> list[dict]:
    a = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    x = nt.from_numpy(a, tile_shape=(tile,))

    def ours():
        y = x + 0  # a fresh copy (the assignment writes it)
        y[x > 0] = 0.0
        return y.wait()

    def numpy_fn():
        b = a + 0
        b[a > 0] = 0.0
        return b

    expected = numpy_fn()
    y = x + 0
    y[x > 0] = 0.0
    np.testing.assert_array_equal(y.to_numpy(), expected)
    t_nt = median_time(ours, repeat)
    t_numpy = median_time(numpy_fn, repeat)
    return _rows(f"y = x + 0; y[x > 0] = 0 f32 {n >> 20}M", t_nt, t_numpy, None, tile)


def bench_sorting(name, n, tile, repeat) -> list[dict]:
    rng = np.random.default_rng(0)
    if name == "unique_counts":
        a = rng.integers(0, 1000, n)
        ours = lambda t: nt.unique_counts(t)  # noqa: E731
        numpy_fn = lambda v: np.unique(v, return_counts=True)  # noqa: E731
        label = f"unique_counts i64 {n >> 20}M of 1000 values"
    else:
        a = rng.standard_normal(n)
        ours = getattr(nt, name)
        # NumPy's default kind: on AVX-512 x86-simd-sort's (unstable) sort and argsort, 5x
        # faster than its stable argsort (numtile's is stable): the stricter peer
        numpy_fn = getattr(np, name)
        label = f"{name} f64 {n >> 20}M"
    x = nt.from_numpy(a, tile_shape=(tile,))
    got, expected = ours(x), numpy_fn(a)
    if name == "unique_counts":
        for g, e in zip(got, expected):
            np.testing.assert_array_equal(g.to_numpy(), e)
    elif name == "argsort":  # numtile's argsort is stable: it orders ties as the stable sort
        np.testing.assert_array_equal(got.to_numpy(), np.argsort(a, kind="stable"))
    else:
        np.testing.assert_array_equal(got.to_numpy(), expected)
    del got
    t_nt = median_time(lambda: _wait(ours(x)), repeat)
    t_numpy = median_time(lambda: numpy_fn(a), repeat)
    return _rows(label, t_nt, t_numpy, None, tile)


def _wait(result):
    for tensor in result if isinstance(result, tuple) else (result,):
        tensor.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1/16 of the sizes")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-dask", action="store_true", help="NumPy as the only peer")
    parser.add_argument(
        "--cases",
        default="neg,exp,fma,fused,sin,cos,pow,sin64,pow64,sum,var,max,any,cumulative_sum,where,mask,"
        "sort,argsort,unique_counts",
    )
    parser.add_argument(
        "--one-process", action="store_true", help="every case in this process, one after another"
    )
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # a child's rows
    args = parser.parse_args()
    cases = args.cases.split(",")
    if not args.one_process and len(cases) > 1:
        print(f"{CORES} cores, load average {os.getloadavg()[0]:.2f}, median of {args.repeat}")
        print_table([row for case in cases for row in _child(case, sys.argv[1:])])
        return
    n = (64 << 20) // (16 if args.quick else 1)
    side = 8192 // (4 if args.quick else 1)
    tile = n // 16
    da = None if args.no_dask else _dask()[1]
    if not args.json:
        print(f"{CORES} cores, load average {os.getloadavg()[0]:.2f}, median of {args.repeat}")
    rows: list[dict] = []
    for case in cases:
        if case in ELEMENTWISE:
            size = n // 4 if case.endswith("64") else n  # float64 rows: 16M (scalar NumPy)
            rows += bench_elementwise(case, size, size // 16, args.repeat, da)
        elif case == "fused":
            rows += bench_fused(n, n // 16, args.repeat, da)
        elif case in AXIS_CASES:
            rows += bench_axis(case, side, side // 4, args.repeat, da)
        elif case == "cumulative_sum":
            rows += bench_cumulative_sum(n, tile, args.repeat, da)
        elif case == "where":
            rows += bench_where(n, tile, args.repeat, da)
        elif case == "mask":
            rows += bench_mask_assignment(n, tile, args.repeat)
        elif case in ("sort", "argsort", "unique_counts"):
            rows += bench_sorting(case, n // 4, tile // 4, args.repeat)
        else:
            raise SystemExit(f"unknown case {case!r}")
    if args.json:
        print(json.dumps(rows))
    else:
        print_table(rows)
    nt.shutdown()


def _child(case: str, argv: list[str]) -> list[dict]:
    """The rows of ``case`` measured in a fresh process (the other arguments passed on)."""
    kept, skip = [], False
    for arg in argv:
        if skip or arg.startswith("--cases="):
            skip = False
            continue
        skip = arg == "--cases"
        if not skip:
            kept.append(arg)
    command = [sys.executable, os.path.abspath(__file__), *kept, "--cases", case, "--json"]
    output = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(output.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
