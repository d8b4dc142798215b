"""Every codelet of the tiled ops, by op family; each wraps kernels for the runtime.

A codelet's kernel is written once for every backend: ``ops`` is the namespace the worker
kind provides (the CPU kernels, or the CUDA ones with the worker's stream bound). Families
of ops sharing one kernel (``unary``, ``binary``, ``reduce``, ...) get one codelet per op,
named ``family:op`` (``unary:gelu_tanh``), so traces, ``runtime_summary()`` and the
performance models of ``dmda`` tell the ops apart.
"""

from numtile.tiletensor.codelets import (
    activated,
    copy,
    decode,
    elementwise,
    indexing,
    linalg,
    lu,
    narrow,
    nn,
    reduction,
    sorting,
)

__all__ = [
    "activated",
    "copy",
    "decode",
    "elementwise",
    "indexing",
    "linalg",
    "lu",
    "narrow",
    "nn",
    "reduction",
    "sorting",
]
from numtile.tiletensor.codelets import qr

__all__ = ["copy", "decode", "elementwise", "linalg", "lu", "nn", "qr", "reduction"]
