"""The CUDA twins of ops_cpu.sorting, ops_cpu.searching and ops_cpu.indexing against the CPU
kernels under the simulator (one test body over both backends), and compiled for sm_90.

Rows are longer than the simulator's 16 threads and not multiples of the test block (8), so
the grid-stride loops wrap; values hold NaNs, signed zeros and ties.
"""

from __future__ import annotations

import numpy as np
import pytest

from numtile import opcodes
from tests.kernels import Host

KINDS = {"f": opcodes.SORT_FLOAT, "i": opcodes.SORT_SIGNED, "u": opcodes.SORT_UNSIGNED}


def _values(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.integers(-4, 5, shape) * 1.5).astype(dtype)
    if np.dtype(dtype).kind == "f":
        x.reshape(-1)[::7] = np.nan
        x.reshape(-1)[::5] = -0.0
    return x


def _bits(x):
    return x.view(np.dtype(f"u{x.dtype.itemsize}"))


def _stable(x, descending):
    if not descending:
        return np.argsort(x, axis=-1, kind="stable")
    flipped = np.flip(np.argsort(np.flip(x, -1), axis=-1, kind="stable"), -1)
    return x.shape[-1] - 1 - flipped


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int8, np.uint16])
def test_sort_rows(backend, dtype, descending):
    x = _values(dtype, (3, 41))
    values, indices = np.zeros_like(_bits(x)), np.zeros((3, 41), np.int64)
    kind = KINDS[np.dtype(dtype).kind]
    backend.run("sort_rows", _bits(x), values, indices, 5, kind, descending)
    order = _stable(x, descending)
    np.testing.assert_array_equal(indices, order + 5)
    np.testing.assert_array_equal(values, np.take_along_axis(_bits(x), order, -1))


@pytest.mark.parametrize("begin", [0, 13])
def test_merge_runs(backend, begin):
    a = np.sort(_values(np.float64, (2, 20), 1), axis=-1, kind="stable")
    b = np.sort(_values(np.float64, (2, 17), 2), axis=-1, kind="stable")
    a_indices = np.arange(40).reshape(2, 20)
    b_indices = 100 + np.arange(34).reshape(2, 17)
    out, out_indices = np.zeros((2, 19), np.uint64), np.zeros((2, 19), np.int64)
    args = (_bits(a), a_indices, _bits(b), b_indices, out, out_indices, begin)
    backend.run("merge_runs", *args, opcodes.SORT_FLOAT, False)
    both = np.concatenate([a, b], -1)
    order = np.argsort(both, axis=-1, kind="stable")[:, begin : begin + 19]
    np.testing.assert_array_equal(out, np.take_along_axis(_bits(both), order, -1))
    everything = np.concatenate([a_indices, b_indices], -1)
    np.testing.assert_array_equal(out_indices, np.take_along_axis(everything, order, -1))


@pytest.mark.parametrize("right", [False, True])
def test_count_before(backend, right):
    run = np.sort(_values(np.float32, 23), kind="stable")
    needles = _values(np.float32, 37, 3)
    counts = np.full(37, 2, np.int64)
    backend.run("count_before", _bits(run), _bits(needles), counts, opcodes.SORT_FLOAT, right)
    side = "right" if right else "left"
    np.testing.assert_array_equal(counts, 2 + np.searchsorted(run, needles, side))


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int64, np.uint64])
def test_count_values(backend, dtype):
    # values of a span of 9 from the dtype's lowest, or around zero, counted on top of 2 each
    info = np.iinfo(dtype)
    for low in (int(info.min), -4 if info.min else 0):
        offsets = np.random.default_rng(low % 7).integers(0, 9, 53)
        x = (offsets.astype(object) + low).astype(dtype)  # in [low, low + 8]
        counts = np.full(9, 2, np.int64)
        backend.run("count_values", _bits(x), counts, np.uint64(low % (1 << 8 * x.itemsize)))
        np.testing.assert_array_equal(counts, 2 + np.bincount(offsets, minlength=9))


@pytest.mark.parametrize("find_max", [False, True])
def test_arg_reduce(backend, find_max):
    x = _values(np.float64, (3, 11, 5))
    values, indices = np.zeros(15), np.full(15, -1, np.int64)
    plan = (3, 11, 5, Host(np.array([11])), Host(np.array([7])), Host(np.array([1])))
    backend.run("arg_reduce", x.reshape(-1), values, indices, *plan, find_max)
    expected = (np.argmax if find_max else np.argmin)(x, axis=1) + 7
    np.testing.assert_array_equal(indices, expected.reshape(-1))


@pytest.mark.parametrize("find_max", [False, True])
def test_arg_reduce_rows_of_blocks(backend, find_max):
    # rows longer than a block (256), an odd number of them: the best ties within and across
    # blocks, after NaNs, in a tail, or is beaten by the running pair (row 2: the same value at
    # a smaller index)
    x = (np.random.default_rng(1).integers(-3, 4, (5, 600)) * 1.5).astype(np.float64)
    x[1, [300, 520]] = np.nan
    x[3, :590] = 0.0
    x[3, 595:] = -9.0 if find_max else 9.0
    values, indices = np.zeros(5), np.full(5, -1, np.int64)
    values[2], indices[2] = x[2].max() if find_max else x[2].min(), 3
    plan = (5, 600, 1, Host(np.array([600])), Host(np.array([10])), Host(np.array([1])))
    backend.run("arg_reduce", x.reshape(-1), values, indices, *plan, find_max)
    expected = (np.argmax if find_max else np.argmin)(x, axis=1) + 10
    expected[2] = 3
    np.testing.assert_array_equal(indices, expected)


def test_arg_reduce_several_axes(backend):
    # a (3, 4, 50) tile at (1, 2, 10) of a (5, 7, 80) tensor, every axis reduced: the first
    # maximum of the tile's C order is the one of smallest global index
    x = np.random.default_rng(2).integers(0, 3, (3, 4, 50)).astype(np.float32)
    values, indices = np.zeros(1, np.float32), np.full(1, -1, np.int64)
    starts, strides = np.array([1, 2, 10]), np.array([560, 80, 1])
    plan = (1, 600, 1, Host(np.array([3, 4, 50])), Host(starts), Host(strides))
    backend.run("arg_reduce", x.reshape(-1), values, indices, *plan, True)
    local = np.unravel_index(np.argmax(x), x.shape)
    np.testing.assert_array_equal(indices, [np.dot(starts + local, strides)])


@pytest.mark.parametrize("accumulate", [False, True])
def test_take_positions(backend, accumulate):
    src = np.arange(3 * 7 * 4, dtype=np.float64)
    dst = np.ones(3 * 5 * 4)
    src_positions = np.array([6, 0, 3, 3] if accumulate else [6, 0, 3])
    dst_positions = np.array([4, 1, 2, 2] if accumulate else [4, 1, 2])
    backend.run(
        "take_positions", src, dst, 3, 7, 4, 5, Host(src_positions), Host(dst_positions), accumulate
    )
    expected = np.ones((3, 5, 4))
    view = src.reshape(3, 7, 4)
    if accumulate:
        np.add.at(expected, (slice(None), dst_positions), view[:, src_positions])
    else:
        expected[:, dst_positions] = view[:, src_positions]
    np.testing.assert_array_equal(dst, expected.reshape(-1))


def test_counting_and_compaction(backend):
    flags = _values(np.int64, 45) > 0
    x = np.arange(45.0)
    count = np.full(1, 3, np.int64)
    backend.run("count_nonzero", flags, count)
    assert count[0] == 3 + flags.sum()
    out = np.full(8, -1.0)
    backend.run("compact", x, flags, out, 2, 1, 6)
    np.testing.assert_array_equal(out, np.r_[-1.0, x[flags][2:8], -1.0])
    out = np.full(8, -1.0)
    backend.run("compact", x, flags, out, 0, 0, 0)
    np.testing.assert_array_equal(out, -1.0)
    out = np.full(flags.sum(), -1.0)  # more than eight: the kernel's blocks of eight, then the rest
    backend.run("compact", x, flags, out, 1, 0, flags.sum() - 1)
    np.testing.assert_array_equal(out, np.r_[x[flags][1:], -1.0])
    positions = np.full(8, -1, np.int64)
    backend.run("compact_positions", flags, positions, 1, 0, 5, 100)
    np.testing.assert_array_equal(positions[:5], 100 + np.flatnonzero(flags)[1:6])
    values = np.sort(_values(np.float64, 40))
    starts = np.zeros(40, bool)
    backend.run("group_starts", values, np.array([values[0]]), starts, False)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(starts[1:], values[1:] != values[:-1])
    assert not starts[0] or values[0] != values[0]
    groups = np.zeros(40, np.int64)
    backend.run("running_count", starts, groups, 10)
    np.testing.assert_array_equal(groups, 10 + np.cumsum(starts) - 1)


def test_copy_runs(backend):
    src = np.arange(20.0)
    out = np.full(12, -1.0)
    runs = (Host(np.array([15, 0, 4])), Host(np.array([0, 3, 9])), Host(np.array([3, 0, 2])))
    backend.run("copy_runs", src, out, *runs)
    np.testing.assert_array_equal(out, [15, 16, 17, -1, -1, -1, -1, -1, -1, 4, 5, -1])


# --- real-GPU compilation ------------------------------------------------------------------------

_COMPILE_ALL = """
    from numtile.ops_cuda import indexing, sorting

    i64, flag = types.int64, types.boolean
    for unsigned in (types.uint8, types.uint16, types.uint32, types.uint64):
        rows = unsigned[:, ::1]
        index_rows = i64[:, ::1]
        cuda.compile_ptx(sorting._start_kernel.py_func, (rows, rows, index_rows, i64), cc=(9, 0))
        signature = (rows, index_rows, rows, index_rows, i64, i64, i64, flag)
        cuda.compile_ptx(sorting._merge_pass_kernel.py_func, signature, cc=(9, 0))
        signature = (rows, index_rows, rows, index_rows, flag)
        cuda.compile_ptx(sorting._copy_rows_kernel.py_func, signature, cc=(9, 0))
        signature = (rows, index_rows, rows, index_rows, rows, index_rows, i64, i64, i64, flag)
        cuda.compile_ptx(sorting._merge_kernel.py_func, signature, cc=(9, 0))
        flat = unsigned[::1]
        signature = (flat, flat, i64[::1], i64, i64, flag)
        cuda.compile_ptx(sorting._count_before_kernel.py_func, signature, cc=(9, 0))
    for t in (types.float32, types.float64, types.int64, types.uint8):
        s = types.UniTuple(i64, 1)
        signature = (t[::1], t[::1], i64[::1], i64, i64, i64, s, s, s, flag)
        cuda.compile_ptx(sorting._arg_reduce_kernel.py_func, signature, cc=(9, 0))
    for t in (types.float32, types.float64, types.int64, flag):
        a = t[::1]
        cuda.compile_ptx(indexing._count_nonzero_kernel.py_func, (a, i64[::1]), cc=(9, 0))
        signature = (a, flag[::1], a, i64, i64, i64)
        cuda.compile_ptx(indexing._compact_kernel.py_func, signature, cc=(9, 0))
        signature = (a, a, flag[::1], flag)
        cuda.compile_ptx(indexing._group_starts_kernel.py_func, signature, cc=(9, 0))
        signature = (a, a, i64[::1], i64[::1], i64[::1])
        cuda.compile_ptx(indexing._copy_runs_kernel.py_func, signature, cc=(9, 0))
        signature = (a, a, i64, i64, i64, i64, i64[::1], i64[::1], flag)
        if t is not flag:
            cuda.compile_ptx(indexing._take_kernel.py_func, signature, cc=(9, 0))
    signature = (flag[::1], i64[::1], i64, i64, i64, i64)
    cuda.compile_ptx(indexing._compact_positions_kernel.py_func, signature, cc=(9, 0))
    cuda.compile_ptx(indexing._running_count_kernel.py_func, (flag[::1], i64[::1], i64), cc=(9, 0))
"""


def test_kernels_compile_for_a_real_gpu(compile_for_a_real_gpu):
    compile_for_a_real_gpu(_COMPILE_ALL)
