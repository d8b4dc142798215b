"""CUDA elementwise kernels: unary maps and their derivatives, broadcasting binary ops,
comparisons and axpy (twins of ``ops_cpu.elementwise``, with the op codes of
``numtile.opcodes``).

A kernel takes the op code at run time and branches on it per element (the branch is the same
for every thread, so it costs a few instructions, not divergence). Kernels whose maths needs
constants in the data's precision are built once per dtype by a cached factory over
``scalar_math(dtype)``.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from numtile import opcodes
from numtile.ops_cuda.launch import (
    DeviceArray,
    block,
    coalesce,
    grid,
    host_ints,
    is_c_contiguous,
    is_host,
    offsets2,
)
from numtile.ops_cuda.scalar_math import maximum, minimum, scalar_math

__all__ = ["axpy", "binary", "binary_math", "compare", "unary", "unary_backward"]

# How a broadcasting kernel reads an operand: a[i] (C-contiguous, full size), a[0] (one
# element), a scalar kernel argument (the operand was a host scalar), or a[offset(i)].
_DENSE, _SINGLE, _VALUE, _STRIDED = range(4)


@cuda.jit(device=True)
def _load(array, value, kind, at):
    """The operand element a broadcasting kernel reads (see the _DENSE... kinds)."""
    if kind == _VALUE:
        return value
    if kind == _SINGLE:
        return array[0]
    return array[at]


@cuda.jit(device=True)
def _operands(i, shape, strided, a, a_value, a_kind, a_strides, b, b_value, b_kind, b_strides):
    """The two operand elements a broadcasting kernel combines into its ``i``-th output
    (``strided``: either operand is read at strided offsets over ``shape``)."""
    a_at = i
    b_at = i
    if strided:
        a_at, b_at = offsets2(i, shape, a_strides, b_strides)
    return _load(a, a_value, a_kind, a_at), _load(b, b_value, b_kind, b_at)


# --- kernels -------------------------------------------------------------------------------------


@functools.cache
def unary_function(dtype: np.dtype):
    """The device function out[i] = f(v) of the unary ops (codes of UNARY_OPS) on ``dtype``."""
    m = scalar_math(dtype)
    exp, expm1, log, log1p, sqrt = m.exp, m.expm1, m.log, m.log1p, m.sqrt
    sin, cos, tanh, floor, ceil, sign = m.sin, m.cos, m.tanh, m.floor, m.ceil, m.sign
    sigmoid, gelu_tanh = m.sigmoid, m.gelu_tanh
    acos, acosh, asin, asinh, atan, atanh = m.acos, m.acosh, m.asin, m.asinh, m.atan, m.atanh
    cosh, sinh, tan, log2, log10 = m.cosh, m.sinh, m.tan, m.log2, m.log10
    trunc, round_half_even = m.trunc, m.round_half_even
    one, zero = m.one, m.zero

    @cuda.jit(device=True)
    def apply(v, op, out, i):
        if op == opcodes.NEGATIVE:
            out[i] = -v
        elif op == opcodes.ABS:
            out[i] = abs(v)
        elif op == opcodes.EXP:
            out[i] = exp(v)
        elif op == opcodes.LOG:
            out[i] = log(v)
        elif op == opcodes.SQRT:
            out[i] = sqrt(v)
        elif op == opcodes.TANH:
            out[i] = tanh(v)
        elif op == opcodes.RELU:
            # a select, not max(v, 0), so that NaN propagates as in np.maximum(v, 0)
            out[i] = zero if v < zero else v
        elif op == opcodes.GELU_TANH:
            out[i] = gelu_tanh(v)
        elif op == opcodes.SILU:
            out[i] = v * sigmoid(v)
        elif op == opcodes.SIN:
            out[i] = sin(v)
        elif op == opcodes.COS:
            out[i] = cos(v)
        elif op == opcodes.SQUARE:
            out[i] = v * v
        elif op == opcodes.RECIPROCAL:
            out[i] = one / v
        elif op == opcodes.SIGMOID:
            out[i] = sigmoid(v)
        elif op == opcodes.EXPM1:
            out[i] = expm1(v)
        elif op == opcodes.LOG1P:
            out[i] = log1p(v)
        elif op == opcodes.FLOOR:
            out[i] = floor(v)
        elif op == opcodes.CEIL:
            out[i] = ceil(v)
        elif op == opcodes.SIGN:
            out[i] = sign(v)
        elif op == opcodes.ACOS:
            out[i] = acos(v)
        elif op == opcodes.ACOSH:
            out[i] = acosh(v)
        elif op == opcodes.ASIN:
            out[i] = asin(v)
        elif op == opcodes.ASINH:
            out[i] = asinh(v)
        elif op == opcodes.ATAN:
            out[i] = atan(v)
        elif op == opcodes.ATANH:
            out[i] = atanh(v)
        elif op == opcodes.COSH:
            out[i] = cosh(v)
        elif op == opcodes.SINH:
            out[i] = sinh(v)
        elif op == opcodes.TAN:
            out[i] = tan(v)
        elif op == opcodes.LOG2:
            out[i] = log2(v)
        elif op == opcodes.LOG10:
            out[i] = log10(v)
        elif op == opcodes.TRUNC:
            out[i] = trunc(v)
        elif op == opcodes.ROUND:
            out[i] = round_half_even(v)

    return apply


@functools.cache
def _unary_kernel(dtype: np.dtype):
    apply = unary_function(dtype)

    @cuda.jit
    def kernel(x, out, op):
        for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
            apply(x[i], op, out, i)

    return kernel


@functools.cache
def unary_backward_function(dtype: np.dtype):
    """The device function grad_in[i] = grad * f'(v) of UNARY_BACKWARD_OPS on ``dtype``."""
    m = scalar_math(dtype)
    exp, sqrt, tanh, sigmoid = m.exp, m.sqrt, m.tanh, m.sigmoid
    gelu_tanh_backward, silu_backward = m.gelu_tanh_backward, m.silu_backward
    one, two, zero = m.one, m.two, m.zero

    @cuda.jit(device=True)
    def apply(v, grad, op, grad_in, i):
        if op == opcodes.RELU_BACKWARD:
            grad_in[i] = grad if v > zero else zero
        elif op == opcodes.GELU_TANH_BACKWARD:
            grad_in[i] = gelu_tanh_backward(v, grad)
        elif op == opcodes.SILU_BACKWARD:
            grad_in[i] = silu_backward(v, grad)
        elif op == opcodes.TANH_BACKWARD:
            t = tanh(v)
            grad_in[i] = grad * (one - t * t)
        elif op == opcodes.SIGMOID_BACKWARD:
            s = sigmoid(v)
            grad_in[i] = grad * s * (one - s)
        elif op == opcodes.EXP_BACKWARD:
            grad_in[i] = grad * exp(v)
        elif op == opcodes.LOG_BACKWARD:
            grad_in[i] = grad / v
        elif op == opcodes.SQRT_BACKWARD:
            grad_in[i] = grad / (two * sqrt(v))

    return apply


@functools.cache
def _unary_backward_kernel(dtype: np.dtype):
    apply = unary_backward_function(dtype)

    @cuda.jit
    def kernel(x, grad_out, grad_in, op):
        for i in range(cuda.grid(1), grad_in.size, cuda.gridsize(1)):
            apply(x[i], grad_out[i], op, grad_in, i)

    return kernel


@cuda.jit(device=True)
def _times(a, b):
    return a * b


@cuda.jit(device=True)
def _over(a, b):
    return a / b


@functools.cache
def binary_function_of(
    maximum, minimum, power, floor_divide, remainder, multiply=_times, divide=_over
):
    """The device function out[i] = op(x, y) of BINARY_OPS over these device functions: one
    factory for every dtype kind (``complex.py`` passes stubs for the ops complex numbers lack,
    and annex G's multiply and divide; the launchers never hand a kernel an op code its dtype
    lacks)."""

    @cuda.jit(device=True)
    def apply(x, y, op, out, i):
        if op == opcodes.ADD:
            out[i] = x + y
        elif op == opcodes.SUBTRACT:
            out[i] = x - y
        elif op == opcodes.MULTIPLY:
            out[i] = multiply(x, y)
        elif op == opcodes.DIVIDE:
            out[i] = divide(x, y)
        elif op == opcodes.MAXIMUM:
            out[i] = maximum(x, y)
        elif op == opcodes.MINIMUM:
            out[i] = minimum(x, y)
        elif op == opcodes.POWER:
            out[i] = power(x, y)
        elif op == opcodes.FLOOR_DIVIDE:
            out[i] = floor_divide(x, y)
        elif op == opcodes.REMAINDER:
            out[i] = remainder(x, y)

    return apply


def broadcast_kernel_of(apply):
    """The broadcasting kernel of the device function ``apply(x, y, op, out, i)`` that writes
    out[i] = op(x, y) (a binary, binary_math or compare op; a bfloat16 twin's own ones)."""

    @cuda.jit
    def kernel(a, a_value, a_kind, a_strides, b, b_value, b_kind, b_strides, out, shape, op):
        strided = a_kind == _STRIDED or b_kind == _STRIDED
        for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
            x, y = _operands(
                i, shape, strided, a, a_value, a_kind, a_strides, b, b_value, b_kind, b_strides
            )
            apply(x, y, op, out, i)

    return kernel


@functools.cache
def binary_kernel_of(*functions):
    """The broadcasting kernel of BINARY_OPS over ``binary_function_of(*functions)``."""
    return broadcast_kernel_of(binary_function_of(*functions))


@functools.cache
def binary_function(dtype: np.dtype):
    """The device function out[i] = op(x, y) of BINARY_OPS on ``dtype``."""
    m = scalar_math(dtype)
    return binary_function_of(maximum, minimum, m.power, m.floor_divide, m.remainder)


@functools.cache
def _binary_kernel(dtype: np.dtype):
    return broadcast_kernel_of(binary_function(dtype))


@functools.cache
def binary_math_function(dtype: np.dtype):
    """The device function out[i] = op(x, y) of the ops of BINARY_MATH on ``dtype``."""
    m = scalar_math(dtype)
    atan2, copysign, hypot, logaddexp = m.atan2, m.copysign, m.hypot, m.logaddexp

    @cuda.jit(device=True)
    def apply(x, y, op, out, i):
        if op == opcodes.ATAN2:
            out[i] = atan2(x, y)
        elif op == opcodes.COPYSIGN:
            out[i] = copysign(x, y)
        elif op == opcodes.HYPOT:
            out[i] = hypot(x, y)
        elif op == opcodes.LOGADDEXP:
            out[i] = logaddexp(x, y)

    return apply


@functools.cache
def _binary_math_kernel(dtype: np.dtype):
    return broadcast_kernel_of(binary_math_function(dtype))


def compare_function_of(
    less, less_equal, greater, greater_equal, logical_and, logical_or, logical_xor
):
    """The device function out[i] = op(x, y) of COMPARE_OPS over these device functions (the
    orderings and logical ops): one factory for every dtype kind, as ``binary_function_of``."""

    @cuda.jit(device=True)
    def apply(x, y, op, out, i):
        if op == opcodes.EQUAL:
            out[i] = x == y
        elif op == opcodes.NOT_EQUAL:
            out[i] = x != y
        elif op == opcodes.LESS:
            out[i] = less(x, y)
        elif op == opcodes.LESS_EQUAL:
            out[i] = less_equal(x, y)
        elif op == opcodes.GREATER:
            out[i] = greater(x, y)
        elif op == opcodes.GREATER_EQUAL:
            out[i] = greater_equal(x, y)
        elif op == opcodes.LOGICAL_AND:
            out[i] = logical_and(x, y)
        elif op == opcodes.LOGICAL_OR:
            out[i] = logical_or(x, y)
        elif op == opcodes.LOGICAL_XOR:
            out[i] = logical_xor(x, y)

    return apply


def compare_kernel_of(*functions):
    """The broadcasting kernel of COMPARE_OPS over ``compare_function_of(*functions)``."""
    return broadcast_kernel_of(compare_function_of(*functions))


compare_function = compare_function_of(
    cuda.jit(device=True)(lambda x, y: x < y),
    cuda.jit(device=True)(lambda x, y: x <= y),
    cuda.jit(device=True)(lambda x, y: x > y),
    cuda.jit(device=True)(lambda x, y: x >= y),
    cuda.jit(device=True)(lambda x, y: x != 0 and y != 0),
    cuda.jit(device=True)(lambda x, y: x != 0 or y != 0),
    cuda.jit(device=True)(lambda x, y: (x != 0) != (y != 0)),
)
_compare_kernel = broadcast_kernel_of(compare_function)


@cuda.jit
def _axpy_kernel(alpha, x, y):
    for i in range(cuda.grid(1), y.size, cuda.gridsize(1)):
        y[i] += alpha * x[i]


# --- launchers -----------------------------------------------------------------------------------


def _check_op(op, table: dict, name: str) -> int:
    op = int(op)
    if not 0 <= op < len(table):
        raise ValueError(f"{name}: unknown op code")
    return op


def _operand(array, strides, shape: tuple[int, ...], size: int, other):
    """(array, value, kind, strides) of a broadcast operand as the kernels take it.

    A host operand (a Python or NumPy scalar, or a one-element host array such as the
    ``np.full(1, scalar)`` the tiled scalar ops pass) becomes a scalar kernel argument of
    the other operand's dtype; the other operand's device array stands in for its array.
    """
    if is_host(array):
        values = np.asarray(array).reshape(-1)
        if values.size != 1:
            raise ValueError(
                f"a host operand of a broadcasting kernel must hold one element, got {values.size}"
            )
        return other, other.dtype.type(values[0]), _VALUE, (0,) * len(shape)
    strides = host_ints(strides, "strides")
    if len(strides) != len(shape):
        raise ValueError(f"strides {strides} do not match shape {shape}")
    if array.size == size and is_c_contiguous(strides, shape):
        kind = _DENSE
    elif array.size == 1:
        kind, strides = _SINGLE, (0,) * len(shape)
    else:
        kind = _STRIDED
    return array, array.dtype.type(0), kind, strides


def _operand_dtype(a, b) -> np.dtype:
    """The dtype of the device operand(s) of a broadcasting kernel."""
    if is_host(a) and is_host(b):
        raise TypeError("a broadcasting kernel needs at least one device operand")
    return np.dtype(b.dtype if is_host(a) else a.dtype)


def _broadcast(kernel, a, a_strides, b, b_strides, out, shape, op, stream) -> None:
    shape = host_ints(shape, "shape")
    size = out.size
    if size == 0:
        return
    # the kernels index flat arrays (a 0-d device scalar becomes a 1-element array)
    a, b = (x if is_host(x) or x.ndim == 1 else x.reshape(-1) for x in (a, b))
    a, a_value, a_kind, a_strides = _operand(a, a_strides, shape, size, b)
    b, b_value, b_kind, b_strides = _operand(b, b_strides, shape, size, a)
    if _STRIDED in (a_kind, b_kind):
        shape, (a_strides, b_strides) = coalesce(shape, a_strides, b_strides)
    else:  # the kernel only indexes by i: one specialisation whatever the rank
        shape, a_strides, b_strides = (size,), (1,), (1,)
    kernel[grid(size), block(), stream](
        a, a_value, a_kind, a_strides, b, b_value, b_kind, b_strides, out, shape, op
    )


def unary(x: DeviceArray, out: DeviceArray, op: int, *, stream=0) -> None:
    """out[i] = f(x[i]) for the unary op ``op`` (a code of opcodes.UNARY_OPS)."""
    op = _check_op(op, opcodes.UNARY_OPS, "unary")
    if out.size == 0:
        return
    _unary_kernel(np.dtype(x.dtype))[grid(out.size), block(), stream](x, out, op)


def unary_backward(
    x: DeviceArray, grad_out: DeviceArray, grad_in: DeviceArray, op: int, *, stream=0
) -> None:
    """grad_in[i] = grad_out[i] * f'(x[i]) for ``op`` (a code of opcodes.UNARY_BACKWARD_OPS)."""
    op = _check_op(op, opcodes.UNARY_BACKWARD_OPS, "unary_backward")
    if grad_in.size == 0:
        return
    kernel = _unary_backward_kernel(np.dtype(x.dtype))
    kernel[grid(grad_in.size), block(), stream](x, grad_out, grad_in, op)


def binary(
    a: DeviceArray,
    a_strides,
    b: DeviceArray,
    b_strides,
    out: DeviceArray,
    shape,
    op: int,
    *,
    stream=0,
) -> None:
    """out = op(a, b) broadcast over ``shape`` (a code of opcodes.BINARY_OPS; strides 0 on broadcast
    axes); either operand may be a host scalar or one-element host array."""
    op = _check_op(op, opcodes.BINARY_OPS, "binary")
    if op in opcodes.BINARY_MATH:
        raise ValueError("binary: unknown op code (binary_math runs it)")
    _broadcast(
        _binary_kernel(_operand_dtype(a, b)), a, a_strides, b, b_strides, out, shape, op, stream
    )


def binary_math(
    a: DeviceArray,
    a_strides,
    b: DeviceArray,
    b_strides,
    out: DeviceArray,
    shape,
    op: int,
    *,
    stream=0,
) -> None:
    """out = op(a, b) broadcast over ``shape`` for atan2, copysign, hypot, logaddexp (codes of
    opcodes.BINARY_MATH) of floats; either operand may be a host scalar."""
    if int(op) not in opcodes.BINARY_MATH:
        raise ValueError("binary_math: unknown op code")
    kernel = _binary_math_kernel(_operand_dtype(a, b))
    _broadcast(kernel, a, a_strides, b, b_strides, out, shape, int(op), stream)


def compare(
    a: DeviceArray,
    a_strides,
    b: DeviceArray,
    b_strides,
    out: DeviceArray,
    shape,
    op: int,
    *,
    stream=0,
) -> None:
    """Boolean out = op(a, b) broadcast over ``shape`` (a code of opcodes.COMPARE_OPS); either
    operand may be a host scalar or one-element host array."""
    op = _check_op(op, opcodes.COMPARE_OPS, "compare")
    _operand_dtype(a, b)
    _broadcast(_compare_kernel, a, a_strides, b, b_strides, out, shape, op, stream)


def axpy(alpha, x: DeviceArray, y: DeviceArray, *, stream=0) -> None:
    """y[i] += alpha * x[i] in place, alpha converted to y's dtype."""
    if y.size == 0:
        return
    alpha = np.dtype(y.dtype).type(alpha)
    _axpy_kernel[grid(y.size), block(), stream](alpha, x, y)
