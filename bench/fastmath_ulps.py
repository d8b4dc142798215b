"""Error in ulps of the float32 exp, sin and cos kernels (``ops_cpu.fastmath_blocks``, through
``ops_cpu.unary``'s kernel) over EVERY float32 argument of their ordinary range (or every
``--step``-th one), against NumPy's float64 function, beside NumPy's own float32 ufunc over the
same arguments (``--numpy``).

The ulp of a result is the spacing of float32 at the float64 reference's magnitude; arguments
whose result is not a normal float32 (subnormal, overflow) are left out: the tests check those
bit for bit. Ranges: exp |x| < 87, sin and cos |x| < 2**17 (their limits: beyond, the accurate
kernels run).

Usage: python bench/fastmath_ulps.py [--ops exp,sin,cos] [--step 1] [--numpy]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from numtile import opcodes, ops_cpu

RANGES = {"exp": 87.0, "sin": 131072.0, "cos": 131072.0}
NUMPY = {"exp": np.exp, "sin": np.sin, "cos": np.cos}
CHUNK = 1 << 22


def _ulps(actual, reference):
    """(max ulps, its index) over the results that are normal float32."""
    with np.errstate(all="ignore"):
        spacing = np.spacing(np.abs(reference).astype(np.float32)).astype(np.float64)
        ulps = np.abs(actual.astype(np.float64) - reference) / spacing
    tiny, largest = np.finfo(np.float32).tiny, np.finfo(np.float32).max
    ulps[~((np.abs(reference) >= tiny) & (np.abs(reference) <= largest))] = 0.0
    index = int(np.argmax(ulps))
    return float(ulps[index]), index


def scan(name: str, step: int, with_numpy: bool) -> dict:
    """Max ulps (and where) of ours and NumPy's float32 ``name`` over the range's floats."""
    code, function = opcodes.UNARY_OPS[name], NUMPY[name]
    stop = int(np.array(RANGES[name], np.float32).view(np.int32))
    worst = {"ours": (0.0, 0.0), "numpy": (0.0, 0.0)}
    out = np.empty(CHUNK, np.float32)
    for sign in (0, np.int32(-(2**31))):
        for first in range(0, stop, CHUNK * step):
            bits = np.arange(first, min(first + CHUNK * step, stop), step, dtype=np.int32) | sign
            x = bits.view(np.float32)
            reference = function(x.astype(np.float64))
            ops_cpu.unary.kernel(x, out[: x.size], code)  # ours, never VML
            results = {"ours": out[: x.size]}
            if with_numpy:
                results["numpy"] = function(x)
            for label, actual in results.items():
                ulps, index = _ulps(actual, reference)
                if ulps > worst[label][0]:
                    worst[label] = (ulps, float(x[index]))
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", default="exp,sin,cos")
    parser.add_argument("--step", type=int, default=1, help="every step-th float32")
    parser.add_argument("--numpy", action="store_true", help="NumPy's float32 ufunc too")
    args = parser.parse_args()
    for name in args.ops.split(","):
        start = time.perf_counter()
        worst = scan(name, args.step, args.numpy)
        line = f"{name}: |x| < {RANGES[name]:g}, every {args.step} float(s): ours max "
        line += f"{worst['ours'][0]:.3f} ulp at {worst['ours'][1]!r}"
        if args.numpy:
            line += f"; NumPy float32 max {worst['numpy'][0]:.3f} ulp at {worst['numpy'][1]!r}"
        print(f"{line} ({time.perf_counter() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
