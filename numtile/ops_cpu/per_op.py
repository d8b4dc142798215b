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


class OpKernel:
    """``kernel(*arrays, op)``: runs the Numba function ``build(name)`` of the op ``op`` (a code
    of ``codes``, a table name -> code), built on the first call with that code."""

    def __init__(self, name: str, codes: dict[str, int], build: Callable, doc: str) -> None:
        self.__name__ = self.__qualname__ = name
        self.__doc__ = doc
        self._names = {code: op_name for op_name, code in codes.items()}
        self._build = build
        self._kernels: dict = {}
        self._lock = threading.Lock()

    def __call__(self, *args):
        op = args[-1]
        kernel = self._kernels.get(op) or self._kernel_of(op)
        kernel(*args[:-1])

    def _kernel_of(self, op):
        if op not in self._names:
            raise ValueError(f"{self.__name__}: unknown op code {op!r}")
        with self._lock:
            if op not in self._kernels:
                self._kernels[op] = self._build(self._names[op])
        return self._kernels[op]

    @property
    def signatures(self) -> list:
        """The signatures compiled so far, over every op (as a Numba dispatcher's)."""
        return [s for kernel in self._kernels.values() for s in kernel.signatures]
