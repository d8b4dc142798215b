"""Precision modes of a model: ``fp32``, ``bf16-mixed``, ``fp32-fast-bf16`` and ``tf32``.

A mode is chosen per model (``model.set_precision(mode)``: its forward, and the backward of
that forward, run in it) or per block of code (``with nt.nn.precision(mode):``); a model's
own mode wins inside its forward. What each mode does to a GEMM is in
``numtile.tiletensor.precision``: parameters, AdamW state and gradients always stay float32
(the master weights), so a checkpoint saved in one mode resumes in any other.

Where the hardware lacks the units of a mode (TF32 anywhere but an sm_80+ GPU; bf16 on a CPU
without AVX512-BF16/AMX), choosing it warns once, naming the fallback taken: the same
numbers, computed by the float32 GEMM.

>>> import numtile as nt, warnings
>>> layer = nt.nn.Linear(4, 2, tile=(4, 2))
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore")
...     layer.set_precision("fp32-fast-bf16").precision
'fp32-fast-bf16'
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from numtile.tiletensor.precision import (
    MODES,
    PrecisionFallbackWarning,
    check_mode,
    current_precision,
    using_precision,
    warn_fallback,
)

__all__ = ["MODES", "PrecisionFallbackWarning", "current_precision", "precision"]


@contextlib.contextmanager
def precision(mode: str) -> Iterator[str]:
    """Run the GEMMs submitted in the block (forward and the backward of forwards made in
    it) in precision ``mode``; warns once if the hardware falls back.

    >>> import numtile as nt, numpy as np, warnings
    >>> a = nt.from_numpy(np.full((2, 2), 1 + 2.0**-10, np.float32))
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     with precision("fp32-fast-bf16"):
    ...         (a @ a).to_numpy()[0, 0].item()  # inputs rounded to bf16: 1.0
    2.0
    """
    check_mode(mode)
    warn_fallback(mode)
    with using_precision(mode):
        yield mode
