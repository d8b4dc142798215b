"""numtile's operations outside compare_array_api's list against NumPy, in process CPU time
and wall time, in one process: a sweep for work numtile does that NumPy does not (a CPU ratio
above 1), which a loaded machine distorts less than wall time.

    python bench/compare_ops_sweep.py [case,case,...]

4096^2 float64 in 1024^2 tiles (int64 and float32 for two cases); medians of 3 rounds, each
numtile call then the NumPy one.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import numpy as np

import numtile as nt

N = 4096
TILE = (1024, 1024)


def _cases(a, b, ai, a32, index):
    """name -> (numtile function, NumPy function), each taking no argument."""
    x, y = nt.from_numpy(a, tile_shape=TILE), nt.from_numpy(b, tile_shape=TILE)
    xi, x32 = nt.from_numpy(ai, tile_shape=TILE), nt.from_numpy(a32, tile_shape=TILE)
    t_index = nt.from_numpy(index)
    both = {  # the same function of nt and np
        "stack": lambda m, v, w: m.stack([v, w]),
        "clip": lambda m, v, w: m.clip(v, -1, 1),
        "abs": lambda m, v, w: m.abs(v),
        "astype f32": lambda m, v, w: v.astype(m.float32),
        "isnan": lambda m, v, w: m.isnan(v),
        "round": lambda m, v, w: m.round(v),
        "sqrt|x|": lambda m, v, w: m.sqrt(m.abs(v)),
        "log|x|": lambda m, v, w: m.log(m.abs(v)),
        "tanh": lambda m, v, w: m.tanh(v),
        "maximum": lambda m, v, w: m.maximum(v, w),
        "x/y": lambda m, v, w: v / w,
        "flip0": lambda m, v, w: m.flip(v, axis=0),
        "roll1": lambda m, v, w: m.roll(v, 7, axis=1),
        "argmax1": lambda m, v, w: m.argmax(v, axis=1),
        "sort1": lambda m, v, w: m.sort(v, axis=1),
        "mean1": lambda m, v, w: m.mean(v, axis=1),
        "std0": lambda m, v, w: m.std(v, axis=0),
        "max0": lambda m, v, w: m.max(v, axis=0),
        "prod0": lambda m, v, w: m.prod(v, axis=0),
        "any0": lambda m, v, w: m.any(v > 3, axis=0),
        "tril": lambda m, v, w: m.tril(v),
        "x[mask]": lambda m, v, w: v[v > 1],
    }
    cases = {name: (lambda f=f: f(nt, x, y), lambda f=f: f(np, a, b)) for name, f in both.items()}
    cases.update(
        {
            "transpose": (lambda: nt.permute_dims(x, (1, 0)), lambda: np.ascontiguousarray(a.T)),
            "concat0": (lambda: nt.concat([x, y]), lambda: np.concatenate([a, b])),
            "concat1": (
                lambda: nt.concat([x, y], axis=1),
                lambda: np.concatenate([a, b], axis=1),
            ),
            "take0": (lambda: nt.take(x, t_index, axis=0), lambda: np.take(a, index, axis=0)),
            "cumsum0": (lambda: nt.cumulative_sum(x, axis=0), lambda: np.cumsum(a, axis=0)),
            "int sum0": (lambda: nt.sum(xi, axis=0), lambda: np.sum(ai, axis=0)),
            "exp f32": (lambda: nt.exp(x32), lambda: np.exp(a32)),
        }
    )
    return cases


def _timed(function) -> tuple[float, float]:
    """(process CPU seconds, wall seconds) of one call, a TileTensor result waited for."""
    start, cpu = time.perf_counter(), time.process_time()
    result = function()
    if isinstance(result, nt.TileTensor):
        result.wait()
    return time.process_time() - cpu, time.perf_counter() - start


def main() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((N, N)), rng.standard_normal((N, N))
    ai = rng.integers(0, 1000, (N, N))
    cases = _cases(a, b, ai, a.astype(np.float32), rng.integers(0, N, 1000))
    chosen = sys.argv[1].split(",") if len(sys.argv) > 1 else list(cases)
    median = statistics.median
    for name in chosen:
        ours, numpy_fn = cases[name]
        _timed(ours), _timed(numpy_fn)  # first calls compile
        rounds = [(_timed(ours), _timed(numpy_fn)) for _ in range(3)]
        cpu_nt, wall_nt = (median(r[0][i] for r in rounds) for i in (0, 1))
        cpu_np, wall_np = (median(r[1][i] for r in rounds) for i in (0, 1))
        print(
            f"{name:11s} numtile CPU {cpu_nt * 1e3:7.1f} wall {wall_nt * 1e3:7.1f} ms | NumPy "
            f"CPU {cpu_np * 1e3:7.1f} wall {wall_np * 1e3:7.1f} ms | CPU ratio "
            f"{cpu_nt / cpu_np:5.2f}, wall ratio {wall_nt / wall_np:5.2f}",
            flush=True,
        )
    print(f"load average {os.getloadavg()[0]:.2f}")
    nt.shutdown()


if __name__ == "__main__":
    main()
