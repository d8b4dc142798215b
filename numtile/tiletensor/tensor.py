"""``TileTensor``: a layout, a dtype and one data handle per tile."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from numtile.runtime import DataHandle, get_runtime
from numtile.runtime.distributed import gather_on
from numtile.tiletensor import dispatch, placement
from numtile.tiletensor.dtypes import check_dtype, is_floating
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


def _operator(name: str, reflected: bool = False):
    """A binary operator method that runs op ``name`` (operands swapped when ``reflected``)."""
    if reflected:

        def method(self, other):
            return dispatch.call(name, other, self)
    else:

        def method(self, other):
            return dispatch.call(name, self, other)

    method.__name__ = f"__{'r' if reflected else ''}{name}__"
    return method


def _inplace_operator(name: str):
    """An in-place operator method (``__iadd__``...): op ``name`` written into self's tiles."""

    def method(self, other):
        return dispatch.call("inplace", self, name, other)

    method.__name__ = f"__i{name}__"
    return method


class Device:
    """numtile's one device: the task runtime, which places each tile on CPU cores and GPUs
    itself (array API ``x.device``); it compares equal to ``"cpu"``.

    >>> import numtile as nt
    >>> nt.ones(2).device, nt.ones(2).device == "cpu"
    (Device('cpu'), True)
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return "Device('cpu')"

    def __str__(self) -> str:
        return "cpu"

    def __eq__(self, other) -> bool:
        return isinstance(other, Device) or other == "cpu"

    def __hash__(self) -> int:
        return hash("cpu")


CPU = Device()


def _scalar(tensor: TileTensor, convert, name: str):
    """``convert`` of the one element of ``tensor`` (Python's ``int()``, ``float()``...)."""
    if tensor.size != 1:
        raise TypeError(f"{name}() needs a tensor of size 1, got shape {tensor.shape}")
    return convert(tensor.item())


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

    __slots__ = (
        "layout",
        "dtype",
        "_handles",
        "_pending",
        "requires_grad",
        "grad",
        "_node",
        "distribution",
        "__weakref__",
    )
    __array_priority__ = 100  # so ``ndarray op TileTensor`` defers to TileTensor

    def __init__(self, layout: Layout, dtype, handles: Sequence[DataHandle] | None = None):
        self.layout = layout
        self.dtype = check_dtype(dtype)
        self.distribution = None  # the ranks owning the tiles, under MPI (placement.py)
        if handles is None:
            _check_tile_count(layout, self.dtype)
            dtype = self.dtype
            handles = [DataHandle(shape, dtype) for shape in layout.tile_shapes()]
            distribution = placement.inherited()  # None unless an op on distributed tensors
            if distribution is not None and placement.place_tiles(layout, handles, distribution):
                self.distribution = distribution
        assert len(handles) == layout.ntiles
        self._handles = list(handles)
        self._pending = None  # a deferred tensor's expression (auto_fusion.py), else None
        self.requires_grad = False
        self.grad: TileTensor | None = None
        self._node = None  # the autograd node that produced this tensor, if recorded

    @classmethod
    def deferred(cls, layout: Layout, dtype, pending) -> TileTensor:
        """A tensor whose tasks are not submitted yet: ``pending.materialise(tensor)`` submits
        them (and gives it its handles) the first time anything reads its tiles."""
        tensor = cls.__new__(cls)
        tensor.layout, tensor.dtype, tensor.distribution = layout, dtype, None
        tensor._handles, tensor._pending = None, pending
        tensor.requires_grad, tensor.grad, tensor._node = False, None, None
        return tensor

    @property
    def handles(self) -> list[DataHandle]:
        """One data handle per tile, in C order of the grid (a deferred tensor's tasks are
        submitted on first access)."""
        if self._pending is not None:
            self.materialise()
        return self._handles

    def materialise(self) -> TileTensor:
        """Submit now the tasks of a tensor whose element-wise ops were deferred to run fused
        (``NUMTILE_AUTO_FUSE``); a no-op on every other tensor. The runtime calls it before a
        task overwrites a tile that a deferred tensor reads.

        >>> import numtile as nt
        >>> y = nt.ones((2,)) * 2 + 1  # deferred: one fused task when materialised
        >>> y.materialise().to_numpy().tolist()
        [3.0, 3.0]
        """
        if self._pending is not None:
            self._pending.materialise(self)
        return self

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
    def device(self) -> Device:
        return CPU

    def to_device(self, device, /, *, stream=None) -> TileTensor:
        """``self`` on ``device``: numtile has one device (``"cpu"``: the runtime moves tiles
        to GPUs by itself), so this checks ``device`` and returns ``self``."""
        if device != CPU:
            raise ValueError(f"unknown device {device!r}; numtile has one device, 'cpu'")
        return self

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        # without it Python iterates through __getitem__ until an IndexError: a 0-d tensor
        # would iterate as empty instead of raising (NumPy: TypeError)
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

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

    def to_numpy(self, root: int | None = None) -> np.ndarray | None:
        """Wait for this tensor's tiles and gather them into one new NumPy array.

        Under MPI every rank calls it and, by default, every rank gets the array; with
        ``root`` the tiles travel to rank ``root`` only, which gets the array, and the other
        ranks get None (they only send the tiles they hold).

        >>> import numtile as nt
        >>> nt.ones((2, 3), tile_shape=(1, 2)).to_numpy(root=0).sum()
        np.float64(6.0)
        """
        runtime = get_runtime()
        if root is None:
            runtime.wait_handles(self.handles)
        elif not gather_on(runtime, self.handles, root):
            return None
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
        if self.dtype.kind == "c":
            raise TypeError(f"float() of a {self.dtype.name} tensor: take nt.real or nt.abs")
        return _scalar(self, float, "float")

    def __int__(self) -> int:
        if self.dtype.kind == "c":
            raise TypeError(f"int() of a {self.dtype.name} tensor: take nt.real first")
        return _scalar(self, int, "int")

    def __complex__(self) -> complex:
        return _scalar(self, complex, "complex")

    def __index__(self) -> int:
        if self.dtype.kind not in "iu":
            raise TypeError(f"only integer tensors can be an index, not {self.dtype.name}")
        return _scalar(self, int, "__index__")

    def __bool__(self) -> bool:
        if self.size != 1:
            raise ValueError(
                f"the truth value of a tensor of shape {self.shape} is ambiguous (bool() needs "
                f"size 1): use nt.any or nt.all"
            )
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

    # -- interop: DLPack and NumPy's protocols (numtile/tiletensor/interop.py) ----------------

    def __dlpack__(self, /, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule of the values, gathered into one host buffer (see interop.dlpack)."""
        from numtile.tiletensor import interop

        return interop.dlpack(self, stream, max_version, dl_device, copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        from numtile.tiletensor import interop

        return interop.dlpack_device(self)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        from numtile.tiletensor import interop

        return interop.array_ufunc(self, ufunc, method, *inputs, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        from numtile.tiletensor import interop

        return interop.array_function(self, func, types, args, kwargs)

    def __array_namespace__(self, /, *, api_version: str | None = None):
        """The ``numtile`` module: the array API namespace of ``api_version`` (None: 2023.12,
        the newest numtile implements; 2021.12 and 2022.12 are subsets of it)."""
        import numtile

        if api_version not in (None, "2021.12", "2022.12", "2023.12"):
            raise ValueError(
                f"numtile implements array API 2023.12 (and before), not {api_version!r}"
            )
        return numtile

    # -- operators and methods: each calls its op through the dispatch table ----------------

    __add__ = _operator("add")
    __radd__ = _operator("add", reflected=True)
    __sub__ = _operator("subtract")
    __rsub__ = _operator("subtract", reflected=True)
    __mul__ = _operator("multiply")
    __rmul__ = _operator("multiply", reflected=True)
    __truediv__ = _operator("divide")
    __rtruediv__ = _operator("divide", reflected=True)
    __floordiv__ = _operator("floor_divide")
    __rfloordiv__ = _operator("floor_divide", reflected=True)
    __mod__ = _operator("remainder")
    __rmod__ = _operator("remainder", reflected=True)
    __pow__ = _operator("power")
    __rpow__ = _operator("power", reflected=True)
    __matmul__ = _operator("matmul")
    __rmatmul__ = _operator("matmul", reflected=True)
    __eq__ = _operator("equal")  # type: ignore[assignment]
    __ne__ = _operator("not_equal")  # type: ignore[assignment]
    __lt__ = _operator("less")
    __le__ = _operator("less_equal")
    __gt__ = _operator("greater")
    __ge__ = _operator("greater_equal")
    __and__ = _operator("bitwise_and")
    __rand__ = _operator("bitwise_and", reflected=True)
    __or__ = _operator("bitwise_or")
    __ror__ = _operator("bitwise_or", reflected=True)
    __xor__ = _operator("bitwise_xor")
    __rxor__ = _operator("bitwise_xor", reflected=True)
    __lshift__ = _operator("bitwise_left_shift")
    __rlshift__ = _operator("bitwise_left_shift", reflected=True)
    __rshift__ = _operator("bitwise_right_shift")
    __rrshift__ = _operator("bitwise_right_shift", reflected=True)

    # in place: tasks that read and write this tensor's own tiles (refused when it requires
    # a gradient); the result must keep this tensor's dtype and shape
    __iadd__ = _inplace_operator("add")
    __isub__ = _inplace_operator("subtract")
    __imul__ = _inplace_operator("multiply")
    __itruediv__ = _inplace_operator("divide")
    __ifloordiv__ = _inplace_operator("floor_divide")
    __imod__ = _inplace_operator("remainder")
    __ipow__ = _inplace_operator("power")
    __iand__ = _inplace_operator("bitwise_and")
    __ior__ = _inplace_operator("bitwise_or")
    __ixor__ = _inplace_operator("bitwise_xor")
    __ilshift__ = _inplace_operator("bitwise_left_shift")
    __irshift__ = _inplace_operator("bitwise_right_shift")
    __imatmul__ = _inplace_operator("matmul")

    def __invert__(self):
        return dispatch.call("bitwise_invert", self)

    def __neg__(self):
        return dispatch.call("negative", self)

    def __pos__(self):
        if self.dtype == np.bool_:  # positive refuses booleans (arithmetic), as NumPy does
            return dispatch.call("positive", self)
        return self

    def __abs__(self):
        return dispatch.call("abs", self)

    __hash__ = None  # type: ignore[assignment]  (== is elementwise)

    def __getitem__(self, key):
        return dispatch.call("getitem", self, key)

    def __setitem__(self, key, value) -> None:
        dispatch.call("setitem", self, key, value)

    def astype(self, dtype, /, *, copy: bool = True, device=None) -> TileTensor:
        return dispatch.call("astype", self, dtype, copy=copy, device=device)

    def retile(self, tile_shape) -> TileTensor:
        return dispatch.call("retile", self, tile_shape)

    def reshape(self, *shape) -> TileTensor:
        return dispatch.call("reshape", self, shape[0] if len(shape) == 1 else shape)

    def transpose(self, *axes) -> TileTensor:
        return dispatch.call("transpose", self, axes[0] if len(axes) == 1 else (axes or None))

    def permute_dims(self, axes) -> TileTensor:
        return dispatch.call("permute_dims", self, axes)

    @property
    def T(self) -> TileTensor:
        if self.ndim != 2:
            raise ValueError(f".T needs a 2-d tensor (array API), got shape {self.shape}")
        return dispatch.call("transpose", self)

    @property
    def mT(self) -> TileTensor:
        return dispatch.call("matrix_transpose", self)

    def sum(self, axis=None, keepdims: bool = False, dtype=None) -> TileTensor:
        return dispatch.call("sum", self, axis=axis, keepdims=keepdims, dtype=dtype)

    def mean(self, axis=None, keepdims: bool = False) -> TileTensor:
        return dispatch.call("mean", self, axis=axis, keepdims=keepdims)

    def max(self, axis=None, keepdims: bool = False) -> TileTensor:
        return dispatch.call("max", self, axis=axis, keepdims=keepdims)

    def min(self, axis=None, keepdims: bool = False) -> TileTensor:
        return dispatch.call("min", self, axis=axis, keepdims=keepdims)

    def prod(self, axis=None, keepdims: bool = False, dtype=None) -> TileTensor:
        return dispatch.call("prod", self, axis=axis, keepdims=keepdims, dtype=dtype)

    # -- autograd -----------------------------------------------------------------------------

    def requires_grad_(self, requires_grad: bool = True) -> TileTensor:
        """Mark this tensor as a leaf whose gradient ``backward`` accumulates in ``.grad``
        (real floating or complex: PyTorch's convention, see ``numtile.autograd``)."""
        if requires_grad and not (is_floating(self.dtype) or self.dtype.kind == "c"):
            raise TypeError(
                f"only floating or complex tensors can require gradients, not {self.dtype}"
            )
        self.requires_grad = requires_grad
        return self

    def backward(self, grad: TileTensor | None = None) -> None:
        """Accumulate the gradient of this tensor into every leaf that requires one.

        >>> import numtile as nt
        >>> w = nt.full((3,), 2.0).requires_grad_()
        >>> (w * w).sum().backward(); w.grad.to_numpy().tolist()
        [4.0, 4.0, 4.0]
        """
        dispatch.call("backward", self, grad)

    def detach(self) -> TileTensor:
        """The same tiles, cut from the autograd graph."""
        return TileTensor(self.layout, self.dtype, self.handles)


dispatch.TENSOR_TYPES += (TileTensor,)


@dispatch.dispatched(name="backward", public="TileTensor.backward")
def _backward_without_autograd(tensor: TileTensor, grad: TileTensor | None = None) -> None:
    raise RuntimeError("backward() needs numtile.autograd: import numtile (it loads the tape)")
