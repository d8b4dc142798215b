"""bfloat16 element-wise ops and reductions: kernels on the bits (``ops_cpu.bf16_kernels``)
against the float32 scratch path they replace and against PyTorch's bfloat16 ops, one run.

    PYTHONPATH=$PWD python bench/compare_bf16_kernels.py [--size 16777216] [--repeat 7]

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

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)

# bytes moved per element: (bits kernel, scratch path: widen each input, float32 kernel, narrow)
BYTES = {
    "exp": (2 + 2, (2 + 4) + (4 + 4) + (4 + 2)),
    "add": (2 + 2 + 2, 2 * (2 + 4) + (4 + 4 + 4) + (4 + 2)),
    "sum": (2, (2 + 4) + 4),
}


def kernel_cases(size: int):
    """(name, bits kernel, scratch path, torch op) on one tile of ``size`` elements."""
    import torch

    from numtile import opcodes, ops_cpu

    rng = np.random.default_rng(0)
    a = rng.standard_normal(size).astype(BFLOAT16)
    b = rng.standard_normal(size).astype(BFLOAT16)
    a_bits, b_bits = a.view(np.uint16), b.view(np.uint16)
    out_bits = np.empty(size, np.uint16)
    wide = [np.empty(size, np.float32) for _ in range(3)]
    strides, shape = np.ones(1, np.int64), np.array([size], np.int64)
    strides.flags.writeable = shape.flags.writeable = False
    partial = np.zeros(1, np.float32)
    ta, tb = torch.from_numpy(a_bits.view(np.int16)).view(torch.bfloat16), None
    tb = torch.from_numpy(b_bits.view(np.int16)).view(torch.bfloat16)
    exp, add, total = opcodes.UNARY_OPS["exp"], opcodes.BINARY_OPS["add"], opcodes.REDUCE_OPS["sum"]

    def widen(bits, out):
        ops_cpu.bf16_widen(bits, out.view(np.uint32))

    def narrow(values, bits):
        ops_cpu.bf16_narrow(values.view(np.uint32), bits)

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
            lambda: ops_cpu.bf16_unary(a_bits, out_bits, exp),
            scratch_exp,
            lambda: torch.exp(ta),
        ),
        (
            "add",
            lambda: ops_cpu.bf16_binary(a_bits, strides, b_bits, strides, out_bits, shape, add),
            scratch_add,
            lambda: torch.add(ta, tb),
        ),
        (
            "sum",
            lambda: ops_cpu.bf16_reduce_accumulate(a_bits, partial, 1, size, 1, total),
            scratch_sum,
            lambda: torch.sum(ta, dtype=torch.float32),
        ),
    ]


def tiled_cases(size: int, tile: int):
    """(name, numtile tiled op, torch op) on a bfloat16 tensor of ``size`` elements."""
    import torch

    import numtile as nt

    rng = np.random.default_rng(1)
    a = rng.standard_normal(size).astype(BFLOAT16)
    b = rng.standard_normal(size).astype(BFLOAT16)
    x, y = nt.from_numpy(a, tile_shape=(tile,)), nt.from_numpy(b, tile_shape=(tile,))
    ta = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    tb = torch.from_numpy(b.view(np.int16)).view(torch.bfloat16)

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
    options = parser.parse_args()
    import torch

    print(f"load average {os.getloadavg()[0]:.1f}, {options.size} elements")
    torch.set_num_threads(1)
    print(
        "one thread | op | bits kernel ms | scratch path ms | torch bf16 ms | bits/scratch "
        "| bits/torch | bytes/element bits, scratch"
    )
    for name, bits_kernel, scratch, peer in kernel_cases(options.size):
        t_bits, t_scratch, t_torch = (
            median_time(f, options.repeat) for f in (bits_kernel, scratch, peer)
        )
        moved = BYTES[name]
        print(
            f"| {name} | {t_bits * 1e3:.1f} | {t_scratch * 1e3:.1f} | {t_torch * 1e3:.1f} | "
            f"{t_bits / t_scratch:.2f}x | {t_bits / t_torch:.2f}x | {moved[0]}, {moved[1]} |"
        )
    import numtile as nt
    from numtile.tiletensor.codelets import narrow

    workers = nt.get_runtime().config.ncpu
    torch.set_num_threads(workers)
    print(
        f"tiled ops, {workers} workers, tile {options.tile} | op | bits ms | scratch ms | "
        "torch ms | bits/scratch | bits/torch"
    )
    direct = narrow.goes_direct
    for name, ours, peer in tiled_cases(options.size, options.tile):
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
