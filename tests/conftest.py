"""Shared fixtures: a tile-by-tile checker against NumPy, schedulers, reproducible inputs."""

from __future__ import annotations

import gc
import math
import os
import subprocess
import sys

# CUDA kernels are tested on CPU-only machines under Numba's CUDA simulator, with tiny block
# sizes (every simulated thread is a Python thread). NUMTILE_TEST_GPU=1 tests a real GPU.
# Numba reads these when it is first imported, so they are set before numtile is.
if os.environ.get("NUMTILE_TEST_GPU") != "1":
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
    os.environ.setdefault("NUMTILE_CUDA_BLOCK", "8")
    os.environ.setdefault("NUMTILE_CUDA_GEMM_TILE", "4")

import numpy as np
import pytest

import numtile as nt
from tests.kernels import BACKENDS

if os.environ.get("NUMTILE_TEST_GPU") != "1":
    from numtile import ops_cuda

    # what the runtime does with the Config above when a CUDA node starts, for the kernels
    # that tests call directly
    ops_cuda.configure(block=8, gemm_tile=4)

    from tests.cudasim import lock_shared_arrays, lock_swapped_modules, quick_blocks

    lock_shared_arrays()  # the simulator's shared arrays race between a block's threads
    lock_swapped_modules()  # and so does its swap of the cuda module around device calls
    quick_blocks()  # syncthreads on a barrier, not the simulator's polling loop

SCHEDULERS = ("eager", "dmda", "sync")

# Relative/absolute tolerance per dtype when comparing floating results with NumPy.
TOLERANCE = {np.dtype(np.float32): 2e-5, np.dtype(np.float64): 1e-12}


def check_tiles(tensor, expected=None, *, rtol=None, atol=None, dtype=None) -> np.ndarray:
    """Check ``tensor`` tile by tile (dask ``assert_eq`` spirit) and return its gathered values.

    Checks that the layout is normalised (grid is the ceil-division, leftover tiles at the
    end), that every handle has the shape and dtype its layout position says, that every
    tile's data matches its region of ``expected`` and that the gathered array does too.
    The dtype must equal ``dtype`` if given, else ``expected``'s dtype (exactly: NumPy's
    promotion rules are part of the contract). Floats are compared with a per-dtype
    tolerance (NaNs in the same places), everything else exactly.
    """
    assert isinstance(tensor, nt.TileTensor), type(tensor)
    layout = tensor.layout
    assert tensor.shape == layout.shape and tensor.ndim == len(layout.shape)
    assert len(layout.tile_shape) == layout.ndim
    assert all(t >= 1 for t in layout.tile_shape), layout
    assert layout.grid == tuple(
        -(-s // t) for s, t in zip(layout.shape, layout.tile_shape, strict=True)
    )
    assert len(tensor.handles) == layout.ntiles == math.prod(layout.grid)
    for axis in range(layout.ndim):
        sizes = layout.tile_sizes(axis)
        assert sum(sizes) == layout.shape[axis]
        assert all(s == layout.tile_shape[axis] for s in sizes[:-1]), (axis, sizes)
        assert all(0 < s <= layout.tile_shape[axis] for s in sizes), (axis, sizes)
    for index, handle in zip(layout.indices(), tensor.handles, strict=True):
        assert handle.shape == layout.tile_shape_at(index), (index, handle, layout)
        assert handle.dtype == tensor.dtype, (index, handle, tensor.dtype)

    gathered = tensor.to_numpy()
    assert isinstance(gathered, np.ndarray)
    assert gathered.shape == tensor.shape and gathered.dtype == tensor.dtype
    if expected is None:
        return gathered
    expected = np.asarray(expected)
    want_dtype = np.dtype(dtype) if dtype is not None else expected.dtype
    assert tensor.dtype == want_dtype, f"dtype {tensor.dtype}, expected {want_dtype}"
    assert gathered.shape == expected.shape, f"shape {gathered.shape}, expected {expected.shape}"
    for index, handle in zip(layout.indices(), tensor.handles, strict=True):
        region = tuple(slice(a, b) for a, b in layout.tile_bounds(index))
        tile = handle.host_array()
        assert tile.shape == handle.shape and tile.dtype == tensor.dtype
        _compare(tile, expected[region], rtol, atol, f"tile {index}")
    _compare(gathered, expected, rtol, atol, "gathered array")
    return gathered


def _compare(actual, expected, rtol, atol, what) -> None:
    if actual.dtype.kind == "f":
        default = TOLERANCE[actual.dtype]
        np.testing.assert_allclose(
            actual,
            expected.astype(actual.dtype) if expected.dtype.kind == "f" else expected,
            rtol=default if rtol is None else rtol,
            atol=default if atol is None else atol,
            equal_nan=True,
            err_msg=what,
        )
    else:
        np.testing.assert_array_equal(actual, expected, err_msg=what, strict=False)


def make_array(shape, dtype, seed=0, *, low=-5, high=6) -> np.ndarray:
    """A reproducible array: standard normal for floats, integers in [low, high) otherwise."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.kind in "iu":
        return rng.integers(low, high, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def make_spd(n, dtype=np.float64, seed=0) -> np.ndarray:
    """A well-conditioned symmetric positive definite matrix."""
    x = make_array((n, n), np.float64, seed)
    return (x @ x.T + n * np.eye(n)).astype(dtype)


@pytest.fixture(name="check_tiles")
def check_tiles_fixture():
    """``check_tiles(tensor, expected, rtol=..., atol=..., dtype=...)``: see ``check_tiles``."""
    return check_tiles


@pytest.fixture(name="make_array")
def make_array_fixture():
    return make_array


@pytest.fixture(name="make_spd")
def make_spd_fixture():
    return make_spd


@pytest.fixture(params=list(BACKENDS))
def backend(request):
    """The kernel package a test body runs on: ``ops_cpu``, then ``ops_cuda`` (under the
    simulator); see ``tests.kernels.Backend``."""
    return BACKENDS[request.param]


@pytest.fixture(scope="module")
def quick_thread_switches():
    """The CUDA simulator's syncthreads waits on Python threads, each wait up to a GIL switch
    interval (5 ms): switching more often makes block-wide reductions quick."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    yield
    sys.setswitchinterval(previous)


@pytest.fixture(scope="module")
def frozen_heap():
    """For test files that collect garbage often (``pytestmark =
    pytest.mark.usefixtures("frozen_heap")``). A memory-limited runtime's start may run a full
    ``gc.collect()`` (``set_manager``: tiles that only cycles keep alive must not be adopted),
    and such tests collect too, to check that tiles die. In a worker that has compiled many
    Numba kernels the heap holds ~650k objects and each full collection takes ~1 s. Collected
    once here, the objects alive when the file starts are frozen (``gc.freeze``): later
    collections scan only what the file's own tests made, everything these tests create and
    check. They go back to the collector when the file ends (``gc.unfreeze``)."""
    gc.collect()  # garbage left by earlier files is freed now, not frozen
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@pytest.fixture(params=["vml", "ours"])
def math_path(request):
    """Element-wise maths through oneMKL's VML (``ops_cpu.mkl_vml``; where MKL does not load,
    numtile's kernels again), then through numtile's own kernels."""
    from numtile.ops_cpu import mkl_vml

    previous = mkl_vml.set_enabled(request.param == "vml")
    yield request.param
    mkl_vml.set_enabled(previous)


@pytest.fixture(params=SCHEDULERS)
def scheduler(request):
    """Run the test under each scheduler; the default runtime is restored afterwards."""
    nt.init(scheduler=request.param)
    try:
        yield request.param
    finally:
        nt.init()


@pytest.fixture(scope="session", autouse=True)
def _private_cache_dir(tmp_path_factory):
    """Keep the performance models that ``dmda`` persists out of the user's cache dir."""
    patcher = pytest.MonkeyPatch()
    patcher.setenv("NUMTILE_CACHE_DIR", str(tmp_path_factory.mktemp("numtile-cache")))
    nt.init()
    yield
    nt.shutdown()
    patcher.undo()


@pytest.fixture(autouse=True)
def _runtime_in_service():
    """A test that leaves the runtime shut down must not break the tests after it."""
    yield
    runtime = None
    try:
        runtime = nt.get_runtime()
    except nt.RuntimeShutdownError:
        pass
    if runtime is None or runtime.closed:
        nt.init()


@pytest.fixture
def read_only_folder(tmp_path):
    """A folder on a read-only tmpfs (root ignores permission bits, not a read-only mount)."""
    folder = tmp_path / "ro"
    folder.mkdir()
    try:
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m,ro", "tmpfs", str(folder)],
            check=True,
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        pytest.skip("cannot mount a read-only tmpfs here")
    yield str(folder)
    subprocess.run(["umount", str(folder)], check=False, timeout=30)
