"""The kernels' BLAS/LAPACK library (``ops_cpu.kernel_blas``): chosen once per process by
``NUMTILE_BLAS``, oneMKL where it loads, else SciPy's. This process's suite runs the kernels
on one library; here the core kernel tests and a tiled LU, QR and Cholesky run again in a
fresh process on each library (the same cached kernels, linked by name to the other one)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from numtile.config import kernel_blas_setting
from numtile.ops_cpu import kernel_blas, mkl_blas

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIBRARIES = [
    "scipy",
    pytest.param(
        "mkl", marks=pytest.mark.skipif(mkl_blas.library() is None, reason="oneMKL not found")
    ),
]
# the kernel tests that compare every BLAS/LAPACK routine the kernels call with SciPy/NumPy
# (their CPU cases: the CUDA simulator cases call no BLAS)
KERNEL_TESTS = ["test_lu.py", "test_qr.py", "test_factorizations.py", "test_matmul.py"]
TILED = """
import numpy as np, scipy.linalg, numtile as nt
from numtile.ops_cpu.kernel_blas import LIBRARY
rng = np.random.default_rng(0)
a = rng.standard_normal((300, 300)); b = rng.standard_normal((300, 2))
spd = a @ a.T + 300 * np.eye(300)
ta = nt.from_numpy(a, tile_shape=(128, 128))
x = nt.linalg.solve(ta, nt.from_numpy(b, tile_shape=(128, 2))).to_numpy()
np.testing.assert_allclose(x, scipy.linalg.solve(a, b), rtol=1e-9, atol=1e-11)
q, r = (m.to_numpy() for m in nt.linalg.qr(ta))
np.testing.assert_allclose(q @ r, a, atol=1e-11)
np.testing.assert_allclose(q.T @ q, np.eye(300), atol=1e-12)
low = nt.linalg.cholesky(nt.from_numpy(spd, tile_shape=(128, 128))).to_numpy()
np.testing.assert_allclose(low, np.linalg.cholesky(spd), rtol=1e-10, atol=1e-12)
c = rng.standard_normal((200, 150)) + 1j * rng.standard_normal((200, 150))
qc, rc = (m.to_numpy() for m in nt.linalg.qr(nt.from_numpy(c, tile_shape=(64, 64))))
np.testing.assert_allclose(qc @ rc, c, atol=1e-11)
print(LIBRARY)
"""


def _environment(library: str) -> dict:
    path = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    return dict(os.environ, NUMTILE_BLAS=library, PYTHONPATH=path)


def test_the_choice_follows_the_setting():
    setting = kernel_blas_setting()
    found = mkl_blas.library() is not None
    expected = "scipy" if setting == "scipy" or not found else "mkl"
    assert kernel_blas.LIBRARY == expected
    path = kernel_blas.kernel_blas_library()
    if path is not None:
        assert ("mkl" in os.path.basename(path)) == (expected == "mkl"), path
    assert f"NUMTILE_BLAS={setting}" in kernel_blas.kernel_blas_description()


def test_a_bad_setting_is_refused(monkeypatch):
    monkeypatch.setenv("NUMTILE_BLAS", "openblas")
    with pytest.raises(ValueError, match="NUMTILE_BLAS must be one of auto, mkl, scipy"):
        kernel_blas_setting()


def test_mkl_asked_for_but_missing_is_an_import_error(monkeypatch):
    monkeypatch.setenv("NUMTILE_BLAS", "mkl")
    monkeypatch.setattr(mkl_blas, "library", lambda: None)
    with pytest.raises(ImportError, match="NUMTILE_BLAS=mkl"):
        kernel_blas._bind_routines()  # raises before it binds anything


@pytest.mark.parametrize("library", LIBRARIES)
def test_kernels_and_tiled_factorisations_on_each_library(library):
    env = _environment(library)
    tiled = subprocess.run(
        [sys.executable, "-c", TILED], env=env, capture_output=True, text=True, timeout=600
    )
    assert tiled.returncode == 0, tiled.stderr[-3000:]
    assert tiled.stdout.split()[-1] == library
    tests = [os.path.join(ROOT, "tests", "ops_cpu", name) for name in KERNEL_TESTS]
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "not cuda"]
    command += tests
    kernels = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert kernels.returncode == 0, kernels.stdout[-3000:] + kernels.stderr[-2000:]
