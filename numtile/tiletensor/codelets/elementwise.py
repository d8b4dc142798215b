"""Codelets of the elementwise ops and generators: one per op code, named ``family:op``.

A wrapper flattens tiles to the 1-D views the kernels take and passes the shapes and
strides the tiled op computed; the op code is bound when the codelet is built. On bfloat16
and float16 tiles the ops with kernels of 16-bit float bits run those (``codelets.bf16``:
widened in registers, rounded once on write); the others run the float32 kernel on widened
copies and round their outputs back (``narrow.through_float32``).
"""

from __future__ import annotations

import math

from numtile import opcodes
from numtile.runtime import Codelet
from numtile.tiletensor.codelets import bf16
from numtile.tiletensor.codelets.narrow import through_float32


def _size(shape) -> int:
    return math.prod(shape)


def _unary(code):
    @through_float32(outputs=(1,), direct=bf16.unary(code))
    def kernel(ops, x, out):
        ops.unary(x.reshape(-1), out.reshape(-1), code)

    return kernel


def _unary_backward(code):
    @through_float32(outputs=(2,), direct=bf16.unary_backward(code))
    def kernel(ops, x, grad_out, grad_in):
        ops.unary_backward(x.reshape(-1), grad_out.reshape(-1), grad_in.reshape(-1), code)

    return kernel


def _for_dtype(ops, kernel_name: str, dtype):
    """``ops.<kernel_name>``, or its complex twin ``ops.complex_<kernel_name>`` for complex
    tiles (binary, compare, reduce_accumulate)."""
    return getattr(ops, f"complex_{kernel_name}" if dtype.kind == "c" else kernel_name)


def _binary(code):
    @through_float32(outputs=(2,), direct=bf16.broadcast("binary", code))
    def kernel(ops, a, b, out, a_strides, b_strides, shape):
        if code == opcodes.POWER and out.dtype.kind == "i" and (ops.to_host(b) < 0).any():
            raise ValueError("integers to negative integer powers are not allowed")
        function = _for_dtype(ops, _binary_kernel(code), a.dtype)
        function(a.reshape(-1), a_strides, b.reshape(-1), b_strides, out.reshape(-1), shape, code)

    return kernel


def _direct(body, kernel_name: str, code):
    """The bfloat16 body ``body(kernel_name, code)`` of a family with bfloat16 kernels (binary,
    binary_math, compare; not bitwise)."""
    return None if kernel_name == "bitwise" else body(kernel_name, code)


def _binary_kernel(code) -> str:
    """The kernel of BINARY_OPS code ``code``: ``binary``, or ``binary_math`` for the
    floating-point functions of two arguments."""
    return "binary_math" if code in opcodes.BINARY_MATH else "binary"


def _with_scalar(kernel_name: str, code: int):
    """A kernel of ``ops.<kernel_name>`` (binary, compare or bitwise) between a tile and a
    scalar, the scalar first or second as the op was written."""

    @through_float32(outputs=(1,), direct=_direct(bf16.with_scalar, kernel_name, code))
    def kernel(ops, a, out, scalar, a_strides, scalar_strides, shape, scalar_first):
        function, a, out = _for_dtype(ops, kernel_name, a.dtype), a.reshape(-1), out.reshape(-1)
        if scalar_first:
            function(scalar, scalar_strides, a, a_strides, out, shape, code)
        else:
            function(a, a_strides, scalar, scalar_strides, out, shape, code)

    return kernel


def _compare(code, kernel_name="compare"):
    @through_float32(direct=_direct(bf16.broadcast, kernel_name, code))
    def kernel(ops, a, b, out, a_strides, b_strides, shape):
        function = _for_dtype(ops, kernel_name, a.dtype)
        function(a.reshape(-1), a_strides, b.reshape(-1), b_strides, out.reshape(-1), shape, code)

    return kernel


def _inplace(kernel_name: str, code: int):
    """A kernel of ``ops.<kernel_name>`` writing ``a op b`` into ``a`` itself (``a += b``)."""

    @through_float32(updates=(0,), direct=_direct(bf16.inplace, kernel_name, code))
    def kernel(ops, a, b, a_strides, b_strides, shape):
        function, a = _for_dtype(ops, kernel_name, a.dtype), a.reshape(-1)
        function(a, a_strides, b.reshape(-1), b_strides, a, shape, code)

    return kernel


def _scalar_inplace(kernel_name: str, code: int):
    """A kernel writing ``a op scalar`` (or ``scalar op a``) into the tile ``a`` itself."""
    with_scalar = _with_scalar(kernel_name, code)

    def kernel(ops, a, scalar, a_strides, scalar_strides, shape, scalar_first):
        with_scalar(ops, a, a, scalar, a_strides, scalar_strides, shape, scalar_first)

    # with_scalar reads bfloat16 tiles itself where it can (then without scratch)
    direct = kernel if kernel_name != "bitwise" else None
    return through_float32(updates=(0,), direct=direct)(kernel)


def _complex_unary(code, kernel_name="complex_unary"):
    parts = (opcodes.COMPLEX_ABS, opcodes.COMPLEX_REAL, opcodes.COMPLEX_IMAG)

    def kernel(ops, x, out):
        function = ops.complex_part if code in parts else getattr(ops, kernel_name)
        function(x.reshape(-1), out.reshape(-1), code)

    return kernel


def _predicate(code):
    @through_float32(direct=bf16.predicate(code))
    def kernel(ops, x, out):
        ops.predicate(x.reshape(-1), out.reshape(-1), code)

    return kernel


@through_float32(outputs=(3,), direct=bf16.where)
def _where(ops, condition, a, b, out, c_strides, a_strides, b_strides, shape):
    flat = (t.reshape(-1) for t in (condition, a, b, out))
    condition, a, b, out = flat
    ops.where(condition, c_strides, a, a_strides, b, b_strides, out, shape)


def _random(code):
    @through_float32(outputs=(0,))
    def kernel(ops, out, shape, start, global_strides, seed, a, b, upper):
        ops.random_fill(out.reshape(-1), shape, start, global_strides, seed, code, a, b, upper)

    return kernel


@through_float32(outputs=(0,))
def _arange(ops, out, first, step):
    ops.arange_fill(out.reshape(-1), first, step)


@through_float32(updates=(1,))
def _axpy(ops, x, y, alpha):
    ops.axpy(alpha, x.reshape(-1), y.reshape(-1))


unary = {
    name: Codelet(f"unary:{name}", kernel=_unary(code), flops=lambda x, out: _size(out))
    for name, code in opcodes.UNARY_OPS.items()
}
unary_backward = {
    name: Codelet(f"unary_backward:{name}", kernel=_unary_backward(code))
    for name, code in opcodes.UNARY_BACKWARD_OPS.items()
}
binary = {
    name: Codelet(f"binary:{name}", kernel=_binary(code), flops=lambda a, b, out, *_: _size(out))
    for name, code in opcodes.BINARY_OPS.items()
}
binary_scalar = {
    name: Codelet(
        f"binary_scalar:{name}",
        kernel=_with_scalar(_binary_kernel(code), code),
        flops=lambda a, out, *_: _size(out),
    )
    for name, code in opcodes.BINARY_OPS.items()
}
compare = {
    name: Codelet(f"compare:{name}", kernel=_compare(code))
    for name, code in opcodes.COMPARE_OPS.items()
}
compare_scalar = {
    name: Codelet(f"compare_scalar:{name}", kernel=_with_scalar("compare", code))
    for name, code in opcodes.COMPARE_OPS.items()
}
complex_unary = {
    name: Codelet(f"complex_unary:{name}", kernel=_complex_unary(code))
    for name, code in opcodes.COMPLEX_UNARY_OPS.items()
}
complex_math = {
    name: Codelet(f"complex_math:{name}", kernel=_complex_unary(code, "complex_math_unary"))
    for name, code in opcodes.COMPLEX_MATH.items()
}
predicate = {
    name: Codelet(f"predicate:{name}", kernel=_predicate(code))
    for name, code in opcodes.PREDICATE_OPS.items()
}
bitwise = {
    name: Codelet(f"bitwise:{name}", kernel=_compare(code, "bitwise"))
    for name, code in opcodes.BITWISE_OPS.items()
}
bitwise_scalar = {
    name: Codelet(f"bitwise_scalar:{name}", kernel=_with_scalar("bitwise", code))
    for name, code in opcodes.BITWISE_OPS.items()
}
where = Codelet("where", kernel=_where)


def _kernel_of(family: str, code: int) -> str:
    return _binary_kernel(code) if family == "binary" else family


def _inplace_family(kernel_name: str, table: dict[str, int]):
    return (
        {
            n: Codelet(f"{kernel_name}_inplace:{n}", kernel=_inplace(_kernel_of(kernel_name, c), c))
            for n, c in table.items()
        },
        {
            n: Codelet(
                f"{kernel_name}_scalar_inplace:{n}",
                kernel=_scalar_inplace(_kernel_of(kernel_name, c), c),
            )
            for n, c in table.items()
        },
    )


binary_inplace, binary_scalar_inplace = _inplace_family("binary", opcodes.BINARY_OPS)
bitwise_inplace, bitwise_scalar_inplace = _inplace_family("bitwise", opcodes.BITWISE_OPS)
# the codelets of each family of broadcasting ops, as the tiled ops look them up
FAMILIES = {
    "binary": {
        "tensor": binary,
        "scalar": binary_scalar,
        "inplace": binary_inplace,
        "scalar_inplace": binary_scalar_inplace,
    },
    "compare": {"tensor": compare, "scalar": compare_scalar},
    "bitwise": {
        "tensor": bitwise,
        "scalar": bitwise_scalar,
        "inplace": bitwise_inplace,
        "scalar_inplace": bitwise_scalar_inplace,
    },
}
random = {
    name: Codelet(f"random:{name}", kernel=_random(code))
    for name, code in opcodes.RANDOM_DISTRIBUTIONS.items()
}
arange = Codelet("arange", kernel=_arange)
axpy = Codelet("axpy", kernel=_axpy, flops=lambda x, y, alpha: 2.0 * _size(y))
