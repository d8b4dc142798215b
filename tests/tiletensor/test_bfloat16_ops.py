"""Element-wise ops, reductions, searching and gradients on bfloat16 TileTensors, bit for bit
against the float32 result rounded by ml_dtypes (the float32 kernels run on widened tiles),
and a GPU worker (CUDA simulator) against the CPU."""

import ml_dtypes
import numpy as np
import pytest

import numtile as nt
from numtile import opcodes

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
# functions NumPy rounds correctly in float32, so numtile's bfloat16 result is NumPy's rounded
EXACT_UNARY = {"negative", "abs", "sqrt", "square", "floor", "ceil", "trunc", "round", "sign"}


def bits(array) -> np.ndarray:
    return np.ascontiguousarray(array).reshape(-1).view(np.uint16)


def assert_bfloat16(tensor, expected) -> None:
    """``tensor`` is bfloat16 and holds ``expected`` (float32 values) rounded, bit for bit."""
    assert tensor.dtype == BFLOAT16
    expected = np.asarray(expected, np.float32).astype(BFLOAT16)
    np.testing.assert_array_equal(bits(tensor.to_numpy()), bits(expected))


def f32(array) -> np.ndarray:
    return np.asarray(array).astype(np.float32)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((6, 9)) * 2).astype(BFLOAT16)
    b = (rng.standard_normal((1, 9)) * 2).astype(BFLOAT16)
    return a, b


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("math_path", ["ours"], indirect=True)  # bfloat16 kernels are ours
def test_every_unary_function_is_the_float32_one_rounded(data, math_path):
    a, _ = data
    x = nt.from_numpy(a, tile_shape=(4, 4))
    wide = nt.from_numpy(f32(a), tile_shape=(4, 4))
    for name in opcodes.UNARY_OPS:
        out = getattr(nt, name)(x)
        assert_bfloat16(out, getattr(nt, name)(wide).to_numpy())
        if name in EXACT_UNARY:
            assert_bfloat16(out, getattr(np, name if name != "round" else "rint")(f32(a)))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_binary_ops_broadcast_with_scalars_and_other_dtypes(data):
    a, b = data
    x, y = nt.from_numpy(a, tile_shape=(4, 4)), nt.from_numpy(b, tile_shape=(1, 5))
    for name in ("add", "subtract", "multiply", "divide", "maximum", "minimum"):
        assert_bfloat16(getattr(nt, name)(x, y), getattr(np, name)(f32(a), f32(b)))
    assert_bfloat16(nt.abs(x) ** y, np.abs(f32(a)) ** f32(b))
    # a Python scalar is rounded to bfloat16 first (array API), then the float32 op rounds
    assert_bfloat16(x * 0.1, f32(a) * f32(np.float32(0.1).astype(BFLOAT16)))
    assert_bfloat16(2.5 - x, 2.5 - f32(a))
    # integer arrays are cast to bfloat16 (PyTorch's promotion); float32 wins
    ints = nt.from_numpy(np.arange(-400, 500, 100), tile_shape=4)
    assert_bfloat16(x + ints, f32(a) + f32(np.arange(-400, 500, 100).astype(BFLOAT16)))
    mixed = x + nt.from_numpy(f32(b), tile_shape=(1, 5))
    assert mixed.dtype == nt.float32
    np.testing.assert_array_equal(mixed.to_numpy(), f32(a) + f32(b))
    x += y  # in place, on bfloat16 tiles
    assert_bfloat16(x, f32(a) + f32(b))
    x *= 3.0
    assert_bfloat16(x, f32((f32(a) + f32(b)).astype(BFLOAT16)) * 3)


def test_compare_where_clip_and_predicates(data):
    a, b = data
    x, y = nt.from_numpy(a, tile_shape=(4, 4)), nt.from_numpy(b, tile_shape=(1, 5))
    np.testing.assert_array_equal((x > y).to_numpy(), f32(a) > f32(b))
    np.testing.assert_array_equal((x == 0.5).to_numpy(), f32(a) == 0.5)
    assert_bfloat16(nt.where(x > y, x, y), np.where(f32(a) > f32(b), f32(a), f32(b)))
    assert_bfloat16(nt.where(x > 0, x, 0.0), np.where(f32(a) > 0, f32(a), 0))
    assert_bfloat16(nt.clip(x, min=-1.0, max=y), np.clip(f32(a), -1.0, f32(b)))
    special = np.array([np.nan, np.inf, -np.inf, -0.0, 1.0], BFLOAT16)
    s = nt.from_numpy(special, tile_shape=2)
    np.testing.assert_array_equal(nt.isnan(s).to_numpy(), np.isnan(f32(special)))
    np.testing.assert_array_equal(nt.isfinite(s).to_numpy(), np.isfinite(f32(special)))
    np.testing.assert_array_equal(nt.signbit(s).to_numpy(), np.signbit(f32(special)))


def test_reductions_accumulate_in_float32_and_round_once():
    # multiples of 1/8 with a reduced extent of 8: every float32 sum, mean and variance is
    # exact, so the results are NumPy's bit for bit whatever the order of the sums
    values = np.random.default_rng(1).integers(-64, 64, (8, 5, 8)) / 8
    a = values.astype(BFLOAT16)
    x = nt.from_numpy(a, tile_shape=(3, 2, 5))
    for axis in (0, 2, (0, 2), None):
        assert_bfloat16(nt.sum(x, axis=axis), np.sum(f32(a), axis=axis))
        assert_bfloat16(nt.mean(x, axis=axis), np.mean(f32(a), axis=axis))
        assert_bfloat16(nt.max(x, axis=axis), np.max(f32(a), axis=axis))
    assert_bfloat16(nt.min(x, axis=1, keepdims=True), np.min(f32(a), axis=1, keepdims=True))
    assert_bfloat16(nt.var(x, axis=0), np.var(f32(a), axis=0))
    assert_bfloat16(nt.std(x, axis=2), np.std(f32(a), axis=2))
    assert_bfloat16(nt.linalg.vector_norm(x, axis=0), np.linalg.norm(f32(a), axis=0))
    assert_bfloat16(nt.cumulative_sum(x, axis=0), np.cumsum(f32(a), axis=0))
    # 1 + 300 * 2**-8 in float32 is 2.171875; summed in bfloat16 it would stay 1.0
    many = nt.from_numpy(np.array([1.0] + [2**-8] * 300, BFLOAT16), tile_shape=64)
    assert_bfloat16(nt.sum(many), 1 + 300 * 2**-8)
    assert nt.argmax(x).item() == np.argmax(f32(a)) and nt.argmin(x).item() == np.argmin(f32(a))


def test_sorting_sets_masks_and_take(data):
    a, _ = data
    x = nt.from_numpy(a, tile_shape=(4, 4))
    np.testing.assert_array_equal(bits(nt.sort(x, axis=1).to_numpy()), bits(np.sort(a, axis=1)))
    np.testing.assert_array_equal(nt.argsort(x, axis=0).to_numpy(), np.argsort(f32(a), axis=0))
    np.testing.assert_array_equal(bits(nt.unique_values(x).to_numpy()), bits(np.unique(a)))
    np.testing.assert_array_equal(bits(x[x > 0].to_numpy()), bits(a[f32(a) > 0]))
    picked = nt.take(x, nt.from_numpy(np.array([5, 0, 5])), axis=0).to_numpy()
    np.testing.assert_array_equal(bits(picked), bits(a[[5, 0, 5]]))


def test_gradients_flow_through_bfloat16_ops_as_in_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    a, w = rng.standard_normal((4, 6)), rng.standard_normal((1, 6))
    x = nt.from_numpy(a.astype(BFLOAT16), tile_shape=(3, 4)).requires_grad_()
    v = nt.from_numpy(np.float32(w), tile_shape=(1, 4)).requires_grad_()
    picked = nt.take(x, nt.asarray([1, 1]), axis=0)  # a scatter-add backward into bfloat16
    loss = nt.sum(nt.tanh(x * v.astype(nt.bfloat16))) + nt.sum(picked)
    loss = loss + nt.mean(x) * 2.0 + nt.var(x) + nt.linalg.vector_norm(x)
    loss.backward()
    tx = torch.tensor(a, dtype=torch.bfloat16, requires_grad=True)
    tv = torch.tensor(np.float32(w), requires_grad=True)
    expected_loss = torch.tanh(tx * tv.bfloat16()).sum() + tx[[1, 1]].sum()
    expected_loss = expected_loss + tx.mean() * 2.0 + tx.var(correction=0) + tx.norm()
    expected_loss.backward()
    assert loss.dtype == nt.bfloat16
    assert float(loss) == pytest.approx(expected_loss.item(), rel=1e-2)
    assert x.grad.dtype == nt.bfloat16 and v.grad.dtype == nt.float32
    # PyTorch differentiates tanh through its bfloat16 output, numtile through the input
    expected = tx.grad.float().numpy()
    np.testing.assert_allclose(f32(x.grad.to_numpy()), expected, rtol=2e-2, atol=1e-2)
    np.testing.assert_allclose(v.grad.to_numpy(), tv.grad.numpy(), rtol=2e-2, atol=2e-2)


@pytest.fixture
def gpu():
    from numtile.ops_cuda import available

    if not available():
        pytest.skip("needs a GPU or the CUDA simulator")
    runtime = nt.init(ncpu=1, ncuda=1, restrict="cuda", cuda_mem_limit=64 * 1024)
    yield runtime
    nt.init()


def _bfloat16_program(a, b):
    """Casts both ways, element-wise ops, a reduction and where on one GPU or CPU runtime."""
    x = nt.from_numpy(f32(a), tile_shape=(4, 4)).astype(nt.bfloat16)
    y = nt.from_numpy(b, tile_shape=(1, 5))
    z = nt.exp(x) * y - 1.5
    return [
        z.to_numpy(),
        nt.sum(z, axis=0).to_numpy(),
        nt.where(x > y, x, 2.0).to_numpy(),
        (z.astype(nt.float32) + 0.25).to_numpy(),
    ]


def test_a_gpu_worker_computes_what_the_cpu_does(data, gpu):
    a, b = data
    on_gpu = _bfloat16_program(a, b)
    nt.init(ncpu=1)
    for gpu_result, cpu_result in zip(on_gpu, _bfloat16_program(a, b)):
        assert gpu_result.dtype == cpu_result.dtype
        np.testing.assert_array_equal(gpu_result.view(np.uint8), cpu_result.view(np.uint8))
