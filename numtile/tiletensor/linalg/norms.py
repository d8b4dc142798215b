"""Matrix norms over the last two axes of a stack: Frobenius and the induced 1 and inf norms
(with their -1 and -inf minima); 2, -2 and nuclear through the singular values."""

from __future__ import annotations

import numpy as np

from numtile.tiletensor.dispatch import dispatched
from numtile.tiletensor.manipulation import reshape
from numtile.tiletensor.reduction import max as tensor_max
from numtile.tiletensor.reduction import min as tensor_min
from numtile.tiletensor.reduction import require_inexact, vector_norm
from numtile.tiletensor.tensor import TileTensor

_INDUCED = {1: (-2, -1), -1: (-2, -1), np.inf: (-1, -2), -np.inf: (-1, -2)}


@dispatched(public="numtile.linalg.matrix_norm")
def matrix_norm(x: TileTensor, /, *, keepdims: bool = False, ord="fro") -> TileTensor:
    """Matrix norm over the last two axes: ``'fro'`` (Frobenius), 1 / -1 (largest / smallest
    column sum of ``|x|``), inf / -inf (largest / smallest row sum); 2, -2 and ``'nuc'``
    (through the singular values, ``linalg/spectral.py``) of each matrix of the stack. Real
    or complex floating input (complex64 -> float32); integers and booleans raise
    ``TypeError``, as in the standard.

    >>> import numtile as nt, numpy as np
    >>> x = nt.from_numpy(np.array([[1.0, -2.0], [3.0, 4.0]]), tile_shape=(1, 2))
    >>> [nt.linalg.matrix_norm(x, ord=o).item() for o in (1, -1, np.inf, -np.inf)]
    [6.0, 4.0, 7.0, 3.0]
    """
    require_inexact(x, "matrix_norm")
    if x.ndim < 2:
        raise ValueError(f"matrix_norm needs at least 2 axes, got shape {x.shape}")
    if ord == "fro":
        return vector_norm(x, axis=(-2, -1), keepdims=keepdims)
    if isinstance(ord, (int, float)) and not isinstance(ord, bool) and ord in _INDUCED:
        summed, picked = _INDUCED[ord]
        # column or row sums of |x|: a 1-norm, read by the reduction kernels (complex too)
        sums = vector_norm(x, axis=summed, keepdims=True, ord=1)
        pick = tensor_max if ord > 0 else tensor_min
        if keepdims:
            return pick(sums, axis=picked, keepdims=True)
        return reshape(pick(sums, axis=picked), x.shape[:-2])
    if ord in (2, -2, "nuc"):  # through the singular values (linalg/spectral.py)
        from numtile.tiletensor.linalg.spectral import spectral_norm

        return spectral_norm(x, ord, keepdims)
    raise ValueError(
        f"matrix_norm: unsupported ord {ord!r}; expected 'fro', 1, -1, inf, -inf, 2, -2 or 'nuc'"
    )
