"""Element-wise maths through oneMKL's Vector Math library (VML), where it beats our kernels.

Our float32/float64 kernels vectorise exp, log, sin, cos, tan and pow (``fastmath*``); the
other functions (log1p, expm1, asin, atan2...) call libm once per element. VML computes whole
arrays with SIMD code for every function. ``unary`` and ``binary`` below run an op through
VML when MKL loads (``mkl_lib.library()``), the switch is on (``NUMTILE_VML``, default on;
``set_enabled``), the op is routed for this CPU's vendor (``cpu_vendor``: the first table below
on Intel CPUs and where the vendor is unknown, the second on AMD's and others', where MKL runs
generic code paths), the dtypes are one of
float32/float64 throughout and the operands are dense (no broadcasting, strides or fusion:
those stay on our kernels); they return False otherwise and the caller runs its own kernel.

Every call passes its mode explicitly (the ``vm*`` functions), so no thread's global VML mode
is read or changed: HA (high accuracy, at most 1 ulp), FTZ/DAZ off (subnormal inputs and
results kept, whatever MXCSR holds) and ERRMODE_IGNORE (no errno, no stderr, no callback, no
floating-point exception: C99's special values are the results and nothing else happens; the
thread's VML error status, which IGNORE still sets, is put back as it was). ERRMODE_NOERR,
which would skip the status, is not used: with it, vmsExp returns NaN for +inf (MKL 2026.2).
The ``_64`` entry points take the element count as a 64-bit integer, whatever MKL interface
layer is loaded. ctypes releases the GIL during the call, so runtime workers call VML in parallel;
MKL runs its sequential layer (one thread per call).

Intel CPUs: routed where VML measured faster than our kernel of the op, one thread (``python
bench/vector_width.py --vml``: CPU ns an element, medians of 7-15 interleaved rounds, in L2 at
64K elements / at a tile's size, 4M elements; 2-core Xeon with AVX-512, load 6.5-7,
2026-12-06; float32 exp, sin, cos: 16K / 4M elements, load 3.3-3.5, the same day):

=========== ============================= =============================
op          float32 VML vs ours           float64 VML vs ours
=========== ============================= =============================
exp         not routed: 0.95 vs 0.41,     0.93 vs 2.12, 1.82 vs 2.46
            0.72 vs 0.64
log         0.61 vs 1.38, 0.97 vs 3.02    1.54 vs 2.36, 1.86 vs 2.59
sin         not routed: 1.32 vs 0.71,     1.65 vs 3.01, 1.98 vs 3.36
            1.20 vs 1.04
cos         not routed: 1.37 vs 0.69,     1.71 vs 2.96, 2.05 vs 3.25
            1.28 vs 1.02
tan         1.12 vs 1.55, 1.50 vs 2.14    1.89 vs 5.77, 2.09 vs 5.48
tanh        not routed                    2.75 vs 30.8, 2.19 vs 27.6
power       1.30 vs 2.85, 1.44 vs 2.72    2.93 vs 10.1, 2.75 vs 10.7
=========== ============================= =============================

float32 exp, sin and cos are ``fastmath_blocks``' (0.79-0.83 ulp; VML's HA mode is within 1;
at 256K elements, in L2, VML/ours 1.30, 1.23, 1.34): a short kernel over the ordinary
arguments, whose large outputs also stream past the caches, which VML's cannot.

float32 power is VML's only where the CPU lacks AVX-512: elsewhere ``pow_avx512``'s kernel
(float32 lanes, 32-entry tables in registers by vpermi2ps, 0.55 ulp) takes 0.64-0.67 ns an
element against VML's 0.92-1.20 and NumPy's 0.74-0.84 (one thread, medians of 9-11
interleaved rounds at 16K, 64K and 4M elements, load 1.7-2.7, 2026-12-06). ``fastmath_pow``'s
float64 kernel reduced to such a fast path had taken 2.2-2.4: LLVM's vectoriser does not make
table lookups in registers from scalar code.

expm1, log1p, log2, log10, asin, acos, atan, sinh, cosh, asinh, acosh, atanh, atan2 and hypot,
whose loops here call libm once an element, take 4-50x less time through VML (VML/ours
0.02-0.23 in L2, load 3.4). Not routed: float32 tanh (our rational approximation, a few ulp:
0.68 vs VML's 0.75 in cache, though 2.43 vs 1.79 at 4M), sqrt (one instruction in our loops;
float32 0.35 vs 0.54 in cache), reciprocal and the rest (no VML function), integer, complex and
16-bit float dtypes (bfloat16/float16 kernels stay ours; a float32 kernel that an op widens
them for may be VML's).

AMD and other CPUs (``cpu_vendor`` not GenuineIntel): routed where VML measured faster here,
one thread (``python bench/vector_width.py --vml``, CPU ns an element, medians of 7 / 5
interleaved rounds at 64K / 4M elements; AMD EPYC Zen 3, 2 cores, AVX2 and no AVX-512, shared,
load 4.7-4.9, 2026-12-07). VML's exp, log, sin, cos and tan lose here to our kernels by 1.05-3.4x
in either precision; power goes to ``pow_blocks`` in both (64K elements, 11 interleaved rounds,
load 6.7: float32 3.34 against VML's 6.29, float64 7.54 against 11.50; at 4M, 7 rounds, load
6.9: 3.12 against 5.83, 10.49 against 10.70; float64 had stayed on VML while ``pow_blocks``
took 12.88 against its 10.99, before ``fastmath.opaque``):

=========== ============================= =============================
op          float32 VML vs ours           float64 VML vs ours
=========== ============================= =============================
exp         not routed: 2.04 vs 0.60,     not routed: 3.81 vs 2.48,
            1.74 vs 0.96                  3.65 vs 2.49
log         not routed: 2.36 vs 1.61,     not routed: 4.73 vs 3.43,
            2.10 vs 1.71                  4.34 vs 3.43
sin, cos    not routed: 2.66 vs 1.11,     not routed: 6.41 vs 5.10,
            2.24 vs 1.53 (sin)            5.34 vs 5.09 (cos)
tan         not routed: 3.94 vs 2.39      not routed: 11.8 vs 8.76
tanh        not routed: 5.20 vs 0.74      9.94 vs 32.7, 9.18 vs 34.3
expm1       16.3 vs 22.6, 16.3 vs 21.3    16.2 vs 22.0, 15.8 vs 23.6
log1p       16.8 vs 21.5, 15.8 vs 21.7    14.4 vs 19.8, 14.3 vs 19.7
log2, log10 2.17 vs 5.40, 2.25 vs 13.8    4.83 vs 8.09, 5.07 vs 16.2
asin, acos  3.13 vs 14.1, 3.17 vs 15.1    7.71 vs 22.6, 9.33 vs 24.0
atan        5.59 vs 16.8, 5.05 vs 17.2    14.7 vs 18.0, 11.9 vs 18.0
sinh        17.7 vs 36.9, 16.9 vs 34.3    6.23 vs 34.8, 5.66 vs 34.0
cosh        not routed: 15.2 vs 12.7      4.65 vs 14.9, 4.17 vs 14.7
asinh       not routed: 50.7 vs 20.7      not routed: 97.2 vs 24.7
acosh       not routed: 53.9 vs 14.0      not routed: 54.5 vs 16.5
atanh       4.70 vs 35.3, 4.65 vs 34.8    not routed: 35.0 vs 34.3, 33.6 vs 33.5
power       not routed: ``pow_blocks``    not routed: ``pow_blocks``
            (3.34 vs VML's 6.29)          (7.54 vs VML's 11.50)
atan2       6.66 vs 35.9, 5.83 vs 35.8    14.2 vs 36.8, 14.5 vs 36.8
hypot       not routed: 30.2 vs 5.13      not routed: 40.4 vs 15.5
=========== ============================= =============================
"""

from __future__ import annotations

import ctypes
import functools
import platform

import numpy as np

from numtile import opcodes
from numtile.config import Config
from numtile.ops_cpu.mkl_lib import library
from numtile.ops_cpu.per_op import c_contiguous

# mkl_vml_defines.h: high accuracy, FTZ/DAZ off during the call, errors ignored
_VML_HA = 0x2
_VML_FTZDAZ_OFF = 0x140000
_VML_ERRMODE_IGNORE = 0x100
MODE = _VML_HA | _VML_FTZDAZ_OFF | _VML_ERRMODE_IGNORE

# op code -> VML function name (after the vms/vmd prefix), the precisions routed on Intel CPUs,
# those routed on others (the two tables of the module's docstring)
_BOTH, _DOUBLE, _SINGLE, _NONE = ("s", "d"), ("d",), ("s",), ()
UNARY = {
    opcodes.EXP: ("Exp", _DOUBLE, _NONE),
    opcodes.LOG: ("Ln", _BOTH, _NONE),
    opcodes.SIN: ("Sin", _DOUBLE, _NONE),
    opcodes.COS: ("Cos", _DOUBLE, _NONE),
    opcodes.TAN: ("Tan", _BOTH, _NONE),
    opcodes.TANH: ("Tanh", _DOUBLE, _DOUBLE),
    opcodes.EXPM1: ("Expm1", _BOTH, _BOTH),
    opcodes.LOG1P: ("Log1p", _BOTH, _BOTH),
    opcodes.LOG2: ("Log2", _BOTH, _BOTH),
    opcodes.LOG10: ("Log10", _BOTH, _BOTH),
    opcodes.ASIN: ("Asin", _BOTH, _BOTH),
    opcodes.ACOS: ("Acos", _BOTH, _BOTH),
    opcodes.ATAN: ("Atan", _BOTH, _BOTH),
    opcodes.SINH: ("Sinh", _BOTH, _BOTH),
    opcodes.COSH: ("Cosh", _BOTH, _DOUBLE),
    opcodes.ASINH: ("Asinh", _BOTH, _NONE),
    opcodes.ACOSH: ("Acosh", _BOTH, _NONE),
    opcodes.ATANH: ("Atanh", _BOTH, _SINGLE),
}
BINARY = {
    opcodes.POWER: ("Pow", _BOTH, _NONE),
    opcodes.ATAN2: ("Atan2", _BOTH, _BOTH),
    opcodes.HYPOT: ("Hypot", _BOTH, _NONE),
}
_PRECISION = {np.dtype(np.float32): "s", np.dtype(np.float64): "d"}
_POINTER, _COUNT = ctypes.c_void_p, ctypes.c_int64

_switch: dict[str, bool] = {}


def enabled() -> bool:
    """True where element-wise maths may go to VML: MKL loads and the switch is on."""
    if "on" not in _switch:
        _switch["on"] = Config.defaults().vml
    return _switch["on"] and library() is not None


def set_enabled(on: bool) -> bool:
    """Turns the VML path on or off for this process (``NUMTILE_VML`` sets the default);
    returns the previous setting."""
    previous = enabled() if "on" not in _switch else _switch["on"]
    _switch["on"] = bool(on)
    return previous


@functools.cache
def _function(name: str, precision: str, operands: int):
    """VML's ``vm<precision><name>_64`` with its argument types (n, operands..., r, mode)."""
    function = getattr(library(), f"vm{precision}{name}_64")
    function.argtypes = [_COUNT] + [_POINTER] * (operands + 1) + [_COUNT]
    function.restype = None
    return function


@functools.cache
def cpu_vendor() -> str:
    """The host CPU's vendor ("GenuineIntel", "AuthenticAMD"...) as /proc/cpuinfo's
    ``vendor_id`` (elsewhere: ``platform.processor()``, which names it on Windows), read
    once; "" where neither says."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    words = platform.processor().replace(",", " ").split()
    return next((word for word in words if word in ("GenuineIntel", "AuthenticAMD")), "")


def intel_table() -> bool:
    """True where the routing of Intel CPUs applies: an Intel CPU, or one whose vendor is not
    known (the routing before vendors were told apart); False on AMD and other vendors, where
    MKL runs slower generic code paths."""
    return cpu_vendor() in ("GenuineIntel", "")


def _routed(table, code, dtype) -> str | None:
    """The VML function name of ``code`` for ``dtype`` on this CPU (None where not routed)."""
    entry = table.get(code)
    if entry is None or _PRECISION.get(dtype) not in entry[1 if intel_table() else 2]:
        return None
    return entry[0]


def routes(name: str, dtype) -> bool:
    """True where VML computes op ``name`` (of UNARY_OPS or BINARY_OPS) on dense tiles of
    ``dtype``: the fused kernels (``fusion``), which inline our scalar functions, then differ
    from the unfused op by up to an ulp."""
    if not enabled():
        return False
    for codes, table in ((opcodes.UNARY_OPS, UNARY), (opcodes.BINARY_OPS, BINARY)):
        if name in codes and _routed(table, codes[name], np.dtype(dtype)) is not None:
            return True
    return False


def _dense(array, size) -> bool:
    return array.size == size and array.flags.c_contiguous


def run(name: str, *arrays) -> None:
    """VML's function ``name`` (``"Exp"``, ``"Pow"``...; single or double precision by the
    output's dtype) over C-contiguous ``arrays`` of one float dtype and size, inputs then the
    output, in MODE; the thread's VML error status is left as it was (ERRMODE_IGNORE still
    records domain errors and overflows there)."""
    lib, out = library(), arrays[-1]
    status = lib.vmlGetErrStatus()
    function = _function(name, _PRECISION[out.dtype], len(arrays) - 1)
    function(out.size, *(array.__array_interface__["data"][0] for array in arrays), MODE)
    if lib.vmlGetErrStatus() != status:
        lib.vmlSetErrStatus(status)


def unary(x, out, code: int) -> bool:
    """out = op(x) through VML for the UNARY_OPS code ``code``; False (nothing done) where the
    op, dtypes or layout are not routed."""
    routed = _routed(UNARY, code, out.dtype)
    if routed is None or x.dtype != out.dtype or not enabled():
        return False
    if not (_dense(x, out.size) and out.flags.c_contiguous):
        return False
    if out.size:
        run(routed, x, out)
    return True


def binary(a, a_strides, b, b_strides, out, shape, code: int) -> bool:
    """out = op(a, b) through VML for the BINARY_OPS code ``code`` where a and b both hold
    every element of ``shape`` in C order; False (nothing done) otherwise."""
    routed = _routed(BINARY, code, out.dtype)
    if routed is None or not (a.dtype == b.dtype == out.dtype) or not enabled():
        return False
    size = out.size
    if not (_dense(a, size) and _dense(b, size) and out.flags.c_contiguous):
        return False
    if not (c_contiguous(a_strides, shape) and c_contiguous(b_strides, shape)):
        return False
    if size:
        run(routed, a, b, out)
    return True


__all__ = [
    "BINARY",
    "MODE",
    "UNARY",
    "binary",
    "cpu_vendor",
    "enabled",
    "intel_table",
    "run",
    "set_enabled",
    "unary",
]
