"""Complex gradients of slogdet, cholesky, qr, eigh, eigvalsh, svd, svdvals and pinv in PyTorch's
convention, against torch autograd on complex128: matrices with tiles that divide none of
their axes, and stacks. Eigen- and singular vectors are defined up to phases, so their
losses are the phase-invariant ones PyTorch's documentation advises (|V|^2, V diag(c) V^H,
U diag(c) Vh)."""

import numpy as np
import pytest

import numtile as nt

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(11)


def _complex(shape):
    return RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)


def _hermitian(shape):
    """Hermitian positive definite matrices (a stack where shape has more than 2 axes)."""
    b = _complex(shape)
    return b @ np.swapaxes(b, -1, -2).conj() + shape[-1] * np.eye(shape[-1])


def _tiles(shape):
    """Tiles that divide none of the axes below (one matrix of a stack per tile)."""
    if len(shape) < 2:
        return (2,) * len(shape)
    return (1,) * (len(shape) - 2) + (2, 2) if len(shape) > 2 else (3, 2)


def _weights(shape, dtype):
    values = _complex(shape) if np.dtype(dtype).kind == "c" else RNG.standard_normal(shape)
    return values.astype(dtype)


def _loss(xp, outputs, weights):
    """sum(real(output * weight)) over the outputs: a real loss of complex values."""
    total = 0
    for value, weight in zip(outputs, weights, strict=True):
        if xp is nt:
            weight = nt.from_numpy(weight, tile_shape=_tiles(weight.shape))
            total = total + nt.sum(nt.real(value * weight))
        else:
            total = total + (value * torch.tensor(weight)).real.sum()
    return total


def _check(build, a):
    """The gradient of ``_loss(build(xp, a))`` from numtile equals torch's."""
    ours = nt.from_numpy(a, tile_shape=_tiles(a.shape)).requires_grad_()
    outputs = build(nt, ours)
    weights = [_weights(o.shape, o.dtype) for o in outputs]
    _loss(nt, outputs, weights).backward()
    theirs = torch.tensor(a, requires_grad=True)
    _loss(torch, build(torch, theirs), weights).backward()
    expected = theirs.grad.numpy()
    got = ours.grad.to_numpy()
    assert got.dtype == expected.dtype == np.complex128
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-10)


def _adjoint(xp, x):
    return x.mH if xp is torch else nt.conj(nt.linalg.matrix_transpose(x))


def _slogdet(xp, x):
    sign, logabs = xp.linalg.slogdet(x)
    return [sign, logabs]


@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3)])
def test_slogdet_cholesky_and_eigh_match_torch(shape):
    a = _complex(shape) + 3 * np.eye(shape[-1])
    _check(_slogdet, a)  # the sign's phase moves with a: it has a gradient too
    spd = _hermitian(shape)
    _check(lambda xp, x: [xp.linalg.cholesky(x), xp.linalg.cholesky(x, upper=True)], spd)

    def spectrum(xp, x):
        w, v = xp.linalg.eigh(x)
        magnitudes = xp.real(v * xp.conj(v))  # |V|^2: each column's phase drops out
        scaled = v * xp.reshape(w, w.shape[:-1] + (1, w.shape[-1]))
        # V diag(w) V^H with the eigenvalues as constants (detached): only V's gradient
        fixed = xp.reshape(w.detach(), w.shape[:-1] + (1, w.shape[-1]))
        rotated = (v * fixed) @ _adjoint(xp, v)
        return [w, magnitudes, rotated, scaled @ _adjoint(xp, v), xp.linalg.eigvalsh(x)]

    _check(spectrum, spd)


def test_qr_matches_torch():
    for a in [_complex((5, 3)), _complex((4, 4))]:  # reduced QR's gradient needs m >= n
        q, _ = nt.linalg.qr(nt.from_numpy(a, tile_shape=_tiles(a.shape)))
        # LAPACK's convention (R's diagonal real) on both sides: the same factors
        np.testing.assert_allclose(q.to_numpy(), torch.linalg.qr(torch.tensor(a))[0], atol=1e-12)
        _check(lambda xp, x: list(xp.linalg.qr(x)), a)


def test_svd_svdvals_and_pinv_match_torch():
    def factors(xp, x):
        u, s, vh = xp.linalg.svd(x, full_matrices=False)
        k = s.shape[-1]
        c = np.linspace(1.0, 2.0, k)  # U diag(c) Vh: the pairs' phases cancel
        c = nt.from_numpy(c, tile_shape=(2,)) if xp is nt else torch.tensor(c)
        magnitudes = [xp.real(u * xp.conj(u)), xp.real(vh * xp.conj(vh))]
        return [s, u * c @ vh, *magnitudes, xp.linalg.svdvals(x), xp.linalg.pinv(x)]

    for a in [_complex((5, 3)), _complex((3, 5)), _complex((2, 4, 3))]:  # m > n, m < n, stack
        _check(factors, a)
