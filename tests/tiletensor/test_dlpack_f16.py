"""DLPack export and import of float16 tiles (kDLFloat, 16 bits) against torch.from_dlpack:
NumPy's own DLPack carries them, with no retyping (bfloat16's is in test_dlpack_bf16.py)."""

import numpy as np
import pytest
import torch

import numtile as nt
from numtile.tiletensor.dlpack_bf16 import _type_bytes

KDL_FLOAT = 2


@pytest.mark.parametrize("max_version", [None, (1, 0)], ids=["legacy", "versioned"])
def test_f16_tiles_export_to_torch(max_version):
    values = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float16)
    values[0, :3] = [np.nan, -0.0, np.inf]
    x = nt.from_numpy(values, tile_shape=(2, 2))
    capsule = x.__dlpack__() if max_version is None else x.__dlpack__(max_version=max_version)
    assert tuple(_type_bytes(capsule)) == (KDL_FLOAT, 16)
    t = torch.utils.dlpack.from_dlpack(capsule)
    assert t.dtype == torch.float16 and t.shape == (3, 5)
    np.testing.assert_array_equal(t.numpy().view(np.uint16), values.view(np.uint16))
    one = nt.from_numpy(values)  # one tile: its own buffer is exported, no copy
    assert torch.from_dlpack(one).data_ptr() == one.handles[0].host_array().ctypes.data


def test_f16_torch_tensors_import_sharing_memory():
    src = torch.randn(4, 3).to(torch.float16)
    x = nt.from_dlpack(src)
    assert x.dtype == nt.float16
    np.testing.assert_array_equal(x.to_numpy().view(np.uint16), src.numpy().view(np.uint16))
    shared = nt.asarray(src, copy=False)
    src[0, 0] = 7.0
    assert shared.dtype == nt.float16 and shared.to_numpy()[0, 0] == 7.0
