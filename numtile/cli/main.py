"""``numtile`` command line: ``numtile info`` (and more subcommands as they land)."""

from __future__ import annotations

import argparse
import platform
import sys
import time

from numtile.cli.convert import register as register_convert
from numtile.cli.errors import report
from numtile.cli.prepare import register as register_prepare
from numtile.cli.train import register as register_train


def _blas_lines() -> list[str]:
    from threadpoolctl import threadpool_info

    lines = []
    for lib in threadpool_info():
        if lib.get("user_api") != "blas":
            continue
        lines.append(
            f"  {lib.get('internal_api')} {lib.get('version')} ({lib.get('architecture')}), "
            f"{lib.get('num_threads')} thread(s): {lib.get('filepath')}"
        )
    return lines or ["  (none found)"]


def _cuda_line() -> str:
    try:
        from numba import cuda

        if cuda.is_available():
            return f"available: {[d.name for d in cuda.list_devices()]}"
        return "not available (no CUDA driver or GPU found)"
    except Exception as exc:  # numba-cuda missing or broken: report, do not fail
        return f"not available ({type(exc).__name__}: {exc})"


def _cuda_kernels_line() -> str:
    """Where the CUDA tile kernels' GEMM and factorisations go here: CuPy's cuBLAS/cuSOLVER
    (``cublas``, ``cusolver``) or the ``@cuda.jit`` kernels (``fallback``)."""
    try:
        from numtile.ops_cuda import gemm_path, solver_path
    except Exception as exc:  # numba-cuda missing or broken: report, do not fail
        return f"none ({type(exc).__name__}: {exc})"
    return f"GEMM {gemm_path()}, factorisations {solver_path()}"


def _mpi_line(runtime) -> str:
    """Ranks and their hosts under mpiexec; else whether mpi4py is there (not importing it)."""
    front = runtime.distributed
    if front is None:
        import importlib.util

        found = importlib.util.find_spec("mpi4py") is not None
        state = "mpi4py installed" if found else "mpi4py missing: pip install numtile[mpi]"
        return f"1 rank, not distributed ({state}; run under mpiexec -n P to distribute)"
    hosts: dict[str, list[int]] = {}
    for rank, host in enumerate(front.hosts):
        hosts.setdefault(host, []).append(rank)
    where = ", ".join(f"{host}: ranks {ranks}" for host, ranks in hosts.items())
    return f"{front.nranks} ranks over {len(hosts)} host(s) ({where})"


def info(args: argparse.Namespace) -> int:
    """Print versions, workers, scheduler, BLAS and CUDA; optionally compile every kernel."""
    import numba
    import numpy

    import numtile
    from numtile.config import Config

    config = Config()
    runtime = numtile.get_runtime()
    if runtime.distributed is not None and runtime.distributed.rank != 0:
        return 0  # under mpiexec rank 0 speaks for all (its MPI line lists every rank)
    print(
        f"numtile {numtile.__version__} (Python {platform.python_version()}, "
        f"NumPy {numpy.__version__}, Numba {numba.__version__})"
    )
    print(
        f"workers: {runtime.ncpu} CPU (NUMTILE_NCPU), {runtime.ncuda} GPU (NUMTILE_NCUDA), "
        f"scheduler: {runtime.scheduler.name} (NUMTILE_SCHEDULER), "
        f"restrict: {runtime.restrict or 'none'} (NUMTILE_RESTRICT)"
    )
    limits = [
        f"host {config.host_mem_limit or 'unlimited'} (NUMTILE_HOST_MEM_LIMIT)",
        f"GPU {config.cuda_mem_limit or 'free memory'} (NUMTILE_CUDA_MEM_LIMIT)",
    ]
    print(f"memory limits: {', '.join(limits)}")
    print(
        f"default tiles: {config.tile} per axis, {config.tile_1d} for 1-d (NUMTILE_TILE, "
        f"NUMTILE_TILE_1D)"
    )
    print(f"performance models: {runtime.models.path}")
    print("BLAS (kernels run it at 1 thread per worker while the runtime is up):")
    print("\n".join(_blas_lines()))
    from numtile.train import bf16_gemm_description, kernel_blas_description

    print(f"tile kernels' BLAS/LAPACK: {kernel_blas_description()}")

    print(f"bf16 GEMM: {bf16_gemm_description()}")
    print(f"CUDA: {_cuda_line()}")
    print(f"CUDA kernels: {_cuda_kernels_line()}")
    print(f"MPI: {_mpi_line(runtime)}")
    if args.warmup:
        from numtile.warmup import warmup

        start = time.perf_counter()
        count = warmup(progress=True)
        print(
            f"compiled {count} kernel signatures in {time.perf_counter() - start:.1f} s "
            f"(cached on disk by Numba)"
        )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="numtile", description="Tiled tensors on an asynchronous task runtime."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p_info = sub.add_parser("info", help="versions, workers, scheduler, BLAS, CUDA")
    p_info.add_argument(
        "--warmup", action="store_true", help="compile every kernel now (Numba caches them)"
    )
    p_info.set_defaults(func=info)
    register_prepare(sub)
    register_train(sub)
    register_convert(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the ``numtile`` command; errors are one line on stderr (see ``numtile.cli.errors``)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except Exception as exc:  # report() re-raises what is not a user's or a run's error
        return report(args.command, exc)


if __name__ == "__main__":
    sys.exit(main())
