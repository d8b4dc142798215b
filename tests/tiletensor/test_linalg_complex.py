"""Complex matrix products (issue 13/14): matmul / ``@`` / tensordot / vecdot / matrix_power on
complex64 and complex128 through the c/zgemm tile kernels (conjugate transposes as BLAS's 'C'
flag), against NumPy, and their gradients (and those of solve, inv and det) in PyTorch's
convention against torch autograd. The
CPU kernels and the CUDA twins (simulator) are compared directly in
tests/ops_cuda/test_matmul_complex.py."""

import numpy as np
import pytest

import numtile as nt
from numtile import ops_cpu

RNG = np.random.default_rng(7)
TOLERANCE = {np.complex64: 2e-5, np.complex128: 1e-12}


def _complex(shape, dtype=np.complex128):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)


def _close(actual, expected, dtype):
    tolerance = TOLERANCE[np.dtype(dtype).type]
    assert actual.dtype == expected.dtype
    np.testing.assert_allclose(actual, expected, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_gemm_kernel_applies_every_flag(dtype):
    # trans 0, 1 (transpose) and 2 (conjugate transpose) on both operands, and the gemv path
    a, b = _complex((4, 5), dtype), _complex((5, 3), dtype)
    ops = {0: lambda x: x, 1: lambda x: x.T.copy(), 2: lambda x: x.conj().T.copy()}
    for ta in (0, 1, 2):
        for tb in (0, 1, 2):
            c = np.full((4, 3), np.nan, dtype)
            ops_cpu.gemm(ops[ta](a), ops[tb](b), c, ta, tb, 1.0, 0.0)
            _close(c, a @ b, dtype)
        row = np.ones((1, 3), dtype)
        ops_cpu.gemm(a[:1].copy(), ops[ta](b), row, 0, ta, -2.0, 1.0)
        _close(row, 1 - 2 * (a[:1] @ b), dtype)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_matmul_matches_numpy(dtype):
    a, b = _complex((5, 7), dtype), _complex((7, 4), dtype)
    x, y = nt.from_numpy(a, tile_shape=(2, 3)), nt.from_numpy(b, tile_shape=(3, 3))
    _close((x @ y).to_numpy(), a @ b, dtype)
    stack, vector = _complex((2, 1, 5, 7), dtype), _complex((7,), dtype)
    s = nt.from_numpy(stack, tile_shape=(1, 1, 3, 3))
    _close((s @ y).to_numpy(), stack @ b, dtype)  # batch axes broadcast
    _close((x @ nt.from_numpy(vector, tile_shape=3)).to_numpy(), a @ vector, dtype)
    # mixed with a real operand: promoted to complex
    real = RNG.standard_normal((7, 4)).astype(np.float32 if dtype == np.complex64 else float)
    _close((x @ nt.from_numpy(real, tile_shape=(3, 2))).to_numpy(), a @ real, dtype)


def test_conjugate_flags_match_numpy():
    a, b = _complex((5, 4)), _complex((5, 3))
    x, y = nt.from_numpy(a, tile_shape=(2, 3)), nt.from_numpy(b, tile_shape=(2, 2))
    adjoint = nt.linalg.matmul(x, y, transpose_a=True, conjugate_a=True)
    _close(adjoint.to_numpy(), a.conj().T @ b, np.complex128)
    gram = nt.linalg.matmul(x, x, transpose_b=True, conjugate_b=True)
    _close(gram.to_numpy(), a @ a.conj().T, np.complex128)
    conjugated = nt.linalg.matmul(y, x, transpose_a=True, conjugate_b=True)  # no transpose: copy
    _close(conjugated.to_numpy(), b.T @ a.conj(), np.complex128)
    # on real tensors the conjugate flags change nothing
    r = RNG.standard_normal((3, 4))
    real = nt.linalg.matmul(nt.asarray(r), nt.asarray(r), transpose_b=True, conjugate_b=True)
    np.testing.assert_allclose(real.to_numpy(), r @ r.T, rtol=1e-13)


def test_tensordot_vecdot_and_matrix_power_match_numpy():
    a, b = _complex((2, 3, 4)), _complex((4, 3, 2))
    x, y = nt.from_numpy(a, tile_shape=(1, 2, 3)), nt.from_numpy(b, tile_shape=(3, 2, 2))
    got = nt.linalg.tensordot(x, y, axes=([1, 2], [1, 0]))
    _close(got.to_numpy(), np.tensordot(a, b, axes=([1, 2], [1, 0])), np.complex128)
    _close(nt.tensordot(x, y, axes=1).to_numpy(), np.tensordot(a, b, axes=1), np.complex128)
    v, w = _complex((3, 5)), _complex((5,))
    got = nt.linalg.vecdot(nt.from_numpy(v, tile_shape=(2, 2)), nt.from_numpy(w, tile_shape=2))
    _close(got.to_numpy(), np.vecdot(v, w), np.complex128)  # conj(v) . w
    m = _complex((2, 4, 4)) / 2
    power = nt.linalg.matrix_power(nt.from_numpy(m, tile_shape=(1, 3, 3)), 5)
    _close(power.to_numpy(), np.linalg.matrix_power(m, 5), np.complex128)


torch = pytest.importorskip("torch")


def _loss(values, weights, xp):
    """A real loss of a complex result: sum(real(values * weights))."""
    return xp.sum(xp.real(values * weights)) if xp is nt else (values * weights).real.sum()


def _tile(ndim):
    return (1,) * (ndim - 2) + (2, 3)  # divides none of the shapes below


def _check_gradients(build, *inputs):
    ours = [nt.from_numpy(v, tile_shape=_tile(v.ndim)).requires_grad_() for v in inputs]
    out = build(nt, *ours)
    weights = _complex(out.shape)
    _loss(out, nt.from_numpy(weights, tile_shape=_tile(len(out.shape))), nt).backward()
    theirs = [torch.tensor(v, requires_grad=True) for v in inputs]
    _loss(build(torch, *theirs), torch.tensor(weights), torch).backward()
    for mine, expected in zip(ours, theirs, strict=True):
        got = mine.grad.to_numpy()
        assert got.dtype == expected.grad.numpy().dtype
        np.testing.assert_allclose(got, expected.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_matmul_gradients_match_torch():
    a, b = _complex((4, 5)), _complex((5, 3))
    _check_gradients(lambda xp, x, y: x @ y, a, b)
    # transposed operands (GEMM flags): the gradients conjugate the other operand
    _check_gradients(
        lambda xp, x, y: (
            nt.linalg.matmul(x, y, transpose_a=True, transpose_b=True) if xp is nt else x.T @ y.T
        ),
        a.T.copy(),
        b.T.copy(),
    )
    # a real operand with a complex one keeps the real part of its gradient; batched
    real, stack = RNG.standard_normal((5, 3)), _complex((2, 4, 5))
    _check_gradients(lambda xp, x, y: x @ (y if xp is nt else y.to(x.dtype)), stack, real)
    # composites over matmul: tensordot, vecdot, matrix_power
    _check_gradients(lambda xp, x, y: xp.tensordot(x, y, dims=1) if xp is torch
                     else nt.tensordot(x, y, axes=1), a, b)  # fmt: skip
    square = _complex((3, 3)) / 2
    _check_gradients(
        lambda xp, x: nt.linalg.matrix_power(x, 3) if xp is nt else torch.linalg.matrix_power(x, 3),
        square,
    )


def test_solve_inverse_and_determinant_gradients_match_torch():
    a = _complex((4, 4)) + 3 * np.eye(4)
    b = _complex((4, 2))
    _check_gradients(lambda xp, x, y: xp.linalg.solve(x, y), a, b)
    _check_gradients(lambda xp, x: xp.linalg.inv(x), a)
    _check_gradients(
        lambda xp, x: xp.reshape(xp.linalg.det(x), (1, 1)) if xp is nt else x.det().reshape(1, 1),
        a,
    )
