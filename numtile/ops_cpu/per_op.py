"""Kernel families compiled one op at a time.

A kernel family such as ``binary`` takes its op as an integer code, but one Numba function
branching on a run-time code compiles every branch (each op's loops) for every dtype the first
time it runs: seconds per signature, most of it for ops the program never runs. An ``OpKernel``
instead builds, on the first call with a code, the Numba function of that op alone: a closure
over the op's name, whose branches on the name are constant and so pruned before typing.
Numba's on-disk cache keys a closure by its cells' values, so closures over a string stay
cached (a closure over a function would not: a dispatcher pickles with a per-process id).

Measured (float64 ``binary``, 9 ops x 4 loops): all 9 ops one at a time compile in 1.1x the
time of the one kernel of every op, and each op alone in 0.7-1.6 s instead of 8 s. Splitting
each op's loops (dense, scalar, strided) into kernels of their own as well cost 3.4x in all
(each kernel repeats the fixed cost of typing and optimising), so an op's loops stay together.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

from numtile.ops_cpu import streaming


class OpKernel:
    """``kernel(*arrays, op)``: runs the Numba function ``build(name)`` of the op ``op`` (a code
    of ``codes``, a table name -> code), built on the first call with that code, and returns
    what it returns.

    With ``streamed = (build_streamed, output)``, where ``streaming.wanted`` the argument at
    position ``output``, the call runs ``build_streamed(name)`` instead: the same op with its
    output streamed past the caches, or None for the ops that keep ``build``'s kernel. Each is
    built and compiled on first use, so a program whose outputs never stream never compiles
    the streamed loops."""

    def __init__(
        self,
        name: str,
        codes: dict[str, int],
        build: Callable,
        doc: str,
        streamed: tuple[Callable, int] | None = None,
    ) -> None:
        self.__name__ = self.__qualname__ = name
        self.__doc__ = doc
        self._names = {code: op_name for op_name, code in codes.items()}
        self._build = build
        self._kernels: dict = {}
        self._lock = threading.Lock()
        self._streamed = streamed
        self._streamed_kernels: dict = {}

    def __call__(self, *args):
        op = args[-1]
        if self._streamed is not None and streaming.wanted(args[self._streamed[1]]):
            kernel = self._streamed_kernels.get(op, False)
            if kernel is False:
                kernel = self._kernel_of(op, streamed=True)
            if kernel is not None:
                kernel(*args[:-1])
                return
        kernel = self._kernels.get(op) or self._kernel_of(op)
        return kernel(*args[:-1])

    def _kernel_of(self, op, streamed: bool = False):
        """The kernel of ``op``, built on first use (the streamed one, or None, if asked)."""
        build, kernels = self._build, self._kernels
        if streamed:
            build, kernels = self._streamed[0], self._streamed_kernels
        if op not in self._names:
            raise ValueError(f"{self.__name__}: unknown op code {op!r}")
        with self._lock:
            if op not in kernels:
                kernels[op] = build(self._names[op])
        return kernels[op]

    @property
    def signatures(self) -> list:
        """The signatures compiled so far, over every op (as a Numba dispatcher's)."""
        kernels = [*self._kernels.values(), *self._streamed_kernels.values()]
        return [s for kernel in kernels if kernel is not None for s in kernel.signatures]

    def knows(self, op) -> bool:
        """True where ``op`` is one of this family's codes."""
        return op in self._names


class ByNeed:
    """A kernel whose Python body ``choose`` picks, per call, one of the Numba functions
    ``kernels`` (the dense loop or the strided one, say), each compiled on its first call: a
    program compiles only the variants it runs (a dense copy or ``where`` skips the typing of
    the strided index arithmetic). ``signatures`` lists every variant's, as OpKernel's."""

    def __init__(self, choose: Callable, *kernels) -> None:
        self.__name__ = self.__qualname__ = choose.__name__
        self.__doc__ = choose.__doc__
        self._choose = choose
        self._kernels = kernels

    def __call__(self, *args):
        return self._choose(*args)

    @property
    def signatures(self) -> list:
        return [s for kernel in self._kernels for s in kernel.signatures]


class LibraryFirst:
    """The ``OpKernel`` ``kernel(*args, op)``, unless ``library(*args, op)``, a call of the same
    arguments into a math library (``mkl_vml.unary``), did the work: it returns True then,
    False where it does not take those operands or that op (our kernel runs). Ops that are not
    the kernel's own never reach the library. Other attributes are ``kernel``'s."""

    def __init__(self, library: Callable, kernel: OpKernel) -> None:
        self.__name__ = self.__qualname__ = kernel.__name__
        self.__doc__ = kernel.__doc__
        self._library = library
        self.kernel = kernel

    def __call__(self, *args):
        if not (self.kernel.knows(args[-1]) and self._library(*args)):
            self.kernel(*args)

    def __getattr__(self, name):
        return getattr(self.kernel, name)


class Mirrored:
    """The broadcasting ``kernel(a, a_strides, b, b_strides, out, shape, op)``, where each op
    of ``mirrors`` (op -> its mirror) runs as its mirror with the operands swapped (a > b as
    b < a, the same bits, NaNs included): one compiled kernel serves both. Other attributes
    are ``kernel``'s."""

    def __init__(self, kernel: OpKernel, mirrors: dict) -> None:
        self.__name__ = self.__qualname__ = kernel.__name__
        self.__doc__ = kernel.__doc__
        self.kernel = kernel
        self._mirrors = mirrors

    def __call__(self, a, a_strides, b, b_strides, out, shape, op):
        mirror = self._mirrors.get(op)
        if mirror is None:
            self.kernel(a, a_strides, b, b_strides, out, shape, op)
        else:
            self.kernel(b, b_strides, a, a_strides, out, shape, mirror)

    def __getattr__(self, name):
        return getattr(self.kernel, name)


def read_only(array):
    """``array`` as a read-only array (itself when it already is, else a read-only view; the
    caller's array stays writable). Numba types read-only and writable arrays apart, so index
    arrays (strides, shapes) always reach a kernel read-only: one compile, not two, whether
    they come from a tiled op's cache (read-only) or a codelet's or test's own array."""
    if not array.flags.writeable:
        return array
    view = array.view()
    view.flags.writeable = False
    return view


def c_contiguous(strides, shape) -> bool:
    """helpers.is_c_contiguous in Python, for a ``ByNeed`` choice (a few axes: cheaper than a
    call into Numba, and nothing to compile)."""
    expected = 1
    for stride, extent in zip(strides.tolist()[::-1], shape.tolist()[::-1]):
        if extent != 1 and stride != expected:
            return False
        expected *= extent
    return True


def dense_apart(a, a_strides, b, b_strides, out, shape) -> bool:
    """True where ``a``, ``b`` and ``out`` each hold every element of ``shape`` in C order (no
    broadcasting) and out overlaps neither input or is one of them exactly: what a kernel
    over flat arrays that reads each element before writing it needs."""
    size = out.size
    if any(x.size != size or not x.flags.c_contiguous for x in (a, b, out)):
        return False
    if not (c_contiguous(a_strides, shape) and c_contiguous(b_strides, shape)):
        return False
    return not any(np.may_share_memory(x, out) and x.ctypes.data != out.ctypes.data for x in (a, b))
