"""numtile.ops_cpu.memory against NumPy references."""

import numpy as np
import pytest

from numtile.ops_cpu import memory

DTYPES = [np.float32, np.float64, np.int64]


def view_arguments(view, base):
    """(offset, element strides) of a NumPy view into the C-contiguous array ``base``."""
    start = view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    return start // base.itemsize, np.array(view.strides, dtype=np.int64) // base.itemsize


# (source base shape, source view, destination base shape, destination view)
COPY_CASES = {
    "contiguous rows with offsets": ((6, 4), lambda a: a[2:5], (5, 4), lambda a: a[1:4]),
    "transpose 2-d": ((3, 5), lambda a: a.T, (5, 3), lambda a: a),
    "transpose 3-d": ((2, 3, 4), lambda a: a.transpose(2, 0, 1), (4, 2, 3), lambda a: a),
    "reversed 2-d": ((4, 5), lambda a: a[::-1, ::-1], (4, 5), lambda a: a),
    "reversed step 1-d": ((9,), lambda a: a[::-2], (5,), lambda a: a),
    "block into larger": ((3, 2), lambda a: a, (5, 6), lambda a: a[1:4, 2:4]),
    "strided to reversed": ((4, 6), lambda a: a[:, ::2].T, (6, 4), lambda a: a[::-2, ::-1]),
    "broadcast source": ((4,), lambda a: np.broadcast_to(a, (3, 4)), (3, 4), lambda a: a),
    "inner extent 1": ((4, 3), lambda a: a[:, 1:2], (4, 1), lambda a: a),
    "0-d": ((3, 4), lambda a: a[1, 2, ...], (2,), lambda a: a[1, ...]),
    "empty": ((3, 4), lambda a: a[:, :0], (3, 2), lambda a: a[:, :0]),
    "4-d sliced transpose": (
        (2, 3, 4, 5),
        lambda a: a[:, ::2, 1:, ::-1].transpose(3, 0, 2, 1),
        (5, 2, 3, 2),
        lambda a: a,
    ),
}


@pytest.mark.parametrize("dtype", DTYPES)
def test_fill(dtype):
    out = np.zeros(7, dtype)
    memory.fill(out, 3)
    np.testing.assert_array_equal(out, np.full(7, 3, dtype))
    memory.fill(out[2:5], -0.1 if dtype != np.int64 else -1)
    expected = np.full(7, 3, dtype)
    expected[2:5] = dtype(-0.1) if dtype != np.int64 else -1
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", list(COPY_CASES))
def test_copy_strided_matches_numpy(case, dtype):
    src_shape, src_view, dst_shape, dst_view = COPY_CASES[case]
    src = np.arange(np.prod(src_shape), dtype=dtype).reshape(src_shape) + 1
    dst = np.zeros(dst_shape, dtype)
    source, target = src_view(src), dst_view(dst)
    assert source.shape == target.shape
    expected = dst.copy()
    dst_view(expected)[...] = source
    src_offset, src_strides = view_arguments(source, src)
    dst_offset, dst_strides = view_arguments(target, dst)
    memory.copy_strided(
        src.reshape(-1),
        src_offset,
        src_strides,
        dst.reshape(-1),
        dst_offset,
        dst_strides,
        np.array(source.shape, dtype=np.int64),
    )
    np.testing.assert_array_equal(dst, expected)


CAST_VALUES = np.array([-2.7, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 2.9, 1000.25])


@pytest.mark.parametrize(
    ("source", "target"),
    [
        (np.float64, np.int64),
        (np.float32, np.int64),
        (np.int64, np.float64),
        (np.int64, np.float32),
        (np.float64, np.float32),
        (np.float32, np.float64),
        (np.float64, np.bool_),
        (np.int64, np.bool_),
        (np.bool_, np.float32),
    ],
)
def test_cast_matches_astype(source, target):
    x = CAST_VALUES.astype(source)
    out = np.empty(x.shape, target)
    memory.cast(x, out)
    np.testing.assert_array_equal(out, x.astype(target))


@pytest.mark.parametrize("target", [np.float32, np.bool_])
def test_cast_special_floats(target):
    x = np.array([np.nan, np.inf, -np.inf, 1e300, -0.0])
    out = np.empty(x.shape, target)
    with np.errstate(over="ignore"):
        expected = x.astype(target)
    memory.cast(x, out)
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(np.signbit(out), np.signbit(expected))
