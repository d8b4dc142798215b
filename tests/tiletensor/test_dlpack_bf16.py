"""DLPack export and import of bfloat16 tiles (kDLBfloat, 16 bits) against torch.from_dlpack,
which NumPy's own DLPack cannot do."""

import ml_dtypes
import numpy as np
import pytest
import torch

import numtile as nt

BITS = np.uint16


@pytest.mark.parametrize("max_version", [None, (1, 0)], ids=["legacy", "versioned"])
def test_bf16_tiles_export_to_torch(max_version):
    values = np.random.default_rng(0).standard_normal((3, 5)).astype(ml_dtypes.bfloat16)
    values[0, :3] = [np.nan, -0.0, np.inf]
    x = nt.from_numpy(values, tile_shape=(2, 2))
    capsule = x.__dlpack__() if max_version is None else x.__dlpack__(max_version=max_version)
    t = torch.utils.dlpack.from_dlpack(capsule)
    assert t.dtype == torch.bfloat16 and t.shape == (3, 5)
    np.testing.assert_array_equal(t.view(torch.int16).numpy().view(BITS), values.view(BITS))
    one = nt.from_numpy(values)  # one tile: its own buffer is exported, no copy
    assert torch.from_dlpack(one).data_ptr() == one.handles[0].host_array().ctypes.data


def test_bf16_torch_tensors_import_sharing_memory():
    src = torch.randn(4, 3).to(torch.bfloat16)
    bits = src.view(torch.int16).numpy().view(BITS).copy()
    x = nt.from_dlpack(src)
    assert x.dtype == nt.bfloat16
    np.testing.assert_array_equal(x.to_numpy().view(BITS), bits)
    shared = nt.asarray(src, copy=False)
    src[0, 0] = 7.0
    assert shared.dtype == nt.bfloat16 and shared.to_numpy()[0, 0] == 7.0
    assert nt.from_dlpack(torch.ones(2)).dtype == np.float32  # other dtypes as before
