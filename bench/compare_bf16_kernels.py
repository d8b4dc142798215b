"""bfloat16 (or float16) element-wise ops and reductions: kernels on the bits
(``ops_cpu.bf16_kernels``) against the float32 scratch path they replace and against
PyTorch's ops on the same dtype, one run.

    PYTHONPATH=$PWD python bench/compare_bf16_kernels.py [--dtype float16] [--size 16777216]

One thread each (a kernel call on one tile; ``torch.set_num_threads(1)``), then the tiled op
on the runtime's workers against torch on as many threads. Times are medians; bytes are the
memory traffic of each path per element (reads + writes of every pass over a tile).
"""

from __future__ import annotations

import argparse
import os
import sys

import ml_dtypes
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import median_time  # noqa: E402

# each dtype: NumPy dtype, prefix of its kernels (and of its conversions), torch dtype name
DTYPES = {
    "bfloat16": (np.dtype(ml_dtypes.bfloat16), "bf16", "bfloat16"),
    "float16": (np.dtype(np.float16), "f16", "float16"),
}

# bytes moved per element: (bits kernel, scratch path: widen each input, float32 kernel, narrow)
BYTES = {
    "exp": (2 + 2, (2 + 4) + (4 + 4) + (4 + 2)),
    "add": (2 + 2 + 2, 2 * (2 + 4) + (4 + 4 + 4) + (4 + 2)),
    "sum": (2, (2 + 4) + 4),
}


def kernel_cases(size: int, dtype: str):
    """(name, bits kernel, scratch path, torch op) on one tile of ``size`` elements."""
    import torch

    from numtile import opcodes, ops_cpu

    numpy_dtype, prefix, torch_name = DTYPES[dtype]
    kernel = {name: getattr(ops_cpu, f"{prefix}_{name}") for name in ("unary", "binary")}
    reduce_bits = getattr(ops_cpu, f"{prefix}_reduce_accumulate")
    widen_bits, narrow_bits = (
        getattr(ops_cpu, f"{prefix}_widen"),
        getattr(ops_cpu, f"{prefix}_narrow"),
    )
    torch_dtype = getattr(torch, torch_name)
    rng = np.random.default_rng(0)
    a = rng.standard_normal(size).astype(numpy_dtype)
    b = rng.standard_normal(size).astype(numpy_dtype)
    a_bits, b_bits = a.view(np.uint16), b.view(np.uint16)
    out_bits = np.empty(size, np.uint16)
    wide = [np.empty(size, np.float32) for _ in range(3)]
    strides, shape = np.ones(1, np.int64), np.array([size], np.int64)
    strides.flags.writeable = shape.flags.writeable = False
    partial = np.zeros(1, np.float32)
    ta = torch.from_numpy(a_bits.view(np.int16)).view(torch_dtype)
    tb = torch.from_numpy(b_bits.view(np.int16)).view(torch_dtype)
    exp, add, total = opcodes.UNARY_OPS["exp"], opcodes.BINARY_OPS["add"], opcodes.REDUCE_OPS["sum"]

    def widen(bits, out):
        widen_bits(bits, out.view(np.uint32))

    def narrow(values, bits):
        narrow_bits(values.view(np.uint32), bits)

    def scratch_exp():
        widen(a_bits, wide[0])
        ops_cpu.unary(wide[0], wide[1], exp)
        narrow(wide[1], out_bits)

    def scratch_add():
        widen(a_bits, wide[0])
        widen(b_bits, wide[1])
        ops_cpu.binary(wide[0], strides, wide[1], strides, wide[2], shape, add)
        narrow(wide[2], out_bits)

    def scratch_sum():
        widen(a_bits, wide[0])
        ops_cpu.reduce_accumulate(wide[0], partial, 1, size, 1, total)

    return [
        (
            "exp",
            lambda: kernel["unary"](a_bits, out_bits, exp),
            scratch_exp,
            lambda: torch.exp(ta),
        ),
        (
            "add",
            lambda: kernel["binary"](a_bits, strides, b_bits, strides, out_bits, shape, add),
            scratch_add,
            lambda: torch.add(ta, tb),
        ),
        (
            "sum",
            lambda: reduce_bits(a_bits, partial, 1, size, 1, total),
            scratch_sum,
            lambda: torch.sum(ta, dtype=torch.float32),
        ),
    ]


def tiled_cases(size: int, tile: int, dtype: str):
    """(name, numtile tiled op, torch op) on a tensor of ``size`` elements of ``dtype``."""
    import torch

    import numtile as nt

    numpy_dtype, _, torch_name = DTYPES[dtype]
    rng = np.random.default_rng(1)
    a = rng.standard_normal(size).astype(numpy_dtype)
    b = rng.standard_normal(size).astype(numpy_dtype)
    x, y = nt.from_numpy(a, tile_shape=(tile,)), nt.from_numpy(b, tile_shape=(tile,))
    ta = torch.from_numpy(a.view(np.int16)).view(getattr(torch, torch_name))
    tb = torch.from_numpy(b.view(np.int16)).view(getattr(torch, torch_name))

    return [
        ("exp", lambda: nt.exp(x).wait(), lambda: torch.exp(ta)),
        ("add", lambda: (x + y).wait(), lambda: torch.add(ta, tb)),
        ("sum", lambda: nt.sum(x).wait(), lambda: torch.sum(ta)),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=16 * 2**20)
    parser.add_argument("--tile", type=int, default=2**20)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bfloat16")
    parser.add_argument("--kernels-only", action="store_true", help="skip the tiled ops")
    options = parser.parse_args()
    import torch

    print(f"load average {os.getloadavg()[0]:.1f}, {options.size} elements of {options.dtype}")
    torch.set_num_threads(1)
    print(
        f"one thread | op | bits kernel ms | scratch path ms | torch {options.dtype} ms "
        "| bits/scratch | bits/torch | bytes/element bits, scratch"
    )
    for name, bits_kernel, scratch, peer in kernel_cases(options.size, options.dtype):
        t_bits, t_scratch, t_torch = (
            median_time(f, options.repeat) for f in (bits_kernel, scratch, peer)
        )
        moved = BYTES[name]
        print(
            f"| {name} | {t_bits * 1e3:.1f} | {t_scratch * 1e3:.1f} | {t_torch * 1e3:.1f} | "
            f"{t_bits / t_scratch:.2f}x | {t_bits / t_torch:.2f}x | {moved[0]}, {moved[1]} |"
        )
    if options.kernels_only:
        return
    import numtile as nt
    from numtile.tiletensor.codelets import narrow

    workers = nt.get_runtime().config.ncpu
    torch.set_num_threads(workers)
    print(
        f"tiled ops, {workers} workers, tile {options.tile} | op | bits ms | scratch ms | "
        "torch ms | bits/scratch | bits/torch"
    )
    direct = narrow.goes_direct
    for name, ours, peer in tiled_cases(options.size, options.tile, options.dtype):
        t_ours, t_torch = (median_time(f, options.repeat) for f in (ours, peer))
        narrow.goes_direct = lambda values: False  # the float32 scratch path, as before
        try:
            t_scratch = median_time(ours, options.repeat)
        finally:
            narrow.goes_direct = direct
        print(
            f"| {name} | {t_ours * 1e3:.1f} | {t_scratch * 1e3:.1f} | {t_torch * 1e3:.1f} | "
            f"{t_ours / t_scratch:.2f}x | {t_ours / t_torch:.2f}x |"
        )


if __name__ == "__main__":
    main()
