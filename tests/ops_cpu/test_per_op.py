"""OpKernel (numtile.ops_cpu.per_op): a kernel family builds the kernel of one op on the first
call with its code, and only that one."""

import threading

import numpy as np
import pytest

from numtile import opcodes, ops_cpu
from numtile.ops_cpu.per_op import OpKernel


def test_builds_only_the_ops_called_once_each():
    built = []

    def build(name):
        built.append(name)
        return lambda out: out.fill(len(name))

    kernel = OpKernel("demo", {"one": 0, "three": 1}, build, "a demo family")
    out = np.zeros(2)
    threads = [threading.Thread(target=kernel, args=(out, 1)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert built == ["three"] and (out == 5).all()
    kernel(out, 0)
    assert built == ["three", "one"] and (out == 3).all()
    with pytest.raises(ValueError, match="demo: unknown op code 2"):
        kernel(out, 2)


def test_a_kernel_of_one_op_computes_that_op_only():
    x = np.arange(1.0, 6.0)
    strides, shape = np.ones(1, np.int64), np.array([5], np.int64)
    for name, reference in (("subtract", np.subtract), ("hypot", np.hypot)):
        code = opcodes.BINARY_OPS[name]
        kernel = ops_cpu.binary_math if code in opcodes.BINARY_MATH else ops_cpu.binary
        out = np.empty(5)
        kernel(x, strides, x[::-1].copy(), strides, out, shape, code)
        np.testing.assert_allclose(out, reference(x, x[::-1]))
    assert ops_cpu.binary.signatures  # counted as numtile.warmup counts a dispatcher's
    with pytest.raises(ValueError, match="binary: unknown op code"):
        ops_cpu.binary(x, strides, x, strides, np.empty(5), shape, opcodes.ATAN2)
