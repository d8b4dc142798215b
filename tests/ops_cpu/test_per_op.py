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


def test_by_need_kernels_compile_their_strided_loop_once_for_any_read_only_ness():
    src, dst = np.arange(12.0), np.zeros(12)
    one, shape = np.ones(1, np.int64), np.array([12], np.int64)
    ops_cpu.copy_strided(src, 0, one, dst, 0, one, shape)  # contiguous: NumPy, no loop
    np.testing.assert_array_equal(dst, src)
    strides = [np.array([1, 3], np.int64), np.array([4, 1], np.int64)]  # transposed, C order
    grid = np.array([3, 4], np.int64)
    for writable in (True, False):
        for array in (*strides, grid):
            array.flags.writeable = writable
        ops_cpu.copy_strided(src, 0, strides[0], dst, 0, strides[1], grid)
        np.testing.assert_array_equal(dst, src.reshape(4, 3).T.reshape(-1))
        assert strides[0].flags.writeable == writable  # the caller's array is left as it was
    float64 = [s for s in ops_cpu.copy.copy_strided.signatures if "float64" in str(s[0])]
    assert len(float64) == 1 and all(not s[2].mutable for s in float64)
    condition = np.arange(12) % 3 == 0
    out = np.empty(12)
    zero = np.zeros(1, np.int64)
    ops_cpu.where(condition, one, src, one, src[:1], zero, out, shape)  # dense loops
    np.testing.assert_array_equal(out, np.where(condition, src, 0.0))
    ops_cpu.where(condition, strides[1], src, strides[0], src, strides[1], out, grid)  # strided
    np.testing.assert_array_equal(out, np.where(condition, src.reshape(4, 3).T.reshape(-1), src))


def test_compare_runs_greater_as_less_with_the_operands_swapped():
    a = np.array([[1.0, np.nan, 3.0, -0.0, np.inf]]).repeat(2, 0)  # a broadcast axis too
    b = np.array([2.0, 1.0, np.nan, 0.0, np.inf])
    shape = np.array(a.shape)
    a_strides, b_strides = np.array([5, 1]), np.array([0, 1])
    for name, expected in (("greater", a > b), ("greater_equal", a >= b), ("less", a < b)):
        out = np.empty(a.shape, np.bool_)
        ops_cpu.compare(a.ravel(), a_strides, b, b_strides, out.ravel(), shape,
                        opcodes.COMPARE_OPS[name])  # fmt: skip
        np.testing.assert_array_equal(out, expected)
    built = ops_cpu.compare.kernel._kernels
    assert opcodes.LESS in built and opcodes.LESS_EQUAL in built
    assert opcodes.GREATER not in built and opcodes.GREATER_EQUAL not in built


def test_complex_kernels_build_the_op_called_and_return_its_result():
    from numtile.ops_cpu import complex as complex_kernels

    z = np.array([1 + 2j, -0.5 + 0.25j, 3 - 1j])
    out = np.empty_like(z)
    # a fresh family of the same builder (other tests may have built ops of the module's own)
    unary = OpKernel("fresh", opcodes.COMPLEX_MATH, complex_kernels._complex_map, "")
    unary(z, out, opcodes.COMPLEX_MATH["sinh"])
    np.testing.assert_allclose(out, np.sinh(z), rtol=1e-15)
    built = {unary._names[code] for code in unary._kernels}
    assert "sinh" in built and "cosh" not in built and "asin" not in built
    # the arithmetic kernel says whether annex G's pass must follow: an infinite product does
    strides, shape = np.ones(1, np.int64), np.array([3], np.int64)
    product = np.empty_like(z)
    arithmetic = complex_kernels._complex_binary
    assert not arithmetic(z, strides, z, strides, product, shape, opcodes.MULTIPLY)
    infinite = np.array([complex(np.inf, 0.0), 1j, 2.0])
    assert arithmetic(infinite, strides, z, strides, product, shape, opcodes.MULTIPLY)
