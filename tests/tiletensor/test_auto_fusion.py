"""Automatic fusion (``tiletensor/auto_fusion.py``): element-wise chains on tensors that need
no gradient run as one fused kernel per output tile, equal bit for bit to the ops run one by
one (``NUMTILE_AUTO_FUSE=0``), with every hazard of deferring met."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import numtile as nt
from numtile.runtime import get_runtime
from numtile.tiletensor import auto_fusion


def _tensor(array, tile_shape=None):
    return nt.from_numpy(np.array(array), tile_shape=tile_shape)


def _bits(array: np.ndarray) -> np.ndarray:
    return array.reshape(-1).view(np.uint8)


def _run(function, arrays, tiles, on: bool):
    previous = auto_fusion.set_enabled(on)
    try:
        out = function(*(_tensor(a, t) for a, t in zip(arrays, tiles)))
        return out.to_numpy(), out.tile_shape, out.dtype
    finally:
        auto_fusion.set_enabled(previous)


def _same_as_unfused(function, arrays, tiles) -> np.ndarray:
    """``function`` of tensors of ``arrays`` fused and unfused: the same bits, dtype and
    tile shape; returns the result."""
    got, got_tiles, got_dtype = _run(function, arrays, tiles, True)
    expected, tiles_unfused, dtype_unfused = _run(function, arrays, tiles, False)
    assert got_dtype == dtype_unfused and got_tiles == tiles_unfused
    assert got.shape == expected.shape
    np.testing.assert_array_equal(_bits(got), _bits(expected))
    return got


RNG = np.random.default_rng(7)
F32 = RNG.standard_normal((7, 9)).astype(np.float32)
G32 = RNG.standard_normal((7, 9)).astype(np.float32)
ROW = RNG.standard_normal((1, 9)).astype(np.float32)
F64 = RNG.standard_normal((7, 9))
I32 = RNG.integers(-5, 5, (7, 9)).astype(np.int32)

# name -> (function of the array namespace xp and the operands, arrays, tile shapes)
CHAINS = {
    "fma": (lambda xp, x, y, z: x * y + z, (F32, G32, ROW), ((3, 4), (2, 5), (1, 2))),
    "functions": (lambda xp, x, y: xp.exp(x) * y - 1, (F32, G32), ((3, 4), (3, 4))),
    "float64 functions": (
        lambda xp, x, y: xp.exp(x) * y - xp.sin(y) / xp.sqrt(xp.abs(x)),
        (F64, F64 * 2),
        ((3, 4), (3, 4)),
    ),
    "trig and compare": (
        lambda xp, x, y: xp.where(xp.sin(x) > 0, x, y) * (y >= 0),
        (F32, G32),
        ((4, 3), (4, 3)),
    ),
    "mixed dtypes": (lambda xp, x, n, w: (x + n) * w - n / 3, (F32, I32, F64), ((3, 4),) * 3),
    "integers": (
        lambda xp, n, m: (n * m + 3) // 2 - (n & 6),
        (I32, I32 + 1),
        ((2, 2), (5, 9)),
    ),
    "broadcast rows": (
        lambda xp, r, x: xp.maximum(r * 2.0, x) - r,
        (ROW, F32),
        ((1, 4), (3, 5)),
    ),
    "weak and numpy scalars": (
        lambda xp, x: (x * np.float32(0.1) + 1e-3) * 3 - np.float32(2),
        (F32,),
        ((7, 9),),
    ),
    "comparisons and logic": (
        lambda xp, x, y: xp.logical_and(x > y, xp.isfinite(x / y)) | (x == 0),
        (F32, G32),
        ((3, 3), (3, 3)),
    ),
    "0-d": (lambda xp, x, y: x * y + 1, (np.float32(2.5), np.float32(-1.25)), (None, None)),
    "empty": (lambda xp, x, y: x * y + 1, (F32[:0], G32[:0]), ((3, 4), (3, 4))),
    "unary chain": (
        lambda xp, x: xp.tanh(xp.abs(-x) * 0.5) + xp.square(x),
        (F32,),
        ((5, 2),),
    ),
}


@pytest.mark.parametrize("case", CHAINS)
def test_chains_equal_the_unfused_ops_bit_for_bit(case):
    function, arrays, tiles = CHAINS[case]
    got = _same_as_unfused(lambda *tensors: function(nt, *tensors), arrays, tiles)
    expected = function(np, *(np.asarray(a) for a in arrays))
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


def test_fma_submits_one_fused_task_per_tile(submitted):
    x, y, z = (_tensor(a, (2, 3)) for a in (F32, G32, F32))  # 4 x 3 tiles
    out = x * y + z
    assert submitted == []  # deferred: nothing submitted until the result is read
    out.wait()
    assert submitted == ["fused:multiply+add"] * 12
    np.testing.assert_array_equal(out.to_numpy(), F32 * G32 + F32)


def test_functions_chain_is_one_kernel(submitted):
    a, b = _tensor(F32, (4, 9)), _tensor(G32, (4, 9))
    (nt.sqrt(nt.abs(a)) * b - 1).wait()
    assert submitted == ["fused:abs+sqrt+multiply+subtract"] * 2


def test_float32_exp_runs_its_own_kernel_then_the_rest_fused(submitted):
    """float32 exp, sin and cos have kernels of their own (fastmath_blocks) that fused
    kernels do not reproduce bit for bit: they run first, the rest fused."""
    a, b = _tensor(F32, (4, 9)), _tensor(G32, (4, 9))
    (nt.exp(a) * b - 1).wait()
    assert submitted == ["unary:exp"] * 2 + ["fused:multiply+subtract"] * 2


def test_a_single_op_runs_its_own_kernel(submitted):
    x = _tensor(F32, (4, 9))
    (-x).wait()
    assert submitted == ["unary:negative"] * 2


def test_switched_off_each_op_runs_at_once(submitted):
    auto_fusion.set_enabled(False)
    x, y = _tensor(F32, (4, 9)), _tensor(G32, (4, 9))
    x * y + 1
    assert submitted == ["binary:multiply"] * 2 + ["binary_scalar:add"] * 2


def test_an_input_overwritten_in_place_is_read_before(fusing):
    x, y = _tensor(F32, (3, 4)), _tensor(G32, (3, 4))
    t = x * y + 1
    x += 1
    np.testing.assert_array_equal(t.to_numpy(), F32 * G32 + 1)
    np.testing.assert_array_equal(x.to_numpy(), F32 + 1)


def test_an_input_assigned_by_setitem_is_read_before(fusing):
    x, y = _tensor(F32, (3, 4)), _tensor(G32, (3, 4))
    t = x * y - y
    x[1:3, 2:] = 0.0
    u = x * 2 + 1  # reads the new values
    np.testing.assert_array_equal(t.to_numpy(), F32 * G32 - G32)
    changed = F32.copy()
    changed[1:3, 2:] = 0
    np.testing.assert_array_equal(u.to_numpy(), changed * 2 + 1)


def test_an_optimizer_step_waits_for_the_deferred_readers_of_its_parameters(fusing):
    from numtile.nn import optim

    weight = _tensor(F32, (3, 4)).requires_grad_()
    (weight * weight).sum().backward()
    snapshot = weight.detach() * 2 + 1  # deferred, reads the weight's tiles
    assert snapshot._pending is not None
    optim.SGD([weight], lr=0.5).step()
    np.testing.assert_array_equal(snapshot.to_numpy(), F32 * 2 + 1)
    np.testing.assert_allclose(weight.to_numpy(), F32 - 0.5 * 2 * F32, rtol=1e-6)


def test_copy_into_and_invalidate_wait_for_deferred_readers(fusing):
    from numtile.tiletensor.elementwise_core import copy_into

    x, y = _tensor(F32, (3, 4)), _tensor(G32, (3, 4))
    t = x * 3 + y
    copy_into(x, y)
    u = y * y + 2
    y.invalidate()
    np.testing.assert_array_equal(t.to_numpy(), F32 * 3 + G32)
    np.testing.assert_array_equal(u.to_numpy(), G32 * G32 + 2)


def test_exporting_a_tile_by_dlpack_submits_its_deferred_readers(fusing):
    x = _tensor(F32, (7, 9))  # one tile: DLPack exports its own buffer
    t = x * 2 + 1
    exported = np.from_dlpack(x)
    get_runtime().wait_all()  # the reads submitted at the export are done
    exported[...] = 0
    np.testing.assert_array_equal(t.to_numpy(), F32 * 2 + 1)


def test_an_intermediate_with_a_name_runs_once(submitted):
    x, y = _tensor(F32, (4, 9)), _tensor(G32, (4, 9))
    t = x * y
    a, b = t + 1, t + 2
    (a * b).wait()
    assert submitted.count("binary:multiply") == 2 + 2  # x * y once, then a * b
    assert not any(name.startswith("fused") for name in submitted)
    np.testing.assert_array_equal(t.to_numpy(), F32 * G32)


def test_a_temporary_used_by_two_consumers_runs_once(submitted):
    x, y = _tensor(F32, (4, 9)), _tensor(G32, (4, 9))
    t = x * y
    a, b = t + 1, t - 1
    del t  # held by a's and b's expressions only: computed once, not inlined twice
    out = (a * b).to_numpy()
    assert submitted.count("binary:multiply") == 2 + 2
    product = F32 * G32
    np.testing.assert_array_equal(out, (product + 1) * (product - 1))


def test_a_loop_runs_every_few_iterations(submitted):
    x = _tensor(F32, (7, 9))
    expected = F32.copy()
    for _ in range(20):
        x = x * np.float32(0.5) + np.float32(1)
        expected = expected * np.float32(0.5) + np.float32(1)
    got = x.to_numpy()
    assert 0 < len(submitted) <= 3 and all(n.startswith("fused:") for n in submitted)
    assert max(n.count("+") + 1 for n in submitted) <= auto_fusion.MAX_OPS
    np.testing.assert_array_equal(got, expected)


def test_a_dropped_result_costs_nothing(submitted):
    x = _tensor(F32, (3, 4))
    for _ in range(5):
        nt.sqrt(nt.abs(x * 2)) - x
    x += 1  # nothing deferred is alive to materialise
    assert len(submitted) == len(x.handles)
    assert not any("fused" in n or "sqrt" in n or "multiply" in n for n in submitted)


def test_errors_raise_at_the_call(fusing):
    x, y = _tensor(F32, (3, 4)), _tensor(G32[:, :5], (3, 4))
    with pytest.raises(ValueError, match="cannot be broadcast"):
        x * y
    flags = nt.asarray([True, False])
    with pytest.raises(TypeError):
        flags - flags
    small = nt.asarray(np.array([1, 2], np.int8))
    with pytest.raises(OverflowError):
        small + 1000


def test_gradients_are_unchanged(fusing):
    w = _tensor(F32, (3, 4)).requires_grad_()
    x = _tensor(G32, (3, 4))
    loss = ((w * x + 1) * w).sum()
    assert all(t._pending is None for t in (w, x))
    loss.backward()
    np.testing.assert_allclose(w.grad.to_numpy(), 2 * F32 * G32 + 1, rtol=1e-5)


def test_results_of_grad_inputs_are_never_deferred(fusing):
    w = _tensor(F32, (3, 4)).requires_grad_()
    y = w * 2
    assert y._pending is None and y._node is not None
    z = y + 1  # y is in the graph: not deferred either
    assert z._pending is None


def test_complex_and_narrow_dtypes_run_at_once(fusing):
    c = nt.asarray(np.array([1 + 2j, 3j], np.complex64))
    assert (c * 2)._pending is None
    h = nt.asarray(np.array([1, 2], np.float16))
    assert (h + 1)._pending is None
    n = nt.asarray(np.array([1, 2], np.int64))
    assert (n**2)._pending is None  # integer powers check their exponents


def test_an_op_computed_by_a_math_library_runs_unfused(fusing, math_path):
    from numtile.ops_cpu import mkl_vml

    x = _tensor(F64, (3, 4))
    deferred = nt.log1p(x)._pending is not None  # log1p: VML's on every CPU vendor
    assert deferred == (not mkl_vml.enabled())


@pytest.mark.parametrize("math_path", ["vml", "ours"], indirect=True)
def test_float64_functions_equal_the_unfused_ops_on_either_math_path(math_path):
    _same_as_unfused(lambda x, y: nt.log1p(nt.abs(x)) * y + nt.exp(y), (F64, F64), ((3, 4),) * 2)


def test_the_variable_turns_it_off():
    code = "from numtile.tiletensor import auto_fusion; print(auto_fusion.enabled())"
    for value, expected in (("0", "False"), ("1", "True")):
        env = dict(os.environ, NUMTILE_AUTO_FUSE=value)
        result = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        assert result.stdout.strip() == expected


def test_wait_all_submits_every_deferred_tensor_fused(submitted):
    x, y = _tensor(F32, (4, 9)), _tensor(G32, (4, 9))
    t = x * y + 1
    nt.wait_all()
    assert submitted == ["fused:multiply+add"] * 2 and t._pending is None


def test_a_tensor_deferred_before_a_restart_computes_after_it(fusing):
    x = _tensor(F32, (4, 9))
    t = x * 2 - 1
    nt.init()  # the old runtime waits for its work: deferred tensors are submitted first
    assert t._pending is None
    np.testing.assert_array_equal(t.to_numpy(), F32 * 2 - 1)
