"""Explicit 512-bit vector code for Numba ``@intrinsic``s: a thin layer over llvmlite's IR
builder that spells float32 x 16 arithmetic the way a kernel reads (``v.fma(x, y, z)``,
``v.lookup(table, index)``), so that a kernel can use what LLVM's loop vectoriser never makes
from scalar code (in-register table lookups, ``vpermi2ps``).

Every operation is IEEE (no fast-math flags: no contraction, no reassociation), so each
rounds exactly where the code says. ``Vectors`` is built once per codegen call around the
``builder``; ``have_avx512()`` says whether the host CPU (and Numba's target) can run such
code at all.
"""

from __future__ import annotations

import functools

import numba
import numpy as np
from llvmlite import binding, ir
from numba.core import cgutils

LANES = 16
F32 = ir.FloatType()
I32 = ir.IntType(32)
F32X16 = ir.VectorType(F32, LANES)
I32X16 = ir.VectorType(I32, LANES)
I1X16 = ir.VectorType(ir.IntType(1), LANES)


@functools.cache
def have_avx512() -> bool:
    """True where the host CPU has AVX-512F and Numba compiles for the host (not for a generic
    or named other CPU, which may lack it)."""
    if numba.config.CPU_NAME not in (None, "host"):
        return False
    return bool(binding.get_host_cpu_features().get("avx512f", False))


class Vectors:
    """float32 x 16 / int32 x 16 operations emitted into ``builder``."""

    def __init__(self, builder: ir.IRBuilder) -> None:
        self.builder = builder
        self.module = builder.module

    def _call(self, name: str, result, arguments: list):
        function_type = ir.FunctionType(result, [argument.type for argument in arguments])
        function = cgutils.get_or_insert_function(self.module, function_type, name)
        return self.builder.call(function, arguments)

    @staticmethod
    def floats(value) -> ir.Constant:
        """A float32 constant in every lane (``value`` rounded to float32 first)."""
        return ir.Constant(F32X16, [float(np.float32(value))] * LANES)

    @staticmethod
    def ints(value) -> ir.Constant:
        """An int32 constant in every lane (``value`` taken modulo 2**32)."""
        return ir.Constant(I32X16, [int(np.uint32(value % (1 << 32)).view(np.int32))] * LANES)

    @staticmethod
    def table(values) -> ir.Constant:
        """16 float32 values, one a lane (half of a 32-entry ``lookup`` table)."""
        return ir.Constant(F32X16, [float(np.float32(value)) for value in values])

    def bits(self, x):
        return self.builder.bitcast(x, I32X16)

    def from_bits(self, x):
        return self.builder.bitcast(x, F32X16)

    def add(self, x, y):
        return self.builder.fadd(x, y)

    def sub(self, x, y):
        return self.builder.fsub(x, y)

    def negate(self, x):
        return self.builder.fneg(x)

    def mul(self, x, y):
        return self.builder.fmul(x, y)

    def fma(self, x, y, z):
        """x * y + z rounded once."""
        return self._call("llvm.fma.v16f32", F32X16, [x, y, z])

    def int_add(self, x, y):
        return self.builder.add(x, y)

    def int_sub(self, x, y):
        return self.builder.sub(x, y)

    def int_and(self, x, y):
        return self.builder.and_(x, y)

    def shift_left(self, x, count: int):
        return self.builder.shl(x, self.ints(count))

    def shift_right(self, x, count: int):
        """Arithmetic (sign-filling) shift."""
        return self.builder.ashr(x, self.ints(count))

    def to_float(self, x):
        """int32 lanes to float32."""
        return self.builder.sitofp(x, F32X16)

    def below_unsigned(self, x, y):
        """Lanes where x < y as unsigned integers (a mask)."""
        return self.builder.icmp_unsigned("<", x, y)

    def below(self, x, y):
        """Lanes where the float x < y (false for NaN: an ordered comparison)."""
        return self.builder.fcmp_ordered("<", x, y)

    def both(self, x, y):
        return self.builder.and_(x, y)

    def mantissa(self, x):
        """The significand of each lane scaled into [1, 2) (``vgetmantps``; subnormals too),
        NaN for lanes with the sign bit set (-0 included)."""
        arguments = [x, ir.Constant(I32, 0b1000), x, ir.Constant(ir.IntType(LANES), -1)]
        arguments.append(ir.Constant(I32, 4))  # the current rounding mode
        return self._call("llvm.x86.avx512.mask.getmant.ps.512", F32X16, arguments)

    def exponent(self, x):
        """floor(log2 |x|) of each lane as a float (``vgetexpps``; subnormals too)."""
        arguments = [x, x, ir.Constant(ir.IntType(LANES), -1), ir.Constant(I32, 4)]
        return self._call("llvm.x86.avx512.mask.getexp.ps.512", F32X16, arguments)

    def scale(self, x, y):
        """x 2**floor(y) a lane, rounded once (``vscalefps``)."""
        arguments = [x, y, x, ir.Constant(ir.IntType(LANES), -1), ir.Constant(I32, 4)]
        return self._call("llvm.x86.avx512.mask.scalef.ps.512", F32X16, arguments)

    def lookup(self, low, high, index):
        """(low, high)[index & 31] a lane: a 32-entry table in two registers (``vpermi2ps``),
        indexed by the low 5 bits of each int32 lane of ``index``."""
        return self._call("llvm.x86.avx512.vpermi2var.ps.512", F32X16, [low, index, high])

    def load(self, pointer):
        """16 float32 from ``pointer`` (any alignment of a float32)."""
        return self.builder.load(self.builder.bitcast(pointer, F32X16.as_pointer()), align=4)

    def store(self, value, pointer, streamed: bool) -> None:
        """16 float32 to ``pointer``: a non-temporal store where ``streamed`` (``pointer`` must
        then be 64-byte aligned), an ordinary one of any float32 alignment otherwise."""
        target = self.builder.bitcast(pointer, F32X16.as_pointer())
        store = self.builder.store(value, target, align=64 if streamed else 4)
        if streamed:
            flag = self.module.add_metadata([ir.Constant(I32, 1)])
            store.set_metadata("nontemporal", flag)

    def mask_bits(self, mask):
        """A lane mask as an int32, lane i in bit i."""
        return self.builder.zext(self.builder.bitcast(mask, ir.IntType(LANES)), I32)


__all__ = ["LANES", "Vectors", "have_avx512"]
