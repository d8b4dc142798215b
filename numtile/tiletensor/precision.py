"""Precision modes of the GEMMs (NNTile's ``fp32_fast_*`` modes, autocast's bf16-mixed).

A mode says how the inputs and outputs of every GEMM task submitted under it are rounded;
the GEMM always accumulates in float32:

============== ============================ ============================================
mode           GEMM inputs                  GEMM output (the activation it produces)
============== ============================ ============================================
fp32           float32                      float32
fp32-fast-bf16 rounded to bfloat16 (RNE)    float32
tf32           rounded to TF32 (RNE)        float32
bf16-mixed     rounded to bfloat16 (RNE)    rounded to bfloat16 (RNE)
============== ============================ ============================================

Rounding keeps ``bits`` of the 23 mantissa bits of a float32 (bfloat16: 7, TF32: 10), with
round-to-nearest-even; NaN and infinities are kept. A product of two such values is exact
in float32, so "round the inputs, then sgemm" is exactly a bf16/TF32 GEMM with float32
accumulation (up to the order of the sums). The mode is captured when a task is submitted
(a task argument), so tasks already queued keep the mode they were submitted under.

>>> import numtile as nt
>>> with using_precision("tf32"):
...     gemm_rounding()
(10, 23)
>>> gemm_rounding()
(23, 23)
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import warnings
from collections.abc import Iterator

MODES = ("fp32", "bf16-mixed", "fp32-fast-bf16", "tf32")
FULL = 23  # float32's mantissa bits: no rounding
BF16_BITS, TF32_BITS = 7, 10
# (input mantissa bits, output mantissa bits) of each mode's GEMMs
_ROUNDING = {
    "fp32": (FULL, FULL),
    "fp32-fast-bf16": (BF16_BITS, FULL),
    "tf32": (TF32_BITS, FULL),
    "bf16-mixed": (BF16_BITS, BF16_BITS),
}
_CURRENT = contextvars.ContextVar("numtile_precision", default="fp32")


class PrecisionFallbackWarning(UserWarning):
    """A precision mode runs on hardware without the units it is meant for (said once)."""


def check_mode(mode: str) -> str:
    """``mode`` if it is one of ``MODES``, else ``ValueError`` listing them.

    >>> check_mode("bf16-mixed")
    'bf16-mixed'
    """
    if mode not in MODES:
        raise ValueError(f"precision must be one of {', '.join(MODES)}; got {mode!r}")
    return mode


def current_precision() -> str:
    """The mode GEMMs are submitted under now (``"fp32"`` outside any ``using_precision``)."""
    return _CURRENT.get()


@contextlib.contextmanager
def using_precision(mode: str | None) -> Iterator[str]:
    """Submit the GEMMs of the block under ``mode`` (``None``: leave the current one)."""
    if mode is None:
        yield current_precision()
        return
    token = _CURRENT.set(check_mode(mode))
    try:
        yield mode
    finally:
        _CURRENT.reset(token)


def gemm_rounding(mode: str | None = None) -> tuple[int, int]:
    """(input, output) mantissa bits kept by the GEMMs of ``mode`` (default: the current)."""
    return _ROUNDING[check_mode(mode or current_precision())]


@functools.cache
def cpu_features() -> frozenset[str]:
    """The host CPU's feature flags as LLVM names them (``avx512bf16``, ``amx-bf16``, ...)."""
    from llvmlite import binding

    features = binding.get_host_cpu_features()
    return frozenset(name for name, enabled in features.items() if enabled)


def cpu_has_bf16_gemm() -> bool:
    """True when the CPU multiplies bfloat16 natively (AVX512-BF16 or AMX-BF16)."""
    return bool({"avx512bf16", "amx-bf16"} & cpu_features())


# oneDNN's AMX matmul against oneMKL's bf16 GEMM, one thread (thread CPU time, Sapphire Rapids):
# 1.1-2.0x oneMKL's rate for inner dimensions up to 768, level at 1024, 0.66-0.92x from 1536
# on (M, N of 512-4096); so each GEMM goes to the faster of the two where both are installed
ONEDNN_INNER_LIMIT = 1024


def bf16_gemm_library(ops) -> str | None:
    """The libraries behind the bf16 GEMM of a CPU worker (``ops``: ``numtile.ops_cpu``) where
    the CPU has bf16 units and their wheels are installed: ``"oneDNN"``, ``"oneMKL"``, or both
    (``"oneDNN + oneMKL"``: oneDNN for inner dimensions under ``ONEDNN_INNER_LIMIT``, oneMKL
    from there); None: widen + sgemm."""
    if not cpu_has_bf16_gemm():
        return None
    found = [
        name
        for name, available in (
            ("oneDNN", ops.onednn_bf16_available),
            ("oneMKL", ops.mkl_bf16_available),
        )
        if available()
    ]
    return " + ".join(found) or None


def bf16_gemm(ops):
    """The bf16 x bf16 -> float32 GEMM kernel of a CPU worker (``bf16_gemm_library``'s, or
    the exact widen-and-sgemm fallback)."""
    library = bf16_gemm_library(ops)
    if library == "oneDNN + oneMKL":
        return _by_inner(ops.gemm_bf16_onednn, ops.gemm_bf16_mkl)
    if library == "oneDNN":
        return ops.gemm_bf16_onednn
    return ops.gemm_bf16_mkl if library == "oneMKL" else ops.gemm_bf16


@functools.cache
def _by_inner(small, large):
    """A GEMM calling ``small`` for inner dimensions under ``ONEDNN_INNER_LIMIT``, else
    ``large``."""

    def gemm(a, b, c, trans_a, trans_b, alpha, beta):
        inner = a.shape[0] if trans_a else a.shape[1]
        kernel = small if inner < ONEDNN_INNER_LIMIT else large
        kernel(a, b, c, trans_a, trans_b, alpha, beta)

    return gemm


def fused_bf16_linear(ops, inner: int):
    """oneDNN's matmul writing a bfloat16 output with its bias (``linear_bf16_onednn``) for a
    CPU worker's GEMM of ``inner`` products, where that GEMM is oneDNN's; else None."""
    library = bf16_gemm_library(ops) or ""
    if library == "oneDNN" or (library.startswith("oneDNN") and inner < ONEDNN_INNER_LIMIT):
        return ops.linear_bf16_onednn
    return None


def cpu_fallback(mode: str) -> str | None:
    """What the CPU does instead of ``mode``'s hardware GEMM, or None when it has the units.

    >>> cpu_fallback("fp32") is None
    True
    """
    check_mode(mode)
    if mode == "tf32":
        return (
            "TF32 is a GPU tensor-core format (NVIDIA sm_80 and newer): on the CPU, tf32 "
            "rounds the GEMM inputs to TF32 (10-bit mantissa) and multiplies them with the "
            "float32 sgemm, the same numbers with no speed-up"
        )
    if mode in ("bf16-mixed", "fp32-fast-bf16") and not cpu_has_bf16_gemm():
        return (
            "this CPU has no AVX512-BF16 or AMX-BF16 units: the bf16 GEMM widens its bfloat16 "
            "inputs to float32 and runs the float32 sgemm (exact: a product of two bfloat16 "
            "values is exact in float32), so bf16 GEMMs run at float32 speed here"
        )
    return None


TENSOR_CORES = (8, 0)  # the compute capability of bf16 and TF32 tensor cores (Ampere)


def gpu_fallback(mode: str, gpus) -> str | None:
    """What the GPUs older than sm_80 among ``gpus`` ((name, compute capability) pairs) do
    instead of ``mode``'s tensor-core GEMM, or None when none of them falls back.

    >>> gpu_fallback("tf32", [("cuda0", (8, 0))]) is None
    True
    """
    check_mode(mode)
    old = [
        f"{name} (sm_{major}{minor})"
        for name, (major, minor) in gpus
        if (major, minor) < TENSOR_CORES
    ]
    if mode == "fp32" or not old:
        return None
    kind = "TF32" if mode == "tf32" else "bf16"
    rounding = (
        "round their float32 inputs to TF32" if mode == "tf32" else "widen bfloat16 to float32"
    )
    return (
        f"{', '.join(old)} {'is' if len(old) == 1 else 'are'} older than sm_80 and has no {kind} "
        f"tensor cores: its GEMMs {rounding} with a @cuda.jit kernel and run the float32 GEMM "
        f"(cuBLAS sgemm), the same numbers with no speed-up"
    )


def gpu_capabilities() -> list[tuple[str, tuple[int, int]]]:
    """(name, compute capability) of the current runtime's GPUs (none without CUDA workers)."""
    from numtile.runtime import get_runtime

    found = {}
    for node in get_runtime().nodes:
        capability = getattr(getattr(node, "device", None), "compute_capability", None)
        if capability is not None:
            found[node.name] = tuple(capability)
    return list(found.items())


_WARNED: set[tuple[str, str]] = set()


def warn_fallback(mode: str) -> str | None:
    """Warn once per process, mode and kind of worker when the CPU (``cpu_fallback``) or a GPU
    (``gpu_fallback``) falls back; returns the messages, or None."""
    messages = {"cpu": cpu_fallback(mode), "gpu": gpu_fallback(mode, gpu_capabilities())}
    for kind, message in messages.items():
        if message and (mode, kind) not in _WARNED:
            _WARNED.add((mode, kind))
            warnings.warn(f"precision {mode!r}: {message}", PrecisionFallbackWarning, stacklevel=3)
    said = [m for m in messages.values() if m]
    return "; ".join(said) if said else None
