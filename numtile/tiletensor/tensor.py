"""``TileTensor``: a layout, a dtype and one data handle per tile."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from numtile.runtime import DataHandle, get_runtime
from numtile.tiletensor.dtypes import check_dtype
from numtile.tiletensor.layout import Layout

_BYTES_PER_TILE = 512  # a DataHandle and its bookkeeping (measured: about 450 bytes)


def _check_tile_count(layout: Layout, dtype: np.dtype) -> None:
    """Refuse, before allocating anything, a tensor whose tile handles alone exceed RAM."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # not POSIX: no cheap way to know
        return
    needed = layout.ntiles * _BYTES_PER_TILE
    if needed > memory:
        raise MemoryError(
            f"a tensor of shape {layout.shape} in tiles of {layout.tile_shape} has "
            f"{layout.ntiles:,} tiles, whose bookkeeping alone needs about {needed:,} bytes "
            f"({_BYTES_PER_TILE} per tile), more than this machine's {memory:,} bytes of "
            f"memory (its data is {layout.size * dtype.itemsize:,} bytes): use a larger "
            f"tile_shape"
        )


class TileTensor:
    """An N-d array cut into tiles; operations on it submit tile tasks and return at once.

    Results materialise on ``to_numpy()`` (or ``numpy.asarray``), which waits only for the
    tasks producing this tensor's tiles.

    >>> import numtile as nt, numpy as np
    >>> x = nt.from_numpy(np.arange(6.0).reshape(2, 3), tile_shape=(1, 2))
    >>> x
    TileTensor(shape=(2, 3), tile_shape=(1, 2), grid=(2, 2), dtype=float64)
    >>> (x * 2 + 1).to_numpy().tolist()
    [[1.0, 3.0, 5.0], [7.0, 9.0, 11.0]]
    """

    __slots__ = ("layout", "dtype", "handles", "requires_grad", "grad", "_node", "__weakref__")
    __array_priority__ = 100  # so ``ndarray op TileTensor`` defers to TileTensor

    def __init__(self, layout: Layout, dtype, handles: Sequence[DataHandle] | None = None):
        self.layout = layout
        self.dtype = check_dtype(dtype)
        if handles is None:
            _check_tile_count(layout, self.dtype)
            dtype = self.dtype
            handles = [DataHandle(shape, dtype) for shape in layout.tile_shapes()]
        assert len(handles) == layout.ntiles
        self.handles = list(handles)
        self.requires_grad = False
        self.grad: TileTensor | None = None
        self._node = None  # the autograd node that produced this tensor, if recorded

    # -- metadata ---------------------------------------------------------------------------

    @property
    def shape(self) -> tuple[int, ...]:
        return self.layout.shape

    @property
    def tile_shape(self) -> tuple[int, ...]:
        return self.layout.tile_shape

    @property
    def grid(self) -> tuple[int, ...]:
        return self.layout.grid

    @property
    def ndim(self) -> int:
        return self.layout.ndim

    @property
    def size(self) -> int:
        return self.layout.size

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def device(self) -> str:
        return "cpu"

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def tile(self, index: Sequence[int]) -> DataHandle:
        """The data handle of tile ``index`` (a tuple with one entry per axis)."""
        flat = 0
        for i, g in zip(index, self.grid):
            if not 0 <= i < g:
                raise IndexError(f"tile index {tuple(index)} out of range for grid {self.grid}")
            flat = flat * g + i
        return self.handles[flat]

    def __repr__(self) -> str:
        return (
            f"TileTensor(shape={self.shape}, tile_shape={self.tile_shape}, grid={self.grid}, "
            f"dtype={self.dtype.name})"
        )

    # -- data -------------------------------------------------------------------------------

    def to_numpy(self) -> np.ndarray:
        """Wait for this tensor's tiles and gather them into one new NumPy array."""
        get_runtime().wait_handles(self.handles)
        out = np.empty(self.shape, self.dtype)
        for index, handle in zip(self.layout.indices(), self.handles):
            region = tuple(slice(a, b) for a, b in self.layout.tile_bounds(index))
            out[region] = handle.host_array()
        return out

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        out = self.to_numpy()
        return out if dtype is None else out.astype(dtype, copy=False)

    def wait(self) -> TileTensor:
        """Block until this tensor's tiles are computed; re-raise a task error if one failed."""
        get_runtime().wait_handles(self.handles)
        return self

    def item(self):
        if self.size != 1:
            raise ValueError(f"item() needs a tensor of size 1, got shape {self.shape}")
        return self.to_numpy().reshape(()).item()

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __bool__(self) -> bool:
        return bool(self.item())

    def invalidate(self) -> None:
        """Declare the contents no longer needed: memory is freed once pending reads finish."""
        runtime = get_runtime()
        for handle in self.handles:
            runtime.invalidate(handle)

    def wont_use(self) -> None:
        """Hint that this tensor will not be used soon (evicted first under memory pressure)."""
        runtime = get_runtime()
        for handle in self.handles:
            runtime.wont_use(handle)

    def __array_namespace__(self, api_version: str | None = None):
        import numtile

        return numtile

    # -- operators and methods (the functions live in their own modules) ------------------

    def __add__(self, other):
        return _ad.add(self, other)

    def __radd__(self, other):
        return _ad.add(other, self)

    def __sub__(self, other):
        return _ad.subtract(self, other)

    def __rsub__(self, other):
        return _ad.subtract(other, self)

    def __mul__(self, other):
        return _ad.multiply(self, other)

    def __rmul__(self, other):
        return _ad.multiply(other, self)

    def __truediv__(self, other):
        return _ad.divide(self, other)

    def __rtruediv__(self, other):
        return _ad.divide(other, self)

    def __floordiv__(self, other):
        return _ew.floor_divide(self, other)

    def __rfloordiv__(self, other):
        return _ew.floor_divide(other, self)

    def __mod__(self, other):
        return _ew.remainder(self, other)

    def __rmod__(self, other):
        return _ew.remainder(other, self)

    def __pow__(self, other):
        return _ad.pow(self, other)

    def __rpow__(self, other):
        return _ew.pow(other, self)

    def __matmul__(self, other):
        return _ad.matmul(self, other)

    def __rmatmul__(self, other):
        return _ad.matmul(other, self)

    def __neg__(self):
        return _ad.negative(self)

    def __pos__(self):
        return self

    def __abs__(self):
        return _ew.abs(self)

    def __eq__(self, other):  # type: ignore[override]
        return _ew.equal(self, other)

    def __ne__(self, other):  # type: ignore[override]
        return _ew.not_equal(self, other)

    def __lt__(self, other):
        return _ew.less(self, other)

    def __le__(self, other):
        return _ew.less_equal(self, other)

    def __gt__(self, other):
        return _ew.greater(self, other)

    def __ge__(self, other):
        return _ew.greater_equal(self, other)

    def __and__(self, other):
        return _ew.logical_and(self, other)

    def __or__(self, other):
        return _ew.logical_or(self, other)

    __hash__ = None  # type: ignore[assignment]  (== is elementwise)

    def __getitem__(self, key):
        if self.requires_grad and _tape.is_grad_enabled():
            raise NotImplementedError(
                "indexing is not differentiable yet; index x.detach() or use nt.no_grad()"
            )
        return _manip.getitem(self, key)

    def astype(self, dtype, copy: bool = True) -> TileTensor:
        return _ad.astype(self, dtype, copy)

    def retile(self, tile_shape) -> TileTensor:
        return _manip.retile(self, tile_shape)

    def reshape(self, *shape) -> TileTensor:
        return _ad.reshape(self, shape[0] if len(shape) == 1 else shape)

    def transpose(self, *axes) -> TileTensor:
        return _ad.transpose(self, axes[0] if len(axes) == 1 else (axes or None))

    def permute_dims(self, axes) -> TileTensor:
        return _ad.permute_dims(self, axes)

    @property
    def T(self) -> TileTensor:
        if self.ndim != 2:
            raise ValueError(f".T needs a 2-d tensor (array API), got shape {self.shape}")
        return _ad.transpose(self)

    @property
    def mT(self) -> TileTensor:
        return _ad.matrix_transpose(self)

    def sum(self, axis=None, keepdims: bool = False, dtype=None) -> TileTensor:
        return _ad.sum(self, axis=axis, keepdims=keepdims, dtype=dtype)

    def mean(self, axis=None, keepdims: bool = False) -> TileTensor:
        return _ad.mean(self, axis=axis, keepdims=keepdims)

    # -- autograd -----------------------------------------------------------------------------

    def requires_grad_(self, requires_grad: bool = True) -> TileTensor:
        """Mark this tensor as a leaf whose gradient ``backward`` accumulates in ``.grad``."""
        if requires_grad and self.dtype.kind != "f":
            raise TypeError(f"only floating tensors can require gradients, not {self.dtype}")
        self.requires_grad = requires_grad
        return self

    def backward(self, grad: TileTensor | None = None) -> None:
        """Accumulate the gradient of this tensor into every leaf that requires one.

        >>> import numtile as nt
        >>> w = nt.full((3,), 2.0).requires_grad_()
        >>> (w * w).sum().backward(); w.grad.to_numpy().tolist()
        [4.0, 4.0, 4.0]
        """
        from numtile.autograd.tape import backward

        backward(self, grad)

    def detach(self) -> TileTensor:
        """The same tiles, cut from the autograd graph."""
        return TileTensor(self.layout, self.dtype, self.handles)

    def max(self, axis=None, keepdims: bool = False) -> TileTensor:
        return _red.max(self, axis=axis, keepdims=keepdims)

    def min(self, axis=None, keepdims: bool = False) -> TileTensor:
        return _red.min(self, axis=axis, keepdims=keepdims)

    def prod(self, axis=None, keepdims: bool = False, dtype=None) -> TileTensor:
        return _red.prod(self, axis=axis, keepdims=keepdims, dtype=dtype)


from numtile.autograd import functions as _ad  # noqa: E402  (they import TileTensor)
from numtile.autograd import tape as _tape  # noqa: E402
from numtile.tiletensor import elementwise as _ew  # noqa: E402
from numtile.tiletensor import manipulation as _manip  # noqa: E402
from numtile.tiletensor import reduction as _red  # noqa: E402
