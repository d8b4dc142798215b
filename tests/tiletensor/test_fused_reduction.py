"""Reductions of deferred element-wise expressions (``tiletensor/fused_reduction.py``): one
fused task per chain of tiles, equal to NumPy and to the reduction of the materialised
expression (auto fusion off): exactly for max, min, any, all, integers and column sums in a
fixed order, in the last bits for other float sums and products; every case that does not
fuse reduces the materialised expression as before."""

from __future__ import annotations

import types

import numpy as np
import pytest

import numtile as nt
from numtile.tiletensor import auto_fusion, fused_reduction

RNG = np.random.default_rng(11)
F64 = RNG.standard_normal((7, 9))
G64 = RNG.standard_normal((7, 9))
F32 = F64.astype(np.float32)
I32 = RNG.integers(-4, 5, (7, 9)).astype(np.int32)
WITH_NAN = F64.copy()
WITH_NAN[2, 3] = WITH_NAN[5, 0] = np.nan

# name -> (function of the namespace xp and the operands, arrays)
EXPRESSIONS = {
    "compare": (lambda xp, x, y: x > 0.5, (F64, G64)),
    "two inputs": (lambda xp, x, y: x * y + 1, (F64, G64)),
    "float32 and a scalar": (lambda xp, x, y: x * np.float32(0.5) - y, (F32, F32)),
    "integers": (lambda xp, x, y: x * 3 - y, (I32, I32)),
    "NaN": (lambda xp, x, y: x * 2 - y, (WITH_NAN, G64)),
    "logic": (lambda xp, x, y: (x > 0) & (y < 0.5), (F64, G64)),
    "sin": (lambda xp, x, y: xp.sin(x) * y, (F64, G64)),
}
# op -> its function of xp, and whether fused equals unfused exactly along any axis
OPS = {
    "sum": (lambda xp, v, **kw: xp.sum(v, **kw), False),
    "prod": (lambda xp, v, **kw: xp.prod(v, **kw), False),
    "mean": (lambda xp, v, **kw: xp.mean(v, **kw), False),
    "max": (lambda xp, v, **kw: xp.max(v, **kw), True),
    "min": (lambda xp, v, **kw: xp.min(v, **kw), True),
    "any": (lambda xp, v, **kw: xp.any(v, **kw), True),
    "all": (lambda xp, v, **kw: xp.all(v, **kw), True),
}
# a few pairs: every op and every expression at least once (each pair compiles a kernel per
# loop), within a compile budget
PAIRS = [
    ("sum", "two inputs"),
    ("sum", "compare"),
    ("sum", "float32 and a scalar"),
    ("prod", "two inputs"),
    ("mean", "integers"),
    ("max", "NaN"),
    ("min", "NaN"),
    ("any", "compare"),
    ("all", "logic"),
    ("all", "integers"),
]


@pytest.fixture(autouse=True)
def _small_tensors_fuse(monkeypatch):
    """Reductions fuse whatever the size of their operand (these tests' tensors are small)."""
    monkeypatch.setattr(auto_fusion, "FUSED_REDUCTION_MIN", 0)


def _reduce(op, expression, arrays, tile_shape, on: bool, **kwargs) -> np.ndarray:
    """``op`` of ``expression`` over tensors of ``arrays``, with automatic fusion ``on``."""
    previous = auto_fusion.set_enabled(on)
    try:
        tensors = [nt.from_numpy(a, tile_shape=tile_shape) for a in arrays]
        return OPS[op][0](nt, expression(nt, *tensors), **kwargs).to_numpy()
    finally:
        auto_fusion.set_enabled(previous)


def _check(op, name, arrays=None, tile_shape=(3, 4), exact=False, **kwargs) -> None:
    """Fused ``op`` of expression ``name``: as NumPy, and as unfused (the same bits where
    ``OPS`` says so, for integers, or where ``exact``)."""
    expression, default = EXPRESSIONS[name]
    arrays = default if arrays is None else arrays
    got = _reduce(op, expression, arrays, tile_shape, True, **kwargs)
    unfused = _reduce(op, expression, arrays, tile_shape, False, **kwargs)
    assert got.dtype == unfused.dtype and got.shape == unfused.shape
    if exact or OPS[op][1] or got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, unfused)
    else:
        np.testing.assert_allclose(got, unfused, rtol=2e-6 if got.dtype == np.float32 else 1e-13)
    expected = OPS[op][0](np, expression(np, *arrays), **kwargs)
    tolerance = 2e-5 if got.dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("axis", [0, 1, None])
@pytest.mark.parametrize(("op", "name"), PAIRS)
def test_fused_reductions_equal_numpy_and_the_unfused_ones(op, name, axis):
    _check(op, name, axis=axis)


def test_sin_takes_its_exact_form():
    """sin beyond its argument reduction is libm's, per element (one layout: it compiles
    long)."""
    x = F64 * np.where(np.arange(9) % 2, 1.0, 1e6)  # some beyond the reduction
    _check("min", "sin", (x, G64), tile_shape=(3, 9), axis=0)


@pytest.mark.parametrize("name", ["two inputs", "float32 and a scalar"])
def test_column_sums_equal_the_unfused_ones_bit_for_bit(name):
    """One tile a column of tiles: the unfused sum's order is fixed (several would accumulate
    in the order their tasks end), and the fused loop keeps it."""
    _check("sum", name, tile_shape=(7, 4), exact=True, axis=0)


@pytest.mark.parametrize("op", ["sum", "max", "any"])
@pytest.mark.parametrize(
    ("tile_shape", "axis", "keepdims"),
    [((1, 1), 0, False), ((7, 9), None, True), ((2, 5), 1, True), ((4, 2), (0, 1), False)],
)
def test_layouts_and_keepdims(op, tile_shape, axis, keepdims):
    name = "compare" if op == "any" else "two inputs"
    _check(op, name, tile_shape=tile_shape, axis=axis, keepdims=keepdims)


@pytest.mark.parametrize("axis", [0, 1, 2, (0, 1), (1, 2), None, (0, 2)])
def test_three_dimensions(axis):
    x, y = RNG.standard_normal((2, 5, 6, 7))
    for op in ("sum", "max"):
        _check(op, "two inputs", (x, y), tile_shape=(3, 2, 4), axis=axis)


@pytest.mark.parametrize("op", ["sum", "any", "all"])
def test_empty_axes(op):
    empty = np.zeros((0, 9))
    _check(op, "compare", (empty, empty), axis=0)
    _check(op, "compare", (empty, empty), axis=1)


def test_an_expression_is_not_reassociated():
    """(x + c) + c with the reduction: two roundings, as unfused (no fast-math flags)."""
    previous = auto_fusion.set_enabled(True)
    try:
        x = nt.from_numpy(F64 * 1e16, tile_shape=(3, 4))
        got = nt.max(x + 1.0 + 1.0, axis=0).to_numpy()
    finally:
        auto_fusion.set_enabled(previous)
    np.testing.assert_array_equal(got, np.max(F64 * 1e16 + 1.0 + 1.0, axis=0))


def test_one_fused_task_per_chain_and_no_intermediate(submitted):
    x = nt.from_numpy(F64, tile_shape=(3, 4))  # 3 x 3 tiles
    hits = nt.any(x > 0.5, axis=0)
    assert submitted and set(submitted) == {"fused_reduce:max:greater"}
    count = len(submitted)
    total = nt.sum(x * x + 1)  # one output tile: each chain into a partial, then combined
    assert set(submitted[count:]) == {"fused_reduce:sum:multiply+add", "fused_reduce:combine"}
    np.testing.assert_array_equal(hits.to_numpy(), np.any(F64 > 0.5, axis=0))
    np.testing.assert_allclose(total.to_numpy(), np.sum(F64 * F64 + 1), rtol=1e-13)


def test_an_intermediate_with_a_name_runs_once(submitted):
    x, y = (nt.from_numpy(a, tile_shape=(3, 4)) for a in (F64, G64))
    t = x * y
    total, peak = nt.sum(t + 1, axis=0), nt.max(t, axis=1)
    assert submitted.count("binary:multiply") == 9  # t once, read by both reductions
    assert "fused_reduce:sum:add" in submitted
    np.testing.assert_allclose(total.to_numpy(), np.sum(F64 * G64 + 1, axis=0), rtol=1e-13)
    np.testing.assert_array_equal(peak.to_numpy(), np.max(F64 * G64, axis=1))
    np.testing.assert_array_equal(t.to_numpy(), F64 * G64)


def test_a_reduced_tensor_with_a_name_is_right_when_read_again(fusing):
    x = nt.from_numpy(F64, tile_shape=(3, 4))
    hits = x > 0.5
    assert nt.any(hits).item() and not nt.all(hits).item()
    np.testing.assert_array_equal(hits.to_numpy(), F64 > 0.5)


def test_an_input_overwritten_before_the_reduction(submitted):
    x = nt.from_numpy(F64, tile_shape=(3, 4))
    doubled = x * 2  # deferred; materialised by the write below, before it
    x += 1
    total = nt.sum(doubled, axis=0)
    assert not any(name.startswith("fused_reduce") for name in submitted)
    np.testing.assert_allclose(total.to_numpy(), np.sum(F64 * 2, axis=0), rtol=1e-13)


def test_inputs_that_require_grad_reduce_unfused(submitted):
    w = nt.from_numpy(F64, tile_shape=(3, 4)).requires_grad_()
    loss = nt.sum(w * w)
    assert not any(name.startswith("fused_reduce") for name in submitted)
    loss.backward()
    np.testing.assert_allclose(loss.item(), np.sum(F64 * F64), rtol=1e-13)
    np.testing.assert_allclose(w.grad.to_numpy(), 2 * F64, rtol=1e-13)


def test_a_broadcast_input_reduces_unfused(submitted):
    x = nt.from_numpy(F64, tile_shape=(3, 4))
    row = nt.from_numpy(G64[:1], tile_shape=(1, 4))
    total = nt.sum(x * row, axis=0)
    assert not any(name.startswith("fused_reduce") for name in submitted)
    np.testing.assert_allclose(total.to_numpy(), np.sum(F64 * G64[:1], axis=0), rtol=1e-13)


def test_switched_off_nothing_fuses(submitted):
    auto_fusion.set_enabled(False)
    x = nt.from_numpy(F64, tile_shape=(3, 4))
    nt.any(x > 0.5, axis=0).wait()
    assert not any(name.startswith("fused") for name in submitted)


def test_only_runtimes_of_cpu_workers_fuse_reductions():
    cpu, gpu = types.SimpleNamespace(fused_reduce=None), types.SimpleNamespace()
    assert fused_reduction.fusable(types.SimpleNamespace(kinds=["cpu"] * 2, ops=[cpu, cpu]))
    mixed = types.SimpleNamespace(kinds=["cpu", "cuda"], ops=[cpu, gpu])
    assert not fused_reduction.fusable(mixed)


def test_operands_smaller_than_the_threshold_reduce_unfused(submitted, monkeypatch):
    # a small intermediate costs less to write and read than a kernel to compile
    monkeypatch.setattr(auto_fusion, "FUSED_REDUCTION_MIN", F64.size + 1)
    x = nt.from_numpy(F64, tile_shape=(3, 4))
    np.testing.assert_array_equal(nt.any(x > 0.5, axis=0).to_numpy(), (F64 > 0.5).any(axis=0))
    assert submitted and not any(name.startswith("fused_reduce") for name in submitted)
    submitted.clear()
    monkeypatch.setattr(auto_fusion, "FUSED_REDUCTION_MIN", F64.size)
    np.testing.assert_array_equal(nt.any(x > 0.5, axis=0).to_numpy(), (F64 > 0.5).any(axis=0))
    assert set(submitted) == {"fused_reduce:max:greater"}
