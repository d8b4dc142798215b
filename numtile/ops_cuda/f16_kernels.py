"""CUDA element-wise and reduction kernels on float16 bits (twins of the ``f16_*`` kernels of
``ops_cpu.bf16_kernels``): the loops of ``ops_cuda.bf16_kernels`` with float16's conversions.

A float16 element is widened in a register by integer arithmetic (exact: subnormals scaled,
infinities and NaN payloads moved into place) and a float32 result rounded once to nearest
even, bit for bit as ``ops_cpu.f16_kernels`` (and NumPy) convert: overflow to infinity, a NaN
keeps the upper 10 bits of its payload (0x7c01 where those are zero). The bit casts are those of
``bf16_kernels`` (libdevice on a GPU, NumPy views under the simulator).
"""

from __future__ import annotations

import functools

import numpy as np

from numtile.ops_cuda import bf16_kernels
from numtile.ops_cuda.bf16_kernels import Format, _as_bits, _as_float
from numtile.ops_cuda.launch import DeviceArray, device_function

__all__ = [
    "f16_binary",
    "f16_compare",
    "f16_predicate",
    "f16_reduce_accumulate",
    "f16_unary",
    "f16_unary_backward",
]


@device_function
def _f16_widened(bits):
    """The float32 value of float16 bits (exact)."""
    h = np.uint32(bits)
    magnitude = np.uint32(h & np.uint32(0x7FFF))
    if magnitude >= np.uint32(0x7C00):  # infinity or NaN
        body = np.uint32((magnitude << np.uint32(13)) | np.uint32(0x7F800000))
    elif magnitude < np.uint32(0x0400):  # zero or subnormal: a multiple of 2**-24
        body = _as_bits(np.float32(magnitude) * np.float32(2.0**-24))
    else:  # rebias the exponent: 127 - 15
        body = np.uint32((magnitude << np.uint32(13)) + np.uint32(112 << 23))
    return _as_float(np.uint32(body | ((h & np.uint32(0x8000)) << np.uint32(16))))


@device_function
def _f16_rounded(value):
    """The float16 bits nearest the float32 ``value`` (ties to even; past 65520: infinity;
    NaN: the upper 10 bits of its payload, at least 1)."""
    u = _as_bits(value)
    size = np.uint32(u & np.uint32(0x7FFFFFFF))
    if size >= np.uint32(143 << 23):  # |value| >= 2**16
        body = np.uint32(0x7C00)
        if size > np.uint32(0x7F800000):
            body = np.uint32(body | ((size & np.uint32(0x007FFFFF)) >> np.uint32(13)))
            if body == np.uint32(0x7C00):
                body = np.uint32(0x7C01)
    elif size < np.uint32(113 << 23):  # |value| < 2**-14: 0.5's ulp is float16's least bit
        aligned = _as_bits(_as_float(size) + np.float32(0.5))
        body = np.uint32(aligned - np.uint32(126 << 23))
    else:
        odd = (size >> np.uint32(13)) & np.uint32(1)
        rebiased = np.uint32(size - np.uint32(112 << 23))
        body = np.uint32((rebiased + np.uint32(0x0FFF) + odd) >> np.uint32(13))
    return np.uint16(body | ((u >> np.uint32(16)) & np.uint32(0x8000)))


F16 = Format("f16", _f16_widened, _f16_rounded, functools.partial(np.dtype, np.float16))


def f16_unary(x: DeviceArray, out: DeviceArray, op: int, *, stream=0) -> None:
    """out[i] = f(x[i]) for the unary op ``op`` (a code of UNARY_OPS) on float16 bits."""
    bf16_kernels.unary(F16, x, out, op, stream)


def f16_predicate(x: DeviceArray, out: DeviceArray, op: int, *, stream=0) -> None:
    """Boolean out[i] = p(x[i]) for the predicate ``op`` (a code of PREDICATE_OPS) of float16
    bits."""
    bf16_kernels.predicate(F16, x, out, op, stream)


def f16_unary_backward(
    x: DeviceArray, grad_out: DeviceArray, grad_in: DeviceArray, op: int, *, stream=0
) -> None:
    """grad_in[i] = grad_out[i] * f'(x[i]) for ``op`` (a code of UNARY_BACKWARD_OPS), each array
    float16 bits or float32."""
    bf16_kernels.unary_backward(F16, x, grad_out, grad_in, op, stream)


def f16_binary(
    a: DeviceArray, a_strides, b: DeviceArray, b_strides, out: DeviceArray, shape, op, *, stream=0
) -> None:
    """out = op(a, b) broadcast over ``shape`` (a code of BINARY_OPS, BINARY_MATH's included)
    on float16 bits; either operand may be a host scalar (a float16 value)."""
    bf16_kernels.binary(F16, a, a_strides, b, b_strides, out, shape, op, stream)


def f16_compare(
    a: DeviceArray, a_strides, b: DeviceArray, b_strides, out: DeviceArray, shape, op, *, stream=0
) -> None:
    """Boolean out = op(a, b) broadcast over ``shape`` (a code of COMPARE_OPS) of float16 bits;
    either operand may be a host scalar."""
    bf16_kernels.compare(F16, a, a_strides, b, b_strides, out, shape, op, stream)


def f16_reduce_accumulate(
    x: DeviceArray, out: DeviceArray, pre: int, n: int, post: int, op: int, *, stream=0
) -> None:
    """out[p, q] = combine(out[p, q], reduction over j of x[p, j, q]) for ``op`` (a code of
    REDUCE_OPS): x float16 bits, out float32 partials; accumulated in float64."""
    bf16_kernels.reduce_accumulate(F16, x, out, pre, n, post, op, stream)
