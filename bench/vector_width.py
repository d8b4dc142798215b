"""One thread, data in cache: numtile's unary and binary kernels compiled with 512-bit vectors
(as they ship: ``ops_cpu.helpers.wide_vectors``) and without (LLVM's 256-bit preference on
AVX-512 CPUs), float64 pow against a loop of libm's ``pow``, and NumPy's ufuncs, in
interleaved rounds; prints medians in ns an element (of the thread's CPU time, so that other
jobs on a shared machine count less) and the ratios.

With ``--vml``: oneMKL's VML (``ops_cpu.mkl_vml``, HA mode) against our kernel of the same op
and NumPy (power: also ``pow_blocks``' and ``pow_avx512``'s kernels), for every op VML may
take (the tables of ``mkl_vml``'s docstring come from it; run it at ``--size 16384``, in cache,
and at a tile's size, ``--size 4194304``).

Usage: python bench/vector_width.py [--rounds 9] [--size 16384] [--vml] [--ops exp,sin]
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

from numtile import opcodes
from numtile.ops_cpu import elementwise, mkl_vml, pow_avx512, pow_blocks


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


# what VML may take: the ops routed to it, and those measured and left on our kernels
VML_UNARY = ["exp", "log", "sin", "cos", "tan", "tanh", "expm1", "log1p", "log2", "log10"]
VML_UNARY += ["asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "sqrt"]
VML_BINARY = ["power", "atan2", "hypot"]
_DOMAIN = {"asin": (-1, 1), "acos": (-1, 1), "atanh": (-0.99, 0.99), "acosh": (1, 100)}
_DOMAIN |= {"sin": (-4, 4), "cos": (-4, 4), "tan": (-1.5, 1.5), "power": (0.5, 4)}
_DOMAIN |= dict.fromkeys(["log", "log2", "log10", "log1p", "sqrt"], (0.01, 100))


def _vml_cases(n: int, ops: list[str]) -> list[tuple[str, dict]]:
    """VML (``mkl_vml.unary``/``binary``), our kernel of the op and NumPy's ufunc, per op and
    float dtype."""
    rng = np.random.default_rng(0)
    step, shape = np.array([1], np.int64), np.array([n], np.int64)
    cases = []
    for op in ops:
        for dtype in (np.float32, np.float64):
            low, high = _DOMAIN.get(op, (-10, 10))
            x, y = rng.uniform(low, high, n).astype(dtype), rng.uniform(-3, 3, n).astype(dtype)
            out, ufunc = np.empty(n, dtype), getattr(np, {"atan2": "arctan2"}.get(op, op))
            if op in VML_BINARY:
                code, ours = opcodes.BINARY_OPS[op], elementwise.binary_math.kernel
                ours = elementwise.binary.kernel if code not in opcodes.BINARY_MATH else ours
                operands = (x, step, y, step, out, shape, code)
                calls = {"vml": partial(mkl_vml.run, mkl_vml.BINARY[code][0], x, y, out)}
                calls |= {"ours": partial(ours, *operands), "numpy": partial(ufunc, x, y, out=out)}
                if op == "power":  # the kernels that take dense power before VML or after
                    calls["blocks"] = partial(pow_blocks.power, x, y, out)
                if op == "power" and dtype == np.float32 and pow_avx512.enabled():
                    calls["avx512"] = partial(pow_avx512.power, x, y, out)
            else:
                code = opcodes.UNARY_OPS[op]
                name = mkl_vml.UNARY.get(code, (op.capitalize(),))[0]
                calls = {"vml": partial(mkl_vml.run, name, x, out)}
                calls |= {"ours": partial(elementwise.unary.kernel, x, out, code)}
                calls["numpy"] = partial(ufunc, x, out=out)
            cases.append((f"{op} f{np.dtype(dtype).itemsize * 8}", calls))
    for _, calls in cases:  # compile
        for call in calls.values():
            call()
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--size", type=int, default=1 << 14)
    parser.add_argument("--vml", action="store_true", help="VML against our kernels")
    parser.add_argument("--ops", default=",".join(VML_UNARY + VML_BINARY), help="with --vml")
    args = parser.parse_args()
    cases = _vml_cases(args.size, args.ops.split(",")) if args.vml else _cases(args.size)
    times: dict[tuple, list] = {}
    calls_per_round = max(1, (1 << 21) // args.size)
    for _ in range(args.rounds):
        for name, calls in cases:
            for label, call in calls.items():
                start = time.thread_time()  # this thread's CPU time: not the other jobs'
                for _ in range(calls_per_round):
                    call()
                seconds = (time.thread_time() - start) / calls_per_round
                times.setdefault((name, label), []).append(seconds / args.size * 1e9)
    print(f"load {os.getloadavg()[0]:.2f}; CPU ns an element, medians of {args.rounds} rounds")
    for name, calls in cases:
        median = {label: float(np.median(times[(name, label)])) for label in calls}
        line = "  ".join(f"{label} {value:.2f}" for label, value in median.items())
        first, second = ("vml", "ours") if args.vml else ("512", "256")
        line += f"  | {first}/{second} {median[first] / median[second]:.2f}"
        line += f"  {first}/numpy {median[first] / median['numpy']:.2f}"
        if "blocks" in median:
            line += f"  blocks/vml {median['blocks'] / median['vml']:.2f}"
        if "avx512" in median:
            line += f"  avx512/vml {median['avx512'] / median['vml']:.2f}"
        if "libm" in median:
            line += f"  512/libm {median['512'] / median['libm']:.2f}"
        print(f"{name:8s} {line}")


if __name__ == "__main__":
    main()
