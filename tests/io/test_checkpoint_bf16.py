"""HDF5 checkpoints of bfloat16 tensors: uint16 bit patterns with a ``dtype`` attribute, bit
for bit back in numtile, and documented data for a plain h5py reader."""

import h5py
import ml_dtypes
import numpy as np
import pytest

import numtile as nt
from numtile.io import checkpoint_info, load_checkpoint, save_checkpoint


def test_bf16_tensors_round_trip_bit_for_bit_and_read_plainly(tmp_path):
    rng = np.random.default_rng(0)
    values = rng.standard_normal((5, 7)).astype(ml_dtypes.bfloat16)
    values[0, :4] = [np.inf, -np.inf, np.nan, -0.0]
    tensors = {
        "model/w": nt.from_numpy(values, tile_shape=(2, 3)),  # ragged tiles
        "model/scale": nt.from_numpy(np.array(1.5, ml_dtypes.bfloat16)),  # 0-d: CRC-32
        "model/b": nt.from_numpy(np.arange(3, dtype=np.float32)),
    }
    path = tmp_path / "bf16.h5"
    save_checkpoint(path, tensors)
    assert checkpoint_info(path)["dtypes"] == {
        "model/w": "bfloat16",
        "model/scale": "bfloat16",
        "model/b": "float32",
    }
    loaded, _ = load_checkpoint(path, like=tensors)
    for name, tensor in tensors.items():
        assert loaded[name].dtype == tensor.dtype
        bits = np.uint16 if tensor.dtype == nt.bfloat16 else np.uint32
        got, want = (np.atleast_1d(t.to_numpy()).view(bits) for t in (loaded[name], tensor))
        np.testing.assert_array_equal(got, want, err_msg=name)  # NaN, -0.0 included
    with h5py.File(path) as f:  # what the module docstring tells a plain reader
        bits = f["model/w"][...]
        assert bits.dtype == np.uint16 and f["model/w"].attrs["dtype"] == "bfloat16"
        assert "dtype" not in f["model/b"].attrs
        wide = (bits.astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_array_equal(wide, values.astype(np.float32))
    with pytest.raises(ValueError, match="'model/w' holds NaN or infinity"):
        save_checkpoint(tmp_path / "checked.h5", tensors, check_finite=True)
