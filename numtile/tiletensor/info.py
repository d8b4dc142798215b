"""``numtile.__array_namespace_info__()``: what this array API namespace supports."""

from __future__ import annotations

from numtile.tiletensor import dtypes
from numtile.tiletensor.tensor import CPU, Device


class Info:
    """The array API's inspection object: capabilities, devices, default and all dtypes.

    >>> import numtile as nt
    >>> info = nt.__array_namespace_info__()
    >>> info.default_dtypes()["real floating"], sorted(info.dtypes(kind="unsigned integer"))
    (dtype('float64'), ['uint16', 'uint32', 'uint64', 'uint8'])
    """

    def capabilities(self) -> dict:
        """Boolean-mask indexing and data-dependent output shapes are not supported yet."""
        return {"boolean indexing": False, "data-dependent shapes": False}

    def default_device(self) -> Device:
        return CPU

    def devices(self) -> list[Device]:
        return [CPU]

    def default_dtypes(self, *, device=None) -> dict:
        _check(device)
        return {
            "real floating": dtypes.float64,
            "complex floating": dtypes.complex128,
            "integral": dtypes.int64,
            "indexing": dtypes.int64,
        }

    def dtypes(self, *, device=None, kind=None) -> dict:
        """The dtypes of ``kind`` (a kind name of ``isdtype``, a tuple of them, or None for
        all), by name."""
        _check(device)
        return {
            dtype.name: dtype
            for dtype in dtypes.STANDARD
            if kind is None or dtypes.isdtype(dtype, kind)
        }


def _check(device) -> None:
    if device is not None and device != CPU:
        raise ValueError(f"unknown device {device!r}; numtile has one device, 'cpu'")


def __array_namespace_info__() -> Info:
    """The inspection object of the numtile namespace (array API 2023.12)."""
    return Info()
