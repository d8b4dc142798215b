"""The bf16 x bf16 -> float32 GEMM: numtile against ``torch.matmul`` on bfloat16 tensors, same
run, same cores.

numtile side: ``nt.matmul(a, b, out_dtype=float32)`` on bfloat16 TileTensors (one task per
tile product on every core; oneDNN's matmul or oneMKL's ``cblas_gemm_bf16bf16f32`` where the
CPU has AVX512-BF16 or AMX-BF16 and the ``onednn`` or ``mkl`` extra is installed, else the
exact widen-to-float32 + sgemm kernel), and the tile kernels alone on one thread. Peers:
``torch.matmul`` on bfloat16 tensors (``torch.set_num_threads(cores)``), torch float32;
numtile's own float32 ``nt.matmul`` on the same tiles shows what the bf16 GEMM gains over it
(nothing on a CPU without bf16 units). Reported: median seconds, GFLOP/s, numtile/peer.

``--shapes`` adds the GEMMs of GPT training tiles (M x N x K, transposes as the linear layers
run them) on one thread: oneDNN, oneMKL and ``torch.matmul`` (``torch.set_num_threads(1)``,
bfloat16 output) side by side, each figure the median thread CPU time, so that a shared
machine's load moves them less.

Usage: python bench/compare_gemm_bf16.py [--n 4096] [--tile 1024] [--repeat 3]
       [--torch-bf16-repeat 1] [--shapes]

On CPUs without bf16 units torch's bf16 ``matmul`` runs at about 0.4 GFLOP/s on two cores
(5 minutes a call at 4096): ``--torch-bf16-repeat 1`` times it once, with no warm-up call
(it compiles nothing; its first call is its steady state).
"""

from __future__ import annotations

import argparse
import functools
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
    parser.add_argument("--shapes", action="store_true", help="training tile GEMMs, 1 thread")
    parser.add_argument(
        "--torch-bf16-repeat", type=int, default=None, help="runs of torch bf16 (default --repeat)"
    )
    args = parser.parse_args(argv)
    import torch

    import numtile as nt
    from numtile import ops_cpu
    from numtile.tiletensor.precision import bf16_gemm_library, cpu_fallback

    cores = nt.get_runtime().config.ncpu
    torch.set_num_threads(cores)
    n, flops = args.n, 2.0 * args.n**3
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((n, n)).astype(ml_dtypes.bfloat16)
    print(f"n={n}, {cores} cores; CPU: {cpu_fallback('bf16-mixed') or 'has bf16 units'}")
    print(f"numtile's CPU bf16 GEMM: {bf16_gemm_library(ops_cpu) or 'widen + sgemm'}")
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
    for name, kernel in _libraries(ops_cpu).items():
        seconds[f"{name} (1 thread)"] = median_time(
            lambda kernel=kernel: kernel(bits_a, bits_b, c, False, False, 1.0, 0.0), args.repeat
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
    if args.shapes:
        training_shapes(ops_cpu, torch, args.repeat)
    return 0


def _libraries(ops_cpu) -> dict:
    """The bf16 GEMM kernels of the libraries that load here."""
    kernels = {}
    if ops_cpu.onednn_bf16_available():
        kernels["oneDNN matmul"] = ops_cpu.gemm_bf16_onednn
    if ops_cpu.mkl_bf16_available():
        kernels["oneMKL gemm_bf16bf16f32"] = ops_cpu.gemm_bf16_mkl
    return kernels


# (M, N, K, transpose a, transpose b): gpt2-mini's forward linears (rows 1024 = 4 x 256
# tokens, width 256), its LM head tile (vocabulary tile 8192) and their backward GEMMs;
# gpt2-small's (rows 512, width 768, MLP tile 1536)
TRAINING_SHAPES = [
    (1024, 768, 256, False, True),
    (1024, 8192, 256, False, True),
    (1024, 256, 8192, False, False),
    (256, 8192, 1024, True, False),
    (512, 2304, 768, False, True),
    (512, 1536, 768, False, True),
    (512, 768, 1536, False, False),
    (768, 1536, 512, True, False),
]


def _cpu_median(fn, repeat: int) -> float:
    """Median thread CPU seconds of ``fn()`` (one untimed call first)."""
    import time

    fn()
    times = []
    for _ in range(max(repeat, 5)):
        start = time.thread_time()
        fn()
        times.append(time.thread_time() - start)
    return float(np.median(times))


def _rates(ops_cpu, torch, libraries, shape, repeat: int) -> list[float]:
    """GFLOP/s (thread CPU time) of each library on one GEMM shape, then oneDNN's matmul with
    a bfloat16 output (the forward linear's), then torch's (bfloat16 output)."""
    m, n, k, trans_a, trans_b = shape
    rng = np.random.default_rng(1)
    a, b = (
        rng.standard_normal(dims).astype(ml_dtypes.bfloat16).view(np.uint16)
        for dims in ((k, m) if trans_a else (m, k), (n, k) if trans_b else (k, n))
    )
    c, flops = np.empty((m, n), np.float32), 2.0 * m * n * k
    calls = [
        functools.partial(kernel, a, b, c, trans_a, trans_b, 1.0, 0.0)
        for kernel in libraries.values()
    ]
    if ops_cpu.onednn_bf16_available():
        out = np.empty((m, n), np.uint16)
        calls.append(
            functools.partial(ops_cpu.linear_bf16_onednn, a, b, None, out, trans_a, trans_b)
        )
    ta, tb = (torch.from_numpy(x.view(np.int16)).view(torch.bfloat16) for x in (a, b))
    out_torch = torch.empty(m, n, dtype=torch.bfloat16)
    calls.append(
        functools.partial(
            torch.matmul, ta.T if trans_a else ta, tb.T if trans_b else tb, out=out_torch
        )
    )
    return [flops / _cpu_median(call, repeat) / 1e9 for call in calls]


def training_shapes(ops_cpu, torch, repeat: int) -> None:
    """GFLOP/s of each library on the training tile GEMMs, one thread, CPU time."""
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    libraries = _libraries(ops_cpu)
    names = [*libraries, *(["oneDNN, bf16 out"] if ops_cpu.onednn_bf16_available() else [])]
    names.append("torch, bf16 out")
    print(f"\ntraining tile GEMMs, 1 thread, GFLOP/s of thread CPU time (median of {repeat})")
    print(f"{'M x N x K (op)':<24}" + "".join(f"{name:>25}" for name in names))
    with threadpool_limits(1):
        for shape in TRAINING_SHAPES:
            m, n, k, trans_a, trans_b = shape
            rates = _rates(ops_cpu, torch, libraries, shape, repeat)
            op = f"{'T' if trans_a else 'N'}{'T' if trans_b else 'N'}"
            print(f"{f'{m} x {n} x {k} ({op})':<24}" + "".join(f"{r:>25.0f}" for r in rates))


if __name__ == "__main__":
    sys.exit(main())
