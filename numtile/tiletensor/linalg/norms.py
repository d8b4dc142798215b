"""Matrix norms over the last two axes."""

from __future__ import annotations

import numpy as np

from numtile.tiletensor.dispatch import dispatched
from numtile.tiletensor.elementwise import abs as absolute
from numtile.tiletensor.manipulation import reshape
from numtile.tiletensor.reduction import max as tensor_max
from numtile.tiletensor.reduction import require_tensor, vector_norm
from numtile.tiletensor.reduction import sum as tensor_sum
from numtile.tiletensor.tensor import TileTensor


@dispatched(public="numtile.linalg.matrix_norm")
def matrix_norm(x: TileTensor, /, *, keepdims: bool = False, ord="fro") -> TileTensor:
    """Matrix norm over the last two axes: ``'fro'`` (Frobenius), 1 or inf; 2, -2 and
    ``'nuc'`` (through the singular values) of a 2-d matrix.

    >>> import numtile as nt
    >>> nt.linalg.matrix_norm(nt.full((2, 2), 2.0)).item()
    4.0
    """
    require_tensor(x, "matrix_norm")
    if x.ndim < 2:
        raise ValueError(f"matrix_norm needs at least 2 axes, got shape {x.shape}")
    if ord == "fro":
        return vector_norm(x, axis=(-2, -1), keepdims=keepdims)
    if ord in (1, np.inf, "inf"):
        # 1: largest column sum of |x|; inf: largest row sum
        summed, largest = (-2, -1) if ord == 1 else (-1, -2)
        sums = tensor_sum(absolute(x), axis=summed, keepdims=True)
        if keepdims:
            return tensor_max(sums, axis=largest, keepdims=True)
        return reshape(tensor_max(sums, axis=largest), x.shape[:-2])
    if ord in (2, -2, "nuc"):  # through the singular values (linalg/spectral.py)
        from numtile.tiletensor.linalg.spectral import spectral_norm

        return spectral_norm(x, ord, keepdims)
    raise ValueError(
        f"matrix_norm: unsupported ord {ord!r}; expected 'fro', 1, inf, 2, -2 or 'nuc'"
    )
