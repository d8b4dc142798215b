"""CUDA element-wise and reduction kernels on bfloat16 bits (twins of
``ops_cpu.bf16_kernels``): uint16 arrays hold bfloat16 bit patterns, float32 ones are read and
written as they are.

Each element is widened in a register (its bits the upper half of a float32), the float32
device function of the op (``elementwise.unary_function(float32)``... the float32 kernels'
own) writes its result into a one-element local array, and that is rounded once to nearest
even when stored (NaN to the quiet NaN of its sign, as ``bf16._narrow_kernel`` and
``__float2bfloat16_rn``). The bit reinterpretations are libdevice's ``__nv_int_as_float`` and
``__nv_float_as_int`` on a GPU, NumPy views under the simulator (which runs kernels as Python).
ml_dtypes, for bfloat16 host scalars, is imported on first use (its import takes about 1.2 s).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import NamedTuple

import numba
import numpy as np
from numba import cuda

from numtile import opcodes
from numtile.cuda_driver import SIMULATOR
from numtile.ops_cuda import elementwise
from numtile.ops_cuda.elementwise import _broadcast, _check_op, _operands
from numtile.ops_cuda.launch import DeviceArray, device_function, is_host, launch
from numtile.ops_cuda.reduction import _launch_middle, _reduce_kernels

__all__ = [
    "bf16_binary",
    "bf16_compare",
    "bf16_predicate",
    "bf16_reduce_accumulate",
    "bf16_unary",
    "bf16_unary_backward",
]

_FLOAT32 = np.dtype(np.float32)
_BITS = np.dtype(np.uint16)
_TAKEN = (_BITS, _FLOAT32, np.dtype(np.bool_))  # bool: the outputs of comparisons

if SIMULATOR:

    @device_function
    def _as_float(bits):
        return np.uint32(bits).view(np.float32)

    @device_function
    def _as_bits(value):
        return np.float32(value).view(np.uint32)

else:
    from numba.cuda import libdevice

    @device_function
    def _as_float(bits):
        return libdevice.int_as_float(np.int32(bits))

    @device_function
    def _as_bits(value):
        return np.uint32(libdevice.float_as_int(value))


@device_function
def _widened(bits):
    """The float32 value of bfloat16 bits (exact)."""
    return _as_float(np.uint32(bits) << np.uint32(16))


@device_function
def _rounded(value):
    """The bfloat16 bits nearest the float32 ``value`` (ties to even; NaN: the quiet NaN of
    its sign)."""
    u = _as_bits(value)
    upper = u >> np.uint32(16)
    if (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000):
        return np.uint16((upper & np.uint32(0x8000)) | np.uint32(0x7FC0))
    return np.uint16((u + np.uint32(0x7FFF) + (upper & np.uint32(1))) >> np.uint32(16))


@device_function
def _as_is(value):
    return value


class Format(NamedTuple):
    """A 16-bit float format of the kernels: how uint16 bits widen to float32 and a float32
    rounds to bits on the device, and a function giving its NumPy dtype (for host scalar
    operands; bfloat16's comes from ml_dtypes, imported when first needed)."""

    name: str
    widen: object
    round_to: object
    numpy_dtype: Callable[[], np.dtype]


@functools.cache
def _bfloat16() -> np.dtype:
    """ml_dtypes' bfloat16, its module imported on the first call."""
    import ml_dtypes

    return np.dtype(ml_dtypes.bfloat16)


BF16 = Format("bf16", _widened, _rounded, _bfloat16)


def _load(dtype, fmt: Format):
    """How a kernel reads an element of ``dtype``: 16-bit bits widened, float32 as it is."""
    return fmt.widen if np.dtype(dtype) == _BITS else _as_is


def _store(dtype, fmt: Format):
    """How a kernel writes a float32 result into ``dtype``: rounded to bits, else as it is."""
    return fmt.round_to if np.dtype(dtype) == _BITS else _as_is


def _check(fmt: Format, *arrays) -> None:
    for array in arrays:
        if not is_host(array) and np.dtype(array.dtype) not in _TAKEN:
            raise TypeError(
                f"{fmt.name} kernels take uint16 bits, float32 or bool arrays, got {array.dtype}"
            )


@functools.cache
def _unary_kernel(x_dtype, out_dtype, fmt: Format):
    apply = elementwise.unary_function(_FLOAT32)
    load, store = _load(x_dtype, fmt), _store(out_dtype, fmt)

    @cuda.jit
    def kernel(x, out, op):
        wide = cuda.local.array(1, numba.float32)
        for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
            apply(load(x[i]), op, wide, 0)
            out[i] = store(wide[0])

    return kernel


@functools.cache
def _predicate_kernel(fmt: Format):
    widen = fmt.widen

    @cuda.jit
    def kernel(x, out, op):
        for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
            v = widen(x[i])
            if op == opcodes.ISNAN:
                out[i] = math.isnan(v)
            elif op == opcodes.ISINF:
                out[i] = math.isinf(v)
            elif op == opcodes.ISFINITE:
                out[i] = math.isfinite(v)
            elif op == opcodes.SIGNBIT:
                out[i] = math.copysign(np.float32(1), v) < 0

    return kernel


@functools.cache
def _unary_backward_kernel(x_dtype, grad_dtype, out_dtype, fmt: Format):
    apply = elementwise.unary_backward_function(_FLOAT32)
    load_x, load_grad = _load(x_dtype, fmt), _load(grad_dtype, fmt)
    store = _store(out_dtype, fmt)

    @cuda.jit
    def kernel(x, grad_out, grad_in, op):
        wide = cuda.local.array(1, numba.float32)
        for i in range(cuda.grid(1), grad_in.size, cuda.gridsize(1)):
            apply(load_x(x[i]), load_grad(grad_out[i]), op, wide, 0)
            grad_in[i] = store(wide[0])

    return kernel


@functools.cache
def _broadcast_kernel(apply, result, a_dtype, b_dtype, out_dtype, fmt: Format = BF16):
    """The broadcasting kernel of the float32 device function ``apply`` (results of numba
    type ``result``: float32, or boolean for comparisons)."""
    load_a, load_b, store = _load(a_dtype, fmt), _load(b_dtype, fmt), _store(out_dtype, fmt)

    @cuda.jit
    def kernel(a, a_value, a_kind, a_strides, b, b_value, b_kind, b_strides, out, shape, op):
        wide = cuda.local.array(1, result)
        strided = a_kind == elementwise._STRIDED or b_kind == elementwise._STRIDED
        for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
            x, y = _operands(
                i, shape, strided, a, a_value, a_kind, a_strides, b, b_value, b_kind, b_strides
            )
            apply(load_a(x), load_b(y), op, wide, 0)
            out[i] = store(wide[0])

    return kernel


def _binary_function(op: int):
    if op in opcodes.BINARY_MATH:
        return elementwise.binary_math_function(_FLOAT32)
    return elementwise.binary_function(_FLOAT32)


def _host_bits(operand, device, fmt: Format):
    """A host scalar operand as the bits of the 16-bit float it holds when the device operand
    is bits (the tiled ops round Python scalars to the tile's dtype first: exact)."""
    if not is_host(operand) or np.dtype(device.dtype) != _BITS:
        return operand
    value = np.asarray(operand, np.float32).reshape(-1)
    narrow = value.astype(fmt.numpy_dtype())
    back = narrow.astype(np.float32)
    if not np.array_equal(back, value, equal_nan=True):
        raise ValueError(
            f"a scalar operand of a {fmt.name} kernel must be a {fmt.numpy_dtype()}, got {value}"
        )
    return narrow.view(np.uint16)


def _broadcast_bits(fmt, apply, result, a, a_strides, b, b_strides, out, shape, op, stream):
    _check(fmt, a, b, out)
    a, b = _host_bits(a, b, fmt), _host_bits(b, a, fmt)
    a_dtype = b.dtype if is_host(a) else a.dtype  # a host operand stands in as the other
    b_dtype = a.dtype if is_host(b) else b.dtype
    dtypes = (np.dtype(a_dtype), np.dtype(b_dtype), np.dtype(out.dtype))
    kernel = _broadcast_kernel(apply, result, *dtypes, fmt)
    _broadcast(kernel, a, a_strides, b, b_strides, out, shape, op, stream)


def unary(fmt: Format, x, out, op: int, stream) -> None:
    """out[i] = f(x[i]) for the unary op ``op`` on the bits of ``fmt``."""
    op = _check_op(op, opcodes.UNARY_OPS, f"{fmt.name}_unary")
    _check(fmt, x, out)
    kernel = _unary_kernel(np.dtype(x.dtype), np.dtype(out.dtype), fmt)
    launch(kernel, out.size, stream, x, out, op)


def predicate(fmt: Format, x, out, op: int, stream) -> None:
    """Boolean out[i] = p(x[i]) for the predicate ``op`` of the bits of ``fmt``."""
    op = _check_op(op, opcodes.PREDICATE_OPS, f"{fmt.name}_predicate")
    _check(fmt, x, out)
    launch(_predicate_kernel(fmt), out.size, stream, x, out, op)


def unary_backward(fmt: Format, x, grad_out, grad_in, op: int, stream) -> None:
    """grad_in[i] = grad_out[i] * f'(x[i]) for ``op``, each array bits of ``fmt`` or float32."""
    op = _check_op(op, opcodes.UNARY_BACKWARD_OPS, f"{fmt.name}_unary_backward")
    _check(fmt, x, grad_out, grad_in)
    dtypes = (np.dtype(t.dtype) for t in (x, grad_out, grad_in))
    kernel = _unary_backward_kernel(*dtypes, fmt)
    launch(kernel, grad_in.size, stream, x, grad_out, grad_in, op)


def binary(fmt: Format, a, a_strides, b, b_strides, out, shape, op, stream) -> None:
    """out = op(a, b) broadcast over ``shape`` (a code of BINARY_OPS) on the bits of ``fmt``."""
    op = _check_op(op, opcodes.BINARY_OPS, f"{fmt.name}_binary")
    apply = _binary_function(op)
    _broadcast_bits(fmt, apply, numba.float32, a, a_strides, b, b_strides, out, shape, op, stream)


def compare(fmt: Format, a, a_strides, b, b_strides, out, shape, op, stream) -> None:
    """Boolean out = op(a, b) broadcast over ``shape`` (a code of COMPARE_OPS) of the bits of
    ``fmt``."""
    op = _check_op(op, opcodes.COMPARE_OPS, f"{fmt.name}_compare")
    apply = elementwise.compare_function
    _broadcast_bits(fmt, apply, numba.boolean, a, a_strides, b, b_strides, out, shape, op, stream)


def reduce_accumulate(fmt: Format, x, out, pre: int, n: int, post: int, op: int, stream) -> None:
    """out[p, q] = combine(out[p, q], reduction over j of x[p, j, q]) for ``op``: x the bits
    of ``fmt``, out float32 partials; accumulated in float64 as the float32 kernel's."""
    op = _check_op(op, opcodes.REDUCE_OPS, f"{fmt.name}_reduce_accumulate")
    _check(fmt, x, out)
    kernels = _reduce_kernels(numba.float64, numba.float64, _load(x.dtype, fmt))
    _launch_middle(kernels, (x, out), pre, n, post, (op,), stream)


def bf16_unary(x: DeviceArray, out: DeviceArray, op: int, *, stream=0) -> None:
    """out[i] = f(x[i]) for the unary op ``op`` (a code of UNARY_OPS) on bfloat16 bits."""
    unary(BF16, x, out, op, stream)


def bf16_predicate(x: DeviceArray, out: DeviceArray, op: int, *, stream=0) -> None:
    """Boolean out[i] = p(x[i]) for the predicate ``op`` (a code of PREDICATE_OPS) of bfloat16
    bits."""
    predicate(BF16, x, out, op, stream)


def bf16_unary_backward(
    x: DeviceArray, grad_out: DeviceArray, grad_in: DeviceArray, op: int, *, stream=0
) -> None:
    """grad_in[i] = grad_out[i] * f'(x[i]) for ``op`` (a code of UNARY_BACKWARD_OPS), each array
    bfloat16 bits or float32."""
    unary_backward(BF16, x, grad_out, grad_in, op, stream)


def bf16_binary(
    a: DeviceArray, a_strides, b: DeviceArray, b_strides, out: DeviceArray, shape, op, *, stream=0
) -> None:
    """out = op(a, b) broadcast over ``shape`` (a code of BINARY_OPS, BINARY_MATH's included)
    on bfloat16 bits; either operand may be a host scalar (a bfloat16 value)."""
    binary(BF16, a, a_strides, b, b_strides, out, shape, op, stream)


def bf16_compare(
    a: DeviceArray, a_strides, b: DeviceArray, b_strides, out: DeviceArray, shape, op, *, stream=0
) -> None:
    """Boolean out = op(a, b) broadcast over ``shape`` (a code of COMPARE_OPS) of bfloat16
    bits; either operand may be a host scalar."""
    compare(BF16, a, a_strides, b, b_strides, out, shape, op, stream)


def bf16_reduce_accumulate(
    x: DeviceArray, out: DeviceArray, pre: int, n: int, post: int, op: int, *, stream=0
) -> None:
    """out[p, q] = combine(out[p, q], reduction over j of x[p, j, q]) for ``op`` (a code of
    REDUCE_OPS): x bfloat16 bits, out float32 partials; accumulated in float64 as the float32
    kernel's."""
    reduce_accumulate(BF16, x, out, pre, n, post, op, stream)
