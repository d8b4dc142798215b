"""SciPy's BLAS loads without ``scipy.linalg``'s package import (0.3 s of every start-up),
Numba still sees BLAS, and a later ``import scipy.linalg`` gets the same, whole modules."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys
import numba
import numpy as np
import numtile as nt
rng = np.random.default_rng(0)
a = rng.standard_normal((150, 150))
x = nt.from_numpy(a, tile_shape=(64, 64))
np.testing.assert_allclose((x @ x).to_numpy(), a @ a, rtol=1e-12, atol=1e-12)
assert "scipy.linalg" not in sys.modules, "a script without scipy.linalg imported it"
assert not [name for name in sys.modules if name.startswith("scipy.linalg.")]
from numba.np import arraymath
assert arraymath._HAVE_BLAS

@numba.njit
def solve(m, v):
    return np.linalg.solve(m, v) + np.dot(m, v)

spd = a @ a.T + 150 * np.eye(150)
np.testing.assert_allclose(solve(spd, a[0]), np.linalg.solve(spd, a[0]) + spd @ a[0])
import scipy.linalg
from scipy.linalg import cython_blas
assert scipy.linalg.cython_blas is cython_blas is sys.modules["scipy.linalg.cython_blas"]
assert "dgemm" in cython_blas.__pyx_capi__ and "dpotrf" in scipy.linalg.cython_lapack.__pyx_capi__
np.testing.assert_allclose(scipy.linalg.blas.dgemm(1.0, a, a), a @ a, rtol=1e-12, atol=1e-12)
print("ok")
"""


def _run(script: str, blas: str | None = None) -> None:
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    )
    env.pop("NUMTILE_BLAS", None)
    if blas is not None:
        env["NUMTILE_BLAS"] = blas
    run = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0 and "ok" in run.stdout, run.stdout[-2000:] + run.stderr[-3000:]


def test_scipy_linalg_is_not_imported_but_works_later():
    _run(SCRIPT)


def test_scipy_blas_kernels_import_scipy_linalg_whole():
    # the kernels call SciPy's BLAS: that import of scipy.linalg is then ours, and whole
    script = SCRIPT.replace('assert "scipy.linalg" not in', 'assert "scipy.linalg" in')
    _run(script.replace("assert not [name", "assert [name"), blas="scipy")


def test_scipy_linalg_imported_first_is_left_alone():
    script = (
        "import sys, scipy.linalg\n"
        "before = sys.modules['scipy.linalg.cython_blas']\n"
        "import numtile.runtime.blas_threads\n"
        "assert sys.modules['scipy.linalg.cython_blas'] is before is scipy.linalg.cython_blas\n"
        "print('ok')\n"
    )
    _run(script)
