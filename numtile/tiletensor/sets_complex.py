"""The sorted order of a complex tensor for the set functions (``unique_*``).

There is no complex sort kernel: the order is built from stable sorts of real keys, least
significant first, their permutations composed by gathers (``take_positions``: each waits for
the permutation, as a gather does). The order is NumPy's for complex values: first those with
no NaN part, by real then imaginary part; then those with a NaN imaginary part only, by real
part; then those with a NaN real part only, by imaginary part; then those with both parts NaN.
Equal values keep their order (the sorts are stable), so the first of each group is its first
occurrence.
"""

from __future__ import annotations

from numtile.tiletensor.dtypes import int8, int64
from numtile.tiletensor.elementwise import imag, real
from numtile.tiletensor.elementwise_core import astype
from numtile.tiletensor.indexing import take_positions
from numtile.tiletensor.logic import any as any_
from numtile.tiletensor.logic import isnan
from numtile.tiletensor.sorting import sorted_with_indices
from numtile.tiletensor.tensor import TileTensor


def _then_by(order: TileTensor, key: TileTensor) -> TileTensor:
    """``order`` (a permutation of ``key``'s positions) stably sorted by ``key``'s values."""
    keys = take_positions(key, order.to_numpy(), 0)
    return take_positions(order, sorted_with_indices(keys, 0, False)[1].to_numpy(), 0)


def sorted_complex(flat: TileTensor) -> tuple[TileTensor, TileTensor]:
    """(values, indices) of the 1-D complex ``flat`` stably sorted in NumPy's complex order
    (both tiled like ``flat``)."""
    if flat.size == 0:
        return TileTensor(flat.layout, flat.dtype), TileTensor(flat.layout, int64)
    re, im = real(flat), imag(flat)
    order = sorted_with_indices(im, 0, False)[1]  # NaNs last
    order = _then_by(order, re)
    re_nan, im_nan = isnan(re), isnan(im)
    if bool(any_(re_nan | im_nan)):  # the NaN classes, in order: imaginary, real, both
        order = _then_by(order, astype(re_nan, int8) * 2 + astype(im_nan, int8))
    return take_positions(flat, order.to_numpy(), 0), order
