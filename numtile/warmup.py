"""Compile the kernels ahead of time by running every tiled op once on tiny tensors."""

from __future__ import annotations

import numpy as np
from tqdm import tqdm

import numtile as nt

FLOAT_DTYPES = ("float32", "float64")


def _float_workload(dtype: str) -> None:
    a = nt.random.uniform(0.5, 1.5, (3, 3), seed=0, dtype=dtype, tile_shape=(2, 2))
    b = nt.from_numpy(np.eye(3, dtype=dtype) * 4, tile_shape=(2, 2))
    for name in ("exp", "log", "sqrt", "tanh", "relu", "gelu_tanh", "silu", "negative", "abs"):
        getattr(nt, name)(a)
    for op in (nt.add, nt.subtract, nt.multiply, nt.divide, nt.maximum, nt.minimum, nt.pow):
        op(a, b)
        op(a, 2.0)
    _ = [a[::2, 1:], a.T, a.retile((3, 1)), a > b, nt.sum(a, axis=0), nt.max(a)]
    _ = [nt.linalg.vector_norm(a), a @ b, nt.linalg.solve(b, a).astype("int64")]


def _int_workload() -> None:
    a = nt.arange(9, tile_shape=3).reshape((3, 3))
    _ = [a + 1, a * a, a // 2, a % 2, a == 1, nt.sum(a), nt.max(a, axis=1)]
    _ = [a.astype("float64"), a @ a]


def warmup(progress: bool = False) -> int:
    """Run each workload (compiling what it touches); return the number of signatures cached."""
    steps = [(f"{d} ops", lambda d=d: _float_workload(d)) for d in FLOAT_DTYPES]
    steps.append(("int64 ops", _int_workload))
    for _, step in tqdm(steps, disable=not progress, desc="compiling"):
        step()
        nt.wait_all()
    from numtile import ops_cpu

    return sum(
        len(getattr(ops_cpu, name).signatures)
        for name in dir(ops_cpu)
        if hasattr(getattr(ops_cpu, name), "signatures")
    )
