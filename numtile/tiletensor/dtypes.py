"""The dtypes a TileTensor can hold, and NumPy's promotion rules for them."""

from __future__ import annotations

import numpy as np

float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
int64 = np.dtype(np.int64)
bool_ = np.dtype(np.bool_)

SUPPORTED = (float32, float64, int64, bool_)


def check_dtype(dtype) -> np.dtype:
    """Return ``dtype`` as a native-byte-order NumPy dtype, or raise ``TypeError`` if numtile
    cannot hold it (``">f8"``, big-endian float64, is float64: tiles are in native order)."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{dtype!r} is not a dtype") from None
    if not dt.isnative:
        dt = dt.newbyteorder("=")
    if dt not in SUPPORTED:
        names = ", ".join(d.name for d in SUPPORTED)
        raise TypeError(f"unsupported dtype {dt.name}; numtile tensors hold {names} (use astype)")
    return dt


def result_type(*operands) -> np.dtype:
    """NumPy 2 promotion (Python scalars are weak), restricted to the supported dtypes."""
    return check_dtype(np.result_type(*operands))
