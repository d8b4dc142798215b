"""The array API's creation functions (numtile/tiletensor/creation.py, structured.py) against
``array_api_strict`` and NumPy: keywords (dtype, device, copy), default dtypes, any tiling
(tiles that divide nothing, one-element tiles, empty and 0-d arrays), and DLPack producers."""

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import numtile as nt
from tests.tiletensor.test_array_api_hypothesis import SETTINGS, assert_same, retiled, strict, xps

xs = pytest.importorskip("array_api_strict")

TILES = st.integers(1, 5)


@SETTINGS
@given(data=st.data())
def test_arange(data):
    integers = data.draw(st.booleans(), label="integers")
    number = st.integers(-20, 20) if integers else st.floats(-20, 20, width=32)
    start, stop = data.draw(number), data.draw(st.none() | number)
    step = data.draw(number.filter(lambda s: s != 0 and abs(s) > 0.1), label="step")
    expected = xs.arange(start, stop, step)
    ours = nt.arange(start, stop, step, tile_shape=data.draw(TILES))
    assert_same(ours, expected, exact=integers)


@pytest.mark.parametrize("dtype", [None, "float32"])
def test_arange_starts_with_start_itself(dtype):
    # -0.0 + 0 * step is +0.0: the first element is start, its sign included, as NumPy's
    for start, stop, step in ((-0.0, 3.0, 1.0), (-0.0, -2.0, -0.5), (-1e-300, 2.0, 0.5)):
        kwargs = {} if dtype is None else {"dtype": getattr(xs, dtype)}
        expected = xs.arange(start, stop, step, **kwargs)
        kwargs = {} if dtype is None else {"dtype": getattr(nt, dtype)}
        assert_same(nt.arange(start, stop, step, tile_shape=2, **kwargs), expected, exact=True)


@SETTINGS
@given(data=st.data())
def test_linspace(data):
    dtype = data.draw(st.sampled_from([None, "float32", "float64", "complex128"]))
    bound = st.floats(-50, 50) if dtype != "complex128" else st.complex_numbers(max_magnitude=50)
    start, stop = data.draw(bound), data.draw(bound)
    num, endpoint = data.draw(st.integers(0, 12)), data.draw(st.booleans())
    xs_dtype = None if dtype is None else getattr(xs, dtype)
    expected = xs.linspace(start, stop, num, dtype=xs_dtype, endpoint=endpoint)
    ours = nt.linspace(
        start, stop, num, dtype=dtype, endpoint=endpoint, tile_shape=data.draw(TILES)
    )
    assert_same(ours, expected)


@SETTINGS
@given(data=st.data())
def test_eye_tril_triu(data):
    n_rows, n_cols = data.draw(st.integers(0, 6)), data.draw(st.none() | st.integers(0, 6))
    k = data.draw(st.integers(-7, 7), label="k")
    dtype = data.draw(xps.scalar_dtypes(), label="dtype")
    tiles = (data.draw(TILES), data.draw(TILES))
    expected = xs.eye(n_rows, n_cols, k=k, dtype=getattr(xs, dtype.name))
    assert_same(nt.eye(n_rows, n_cols, k=k, dtype=dtype, tile_shape=tiles), expected, exact=True)
    shape = data.draw(xps.array_shapes(min_dims=2, max_dims=4, min_side=0, max_side=5))
    x = data.draw(retiled(data.draw(xps.arrays(dtype, shape))), label="x")
    assert_same(nt.tril(x, k=k), xs.tril(strict(x), k=k), exact=True)
    assert_same(nt.triu(x, k=k), xs.triu(strict(x), k=k), exact=True)


@SETTINGS
@given(data=st.data())
def test_constants_and_likes(data):
    shape = data.draw(xps.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
    dtype = data.draw(st.none() | xps.scalar_dtypes(), label="dtype")
    tiles = tuple(data.draw(TILES) for _ in shape)
    their = None if dtype is None else getattr(xs, dtype.name)
    for name in ("zeros", "ones"):
        ours = getattr(nt, name)(shape, dtype=dtype, tile_shape=tiles, device="cpu")
        assert_same(ours, getattr(xs, name)(shape, dtype=their), exact=True)
    empty = nt.empty(shape, dtype=dtype, tile_shape=tiles)
    assert empty.shape == shape and empty.dtype == np.asarray(xs.empty(shape, dtype=their)).dtype
    value = data.draw(st.booleans() | st.integers(-3, 3) | st.floats(-3, 3) | st.just(2 + 1j))
    if dtype is not None and not np.can_cast(np.min_scalar_type(value), dtype, "same_kind"):
        value = 1  # the standard leaves other mixtures undefined
    assert_same(nt.full(shape, value, dtype=dtype), xs.full(shape, value, dtype=their), exact=True)
    x = data.draw(retiled(data.draw(xps.arrays(xps.scalar_dtypes(), shape))), label="x")
    for name in ("zeros_like", "ones_like"):
        expected = getattr(xs, name)(strict(x), dtype=their)
        ours = getattr(nt, name)(x, dtype=dtype, device=nt.ones(1).device)
        assert ours.tile_shape == x.tile_shape
        assert_same(ours, expected, exact=True)
    assert_same(
        nt.full_like(x, 1, dtype=dtype), xs.full_like(strict(x), 1, dtype=their), exact=True
    )
    assert nt.empty_like(x, dtype=dtype).shape == x.shape


@SETTINGS
@given(data=st.data())
def test_meshgrid(data):
    dtype = data.draw(xps.real_dtypes(), label="dtype")
    count = data.draw(st.integers(1, 3), label="count")
    arrays = [
        data.draw(retiled(data.draw(xps.arrays(dtype, (data.draw(st.integers(0, 4)),)))))
        for _ in range(count)
    ]
    indexing = data.draw(st.sampled_from(["xy", "ij"]), label="indexing")
    ours = nt.meshgrid(*arrays, indexing=indexing)
    theirs = xs.meshgrid(*(strict(a) for a in arrays), indexing=indexing)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs, strict=True):
        assert_same(a, b, exact=True)


@SETTINGS
@given(data=st.data())
def test_asarray_of_nested_sequences_and_scalars(data):
    scalar = st.booleans() | st.integers(-100, 100) | st.floats(allow_nan=False, width=64)
    kind = data.draw(st.sampled_from(["bool", "int", "float"]), label="kind")
    element = {"bool": st.booleans(), "int": st.integers(-100, 100), "float": st.floats(-9, 9)}
    shape = data.draw(xps.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=3))
    values = np.asarray(
        data.draw(
            st.lists(element[kind], min_size=int(np.prod(shape)), max_size=int(np.prod(shape)))
        ),
        dtype=object,
    )
    nested = values.reshape(shape).tolist()
    assert_same(nt.asarray(nested), xs.asarray(nested), exact=True)
    value = data.draw(scalar, label="scalar")
    assert_same(nt.asarray(value), xs.asarray(value), exact=True)


def test_asarray_copy_semantics(check_tiles):
    a = np.arange(6.0).reshape(2, 3)
    shared = nt.asarray(a, copy=False)
    a[0, 0] = 7.0
    assert shared.to_numpy()[0, 0] == 7.0  # one tile on a's own memory
    copied = nt.asarray(a, copy=True)
    a[0, 0] = 8.0
    check_tiles(copied, np.where(np.arange(6).reshape(2, 3) == 0, 7.0, a))
    x = nt.asarray(a, tile_shape=(1, 2))
    assert nt.asarray(x) is x and nt.asarray(x, copy=False) is x
    y = nt.asarray(x, copy=True)
    assert y is not x and y.handles[0] is not x.handles[0]
    check_tiles(y, a)
    check_tiles(nt.asarray(x, dtype=nt.int64), a.astype(np.int64))


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: nt.asarray([1, 2], copy=False), "list cannot become a TileTensor without a copy"),
        (lambda: nt.asarray(np.ones((3, 4))[:, ::2], copy=False), "C-contiguous"),
        (lambda: nt.asarray(np.ones(3), dtype=nt.float32, copy=False), "copy to float32"),
        (
            lambda: nt.asarray(np.ones(8), copy=False, tile_shape=4),
            r"one tile.*tile_shape 4 for shape \(8,\)",
        ),
        (lambda: nt.asarray(nt.ones(3), dtype=nt.int8, copy=False), "a cast"),
        (lambda: nt.asarray(nt.ones(4, tile_shape=2), tile_shape=4, copy=False), "a retile"),
        (lambda: nt.from_dlpack(torch.ones(3, 4)[:, ::2], copy=False), "C-contiguous"),
    ],
)
def test_copy_false_where_a_copy_is_needed_is_a_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_asarray_of_buffers_and_dlpack_producers(check_tiles):
    check_tiles(nt.asarray(bytearray(b"\x01\x02\xff")), np.array([1, 2, 255], np.uint8))
    check_tiles(nt.asarray(memoryview(np.arange(4, dtype=np.int16))), np.arange(4, dtype=np.int16))
    check_tiles(nt.asarray(torch.arange(6, dtype=torch.int32)), np.arange(6, dtype=np.int32))
    check_tiles(nt.asarray(xs.asarray([1.5, 2.5])), np.array([1.5, 2.5]))
    check_tiles(nt.asarray(torch.ones(2, 3), dtype=nt.float64), np.ones((2, 3)))


@pytest.mark.parametrize("producer", ["numpy", "torch"])
def test_from_dlpack(producer, check_tiles):
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    source = torch.from_numpy(a.copy()) if producer == "torch" else a.copy()
    check_tiles(nt.from_dlpack(source), a)
    shared = nt.from_dlpack(source, copy=False)
    source[0, 0] = 42
    assert shared.to_numpy()[0, 0] == 42 and len(shared.handles) == 1
    copied = nt.from_dlpack(source, copy=True)
    source[0, 1] = -1
    assert copied.to_numpy()[0, 1] == 1
    x = nt.from_numpy(a)
    assert nt.from_dlpack(x) is x


def test_creation_bad_input():
    with pytest.raises(ValueError, match="unknown device 'cuda:1'"):
        nt.zeros(3, device="cuda:1")
    with pytest.raises(ValueError, match="number of samples, -1"):
        nt.linspace(0, 1, -1)
    with pytest.raises(TypeError, match="floating or complex dtype, got int64"):
        nt.linspace(0, 1, 3, dtype=nt.int64)
    with pytest.raises(ValueError, match=r"at least 2 dimensions, got shape \(3,\)"):
        nt.tril(nt.ones(3))
    with pytest.raises(ValueError, match="indexing must be 'xy' or 'ij', got 'xx'"):
        nt.meshgrid(nt.ones(2), indexing="xx")
    with pytest.raises(ValueError, match=r"argument 1 is shape \(2, 2\)"):
        nt.meshgrid(nt.ones(2), nt.ones((2, 2)))
    with pytest.raises(TypeError, match=np.dtype(np.longdouble).name):
        nt.asarray(np.ones(2, np.longdouble))
    with pytest.raises(TypeError, match="__dlpack__"):
        nt.from_dlpack([1, 2])
