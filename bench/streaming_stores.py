"""Streaming (non-temporal) stores against ordinary ones in memory-bound element-wise kernels.

Cases (float32, 16 tiles run by 2 threads, outputs allocated and touched once, then reused as
the runtime's pools reuse tile buffers): -x, x * 2 and exp(x) over 64M elements, each as an
ordinary loop and as the same loop computing 16 KiB blocks into an L1-resident buffer that is
then streamed out (``ops_cpu.streaming.store_line``); exp also through VML into the buffer.
Then the case where streaming loses: a 256 KiB tile written and read again at once
(``cached``), while it would still be in L2.

Usage: python bench/streaming_stores.py [--repeat N] [--elements N] [--tiled]

``--tiled`` times numtile's tiled ops instead (-x, x * 2, x * y + z, nt.fuse, where, exp)
with ``streaming.set_enabled`` on and off in turn.

Measured on the 2-core Xeon (AVX-512, 2 MiB L2 a core), shared with other benchmarks,
2026-12-06, streamed/ordinary time, medians of 9-15 rounds:

  kernels, 64M f32, 16 tiles, 2 threads (load 2.0-2.9, 6.1-6.5, then 1.2-1.6):
    -x 0.71, 0.71, 0.61; x*2 0.70, 0.59, 0.61; exp numba 1.02, 1.01, 1.06; exp VML 4K
    blocks 1.02, 0.94, 0.95, 16K blocks 1.10, 1.03, 1.00. (This thread pool's 2 threads ran
    no faster than 1, -x 53-57 ms ordinary, 33 ms streamed, where numtile's 2 workers take
    25.6 / 17.7 ms: not understood; the ratios agree with --tiled's.)
  -x then a sum of the same tile, in cache (2 threads): 256 KiB 1.41, 1.39; 512 KiB 1.47;
    1 MiB 1.32; 2 MiB 1.03, 0.78; 4 MiB 1.05; 8 MiB 0.98, 0.89
  -x then *2, every tile of each pass in turn: 1M elements (256 KiB tiles) 0.92, 0.78;
    4M 0.57, 0.59; 16M 0.68, 0.70; 64M 0.71, 0.65
  --tiled, 64M f32, 16 tiles (load 6.6-7.2, 5.9, 5.7, then 1.1-1.2): -x 0.68, 0.60, 0.68,
    0.69 (25.6 -> 17.7 ms); x*2 0.55, 0.60, 0.72, 0.71; x*y+z 0.62, 0.73, 0.72, 0.70
    (68.6 -> 48.3 ms); fuse(x*y+z) 0.88, 0.83, 0.80, 0.78 (44.1 -> 34.4 ms); where 0.89,
    0.86, 0.87, 0.83; exp (not streamed: the noise) 1.08, 0.91, 1.00, 1.01
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from numtile.ops_cpu.helpers import inlined, unsigned, wide_vectors  # noqa: E402
from numtile.ops_cpu.mkl_lib import library  # noqa: E402
from numtile.ops_cpu.mkl_vml import MODE  # noqa: E402
from numtile.ops_cpu.scalar_math import _exp, _negative  # noqa: E402
from numtile.ops_cpu.streaming import LINE, store_fence, store_line  # noqa: E402

BLOCK_BYTES = 1 << 10
VML_BLOCK_BYTES = (4 << 10, 16 << 10)

_twice = inlined(lambda v: v + v)


@inlined
def _plain(function, x, out):
    for i in range(out.size):
        out[i] = function(x[i])


@inlined
def _streamed(function, x, out, buffer):
    """out = function(x): head to a 64-byte boundary and tail stored as usual, the lines
    between computed into ``buffer`` a block at a time and streamed out."""
    size, itemsize = out.size, out.itemsize
    per_line = LINE // itemsize
    start = min(size, (-(out.ctypes.data % LINE) % LINE) // itemsize)
    for i in range(start):
        out[i] = function(x[i])
    i = start
    while size - i >= per_line:
        count = min(buffer.size, (size - i) // per_line * per_line)
        for j in range(count):
            buffer[j] = function(x[unsigned(i + j)])
        for line in range(0, count * itemsize, LINE):
            store_line(out, i * itemsize + line, buffer, line)
        i += count
    for j in range(i, size):
        out[j] = function(x[j])
    store_fence()


def _kernels(function):
    @numba.njit(nogil=True, error_model="numpy")
    def plain(x, out):
        wide_vectors()
        _plain(function, x, out)

    @numba.njit(nogil=True, error_model="numpy")
    def streamed(x, out):
        wide_vectors()
        buffer = np.empty(BLOCK_BYTES // out.itemsize, out.dtype)
        _streamed(function, x, out, buffer)

    return plain, streamed


NEGATIVE = _kernels(_negative)
TWICE = _kernels(_twice)
EXP = _kernels(_exp)


def _vml_exp_kernels(block_bytes):
    """exp through VML: the whole tile (ordinary stores), or blocks of ``block_bytes``
    streamed out."""
    lib = library()
    if lib is None:
        return None
    address = ctypes.cast(lib.vmsExp_64, ctypes.c_void_p).value
    prototype = ctypes.CFUNCTYPE(None, *[ctypes.c_int64] * 4)  # n, x, out, mode
    vms_exp = prototype(address)

    @numba.njit(nogil=True)
    def plain(x, out):
        vms_exp(out.size, x.ctypes.data, out.ctypes.data, MODE)

    @numba.njit(nogil=True)
    def streamed(x, out):
        size, itemsize = out.size, out.itemsize
        buffer = np.empty(block_bytes // itemsize, out.dtype)
        per_line = LINE // itemsize
        start = min(size, (-(out.ctypes.data % LINE) % LINE) // itemsize)
        if start:
            vms_exp(start, x.ctypes.data, out.ctypes.data, MODE)
        i = start
        while size - i >= per_line:
            count = min(buffer.size, (size - i) // per_line * per_line)
            vms_exp(count, x.ctypes.data + i * itemsize, buffer.ctypes.data, MODE)
            for line in range(0, count * itemsize, LINE):
                store_line(out, i * itemsize + line, buffer, line)
            i += count
        if size > i:
            vms_exp(size - i, x.ctypes.data + i * itemsize, out.ctypes.data + i * itemsize, MODE)
        store_fence()

    return plain, streamed


def _run_tiles(pool, kernel, xs, outs):
    list(pool.map(kernel, xs, outs))


def _interleaved(cases, repeat):
    """Median seconds of each case's function, the cases timed in turn, ``repeat`` rounds,
    every other round in reverse order (whichever runs first in a round measured slower)."""
    times = {name: [] for name in cases}
    for function in cases.values():
        function()
    for round_ in range(repeat):
        order = list(cases.items())
        for name, function in order if round_ % 2 == 0 else order[::-1]:
            start = time.perf_counter()
            function()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def bench_memory(elements, tiles, repeat):
    """The 64M cases: medians, ordinary and streamed, interleaved."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(elements, dtype=np.float32)
    xs = np.array_split(x, tiles)
    outs = [np.empty_like(tile) for tile in xs]
    for out in outs:
        out.fill(0)
    print(f"output tiles' addresses mod 64: {sorted({out.ctypes.data % 64 for out in outs})}")
    kernels = {"-x": NEGATIVE, "x*2": TWICE, "exp (numba)": EXP}
    if library() is not None:
        for block_bytes in VML_BLOCK_BYTES:
            kernels[f"exp VML {block_bytes >> 10}K"] = _vml_exp_kernels(block_bytes)
    with ThreadPoolExecutor(2) as pool:
        for name, (plain, streamed) in kernels.items():
            plain(xs[0], outs[0])
            expected = outs[0].copy()
            streamed(xs[0], outs[0])
            np.testing.assert_array_equal(outs[0], expected)
            medians = _interleaved(
                {
                    "ordinary": lambda plain=plain: _run_tiles(pool, plain, xs, outs),
                    "streamed": lambda streamed=streamed: _run_tiles(pool, streamed, xs, outs),
                },
                repeat,
            )
            ordinary, streaming = medians["ordinary"], medians["streamed"]
            print(
                f"{name:<14} {elements >> 20}M f32  ordinary {ordinary * 1e3:7.2f} ms  "
                f"streamed {streaming * 1e3:7.2f} ms  streamed/ordinary {streaming / ordinary:.2f}"
            )


@numba.njit(nogil=True, error_model="numpy")
def _consume(values):
    total = values.dtype.type(0)
    for v in values:
        total += v
    return total


def bench_cached(tile_bytes, rounds, repeat):
    """A tile written then read at once (both in cache with ordinary stores): -x then a sum,
    ``rounds`` times over one tile per thread, 2 threads."""
    elements = tile_bytes // 4
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal(elements, dtype=np.float32) for _ in range(2)]
    outs = [np.zeros_like(x) for x in xs]
    plain, streamed = NEGATIVE

    def loop(kernel, x, out):
        for _ in range(rounds):
            kernel(x, out)
            _consume(out)

    with ThreadPoolExecutor(2) as pool:
        medians = _interleaved(
            {
                "ordinary": lambda: list(pool.map(lambda x, o: loop(plain, x, o), xs, outs)),
                "streamed": lambda: list(pool.map(lambda x, o: loop(streamed, x, o), xs, outs)),
            },
            repeat,
        )
    ordinary, streaming = medians["ordinary"], medians["streamed"]
    per = 1e6 / rounds
    print(
        f"-x then sum, tile {tile_bytes >> 10} KiB in cache  ordinary {ordinary * per:7.1f} us  "
        f"streamed {streaming * per:7.1f} us  streamed/ordinary {streaming / ordinary:.2f}"
    )


def bench_chained(elements, tiles, repeat):
    """y = -x then z = y * 2 over ``elements`` in ``tiles`` tiles, 2 threads, every tile of y
    written by the first pass before the second reads it (as two tiled ops run): y comes back
    from L3 where the arrays fit there, and streamed stores send it to memory instead."""
    rng = np.random.default_rng(2)
    xs = np.array_split(rng.standard_normal(elements, dtype=np.float32), tiles)
    ys = [np.zeros_like(tile) for tile in xs]
    zs = [np.zeros_like(tile) for tile in xs]
    with ThreadPoolExecutor(2) as pool:

        def passes(negative, twice):
            _run_tiles(pool, negative, xs, ys)
            _run_tiles(pool, twice, ys, zs)

        medians = _interleaved(
            {
                "ordinary": lambda: passes(NEGATIVE[0], TWICE[0]),
                "streamed": lambda: passes(NEGATIVE[1], TWICE[1]),
            },
            repeat,
        )
    ordinary, streaming = medians["ordinary"], medians["streamed"]
    tile_kib = elements * 4 // tiles >> 10
    print(
        f"-x then *2, {elements >> 20}M f32, tiles of {tile_kib} KiB  ordinary "
        f"{ordinary * 1e3:7.2f} ms  streamed {streaming * 1e3:7.2f} ms  "
        f"streamed/ordinary {streaming / ordinary:.2f}"
    )


def bench_tiled(elements, tiles, repeat):
    """numtile's tiled ops (the runtime's workers, pooled tile buffers) with streaming stores
    on and off (``streaming.set_enabled``), alternating round by round in one process."""
    import numtile as nt
    from numtile.ops_cpu import streaming

    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(elements, dtype=np.float32) for _ in range(3)]
    x, y, z = (nt.from_numpy(a, tile_shape=(elements // tiles,)) for a in arrays)
    fused = nt.fuse(lambda x, y, z: x * y + z)
    cases = {
        "-x": lambda: -x,
        "x * 2": lambda: x * 2,
        "x * y + z": lambda: x * y + z,
        "fuse(x * y + z)": lambda: fused(x, y, z),
        "where(x > 0, x, y)": lambda: nt.where(x > 0, x, y),
        "exp": lambda: nt.exp(x),
    }
    for name, case in cases.items():
        results = {}
        for on in (False, True):
            streaming.set_enabled(on)
            results[on] = case().to_numpy()
        np.testing.assert_array_equal(results[True], results[False])

        def run(on, case=case):
            streaming.set_enabled(on)
            case().wait()

        medians = _interleaved(
            {"ordinary": lambda: run(False), "streamed": lambda: run(True)}, repeat
        )
        streaming.set_enabled(True)
        ordinary, streaming_time = medians["ordinary"], medians["streamed"]
        print(
            f"numtile {name:<20} {elements >> 20}M f32, {tiles} tiles  ordinary "
            f"{ordinary * 1e3:7.2f} ms  streamed {streaming_time * 1e3:7.2f} ms  "
            f"streamed/ordinary {streaming_time / ordinary:.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--elements", type=int, default=64 << 20)
    parser.add_argument("--tiles", type=int, default=16)
    parser.add_argument("--cached", default="256K,1M,2M,4M,8M")
    parser.add_argument("--chained", default="1M,4M,16M,64M")
    parser.add_argument("--tiled", action="store_true", help="numtile's ops only")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()}")
    if args.tiled:
        bench_tiled(args.elements, args.tiles, args.repeat)
        print(f"load average {os.getloadavg()}")
        return
    if args.elements:
        bench_memory(args.elements, args.tiles, args.repeat)
    for size in filter(None, args.cached.split(",")):
        tile_bytes = int(size[:-1]) << (10 if size[-1] == "K" else 20)
        bench_cached(tile_bytes, max(4, (256 << 20) // tile_bytes), args.repeat)
    for size in filter(None, args.chained.split(",")):
        bench_chained(int(size[:-1]) << 20, args.tiles, args.repeat)
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
