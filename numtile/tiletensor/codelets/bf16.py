"""The bodies codelets run on bfloat16 and float16 tiles through kernels of their bits
(``direct=`` of ``narrow.through_float32``): no float32 scratch tile, each element widened in
a register and rounded once when written (``ops.bf16_unary``, ``ops.bf16_binary``,
``ops.bf16_compare``, ``ops.bf16_unary_backward``, ``ops.bf16_reduce_accumulate`` and their
``ops.f16_*`` twins, and ``ops.bf16_predicate``/``ops.f16_predicate``; ``where`` picks bit
patterns).

Each takes the arguments of the codelet kernel it stands in for; a task's 16-bit tiles are all
of one format (``narrow.goes_direct``), which picks the kernels. Codelets without one
(random and arange tiles, axpy, softmax, sorting's arg_reduce, the count and group starts of
indexing) keep the float32 scratch path.
"""

from __future__ import annotations

from numtile.tiletensor.codelets.narrow import bits, format_of


def _flat(tile):
    """A tile as the flat array a 16-bit float kernel takes: bfloat16 and float16 as uint16
    bits."""
    return bits(tile.reshape(-1))


def unary(code):
    def kernel(ops, x, out):
        getattr(ops, f"{format_of(x, out)}_unary")(_flat(x), _flat(out), code)

    return kernel


def predicate(code):
    """Boolean out = p(x) (isnan, isinf, isfinite, signbit) of the value the bits hold."""

    def kernel(ops, x, out):
        getattr(ops, f"{format_of(x)}_predicate")(_flat(x), out.reshape(-1), code)

    return kernel


def unary_backward(code):
    def kernel(ops, x, grad_out, grad_in):
        function = getattr(ops, f"{format_of(x, grad_out, grad_in)}_unary_backward")
        function(_flat(x), _flat(grad_out), _flat(grad_in), code)

    return kernel


def _kernel(ops, kernel_name: str, *tiles):
    """The 16-bit float kernel of a broadcasting family for ``tiles``' format: ``binary`` and
    ``binary_math`` share ``<format>_binary``."""
    family = "compare" if kernel_name == "compare" else "binary"
    return getattr(ops, f"{format_of(*tiles)}_{family}")


def broadcast(kernel_name: str, code):
    """out = op(a, b) of ``kernel_name``'s op ``code``, a and b broadcast (tensor operands)."""

    def kernel(ops, a, b, out, a_strides, b_strides, shape):
        function = _kernel(ops, kernel_name, a, b, out)
        function(_flat(a), a_strides, _flat(b), b_strides, _flat(out), shape, code)

    return kernel


def with_scalar(kernel_name: str, code):
    """out = op(a, scalar) or op(scalar, a); the scalar is a one-element float32 array."""

    def kernel(ops, a, out, scalar, a_strides, scalar_strides, shape, scalar_first):
        function, a, out = _kernel(ops, kernel_name, a, out), _flat(a), _flat(out)
        if scalar_first:
            function(scalar, scalar_strides, a, a_strides, out, shape, code)
        else:
            function(a, a_strides, scalar, scalar_strides, out, shape, code)

    return kernel


def inplace(kernel_name: str, code):
    """a = op(a, b) in a's own tile."""

    def kernel(ops, a, b, a_strides, b_strides, shape):
        function, a = _kernel(ops, kernel_name, a, b), _flat(a)
        function(a, a_strides, _flat(b), b_strides, a, shape, code)

    return kernel


def where(ops, condition, a, b, out, c_strides, a_strides, b_strides, shape):
    """out = a if condition else b on bit patterns: nothing is converted, so NaN payloads and
    signalling NaNs survive as ``np.where`` keeps them."""
    condition, a, b, out = (_flat(t) for t in (condition, a, b, out))
    ops.where(condition, c_strides, a, a_strides, b, b_strides, out, shape)
