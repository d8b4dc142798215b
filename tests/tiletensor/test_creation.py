"""Tests for numtile/tiletensor/creation.py (and TileTensor basics in tensor.py)."""

import numpy as np
import pytest

import numtile as nt

DTYPES = [np.float32, np.float64, np.int64, np.bool_]
# shape, tile_shape: divisible, not divisible, one tile, tiles of one, 1-d, 3-d, 0-d, empty.
CASES = [
    ((6, 4), (3, 2)),
    ((5, 7), (2, 3)),
    ((5, 7), (5, 7)),
    ((3, 2), (1, 1)),
    ((11,), (4,)),
    ((3, 4, 5), (2, 3, 4)),
    ((), ()),
    ((0,), (3,)),
    ((4, 0), (2, 2)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, tile_shape", CASES)
def test_from_numpy_round_trip(shape, tile_shape, dtype, make_array, check_tiles):
    x = make_array(shape, dtype, seed=1)
    t = nt.from_numpy(x, tile_shape=tile_shape)
    assert t.shape == shape and t.tile_shape == tile_shape and t.dtype == dtype
    out = check_tiles(t, x)
    assert out is not x and not np.shares_memory(out, x)
    np.testing.assert_array_equal(np.asarray(t), x)
    assert np.asarray(t).dtype == dtype


def test_from_numpy_copies_the_input():
    x = np.arange(6.0)
    t = nt.from_numpy(x, tile_shape=4)
    x[:] = -1
    np.testing.assert_array_equal(t.to_numpy(), np.arange(6.0))


def test_from_numpy_of_a_non_contiguous_view(check_tiles):
    x = np.arange(60.0).reshape(6, 10)[::2, ::-3]
    check_tiles(nt.from_numpy(x, tile_shape=(2, 3)), x)


def test_from_numpy_of_lists_and_scalars(check_tiles):
    check_tiles(
        nt.from_numpy([[1.5, 2.0], [3.0, 4.0]], tile_shape=(1, 2)),
        np.array([[1.5, 2.0], [3.0, 4.0]]),
    )
    check_tiles(nt.asarray([True, False, True], tile_shape=2), np.array([True, False, True]))
    check_tiles(nt.from_numpy(3.5), np.array(3.5))


def test_from_numpy_with_dtype_converts(check_tiles):
    t = nt.from_numpy(np.array([1.7, -2.2, 3.9]), tile_shape=2, dtype=np.int64)
    check_tiles(t, np.array([1, -2, 3]))


def test_from_numpy_of_a_tile_tensor_retiles(check_tiles):
    x = np.arange(20.0).reshape(4, 5)
    t = nt.from_numpy(x, tile_shape=(2, 2))
    assert nt.from_numpy(t) is t
    check_tiles(nt.from_numpy(t, tile_shape=(3, 4)), x)
    check_tiles(nt.from_numpy(t, dtype=np.float32), x.astype(np.float32))


def test_default_tile_shape_holds_small_tensors_in_one_tile():
    t = nt.from_numpy(np.ones((3, 5)))
    assert t.tile_shape == (3, 5) and t.grid == (1, 1)


def test_tile_accessor_and_metadata():
    x = np.arange(35.0).reshape(5, 7)
    t = nt.from_numpy(x, tile_shape=(2, 3))
    assert t.grid == (3, 3) and t.ndim == 2 and t.size == 35 and len(t) == 5
    assert t.nbytes == 35 * 8 and t.device == "cpu"
    assert t.tile((2, 2)).shape == (1, 1)
    t.wait()
    np.testing.assert_array_equal(t.tile((1, 2)).host_array(), x[2:4, 6:7])
    with pytest.raises(IndexError, match="out of range"):
        t.tile((3, 0))
    with pytest.raises(TypeError, match="0-d"):
        len(nt.from_numpy(np.float64(1.0)))


@pytest.mark.parametrize("dtype", [np.longdouble, np.clongdouble, "U3", "M8[s]"])
def test_unsupported_dtype_is_a_type_error(dtype):
    with pytest.raises(TypeError, match="unsupported dtype|not a dtype"):
        nt.from_numpy(np.zeros(3, dtype))
    with pytest.raises(TypeError, match="unsupported dtype|not a dtype"):
        nt.zeros((3,), dtype=dtype)


def test_unsupported_dtype_error_names_the_supported_ones():
    supported = "bool.*int8.*uint64.*float64.*complex128.*bfloat16.*float16"
    with pytest.raises(TypeError, match=f"{np.dtype(np.longdouble).name}.*{supported}"):
        nt.from_numpy(np.zeros(3, np.longdouble))


def test_not_a_dtype_is_a_type_error():
    with pytest.raises(TypeError):
        nt.zeros((2,), dtype="no-such-dtype")


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.bool_])
@pytest.mark.parametrize("shape, tile_shape", [((5, 7), (2, 3)), ((4,), (4,)), ((), ())])
def test_zeros_ones_full(shape, tile_shape, dtype, check_tiles):
    check_tiles(nt.zeros(shape, dtype=dtype, tile_shape=tile_shape), np.zeros(shape, dtype))
    check_tiles(nt.ones(shape, dtype=dtype, tile_shape=tile_shape), np.ones(shape, dtype))
    check_tiles(nt.full(shape, 3, dtype=dtype, tile_shape=tile_shape), np.full(shape, 3, dtype))


def test_zeros_and_ones_default_to_float64(check_tiles):
    check_tiles(nt.zeros((3, 2), tile_shape=(2, 2)), np.zeros((3, 2)))
    check_tiles(nt.ones(4, tile_shape=3), np.ones(4))


@pytest.mark.parametrize(
    "value, dtype",
    [(7, np.int64), (2.5, np.float64), (True, np.bool_), (np.float32(1.5), np.float32)],
)
def test_full_infers_the_dtype_from_the_value(value, dtype, check_tiles):
    check_tiles(nt.full((3, 4), value, tile_shape=(2, 3)), np.full((3, 4), value, dtype))


def test_empty_has_the_layout_and_dtype(check_tiles):
    t = nt.empty((5, 3), dtype=np.float32, tile_shape=(2, 2))
    assert t.dtype == np.float32 and t.grid == (3, 2)
    assert [h.shape for h in t.handles] == [(2, 2), (2, 1)] * 2 + [(1, 2), (1, 1)]
    check_tiles(t)  # any values, but tiles and gathered array have the right shape/dtype


def test_empty_tensors_with_zero_sized_axes(check_tiles):
    t = nt.zeros((0, 3), tile_shape=(2, 2))
    assert t.grid == (0, 2) and t.handles == []
    check_tiles(t, np.zeros((0, 3)))


@pytest.mark.parametrize(
    "make, reference",
    [
        (nt.zeros_like, np.zeros_like),
        (nt.ones_like, np.ones_like),
        (nt.empty_like, None),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_like_functions_keep_shape_tiles_and_dtype(make, reference, dtype, make_array, check_tiles):
    x = make_array((5, 3), dtype)
    source = nt.from_numpy(x, tile_shape=(2, 2))
    out = make(source)
    assert out.shape == (5, 3) and out.tile_shape == (2, 2) and out.dtype == dtype
    check_tiles(out, None if reference is None else reference(x))
    retyped = make(source, dtype=np.float64, tile_shape=(4, 1))
    assert retyped.dtype == np.float64 and retyped.tile_shape == (4, 1)
    check_tiles(retyped, None if reference is None else reference(x, dtype=np.float64))


def test_full_like(check_tiles):
    source = nt.zeros((3, 4), dtype=np.float32, tile_shape=(2, 3))
    check_tiles(nt.full_like(source, 2.5), np.full((3, 4), 2.5, np.float32))
    check_tiles(nt.full_like(source, 9, dtype=np.int64), np.full((3, 4), 9, np.int64))


@pytest.mark.parametrize(
    "args, tile_shape",
    [
        ((10,), 3),
        ((10,), 10),
        ((10,), 1),
        ((2, 13, 3), 2),
        ((10, 0, -3), 2),  # negative step
        ((5, -6, -2), 3),
        ((0.0, 1.0, 0.25), 3),  # float step
        ((-1.5, 2.0, 0.5), 4),
        ((1, 2.5), 1),  # float stop makes float64
        ((0,), 2),  # empty
        ((5, 1), 2),  # empty: stop before start with a positive step
    ],
)
def test_arange(args, tile_shape, check_tiles):
    check_tiles(nt.arange(*args, tile_shape=tile_shape), np.arange(*args))


def test_creation_under_each_scheduler(scheduler, check_tiles):
    check_tiles(nt.arange(3, 40, 3, tile_shape=4), np.arange(3, 40, 3))
    check_tiles(nt.full((5, 3), 2.5, tile_shape=(2, 2)), np.full((5, 3), 2.5))
    x = np.arange(12.0).reshape(3, 4)
    check_tiles(nt.from_numpy(x, tile_shape=(2, 3)), x)


def test_arange_with_dtype(check_tiles):
    check_tiles(nt.arange(0, 6, 2, dtype=np.float32, tile_shape=2), np.arange(0, 6, 2, np.float32))


def test_arange_zero_step_is_a_value_error():
    with pytest.raises(ValueError, match="step"):
        nt.arange(0, 5, 0)


def test_repr():
    t = nt.zeros((5, 7), dtype=np.float32, tile_shape=(2, 3))
    assert repr(t) == "TileTensor(shape=(5, 7), tile_shape=(2, 3), grid=(3, 3), dtype=float32)"


def test_item_and_python_conversions():
    assert nt.full((1, 1), 2.5).item() == 2.5
    assert float(nt.full((), 1.25)) == 1.25
    assert int(nt.full((1,), 7)) == 7
    assert bool(nt.full((), True)) is True
    with pytest.raises(ValueError, match="size 1"):
        nt.zeros((2,)).item()


def test_array_protocol_with_dtype():
    t = nt.arange(4, tile_shape=3)
    out = np.asarray(t, dtype=np.float32)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, np.arange(4, dtype=np.float32))


def test_array_namespace_is_numtile():
    assert nt.zeros((2,)).__array_namespace__() is nt


def test_dtype_names_are_exported():
    assert nt.float32 == np.float32 and nt.float64 == np.float64
    assert nt.int64 == np.int64 and nt.bool == np.bool_
