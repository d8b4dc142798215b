"""What the kernel tests of both backends share: how a test runs a kernel on a backend, the
cases several tests draw from, and the helpers that build kernel arguments the way the tiled
ops do.

A test body parametrized over the ``backend`` fixture (``cpu``, or ``cuda`` under Numba's CUDA
simulator) calls ``backend.run("name", *args)`` and compares the arrays with a NumPy
reference. On ``cuda`` the same call also runs the CPU twin on copies of the arguments and
checks that the CUDA kernel leaves every array as the CPU one does.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import importlib

import numpy as np

# CUDA results against the CPU twin's: float32 sums and transcendental functions differ in the
# last bits (the CPU's float32 tanh is a rational approximation, CUDA's is libdevice's)
TWIN_TOLERANCE = {
    np.dtype(np.float32): {"rtol": 2e-5, "atol": 1e-6},
    np.dtype(np.float64): {"rtol": 1e-12, "atol": 1e-13},
}


class Host:
    """A launch parameter (shape, strides, ...): a host array on every backend."""

    def __init__(self, value) -> None:
        self.value = value


def _host(argument):
    return argument.value if isinstance(argument, Host) else argument


class Backend:
    """A kernel package as the tests call it."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name

    @functools.cached_property
    def ops(self):
        """``numtile.ops_cpu`` or ``numtile.ops_cuda``."""
        return importlib.import_module(f"numtile.ops_{self.name}")

    def kernel(self, name: str):
        """The kernel ``name`` of this backend (``"fill"``, ``"nn.adamw_step"``)."""
        return functools.reduce(getattr, name.split("."), self.ops)

    def run(self, name: str, *args, exact=False, twin=True, tolerance=None) -> None:
        """Run kernel ``name`` on ``args``: NumPy arrays are tiles, updated in place; ``Host``
        values are launch parameters; anything else is a scalar.

        On cuda the tiles go to the device and back, and (unless ``twin`` is False) the CPU
        twin runs on copies first: every tile must come back as the CPU leaves it (exactly
        with ``exact`` or for non-floats, else within ``tolerance`` (rtol and atol) or, by
        default, the ``TWIN_TOLERANCE`` of its dtype).
        """
        if self.name == "cpu":
            self.kernel(name)(*(_host(a) for a in args))
            return
        from numba import cuda

        expected = None
        if twin:
            expected = [copy.deepcopy(_host(a)) for a in args]
            CPU.kernel(name)(*expected)
        device = [
            cuda.to_device(np.ascontiguousarray(a)) if isinstance(a, np.ndarray) else _host(a)
            for a in args
        ]
        self.kernel(name)(*device)
        for position, (argument, result) in enumerate(zip(args, device, strict=True)):
            if isinstance(argument, np.ndarray):
                argument[...] = result.copy_to_host()
                if expected is not None:
                    message = f"argument {position}"
                    assert_twins(argument, expected[position], exact, message, tolerance)

    def potrf(self, a) -> int:
        """Cholesky of the tile ``a`` in place, returning LAPACK's info on either backend (the
        CPU signature; on cuda the info and the columns factored are checked against the CPU
        twin)."""
        if self.name == "cpu":
            return self.ops.potrf(a)
        from numba import cuda

        expected = a.copy()
        expected_info = CPU.ops.potrf(expected)
        d_a, d_info = cuda.to_device(a), cuda.to_device(np.full(1, -1, np.int64))
        self.ops.potrf(d_a, d_info)
        a[...] = d_a.copy_to_host()
        info = int(d_info.copy_to_host()[0])
        assert info == expected_info
        done = a.shape[0] if info == 0 else info - 1  # the columns factored before a failure
        assert_twins(a[:, :done], expected[:, :done])
        return info


def assert_twins(actual, expected, exact=False, message="", tolerance=None) -> None:
    """A CUDA result equals the CPU's: floats within ``TWIN_TOLERANCE`` (NaNs in the same
    places; ``tolerance``: rtol and atol other than the dtype's) unless ``exact``, everything
    else bit for bit (signed zeros included)."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, message
    if expected.dtype.kind != "f" or exact:
        np.testing.assert_array_equal(actual, expected, err_msg=message)
        if expected.dtype.kind == "f":  # signed zeros too
            number = ~np.isnan(expected)
            signs = np.signbit(actual[number]), np.signbit(expected[number])
            np.testing.assert_array_equal(*signs, err_msg=f"{message}: signs")
    else:
        tolerance = tolerance or TWIN_TOLERANCE[expected.dtype]
        np.testing.assert_allclose(actual, expected, equal_nan=True, err_msg=message, **tolerance)


CPU, CUDA = Backend("cpu"), Backend("cuda")
BACKENDS = {"cpu": CPU, "cuda": CUDA}


@contextlib.contextmanager
def cuda_launches(block=None, gemm_tile=None):
    """CUDA launches with this block size and GEMM tile inside the ``with`` block (through
    ``ops_cuda.configure``); the previous settings are restored after it."""
    from numtile import ops_cuda

    previous = ops_cuda.configure(block=block, gemm_tile=gemm_tile)
    try:
        yield
    finally:
        ops_cuda.configure(*previous)


# --- copies ------------------------------------------------------------------------------------


def view_arguments(view, base):
    """(offset, element strides) of a NumPy view into the C-contiguous array ``base``."""
    start = view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    return start // base.itemsize, np.array(view.strides, dtype=np.int64) // base.itemsize


# (source base shape, source view, destination base shape, destination view); extents exceed
# the CUDA simulator's 16 threads, so the grid-stride loops wrap
COPY_CASES = {
    "contiguous rows with offsets": ((6, 7), lambda a: a[2:5], (5, 7), lambda a: a[1:4]),
    "transpose 2-d": ((3, 13), lambda a: a.T, (13, 3), lambda a: a),
    "transpose 3-d": ((2, 3, 5), lambda a: a.transpose(2, 0, 1), (5, 2, 3), lambda a: a),
    "reversed 2-d": ((4, 5), lambda a: a[::-1, ::-1], (4, 5), lambda a: a),
    "reversed step 1-d": ((39,), lambda a: a[::-2], (20,), lambda a: a),
    "block into larger": ((3, 7), lambda a: a, (5, 9), lambda a: a[1:4, 2:9]),
    "strided to reversed": ((4, 6), lambda a: a[:, ::2].T, (6, 4), lambda a: a[::-2, ::-1]),
    "broadcast source": ((9,), lambda a: np.broadcast_to(a, (3, 9)), (3, 9), lambda a: a),
    "inner extent 1": ((19, 3), lambda a: a[:, 1:2], (19, 1), lambda a: a),
    "0-d": ((3, 4), lambda a: a[1, 2, ...], (2,), lambda a: a[1, ...]),
    "empty": ((3, 4), lambda a: a[:, :0], (3, 2), lambda a: a[:, :0]),
    "4-d sliced transpose": (
        (2, 3, 4, 5),
        lambda a: a[:, ::2, 1:, ::-1].transpose(3, 0, 2, 1),
        (5, 2, 3, 2),
        lambda a: a,
    ),
}


# --- broadcasting --------------------------------------------------------------------------------


def element_strides(shape, out_shape):
    """Element strides of a C-contiguous array of ``shape`` broadcast to ``out_shape``."""
    broadcast = np.broadcast_to(np.empty(shape, np.int8), out_shape)
    return np.array(broadcast.strides, dtype=np.int64)


def run_broadcast(backend, name, a, b, op, out_dtype, **options):
    """The result of broadcasting kernel ``name`` (binary or compare) on C-contiguous a and b,
    called on ``backend`` the way the tiled ops call it (host strides and shape); ``options``
    go to ``Backend.run``."""
    out_shape = np.broadcast_shapes(a.shape, b.shape)
    out = np.zeros(out_shape, out_dtype)
    backend.run(
        name,
        a.reshape(-1),
        Host(element_strides(a.shape, out_shape)),
        b.reshape(-1),
        Host(element_strides(b.shape, out_shape)),
        out.reshape(-1),
        Host(np.array(out_shape, dtype=np.int64)),
        op,
        **options,
    )
    return out


def binary_operands(name, dtype, a_shape, b_shape, rng):
    """Operands covering signs, zero divisors and (for power) a safe range."""
    if np.dtype(dtype).kind == "i":
        a = rng.integers(-9, 10, a_shape)
        b = rng.integers(0, 5, b_shape) if name == "power" else rng.integers(-4, 5, b_shape)
    elif name == "power":
        a = rng.uniform(0.1, 3, a_shape)
        b = rng.uniform(-3, 3, b_shape)
    else:
        a = rng.uniform(-5, 5, a_shape)
        b = rng.uniform(-5, 5, b_shape)
        if b.size > 2:
            b.reshape(-1)[::3] = np.round(b.reshape(-1)[::3])
    return np.asarray(a, dtype), np.asarray(b, dtype)


# --- reductions --------------------------------------------------------------------------------


def reduce_operands(op, dtype, shape, rng):
    """x of logical shape (pre, n, post) and a nonzero initial out of shape (pre, post)."""
    pre, n, post = shape
    if np.dtype(dtype).kind in "ib":
        x = rng.integers(-5, 6, shape)
        out = rng.integers(-5, 6, (pre, post))
    elif op == "prod":
        x = rng.uniform(0.5, 1.5, shape)
        out = rng.uniform(0.5, 1.5, (pre, post))
    else:
        x = rng.normal(size=shape)
        out = rng.normal(size=(pre, post))
    return x.astype(dtype), out.astype(dtype)


# --- statistics --------------------------------------------------------------------------------

FAR_FROM_ZERO = ["N(1e6, 1)", "N(-1e8, 1e-2)", "outlier first"]


def far_from_zero(data: str, shape) -> np.ndarray:
    """``data`` (one of ``FAR_FROM_ZERO``) of ``shape``: its running mean, unshifted, rounds at
    1e-10 (1e6) or 1.5e-8 (1e8) against a spread of 1 or 1e-2; "outlier first": every column's
    first value (the shift of its moments) 50 standard deviations off the others."""
    rng = np.random.default_rng(3)
    if data == "N(-1e8, 1e-2)":
        return -1e8 + 1e-2 * rng.standard_normal(shape)
    x = 1e6 + rng.standard_normal(shape)
    if data == "outlier first":
        x[0] += 50.0
    return x


def exact_m2(x: np.ndarray) -> np.ndarray:
    """M2 of every column of x, two passes in long double."""
    precise = x.astype(np.longdouble)
    return ((precise - precise.mean(axis=0)) ** 2).sum(axis=0)


# --- linear algebra ------------------------------------------------------------------------------


def random(shape, dtype, seed=0, mean=0.0, std=1.0):
    """Reproducible normal array of ``dtype`` (small integers for integer dtypes)."""
    rng = np.random.default_rng(seed)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-5, 6, size=shape).astype(dtype)
    return rng.normal(mean, std, shape).astype(dtype)


def spd(n, dtype, seed=0):
    """Well-conditioned symmetric positive definite matrix."""
    x = random((n, n), np.float64, seed)
    return (x @ x.T + n * np.eye(n)).astype(dtype)


def garbage(shape, dtype):
    """Output tile full of values the kernel must ignore when beta == 0."""
    return np.full(shape, 123 if np.issubdtype(dtype, np.integer) else np.nan, dtype)


def triangle(order, lower, unit_diagonal, dtype):
    """(stored, used): a well-conditioned triangular matrix as a kernel gets it, with NaN
    wherever it must not read (the other triangle, the diagonal if unit), and as it is meant."""
    used = np.tril(random((order, order), np.float64, 4)) + order * np.eye(order)
    if not lower:
        used = used.T
    stored = used.copy()
    stored[np.triu_indices(order, 1) if lower else np.tril_indices(order, -1)] = np.nan
    if unit_diagonal:
        np.fill_diagonal(stored, np.nan)
        np.fill_diagonal(used, 1.0)
    return stored.astype(dtype), used


# --- nn: problems cut into tiles -----------------------------------------------------------------

# nn results against PyTorch's in float64: float32 kernels keep some arithmetic in float32
NN_TOLERANCE = {
    np.dtype(np.float32): {"rtol": 2e-4, "atol": 2e-5},
    np.dtype(np.float64): {"rtol": 1e-10, "atol": 1e-12},
}


def assert_matches_torch(actual, expected, dtype):
    """actual == expected (a NumPy array or torch tensor) within ``NN_TOLERANCE`` of ``dtype``."""
    tolerance = NN_TOLERANCE[np.dtype(dtype)]
    np.testing.assert_allclose(actual, np.asarray(expected, np.float64), **tolerance)


# CUDA's nn results against the CPU twin's: CUDA computes in float64 where the CPU keeps float32
NN_TWIN_TOLERANCE = {
    np.dtype(np.float32): {"rtol": 2e-5, "atol": 2e-5},
    np.dtype(np.float64): {"rtol": 1e-12, "atol": 1e-12},
}


def run_nn(backend, name, *args):
    """Run kernel ``nn.<name>`` on ``backend`` (on cuda checked against the CPU twin within the
    tolerance of the data's dtype: the first float array's)."""
    data = next(a for a in args if isinstance(a, np.ndarray) and a.dtype.kind == "f")
    backend.run(f"nn.{name}", *args, tolerance=NN_TWIN_TOLERANCE[data.dtype])


def spans(size, tile):
    """(start, stop) of each tile of an axis of ``size`` cut in tiles of ``tile``."""
    return [(start, min(start + tile, size)) for start in range(0, size, tile)]


def shuffled(items, seed=0):
    """``items`` as a list in a reproducible random order."""
    items = list(items)
    np.random.default_rng(seed).shuffle(items)
    return items


def block(x, rows, columns):
    """Contiguous copy of the tile of the 2-D ``x`` at ``rows`` x ``columns`` (start, stop)."""
    return np.ascontiguousarray(x[rows[0] : rows[1], columns[0] : columns[1]])


def leaf(x):
    """float64 torch tensor of ``x`` that records gradients."""
    import torch

    return torch.tensor(x, dtype=torch.float64, requires_grad=True)
