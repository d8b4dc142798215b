"""Precision modes of a model: ``fp32``, ``bf16-mixed``, ``fp32-fast-bf16`` and ``tf32``.

A mode is chosen per model (``model.set_precision(mode)``: its forward, and the backward of
that forward, run in it) or per block of code (``with nt.nn.precision(mode):``); a model's
own mode wins inside its forward. What each mode does to a GEMM is in
``numtile.tiletensor.precision``: parameters, AdamW state and gradients always stay float32
(the master weights), so a checkpoint saved in one mode resumes in any other.

``bf16-mixed`` also stores activations in bfloat16, as ``torch.autocast`` does: a linear
layer casts its input and weight to bfloat16 (and keeps those for the backward), sums its
GEMMs in float32 and writes a bfloat16 output, rounded once with the bias added; attention,
GELU/SiLU and products of bfloat16 activations stay bfloat16; norms, rotary embeddings and
the loss read bfloat16 and compute in float32 (the loss is float32); the residual stream,
which adds a bfloat16 branch to a float32 sum, stays float32; weight gradients are summed in
float32.

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
