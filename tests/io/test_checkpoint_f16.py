"""HDF5 checkpoints of float16 tensors: HDF5's own IEEE half type (no attribute needed), bit
for bit back in numtile, and what a plain h5py reader gets."""

import h5py
import numpy as np

import numtile as nt
from numtile.io import checkpoint_info, load_checkpoint, save_checkpoint


def test_f16_tensors_round_trip_bit_for_bit_and_read_plainly(tmp_path):
    values = np.random.default_rng(0).standard_normal((5, 7)).astype(np.float16)
    values[0, :6] = [np.inf, -np.inf, np.nan, -0.0, 6e-8, 65504]  # a subnormal, the largest
    tensors = {
        "model/w": nt.from_numpy(values, tile_shape=(2, 3)),  # ragged tiles
        "model/scale": nt.from_numpy(np.array(-1.5, np.float16)),  # 0-d: CRC-32
    }
    path = tmp_path / "f16.h5"
    save_checkpoint(path, tensors)
    assert checkpoint_info(path)["dtypes"] == {"model/w": "float16", "model/scale": "float16"}
    loaded, _ = load_checkpoint(path, like=tensors)
    for name, tensor in tensors.items():
        assert loaded[name].dtype == np.float16
        got, want = (np.atleast_1d(t.to_numpy()).view(np.uint16) for t in (loaded[name], tensor))
        np.testing.assert_array_equal(got, want, err_msg=name)  # NaN, -0.0 included
    with h5py.File(path) as f:
        data = f["model/w"]
        assert data.dtype == np.float16 and "dtype" not in data.attrs
        assert data.chunks == (2, 3) and data.fletcher32
        np.testing.assert_array_equal(data[...].view(np.uint16), values.view(np.uint16))
