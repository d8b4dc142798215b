"""The CUDA twins of ops_cpu.logic and ops_cpu.complex (predicate, where, bitwise and the
complex kernels) against the CPU kernels under the simulator, and compiled for sm_90.

Sizes are not multiples of the test block (8) and exceed the simulator's 16 threads, so the
grid-stride loops wrap.
"""

from __future__ import annotations

import numpy as np
import pytest

from numtile import opcodes
from tests.kernels import CPU, CUDA, Host


def run_twins(kernel, *args, rtol):
    """Run ``kernel`` on both backends (the last array argument is the output) and check that
    the CUDA output matches the CPU one within ``rtol`` (complex outputs too)."""
    outputs = []
    for backend in (CUDA, CPU):
        copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        backend.run(kernel, *copies, twin=False)
        outputs.append([a for a in copies if isinstance(a, np.ndarray)][-1])
    np.testing.assert_allclose(outputs[0], outputs[1], rtol=rtol, atol=rtol, equal_nan=True)
    return outputs[1]


pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

SIZE = 37
SPECIAL = np.array([0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan, 1e-310, 3.0])


def _strides(shape, out_shape):
    strides, step = [], 1
    for extent, wanted in zip(reversed(shape), reversed(out_shape)):
        strides.append(step if extent != 1 or wanted == 1 else 0)
        step *= extent
    return np.array(strides[::-1], np.int64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("name", list(opcodes.PREDICATE_OPS))
def test_predicate_matches_the_cpu_kernel(name, dtype):
    if name == "signbit" and np.dtype(dtype).kind == "c":
        pytest.skip("signbit is real only")
    x = np.resize(SPECIAL, SIZE).astype(dtype)
    if np.dtype(dtype).kind == "c":
        x.imag = np.resize(SPECIAL[::-1], SIZE)
    out = np.zeros(SIZE, bool)
    CUDA.run("predicate", x, out, opcodes.PREDICATE_OPS[name])
    np.testing.assert_array_equal(out, getattr(np, name)(x.real if name == "signbit" else x))


@pytest.mark.parametrize(
    "shapes", [((5, 8), (5, 8), (5, 8)), ((5, 1), (1, 8), (8,)), ((1, 1), (5, 8), (1,))]
)
def test_where_matches_the_cpu_kernel(shapes):
    rng = np.random.default_rng(0)
    out_shape = (5, 8)
    c = rng.integers(0, 2, shapes[0]).astype(bool)
    a = rng.standard_normal(shapes[1])
    b = rng.standard_normal(shapes[2])
    full = [s if len(s) == 2 else (1,) + s for s in shapes]
    args = []
    for value, shape in zip((c, a, b), full):
        args += [value.reshape(-1), Host(_strides(shape, out_shape))]
    out = np.zeros(40)
    CUDA.run("where", *args, out, Host(np.array(out_shape, np.int64)), exact=True)
    np.testing.assert_array_equal(out.reshape(out_shape), np.where(c, a, b))


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int64, np.bool_])
@pytest.mark.parametrize("name", list(opcodes.BITWISE_OPS))
def test_bitwise_matches_the_cpu_kernel(name, dtype):
    if dtype == np.bool_ and "shift" in name:
        pytest.skip("no shifts of booleans")
    rng = np.random.default_rng(1)
    a = rng.integers(0, 100, SIZE).astype(dtype)
    b = rng.integers(0, 7, SIZE).astype(dtype)
    out = np.zeros(SIZE, dtype)
    dense, shape = Host(np.array([1], np.int64)), Host(np.array([SIZE], np.int64))
    CUDA.run("bitwise", a, dense, b, dense, out, shape, opcodes.BITWISE_OPS[name])
    np.testing.assert_array_equal(out, getattr(np, name)(a, b))


def _complex(dtype, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.uniform(-3, 3, SIZE) + 1j * rng.uniform(-3, 3, SIZE)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("name", list(opcodes.COMPLEX_UNARY_OPS))
def test_complex_unary_matches_the_cpu_kernel(name, dtype):
    x = _complex(dtype)
    # sqrt's branch cut, exp's overflow with imag 0 (no 0: the simulator raises on log(0))
    x[:3] = [0.5j, -2 + 0j, 700 + 0j]
    part = name in ("abs", "real", "imag")
    out = np.zeros(SIZE, np.finfo(dtype).dtype if part else dtype)
    kernel = "complex_part" if part else "complex_unary"
    rtol = 1e-5 if dtype == np.complex64 else 1e-12
    run_twins(kernel, x, out, opcodes.COMPLEX_UNARY_OPS[name], rtol=rtol)


@pytest.mark.parametrize("name", list(opcodes.COMPLEX_MATH))
def test_complex_math_matches_the_cpu_kernel(name):
    x = _complex(np.complex128)
    x[:4] = [0.5j, -2 + 0j, 30 + 1j, 2.5 - 0.0j]  # imag 0, tanh's saturation
    out = np.zeros(SIZE, np.complex128)
    run_twins("complex_math_unary", x, out, opcodes.COMPLEX_MATH[name], rtol=1e-13)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("name", opcodes.COMPLEX_BINARY + opcodes.COMPLEX_COMPARE)
def test_complex_binary_matches_the_cpu_kernel(name, dtype):
    a, b = _complex(dtype, 1), _complex(dtype, 2)
    compare = name in opcodes.COMPLEX_COMPARE
    b[:2] = a[:2]
    out = np.zeros(SIZE, bool if compare else dtype)
    dense, shape = Host(np.array([1], np.int64)), Host(np.array([SIZE], np.int64))
    table = opcodes.COMPARE_OPS if compare else opcodes.BINARY_OPS
    kernel = "complex_compare" if compare else "complex_binary"
    rtol = 1e-4 if dtype == np.complex64 else 1e-12
    run_twins(kernel, a, dense, b, dense, out, shape, table[name], rtol=rtol)


@pytest.mark.parametrize("op", [opcodes.SUM, opcodes.PROD])
def test_complex_reduction_matches_the_cpu_kernel(op):
    x = _complex(np.complex128) * 0.5
    x = x[:36].reshape(3, 4, 3).reshape(-1)
    out = np.full(9, 1 + 1j) if op == opcodes.PROD else np.full(9, 2 - 1j)
    out = run_twins("complex_reduce_accumulate", x, out, 3, 4, 3, op, rtol=1e-12)
    expected = x.reshape(3, 4, 3)
    expected = (
        expected.prod(axis=1) * (1 + 1j) if op == opcodes.PROD else expected.sum(axis=1) + 2 - 1j
    )
    np.testing.assert_allclose(out, expected.reshape(-1), rtol=1e-12)


# --- real-GPU compilation ------------------------------------------------------------------------

_COMPILE_ALL = """
    from numtile.ops_cuda import complex as cx, logic

    i64, flag = types.int64, types.boolean
    for t in (types.float32, types.float64, types.complex64, types.complex128):
        cuda.compile_ptx(logic._predicate_kernel.py_func, (t[::1], flag[::1], i64), cc=(9, 0))
    for t in (types.int8, types.uint16, i64, flag):
        for rank in (1, 2):
            s = types.UniTuple(i64, rank)
            signature = (t[::1], t, i64, s, t[::1], t, i64, s, t[::1], s, i64)
            cuda.compile_ptx(logic._bitwise_kernel.py_func, signature, cc=(9, 0))
    for t in (types.float32, types.float64, types.int64, flag, types.complex128):
        for rank in (1, 3):
            s = types.UniTuple(i64, rank)
            signature = (flag[::1], s, t[::1], s, t[::1], s, t[::1], s)
            cuda.compile_ptx(logic._where_kernel.py_func, signature, cc=(9, 0))
    for t, real in ((types.complex64, types.float32), (types.complex128, types.float64)):
        a = t[::1]
        cuda.compile_ptx(cx._unary_kernel.py_func, (a, a, i64), cc=(9, 0))
        cuda.compile_ptx(cx._math_kernel.py_func, (a, a, i64), cc=(9, 0))
        cuda.compile_ptx(cx._part_kernel.py_func, (a, real[::1], i64), cc=(9, 0))
        cuda.compile_ptx(cx._reduce_kernel.py_func, (a, a, i64, i64, i64, i64), cc=(9, 0))
        for rank in (1, 2):
            s = types.UniTuple(i64, rank)
            signature = (a, t, i64, s, a, t, i64, s, a, s, i64)
            cuda.compile_ptx(cx._binary_kernel.py_func, signature, cc=(9, 0))
            signature = (a, t, i64, s, a, t, i64, s, flag[::1], s, i64)
            cuda.compile_ptx(cx._compare_kernel.py_func, signature, cc=(9, 0))
"""


def test_kernels_compile_for_a_real_gpu(compile_for_a_real_gpu):
    compile_for_a_real_gpu(_COMPILE_ALL)
