"""The kernel packages as wholes: ``numtile.ops_cuda`` loads without ``numtile.ops_cpu`` (op codes
come from ``numtile.opcodes``), and both packages name the same kernels."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from numtile import ops_cpu, ops_cuda

ROOT = Path(__file__).resolve().parents[2]

# numtile/__init__.py (the public API) is bypassed: the packages are imported on their own
_IMPORT_ALONE = """
    import sys
    import types

    package = types.ModuleType("numtile")
    package.__path__ = [{path!r}]
    sys.modules["numtile"] = package
    import numtile.{package}

    print(sorted(name for name in sys.modules if name.startswith("numtile.")))
    print("numba.cuda" in sys.modules)
"""


def import_alone(package: str) -> tuple[list[str], bool]:
    """(numtile modules loaded, whether numba.cuda was) after importing ``package`` alone."""
    script = textwrap.dedent(_IMPORT_ALONE).format(path=str(ROOT / "numtile"), package=package)
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    modules, cuda = result.stdout.strip().splitlines()[-2:]
    return eval(modules), cuda == "True"  # noqa: S307 - our own print of a list of names


def test_the_cuda_kernels_load_without_the_cpu_ones():
    modules, cuda = import_alone("ops_cuda")
    assert "numtile.ops_cuda.nn.attention" in modules and "numtile.opcodes" in modules
    assert not [name for name in modules if name.startswith("numtile.ops_cpu")], modules
    assert cuda


def test_the_cpu_kernels_load_without_numba_cuda():
    modules, cuda = import_alone("ops_cpu.nn")  # the package, and nn (loaded on first use)
    assert "numtile.ops_cpu.nn.embedding" in modules and "numtile.ops_cpu.matmul" in modules
    assert not [name for name in modules if name.startswith("numtile.ops_cuda")], modules
    assert not cuda


def kernels(namespace) -> set[str]:
    return {name for name in namespace.__all__ if callable(getattr(namespace, name))}


@pytest.mark.parametrize("family", ["", "nn"])
def test_every_cpu_kernel_has_a_cuda_twin_of_the_same_name(family):
    cpu, gpu = (getattr(p, family) if family else p for p in (ops_cpu, ops_cuda))
    helpers = {"empty", "to_host"}  # StreamOps provides these on a GPU
    # CPU-only by design: oneMKL's and oneDNN's bf16 GEMMs (a GPU takes cuBLAS or the gemm_bf16
    # twin), and LAPACK's geqrf+orgqr for TSQR leaves, with or without Q (GPU workers run the tsqr
    # codelet's generic kernel over the QR tile kernels' twins), the value-split sort's
    # partition (its codelets are CPU-only: GPU workers keep the merge sort), and the merge of
    # numbers compared as themselves (a GPU merges values by their keys: merge_runs)
    cpu_only = {
        "gemm_bf16_mkl",
        "mkl_bf16_available",
        "gemm_bf16_onednn",
        "linear_bf16_onednn",
        "onednn_bf16_available",
        "qr_explicit",
        "qr_leaf",
        "split_by_keys",
        "merge_values",
    }
    # reductions of deferred element-wise expressions: automatic fusion is off with GPU workers
    cpu_only.add("fused_reduce")
    # the CPU LU panel's in-place transposes and row swaps (the CUDA panel stacks its tiles)
    cpu_only |= {"getrf_tiles", "laswp_tiles", "leading_dimension"}
    # flash attention's products on oneMKL's bf16 GEMM (a GPU runs its attention kernels on
    # bfloat16 tiles widened to float32)
    cpu_only |= {"attention_forward_block_bf16", "attention_backward_block_bf16"}
    cpu_only |= {"bf16_attention_ready"}
    assert kernels(cpu) - helpers - cpu_only <= kernels(gpu)
    if family:
        assert kernels(cpu) - cpu_only == kernels(gpu)
