"""``nt.fuse``: one generated kernel per element-wise expression, one task per output tile,
results equal to the unfused ops bit for bit (CPU, and CUDA under the simulator)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import numtile as nt
from numtile.ops_cuda import available

# fused kernels inline numtile's scalar functions: the unfused ops they equal bit for bit are
# numtile's kernels, not oneMKL's VML (ops_cpu.mkl_vml, within 1 ulp of them)
pytestmark = [
    pytest.mark.usefixtures("math_path"),
    pytest.mark.parametrize("math_path", ["ours"], indirect=True),
]


def _expression(x, y, n, alpha):
    """Broadcasting, a scalar argument, a captured constant, int32 promoting float32 to
    float64, sin beyond its fast reduction, where and comparisons (one CPU compile)."""
    t = nt.sin(x * alpha) + n  # float32 * weak float, then float32 + int32 -> float64
    return nt.where(t > 0.25, t, y) - (y >= 0)


def _more(x, y, n, alpha):
    """More functions for the CUDA twin, which the simulator runs without compiling."""
    t = _expression(x, y, n, alpha)
    u = nt.where(t > 0.5, nt.exp(-t), nt.maximum(y, t) / 3.0)
    return nt.clip(u, min=-0.75, max=None) * nt.logical_not(n > 0)


def _inputs():
    rng = np.random.default_rng(0)
    a = rng.uniform(-2, 2, (7, 9)).astype(np.float32)
    a[0, :3] = (1e6, -3e7, np.inf)  # sin's fix-up pass; NaN from inf
    b = rng.standard_normal((1, 9))  # float64, broadcast over rows, tiled differently
    c = rng.integers(-3, 3, (7, 1)).astype(np.int32)
    x = nt.from_numpy(a, tile_shape=(3, 4))
    y = nt.from_numpy(b, tile_shape=(1, 5))
    n = nt.from_numpy(c, tile_shape=(2, 1))
    return x, y, n


def _same_bits(got: np.ndarray, expected: np.ndarray) -> None:
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got.view(np.uint8), expected.view(np.uint8))


def test_fused_equals_the_unfused_ops_bit_for_bit_in_one_task_per_tile(tmp_path):
    nt.init()
    x, y, n = _inputs()
    fused = nt.fuse(_expression)
    path = tmp_path / "trace.json"
    with nt.trace(str(path)):
        got = fused(x, y, n, 1.5)
        got.wait()
    events = json.loads(path.read_text())["traceEvents"]
    names = [e["name"] for e in events if e.get("ph") == "X" and e["name"].startswith("fused:")]
    assert len(names) == got.grid[0] * got.grid[1] == 9  # one task per output tile
    assert set(names) == {
        "fused:multiply+sin+cast+cast+add+greater+where+greater_equal+cast+subtract"
    }
    expected = _expression(x, y, n, 1.5).to_numpy()
    _same_bits(got.to_numpy(), expected)
    # a new scalar value reuses the trace and the kernel (scalars are kernel arguments)
    again = fused(x, y, n, -0.5)
    assert len(fused.plans) == 1
    _same_bits(again.to_numpy(), _expression(x, y, n, -0.5).to_numpy())


def test_an_input_that_requires_grad_runs_unfused_with_the_unfused_gradient():
    nt.init()
    rng = np.random.default_rng(1)
    data = rng.uniform(0.5, 1.5, (5, 6))
    function = nt.fuse(lambda x, y: x * y + x)  # tests/autograd/test_rules.py's: kernels shared
    grads = []
    for run in (function, function.function):
        x = nt.from_numpy(data, tile_shape=(2, 4)).requires_grad_()
        y = nt.from_numpy(data[:1] * 2, tile_shape=(1, 4))
        out = run(x, y)
        assert out.requires_grad
        nt.sum(out).backward()
        grads.append(x.grad.to_numpy())
    _same_bits(grads[0], grads[1])
    assert not function.plans  # never traced: it ran unfused
    np.testing.assert_allclose(grads[0], np.broadcast_to(data[:1] * 2 + 1, data.shape))


def test_what_does_not_fuse_is_refused_or_runs_unfused():
    nt.init()
    x = nt.from_numpy(np.arange(6.0).reshape(2, 3), tile_shape=(2, 2))
    with pytest.raises(TypeError, match="numtile.sum has no fused form"):
        nt.fuse(lambda x: nt.sum(x) + x)(x)
    with pytest.raises(TypeError, match="must return one tensor"):
        nt.fuse(lambda x: 2.0)(x)
    with pytest.raises(TypeError, match="no truth value"):
        nt.fuse(lambda x: x if x > 0 else -x)(x)
    with pytest.raises(TypeError, match="no .sum"):
        nt.fuse(lambda x: x.sum())(x)
    with pytest.raises(TypeError, match="not one of its arguments"):
        nt.fuse(lambda a: a + x)(x)
    # an op between two scalars runs the function unfused, with the unfused result
    scaled = nt.fuse(lambda x, a: x + a * 2)
    _same_bits(scaled(x, 0.25).to_numpy(), (x + 0.5).to_numpy())
    assert list(scaled.plans.values()) == [None]


@pytest.mark.skipif(not available(), reason="needs a GPU or the CUDA simulator")
def test_the_cuda_twin_equals_the_unfused_cuda_ops():
    x, y, n = _inputs()
    nt.init(ncpu=1, ncuda=1, restrict="cuda", cuda_mem_limit=64 * 1024)
    try:
        x, y, n = (nt.from_numpy(t.to_numpy(), tile_shape=t.tile_shape) for t in (x, y, n))
        got = nt.fuse(_more)(x, y, n, 1.5).to_numpy()
        _same_bits(got, _more(x, y, n, 1.5).to_numpy())
    finally:
        nt.init()


@pytest.mark.parametrize("dtype", ["int32", "bool", "float32"])
def test_traced_dtypes_follow_the_unfused_ops_rules(dtype):
    """Tracing alone (no kernel compiled): each result dtype is the unfused op's (NumPy 2's,
    except that float functions of booleans and integers are float64, and clip keeps x's
    dtype, as the README says)."""
    from numtile.tiletensor.fusion_trace import trace

    floating = "float32" if dtype == "float32" else "float64"
    functions = {
        "clip": (lambda x: nt.clip(x, 0, 1), dtype),
        "divide": (lambda x: x / 2, floating),
        "exp": (lambda x: nt.exp(x), floating),
        "compare": (lambda x: x > 1, "bool"),
        "logical_not": (lambda x: nt.logical_not(x), "bool"),
        "where": (lambda x: nt.where(x > 0, x, 0.5), floating),
        "astype": (lambda x: nt.astype(x, "int8") * 3, "int8"),
        "bitwise": (lambda x: ~(x > 0) | (x < 2), "bool"),
        "mixed": (lambda x: x + nt.astype(x, "int64"), "float64" if floating == dtype else "int64"),
    }
    inner = nt.fuse(lambda a: a * 2)  # a fused function inside another one joins its trace
    functions["nested"] = (lambda x: inner(x) + 1, "int64" if dtype == "bool" else dtype)
    # the stand-ins know their rank (part of the signature), and so do values made of them
    functions["ndim"] = (lambda x: nt.astype(x, "int8") if nt.exp(x).ndim == 1 else x, "int8")
    for name, (function, expected) in functions.items():
        plan = trace(function, (("tensor", np.dtype(dtype), 1),))
        assert plan.dtype == np.dtype(expected), name


def test_scalars_of_another_type_trace_again():
    """0, 0.0 and False are equal dict keys: the plan of an int scalar must not serve a float."""
    scaled = nt.fuse(lambda x, a: x * a + 1)
    x = nt.asarray(np.arange(4))
    assert scaled(x, 2).to_numpy().tolist() == [1, 3, 5, 7]
    assert scaled(x, 2.5).to_numpy().tolist() == [1.0, 3.5, 6.0, 8.5]
    assert scaled(x, np.float32(0.5)).dtype == np.float64  # int64 * a float32 scalar
