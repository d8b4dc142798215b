"""The bf16 x bf16 -> float32 GEMM: numtile against ``torch.matmul`` on bfloat16 tensors, same
run, same cores.

numtile side: ``nt.matmul(a, b, out_dtype=float32)`` on bfloat16 TileTensors (one task per
tile product on every core; oneMKL's ``cblas_gemm_bf16bf16f32`` where the CPU has AVX512-BF16
or AMX-BF16 and the ``mkl`` extra is installed, else the exact widen-to-float32 + sgemm
kernel), and the tile kernel alone on one thread. Peers: ``torch.matmul`` on bfloat16
tensors (``torch.set_num_threads(cores)``), torch float32, and oneMKL's bf16 GEMM called
directly when it loads; numtile's own float32 ``nt.matmul`` on the same tiles shows what
the bf16 GEMM gains over it (nothing on a CPU without bf16 units). Reported: median
seconds, GFLOP/s, numtile/peer.

Usage: python bench/compare_gemm_bf16.py [--n 4096] [--tile 1024] [--repeat 3]
       [--torch-bf16-repeat 1]

On CPUs without bf16 units torch's bf16 ``matmul`` runs at about 0.4 GFLOP/s on two cores
(5 minutes a call at 4096): ``--torch-bf16-repeat 1`` times it once, with no warm-up call
(it compiles nothing; its first call is its steady state).
"""

from __future__ import annotations

import argparse
import os
import sys

import ml_dtypes
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import median_time, print_table  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--tile", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-torch-bf16", action="store_true", help="(slow without bf16 units)")
    parser.add_argument(
        "--torch-bf16-repeat", type=int, default=None, help="runs of torch bf16 (default --repeat)"
    )
    args = parser.parse_args(argv)
    import torch

    import numtile as nt
    from numtile import ops_cpu
    from numtile.tiletensor.precision import cpu_fallback, use_mkl_bf16

    cores = nt.get_runtime().config.ncpu
    torch.set_num_threads(cores)
    n, flops = args.n, 2.0 * args.n**3
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((n, n)).astype(ml_dtypes.bfloat16)
    print(f"n={n}, {cores} cores; CPU: {cpu_fallback('bf16-mixed') or 'has bf16 units'}")
    print(f"numtile's CPU bf16 GEMM: {'oneMKL' if use_mkl_bf16(ops_cpu) else 'widen + sgemm'}")
    ta = nt.from_numpy(a, tile_shape=(args.tile, args.tile))
    tb = nt.from_numpy(b, tile_shape=(args.tile, args.tile))

    def numtile_matmul():
        nt.matmul(ta, tb, out_dtype=np.float32).to_numpy()

    seconds = {"numtile nt.matmul (tiled, all cores)": median_time(numtile_matmul, args.repeat)}
    fa, fb = (nt.from_numpy(x.astype(np.float32), tile_shape=ta.tile_shape) for x in (a, b))
    seconds["numtile nt.matmul float32 (the same tiles)"] = median_time(
        lambda: (fa @ fb).to_numpy(), args.repeat
    )
    bits_a, bits_b = a.view(np.uint16), b.view(np.uint16)
    c = np.empty((n, n), np.float32)
    seconds["numtile gemm_bf16 kernel (1 thread)"] = median_time(
        lambda: ops_cpu.gemm_bf16(bits_a, bits_b, c, False, False, 1.0, 0.0), args.repeat
    )
    if ops_cpu.mkl_bf16_available():
        seconds["oneMKL cblas_gemm_bf16bf16f32 (1 thread)"] = median_time(
            lambda: ops_cpu.gemm_bf16_mkl(bits_a, bits_b, c, False, False, 1.0, 0.0), args.repeat
        )
    to_torch = lambda x: torch.from_numpy(x.view(np.int16)).view(torch.bfloat16)  # noqa: E731
    a_torch, b_torch = to_torch(a), to_torch(b)
    if not args.skip_torch_bf16:
        repeat = args.torch_bf16_repeat or args.repeat
        seconds["torch.matmul bfloat16"] = median_time(
            lambda: torch.matmul(a_torch, b_torch), repeat, warmup=int(repeat > 1)
        )
    a32, b32 = a_torch.float(), b_torch.float()
    seconds["torch.matmul float32"] = median_time(lambda: torch.matmul(a32, b32), args.repeat)
    ours = seconds["numtile nt.matmul (tiled, all cores)"]
    rows = []
    for impl, s in seconds.items():
        peer = not impl.startswith("numtile") or "float32" in impl
        rows.append(
            dict(
                case=f"bf16 GEMM {n}",
                impl=impl,
                seconds=s,
                rate=f"{flops / s / 1e9:.1f} GFLOP/s",
                ratio=s / ours if peer else None,
            )
        )
    print_table(rows)
    print("numtile/peer: peer seconds / numtile nt.matmul seconds (> 1: numtile faster)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
