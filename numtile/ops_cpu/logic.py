"""Kernels of the array API's logic: float predicates (isnan...), ``where`` and bitwise ops.

``where`` is the one ternary kernel: three operands read through element strides (0 on
broadcast axes) over the C-ordered output shape.
"""

import numba
import numpy as np

from numtile import opcodes
from numtile.ops_cpu import streaming
from numtile.ops_cpu.elementwise import _broadcast, _map
from numtile.ops_cpu.helpers import inlined, unsigned
from numtile.ops_cpu.per_op import ByNeed, OpKernel, c_contiguous, read_only
from numtile.ops_cpu.streaming import select_streamed

_isnan = inlined(lambda v: np.isnan(v))
_isinf = inlined(lambda v: np.isinf(v))
_isfinite = inlined(lambda v: np.isfinite(v))
_signbit = inlined(lambda v: np.signbit(v.real))  # complex: never asked (real only)

_bitwise_and = inlined(lambda a, b: a & b)
_bitwise_or = inlined(lambda a, b: a | b)
_bitwise_xor = inlined(lambda a, b: a ^ b)
_left_shift = inlined(lambda a, b: a << b)
_right_shift = inlined(lambda a, b: a >> b)


def _predicate(op):
    """The kernel out[i] = p(x[i]) of the predicate ``op`` (a name of PREDICATE_OPS)."""

    @numba.njit(nogil=True, cache=True, error_model="numpy")
    def predicate_op(x, out):
        if op == "isnan":
            _map(_isnan, x, out)
        elif op == "isinf":
            _map(_isinf, x, out)
        elif op == "isfinite":
            _map(_isfinite, x, out)
        elif op == "signbit":
            _map(_signbit, x, out)

    return predicate_op


def _bitwise(op):
    """The broadcasting kernel out = op(a, b) of ``op`` (a name of BITWISE_OPS)."""

    @numba.njit(nogil=True, cache=True, error_model="numpy")
    def bitwise_op(a, a_strides, b, b_strides, out, shape):
        if op == "bitwise_and":
            _broadcast(_bitwise_and, a, a_strides, b, b_strides, out, shape)
        elif op == "bitwise_or":
            _broadcast(_bitwise_or, a, a_strides, b, b_strides, out, shape)
        elif op == "bitwise_xor":
            _broadcast(_bitwise_xor, a, a_strides, b, b_strides, out, shape)
        elif op == "bitwise_left_shift":
            _broadcast(_left_shift, a, a_strides, b, b_strides, out, shape)
        elif op == "bitwise_right_shift":
            _broadcast(_right_shift, a, a_strides, b, b_strides, out, shape)

    return bitwise_op


predicate = OpKernel(
    "predicate",
    opcodes.PREDICATE_OPS,
    _predicate,
    """Boolean out[i] = p(x[i]) for the predicate ``op`` (a code of PREDICATE_OPS) of a float
    or complex tile (complex: isnan/isinf of either part, isfinite of both).""",
)
bitwise = OpKernel(
    "bitwise",
    opcodes.BITWISE_OPS,
    _bitwise,
    """out = op(a, b) broadcast over ``shape`` for integer or boolean tiles (a code of
    BITWISE_OPS; shifts only for integers).""",
)


@numba.njit(nogil=True, error_model="numpy")
def _offset(i, shape, strides):
    """Element offset, under ``strides``, of the ``i``-th element of C-ordered ``shape``."""
    offset = 0
    for axis in range(shape.size - 1, -1, -1):
        offset += (i % shape[axis]) * strides[axis]
        i //= shape[axis]
    return offset


def _dense_step(x, strides, shape, size) -> int:
    """1 when ``x`` is read whole in C order over ``shape`` (``size`` elements), 0 when it is
    one element read everywhere, -1 otherwise."""
    if x.size == 1:
        return 0
    return 1 if x.size == size and c_contiguous(strides, shape) else -1


def _where(condition, c_strides, a, a_strides, b, b_strides, out, shape):
    """out = a if condition else b, the three broadcast over ``shape`` (element strides, 0 on
    broadcast axes).

    Operands each whole or one element (a scalar) run the dense loops (all three whole, into
    an output that ``streaming.wanted``: the streamed one); any other the strided one, its
    index arrays read-only whoever made them (one compile per signature)."""
    size = out.size
    c_step, a_step, b_step = (
        _dense_step(condition, c_strides, shape, size),
        _dense_step(a, a_strides, shape, size),
        _dense_step(b, b_strides, shape, size),
    )
    if c_step == a_step == b_step == 1 and streaming.wanted(out):
        _where_streamed(condition, a, b, out)
        return
    if c_step >= 0 and a_step >= 0 and b_step >= 0:
        _where_dense(condition, c_step, a, a_step, b, b_step, out)
        return
    c_strides, a_strides, b_strides = map(read_only, (c_strides, a_strides, b_strides))
    _where_strided(condition, c_strides, a, a_strides, b, b_strides, out, read_only(shape))


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _where_dense(condition, c_step, a, a_step, b, b_step, out):
    """out[i] = a[i * a_step] if condition[i * c_step] else b[i * b_step] (steps 1 or 0)."""
    size = out.size
    # both loads before the choice: LLVM emits a branch-free select, 8x faster than a branch
    # that random conditions mispredict half the time
    if c_step == 1 and a_step == 1 and b_step == 1:
        for i in range(size):
            x, y = a[i], b[i]
            out[i] = x if condition[i] else y
        return
    if c_step == 1 and a_step == 0 and b_step == 1:  # where(c, scalar, y): vectorised
        x = a[0]
        for i in range(size):
            y = b[i]
            out[i] = x if condition[i] else y
        return
    for i in range(size):
        x, y = a[i * a_step], b[i * b_step]
        out[i] = x if condition[i * c_step] else y


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _where_streamed(condition, a, b, out):
    """out[i] = a[i] if condition[i] else b[i], out streamed past the caches."""
    select_streamed(condition, a, b, out)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _where_strided(condition, c_strides, a, a_strides, b, b_strides, out, shape):
    """out = a if condition else b, each operand read through its element strides."""
    for i in range(out.size):
        x = a[unsigned(_offset(i, shape, a_strides))]
        y = b[unsigned(_offset(i, shape, b_strides))]
        out[i] = x if condition[unsigned(_offset(i, shape, c_strides))] else y


where = ByNeed(_where, _where_dense, _where_streamed, _where_strided)
