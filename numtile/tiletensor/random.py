"""Random tensors that do not depend on the tiling: ``nt.random.uniform``, ``normal``, ``seed``.

Each element is a hash of (key, its global index), so a seeded tensor is identical
whatever its tile shape and whichever worker fills each tile.
"""

from __future__ import annotations

import threading

import numpy as np

from numtile.runtime import Access, get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor.dtypes import check_dtype, float64, is_floating
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.tensor import TileTensor

_state = {"key": 0x5EED, "counter": 0}
_lock = threading.Lock()


def seed(value: int) -> None:
    """Seed the stream that un-seeded calls draw their keys from.

    >>> import numtile as nt
    >>> nt.random.seed(1); a = nt.random.uniform(size=3).to_numpy()
    >>> nt.random.seed(1); b = nt.random.uniform(size=3).to_numpy()
    >>> bool((a == b).all())
    True
    """
    with _lock:
        _state["key"] = int(value) & 0xFFFFFFFFFFFFFFFF
        _state["counter"] = 0


def _next_key() -> int:
    with _lock:
        _state["counter"] += 1
        mixed = np.random.SeedSequence([_state["key"], _state["counter"]]).generate_state(2)
    return int(mixed[0]) << 32 | int(mixed[1])


def _key_for(seed_value) -> int:
    if seed_value is None:
        return _next_key()
    return int(np.random.SeedSequence(int(seed_value)).generate_state(2, np.uint64)[0])


def _generate(shape, distribution: str, a, b, seed_value, dtype, tile_shape) -> TileTensor:
    dtype = check_dtype(dtype)
    if not is_floating(dtype):  # bfloat16: drawn in float32, rounded to nearest-even
        raise TypeError(f"random values need a floating dtype, got {dtype.name}")
    shape = () if shape is None else shape
    layout = Layout(shape, tile_shape)
    out = TileTensor(layout, dtype)
    key = np.uint64(_key_for(seed_value))
    global_strides = np.ones(layout.ndim, np.int64)
    for axis in range(layout.ndim - 2, -1, -1):
        global_strides[axis] = global_strides[axis + 1] * layout.shape[axis + 1]
    runtime = get_runtime()
    codelet = codelets.elementwise.random[distribution]
    high = dtype.type(b)
    upper = float(np.nextafter(high, dtype.type(a)) if high > a else high)
    for index, handle in zip(layout.indices(), out.handles):
        start = np.array([st[i] for st, i in zip(layout.starts, index)], np.int64)
        args = (
            np.array(handle.shape, np.int64),
            start,
            global_strides,
            key,
            float(a),
            float(b),
            upper if distribution == "uniform" else np.inf,
        )
        runtime.submit(codelet, [(handle, Access.W)], args)
    return out


def uniform(low=0.0, high=1.0, size=None, *, seed=None, dtype=float64, tile_shape=None):
    """Uniform samples in [low, high).

    >>> import numtile as nt
    >>> x = nt.random.uniform(-1, 1, (1000,), seed=0).to_numpy()
    >>> bool(x.min() >= -1 and x.max() < 1)
    True
    """
    if not high >= low:
        raise ValueError(f"uniform needs low <= high, got low={low}, high={high}")
    return _generate(size, "uniform", low, high, seed, dtype, tile_shape)


def normal(loc=0.0, scale=1.0, size=None, *, seed=None, dtype=float64, tile_shape=None):
    """Normal samples with mean ``loc`` and standard deviation ``scale``.

    >>> import numtile as nt
    >>> abs(float(nt.random.normal(size=(20000,), seed=3).to_numpy().mean())) < 0.05
    True
    """
    if scale < 0:
        raise ValueError(f"normal needs scale >= 0, got {scale}")
    return _generate(size, "normal", loc, scale, seed, dtype, tile_shape)


def random(size=None, *, seed=None, dtype=float64, tile_shape=None):
    """Uniform samples in [0, 1)."""
    return uniform(0.0, 1.0, size, seed=seed, dtype=dtype, tile_shape=tile_shape)
