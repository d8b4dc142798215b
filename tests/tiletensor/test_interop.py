"""NumPy interop and DLPack (numtile/tiletensor/interop.py and TileTensor's dunders): NumPy
functions and ufuncs on TileTensors return TileTensors computed by numtile, a function numtile
lacks raises TypeError naming it, and DLPack round-trips with NumPy and PyTorch."""

import numpy as np
import pytest
import torch

import numtile as nt
from numtile.runtime import get_runtime

A = np.arange(1.0, 13.0).reshape(3, 4)
B = np.linspace(-2, 2, 12).reshape(3, 4)


@pytest.fixture(name="t")
def tiled():
    return nt.from_numpy(A, tile_shape=(2, 3))


CALLS = {
    "exp": lambda m, x: m.exp(x),
    "add scalar": lambda m, x: m.add(x, 1),
    "absolute": lambda m, x: m.absolute(-x),
    "true_divide": lambda m, x: m.true_divide(x, 2),
    "maximum": lambda m, x: m.maximum(x, 5.0),
    "greater": lambda m, x: m.greater(x, 4),
    "isnan": lambda m, x: m.isnan(x),
    "matmul": lambda m, x: m.matmul(x, m.transpose(x)),
    "add.reduce": lambda m, x: m.add.reduce(x, axis=1),
    "sum axis 0": lambda m, x: m.sum(x, axis=0),
    "sum keepdims": lambda m, x: m.sum(x, axis=1, keepdims=True),
    "sum all": lambda m, x: m.sum(x),
    "mean": lambda m, x: m.mean(x, axis=1),
    "max": lambda m, x: m.max(x, axis=0),
    "amin": lambda m, x: m.amin(x),
    "prod": lambda m, x: m.prod(x, axis=1),
    "concatenate": lambda m, x: m.concatenate([x, x]),
    "concatenate axis 1": lambda m, x: m.concatenate((x, x), axis=1),
    "stack": lambda m, x: m.stack([x, x], axis=-1),
    "where": lambda m, x: m.where(x > 4, x, 0),
    "transpose": lambda m, x: m.transpose(x),
    "transpose axes": lambda m, x: m.transpose(m.reshape(x, (3, 2, 2)), (2, 0, 1)),
    "reshape": lambda m, x: m.reshape(x, (4, 3)),
    "ravel": lambda m, x: m.ravel(x),
    "squeeze": lambda m, x: m.squeeze(m.expand_dims(x, 0)),
    "flip": lambda m, x: m.flip(x, 1),
    "roll": lambda m, x: m.roll(x, 2, axis=1),
    "moveaxis": lambda m, x: m.moveaxis(x, 0, -1),
    "tile": lambda m, x: m.tile(x, (2, 1)),
    "repeat": lambda m, x: m.repeat(x, 2, axis=0),
    "broadcast_to": lambda m, x: m.broadcast_to(x, (2, 3, 4)),
    "tril": lambda m, x: m.tril(x, -1),
    "zeros_like": lambda m, x: m.zeros_like(x),
    "full_like": lambda m, x: m.full_like(x, 7.0),
    "astype": lambda m, x: m.astype(x, m.float32),
    "linalg.matmul": lambda m, x: m.linalg.matmul(x, m.transpose(x)),
    # numtile's sorts are stable: every NumPy kind is satisfied
    "sort stable": lambda m, x: m.sort(-x, axis=1, kind="stable"),
    "sort quicksort": lambda m, x: m.sort(-x, axis=0, kind="quicksort"),
    "argsort": lambda m, x: m.argsort(-x, axis=1, kind="stable"),
    "searchsorted": lambda m, x: m.searchsorted(m.ravel(x), m.ravel(x) - 0.5),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_numpy_functions_run_numtile_ops(name, t, check_tiles):
    call = CALLS[name]
    with np.errstate(all="ignore"):
        expected = call(np, A)
    out = call(np, t)
    assert isinstance(out, nt.TileTensor), type(out)
    check_tiles(out, expected)


def test_no_gather_happens(t, monkeypatch):
    def refuse(self):
        raise AssertionError("gathered")

    monkeypatch.setattr(nt.TileTensor, "to_numpy", refuse)
    out = np.concatenate([np.exp(t), np.sum(t, axis=0, keepdims=True)])
    assert isinstance(out, nt.TileTensor) and out.shape == (4, 4)


def test_metadata_functions_need_no_task(t):
    assert (np.shape(t), np.ndim(t), np.size(t), np.size(t, 1)) == ((3, 4), 2, 12, 4)
    assert np.result_type(t, np.float32) == np.float64
    assert np.asarray(t).tolist() == A.tolist() and np.array(t, dtype=np.int64).dtype == np.int64


@pytest.mark.parametrize(
    "call, named",
    [
        (lambda x: np.fft.fft(x), "numpy.fft.fft"),
        (lambda x: np.median(x), "numpy.median"),
        (lambda x: np.allclose(x, x), "numpy.allclose"),
        (lambda x: np.linalg.eig(x), "numpy.linalg.eig"),
        (lambda x: np.add.accumulate(x), "numpy.add.accumulate"),
        (lambda x: np.add.reduce(x, initial=1.0), r"numpy.add.reduce\(..., initial"),
        (lambda x: np.exp(x, out=np.empty((3, 4))), "numpy.exp"),
        (lambda x: np.sum(x, out=np.empty(())), "numpy.sum"),
        (lambda x: np.concatenate([x, x], casting="unsafe"), "casting"),
        (lambda x: B + x, "ambiguous; convert it with nt.from_numpy"),
        (lambda x: np.multiply(x, B), "numpy.multiply: mixing"),
        (lambda x: np.concatenate([x, B]), "numpy.concatenate: mixing"),
        (lambda x: np.where(B > 0, x, 0), "numpy.where: mixing"),
    ],
)
def test_a_function_numtile_lacks_raises_type_error_naming_it(call, named, t):
    if "numpy.add." in named:
        # NumPy (2.4) keeps a reference to the operand when an override of a ufunc's
        # reduce/accumulate raises (or returns NotImplemented): a tensor without tiles leaks
        # nothing that a later memory-limited runtime would count
        t = nt.zeros((0, 4))
    with pytest.raises(TypeError, match=named.replace(".", r"\.")):
        call(t)


def test_dlpack_to_numpy_and_torch(t):
    assert t.__dlpack_device__() == (1, 0)
    np.testing.assert_array_equal(np.from_dlpack(t), A)
    from_torch = torch.from_dlpack(t)
    assert from_torch.dtype == torch.float64
    np.testing.assert_array_equal(from_torch.numpy(), A)
    ints = nt.from_numpy(np.arange(10, dtype=np.int16), tile_shape=3)
    assert torch.from_dlpack(ints).tolist() == list(range(10))
    assert np.from_dlpack(t, copy=True).shape == (3, 4)
    assert type(t.__dlpack__(max_version=(1, 0))).__name__ == "PyCapsule"


def test_dlpack_of_one_tile_exports_its_own_buffer():
    x = nt.from_numpy(A)
    exported = np.from_dlpack(x, copy=False)
    get_runtime().wait_handles(x.handles)
    assert np.shares_memory(exported, x.handles[0].host_array())
    assert not np.shares_memory(np.from_dlpack(x, copy=True), x.handles[0].host_array())


def test_dlpack_bad_requests(t):
    with pytest.raises(BufferError, match=r"copy=False, but a tensor of 4 tiles \(2, 2\)"):
        t.__dlpack__(copy=False)
    with pytest.raises(BufferError, match=r"not \(2, 0\)"):
        t.__dlpack__(dl_device=(2, 0))
    with pytest.raises(ValueError, match="stream must be None, got 3"):
        t.__dlpack__(stream=3)


def test_round_trip_through_torch(check_tiles):
    x = nt.from_numpy(A.astype(np.float32), tile_shape=(2, 2))
    back = nt.from_dlpack(torch.from_dlpack(x) * 2)
    check_tiles(back, 2 * A.astype(np.float32))
