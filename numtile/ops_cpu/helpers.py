"""Helpers shared by the CPU kernels: the inlining decorator, typed constants, widening, and
the index arithmetic of strided tiles.

Every helper uses NumPy's error model (no per-element exception checks), so the loops that call
them vectorise.
"""

import numba
import numpy as np
from numba.core import types
from numba.extending import intrinsic, overload

# Decorator of the scalar op functions and of the generic loops that take them as arguments:
# they are inlined at Numba IR level, because a kernel that passes a function to a non-inlined
# loop cannot be cached.
inlined = numba.njit(nogil=True, error_model="numpy", inline="always")
# Decorator of the helpers that take no function: a call LLVM may still inline, typed once
# per signature rather than again at each call site (Numba's IR inlining retypes the callee
# each time: the merge kernel, its steps inlined nine times, took 11-12 s to compile).
called = numba.njit(nogil=True, error_model="numpy")


@intrinsic
def wide_vectors(typingctx):
    """Lets LLVM vectorise the calling kernel's loops with 512-bit registers where the CPU has
    them (AVX-512). LLVM's x86 targets from Skylake-X on prefer 256-bit vectors: a heuristic
    against the clock drop of early AVX-512 parts, which leaves half the lanes of a Sapphire
    Rapids idle in the compute-bound loops (exp, sin, pow: 1.3-2x faster with 512 bits). A
    function attribute, so it holds for this kernel only; without AVX-512 it changes nothing."""

    def codegen(context, builder, signature, args):
        # llvmlite's attribute set accepts only its known keywords: a string attribute is added
        # to the underlying set as LLVM's textual IR writes it
        set.add(builder.function.attributes, '"prefer-vector-width"="512"')
        return context.get_dummy_value()

    return types.none(), codegen


def as_type_of(value, example):
    """``value`` converted to the scalar type of ``example`` (a scalar or an array's dtype)."""
    raise NotImplementedError("as_type_of is only callable from numba-compiled code")


@overload(as_type_of, inline="always")
def _as_type_of(value, example):
    # Typed constants keep float32 arithmetic in float32 (a bare 0.5 would promote to float64).
    target = example.dtype if isinstance(example, types.Array) else example

    def convert(value, example):
        return target(value)

    return convert


@numba.njit(nogil=True, error_model="numpy")
def unsigned(index):
    """``index`` (known to be >= 0) as uint64: Numba then drops its negative-index wraparound
    check, which otherwise blocks vectorisation of loops over computed offsets."""
    return np.uint64(index)


@numba.njit(nogil=True, error_model="numpy")
def is_c_contiguous(strides, shape):
    """True when element ``strides`` are the C-contiguous strides of ``shape`` (extent-1 axes
    ignored)."""
    expected = 1
    for axis in range(shape.size - 1, -1, -1):
        if shape[axis] != 1 and strides[axis] != expected:
            return False
        expected *= shape[axis]
    return True


@numba.njit(nogil=True, error_model="numpy")
def inner_axis(shape):
    """Last axis of ``shape`` with extent > 1 (0 if none): the axis walked by the tight loop."""
    axis = shape.size - 1
    while axis > 0 and shape[axis] == 1:
        axis -= 1
    return axis


@numba.njit(nogil=True, error_model="numpy")
def row_offsets(row, shape, inner, first_strides, second_strides):
    """Element offsets in two strided arrays of C-ordered row ``row`` over ``shape[:inner]``."""
    first = 0
    second = 0
    for axis in range(inner - 1, -1, -1):
        extent = shape[axis]
        index = row % extent
        row //= extent
        first += index * first_strides[axis]
        second += index * second_strides[axis]
    return first, second


def widen(value):
    """``value`` as float64 when it is a float, as uint64 when it is an unsigned integer, as
    int64 otherwise (Numba-only)."""
    raise NotImplementedError("widen is only callable from numba-compiled code")


@overload(widen, inline="always")
def widen_overload(value):
    if isinstance(value, types.Float):
        target = types.float64
    elif isinstance(value, types.Integer) and not value.signed:
        target = types.uint64
    else:
        target = types.int64

    def convert(value):
        return target(value)

    return convert


def by_name(find):
    """``part(name)`` for Numba code: the function ``find(name)`` of a literal ``name`` (looked
    up when a kernel is typed). A kernel built per op is a closure over the op's *name* (Numba's
    on-disk cache keeps a closure over a string, not one over a function) and finds its scalar
    function here."""

    def part(name):
        raise NotImplementedError("part is only callable from numba-compiled code")

    @overload(part, inline="always")
    def _part(name):
        if isinstance(name, types.StringLiteral):
            function = find(name.literal_value)
            return lambda name: function
        return None

    return part
