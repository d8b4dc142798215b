"""bfloat16 through DLPack, which NumPy's DLPack does not speak: it neither exports nor
imports DLPack's ``kDLBfloat`` type (code 4, 16 bits), and ``ml_dtypes.bfloat16`` arrays
refuse ``__dlpack__``.

So a bfloat16 array travels as its uint16 bit patterns with the type code rewritten in the
capsule's ``DLTensor``: exported, NumPy's ``uint16`` capsule (code 1) gets code 4, which
``torch.from_dlpack`` reads as ``torch.bfloat16``; imported, a producer's code-4 capsule
gets code 1 for ``numpy.from_dlpack``, and the uint16 array is viewed as bfloat16. Either
way the memory is shared, never converted. The structs are DLPack's (``dlpack.h``, both the
legacy ``dltensor`` capsule and the versioned ``dltensor_versioned`` one of DLPack 1.0).
"""

from __future__ import annotations

import ctypes

import numpy as np

from numtile.tiletensor.dtypes import bfloat16_dtype

KDL_UINT, KDL_BFLOAT = 1, 4  # DLDataTypeCode
# DLTensor: void* data; DLDevice device (2 x int32); int32 ndim; DLDataType dtype (uint8
# code, uint8 bits, uint16 lanes); ... -> the type code is byte 20 of the DLTensor
_CODE_OFFSET = 20
# DLManagedTensorVersioned: DLPackVersion (2 x uint32), manager_ctx, deleter, uint64 flags,
# then its DLTensor (the legacy DLManagedTensor starts with its DLTensor)
_VERSIONED_OFFSET = 32
_NAMES = {b"dltensor": 0, b"dltensor_versioned": _VERSIONED_OFFSET}

_api = ctypes.pythonapi
_api.PyCapsule_GetName.restype = ctypes.c_char_p
_api.PyCapsule_GetName.argtypes = [ctypes.py_object]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _type_bytes(capsule) -> ctypes.Array:
    """The (code, bits) bytes of the DLTensor inside an unconsumed DLPack ``capsule``."""
    name = _api.PyCapsule_GetName(capsule)
    if name not in _NAMES:
        raise BufferError(f"not an unconsumed DLPack capsule (its name is {name!r})")
    address = _api.PyCapsule_GetPointer(capsule, name) + _NAMES[name] + _CODE_OFFSET
    return (ctypes.c_uint8 * 2).from_address(address)


def _retype(capsule, old: int, new: int) -> bool:
    """Rewrite a 16-bit type code ``old`` to ``new`` in ``capsule``; whether it had it."""
    code_bits = _type_bytes(capsule)
    if (code_bits[0], code_bits[1]) != (old, 16):
        return False
    code_bits[0] = new
    return True


def export_bf16(array: np.ndarray, max_version=None):
    """A DLPack capsule of the bfloat16 ``array`` (its memory, type code ``kDLBfloat``)."""
    bits = array.view(np.uint16)
    if max_version is None:
        capsule = bits.__dlpack__()
    else:
        capsule = bits.__dlpack__(max_version=max_version, copy=False)
    assert _retype(capsule, KDL_UINT, KDL_BFLOAT)
    return capsule


class _Bits:
    """A DLPack producer seen through NumPy: its bfloat16 capsules retyped to uint16."""

    def __init__(self, producer) -> None:
        self.producer, self.bf16 = producer, False

    def __dlpack_device__(self):
        return self.producer.__dlpack_device__()

    def __dlpack__(self, **options):
        capsule = self.producer.__dlpack__(**options)
        self.bf16 = _retype(capsule, KDL_BFLOAT, KDL_UINT)
        return capsule


def from_dlpack_array(x, copy=None) -> np.ndarray:
    """``numpy.from_dlpack(x, copy=copy)``, bfloat16 producers (``kDLBfloat``) included."""
    bits = _Bits(x)
    array = np.from_dlpack(bits, copy=copy)
    return array.view(bfloat16_dtype()) if bits.bf16 else array
