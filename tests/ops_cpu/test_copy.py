"""The copy kernels (numtile.ops_cpu.copy, and its CUDA twin under the simulator) against NumPy.

Every body runs on both backends (the ``backend`` fixture); on cuda each call is also checked
against the CPU twin's result. CUDA-only behaviour is tested in tests/ops_cuda/test_copy.py.
"""

import numpy as np
import pytest

from tests.kernels import COPY_CASES, Host, view_arguments

DTYPES = [np.float32, np.float64, np.int64, np.bool_]


@pytest.mark.parametrize("dtype", DTYPES)
def test_fill(backend, dtype):
    out = np.zeros(37, dtype)
    expected = out.copy()
    typed = np.dtype(dtype).type
    minus = -1 if dtype == np.int64 else -0.1
    for value, part in ((3, slice(None)), (minus, slice(2, 25)), (True, slice(30, 31))):
        backend.run("fill", out[part], value)
        expected[part] = typed(value)
        np.testing.assert_array_equal(out, expected)
    backend.run("fill", out[:0], 5)  # nothing to fill
    backend.run("fill", out, typed(2))
    np.testing.assert_array_equal(out, np.full(37, 2, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", list(COPY_CASES))
def test_copy_strided_matches_numpy(backend, case, dtype):
    src_shape, src_view, dst_shape, dst_view = COPY_CASES[case]
    src = (np.arange(np.prod(src_shape)).reshape(src_shape) % 7 + 1).astype(dtype)
    dst = np.zeros(dst_shape, dtype)
    source, target = src_view(src), dst_view(dst)
    assert source.shape == target.shape
    expected = dst.copy()
    dst_view(expected)[...] = source
    src_offset, src_strides = view_arguments(source, src)
    dst_offset, dst_strides = view_arguments(target, dst)
    backend.run(
        "copy_strided",
        src.reshape(-1),
        src_offset,
        Host(src_strides),
        dst.reshape(-1),
        dst_offset,
        Host(dst_strides),
        Host(np.array(source.shape, dtype=np.int64)),
    )
    np.testing.assert_array_equal(dst, expected)


CAST_VALUES = np.array([-2.7, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 2.9, 1000.25, 7.0, -3e9])


@pytest.mark.parametrize("target", DTYPES)
@pytest.mark.parametrize("source", DTYPES)
def test_cast_matches_astype(backend, source, target):
    x = np.resize(CAST_VALUES, 37).astype(source)
    out = np.empty(x.shape, target)
    backend.run("cast", x, out)
    expected = x.astype(target)
    np.testing.assert_array_equal(out, expected)
    if target != np.bool_:
        np.testing.assert_array_equal(np.signbit(out), np.signbit(expected))


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.parametrize("target", [np.float32, np.float64, np.bool_])
def test_cast_special_floats(backend, target):
    x = np.array([np.nan, np.inf, -np.inf, 1e300, -1e300, -0.0, 1e-300])
    out = np.empty(x.shape, target)
    with np.errstate(over="ignore"):
        expected = x.astype(target)
        backend.run("cast", x, out)
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(np.signbit(out), np.signbit(expected))
