"""Memory bandwidth of this machine, to judge the bandwidth-bound array API cases.

The streaming cases of ``compare_array_api.py`` (``sum`` over an axis of 8192 x 8192
float64, ``x * y + z`` of 64M float32) move far more bytes than fit in any cache, so no
implementation can beat the machine's memory bandwidth. This script measures that bandwidth
with NumPy on every core at once (one thread per core, each on its own contiguous part of the
arrays; NumPy releases the GIL in its loops):

  read   a vectorised float64 sum (a Numba loop, reassociation allowed; bytes read / s)
  triad  ``out = x * y + z`` of float32 arrays written chunk by chunk into a preallocated
         output (three streams read, one written; cache-sized temporaries)

and the same cases as numtile runs them, in the same run, as bytes moved / s (the minimum
traffic: every input read once, the output written once).

Usage: python bench/membw.py [--repeat N] [--threads T]
"""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import median_time  # noqa: E402

import numtile as nt  # noqa: E402

CHUNK = 1 << 16  # elements of the triad's cache-sized temporaries


@numba.njit(fastmath=True, nogil=True, cache=True)
def _stream_sum(a):
    total = 0.0
    for i in range(a.size):
        total += a[i]
    return total


def _parts(n: int, threads: int) -> list[slice]:
    bounds = np.linspace(0, n, threads + 1).astype(int)
    return [slice(int(a), int(b)) for a, b in zip(bounds, bounds[1:])]


def _triad_part(x, y, z, out, part: slice) -> None:
    tmp = np.empty(CHUNK, dtype=x.dtype)
    for start in range(part.start, part.stop, CHUNK):
        stop = min(start + CHUNK, part.stop)
        t = tmp[: stop - start]
        np.multiply(x[start:stop], y[start:stop], out=t)
        np.add(t, z[start:stop], out=out[start:stop])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    pool = ThreadPoolExecutor(args.threads)
    rng = np.random.default_rng(0)

    side = 8192
    a = rng.standard_normal((side, side))
    flat = a.reshape(-1)
    parts = _parts(flat.size, args.threads)
    read_s = median_time(lambda: list(pool.map(lambda p: _stream_sum(flat[p]), parts)), args.repeat)
    x = nt.from_numpy(a, tile_shape=(side // 4, side // 4))
    sum_s = median_time(lambda: nt.sum(x, axis=0).wait(), args.repeat)

    n = 64 << 20
    xs = [rng.standard_normal(n, dtype=np.float32) for _ in range(3)]
    out = np.empty_like(xs[0])
    out[:] = 0  # touch the pages once: the triad measures traffic, not page faults
    parts = _parts(n, args.threads)
    triad_s = median_time(
        lambda: list(pool.map(lambda p: _triad_part(*xs, out, p), parts)), args.repeat
    )
    ts = [nt.from_numpy(v, tile_shape=(n // 16,)) for v in xs]
    fma_s = median_time(lambda: (ts[0] * ts[1] + ts[2]).wait(), args.repeat)
    pool.shutdown()

    gb = 1e-9
    rows = [
        ("read (vectorised sum, f64 512 MiB)", a.nbytes / read_s),
        ("numtile sum axis 0, f64 8192^2", a.nbytes / sum_s),
        ("triad out = x*y + z (f32 64M, NumPy chunks)", 4 * xs[0].nbytes / triad_s),
        ("numtile x * y + z, f32 64M", 4 * xs[0].nbytes / fma_s),
    ]
    print(f"{args.threads} threads, load average {os.getloadavg()[0]:.2f}, median of {args.repeat}")
    for name, rate in rows:
        print(f"{name:<48}{rate * gb:>8.1f} GB/s")
    print(f"numtile sum / read peak: {rows[1][1] / rows[0][1]:.2f}")
    print(f"numtile x*y+z / triad peak: {rows[3][1] / rows[2][1]:.2f}")
    nt.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
