"""One thread, data in cache: numtile's unary and binary kernels compiled with 512-bit vectors
(as they ship: ``ops_cpu.helpers.wide_vectors``) and without (LLVM's 256-bit preference on
AVX-512 CPUs), float64 pow against a loop of libm's ``pow``, and NumPy's ufuncs, in
interleaved rounds; prints medians in ns an element and the ratios.

Usage: python bench/vector_width.py [--rounds 9] [--size 16384]
"""

from __future__ import annotations

import argparse
import os
import time
import types as python_types
from functools import partial

import numba
import numpy as np
from numba.core import types
from numba.extending import intrinsic

from numtile.ops_cpu import elementwise


@intrinsic
def _no_attribute(typingctx):
    def codegen(context, builder, signature, args):
        return context.get_dummy_value()

    return types.none(), codegen


def _kernels(build, op):
    """(512-bit kernel, 256-bit kernel) of ``op``: the same source, compiled uncached, the
    second with ``wide_vectors`` replaced by a no-op."""
    function = build(op).py_func
    namespace = dict(function.__globals__, wide_vectors=_no_attribute)
    narrow = python_types.FunctionType(
        function.__code__, namespace, function.__name__, function.__defaults__, function.__closure__
    )
    jit = numba.njit(nogil=True, error_model="numpy")
    return jit(function), jit(narrow)


@numba.njit(nogil=True, error_model="numpy")
def _libm_power(a, b, out):
    for i in range(out.size):
        out[i] = a[i] ** b[i]


def _cases(n: int) -> list[tuple[str, dict]]:
    rng = np.random.default_rng(0)
    cases = []
    for dtype in (np.float32, np.float64):
        bits = np.dtype(dtype).itemsize * 8
        x, y = (rng.standard_normal(n).astype(dtype) for _ in range(2))
        base, out = np.abs(x) + dtype(0.5), np.empty(n, dtype)
        for op, ufunc in (("exp", np.exp), ("sin", np.sin), ("cos", np.cos)):
            wide, narrow = _kernels(elementwise._unary, op)
            calls = {"512": partial(wide, x, out), "256": partial(narrow, x, out)}
            calls["numpy"] = partial(ufunc, x, out=out)
            cases.append((f"{op} f{bits}", calls))
        step, shape = np.array([1], np.int64), np.array([n], np.int64)
        wide, narrow = _kernels(elementwise._binary, "power")
        operands = (base, step, y, step, out, shape)
        calls = {"512": partial(wide, *operands), "256": partial(narrow, *operands)}
        calls["numpy"] = partial(np.power, base, y, out=out)
        if dtype == np.float64:
            calls["libm"] = partial(_libm_power, base, y, out)
        cases.append((f"pow f{bits}", calls))
    for _, calls in cases:  # compile
        for call in calls.values():
            call()
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--size", type=int, default=1 << 14)
    args = parser.parse_args()
    cases = _cases(args.size)
    times: dict[tuple, list] = {}
    calls_per_round = max(1, (1 << 21) // args.size)
    for _ in range(args.rounds):
        for name, calls in cases:
            for label, call in calls.items():
                start = time.perf_counter()
                for _ in range(calls_per_round):
                    call()
                seconds = (time.perf_counter() - start) / calls_per_round
                times.setdefault((name, label), []).append(seconds / args.size * 1e9)
    print(f"load {os.getloadavg()[0]:.2f}; ns an element, medians of {args.rounds} rounds")
    for name, calls in cases:
        median = {label: float(np.median(times[(name, label)])) for label in calls}
        line = "  ".join(f"{label} {value:.2f}" for label, value in median.items())
        line += f"  | 512/256 {median['512'] / median['256']:.2f}"
        line += f"  512/numpy {median['512'] / median['numpy']:.2f}"
        if "libm" in median:
            line += f"  512/libm {median['512'] / median['libm']:.2f}"
        print(f"{name:8s} {line}")


if __name__ == "__main__":
    main()
