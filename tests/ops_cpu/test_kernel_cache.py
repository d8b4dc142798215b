"""Numba's disk cache of kernels is stamped with all kernel sources (numtile.kernel_cache):
an edit to a helper in one file recompiles a cached kernel of another file that inlines it."""

import subprocess
import sys
import textwrap

import numtile.kernel_cache as kernel_cache
import numtile.ops_cpu.tsqr as tsqr

SCRIPT = """
import sys
from pathlib import Path

import numtile.kernel_cache as kernel_cache

if {stamped}:
    kernel_cache.PACKAGE = Path({root!r})
else:
    kernel_cache.PACKAGE = Path("/nonexistent")  # Numba's own per-file stamp
sys.path.insert(0, {root!r})
from ops_cpu.kernel import kernel

print(kernel(2.0))
"""


def _run(root, stamped):
    code = SCRIPT.format(root=str(root), stamped=stamped)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(done.stdout.split()[-1])


def _write(root, factor):
    (root / "ops_cpu" / "helpers.py").write_text(
        f"from numba import njit\n\n\n@njit(cache=True)\ndef scale(x):\n    return x * {factor}\n"
    )


def _package(tmp_path):
    root = tmp_path / "pkg"
    (root / "ops_cpu").mkdir(parents=True)
    (root / "ops_cpu" / "__init__.py").write_text("")
    (root / "ops_cpu" / "kernel.py").write_text(
        textwrap.dedent(
            """
            from numba import njit

            from ops_cpu.helpers import scale


            @njit(cache=True)
            def kernel(x):
                return scale(x) + 1.0
            """
        )
    )
    return root


def test_a_helper_edit_in_another_file_recompiles_the_kernel(tmp_path):
    root = _package(tmp_path)
    _write(root, 3.0)
    assert _run(root, stamped=True) == 7.0  # compiled and cached
    assert any((root / "ops_cpu" / "__pycache__").glob("kernel.kernel-*.nbi"))
    _write(root, 5.0)  # kernel.py itself unchanged
    assert _run(root, stamped=True) == 11.0


def test_numbas_per_file_stamp_alone_serves_the_stale_kernel(tmp_path):
    # what the stamps fix: the same edit under Numba's own locators runs the old code
    root = _package(tmp_path)
    _write(root, 3.0)
    assert _run(root, stamped=False) == 7.0
    _write(root, 5.0)
    assert _run(root, stamped=False) == 7.0


def test_numtile_kernels_use_the_shared_stamp():
    locator = tsqr.qr_leaf._cache._impl._locator
    assert isinstance(locator, kernel_cache.LOCATORS)
    assert locator.get_source_stamp() == kernel_cache.sources_digest()
    names = {path.name for path in kernel_cache.kernel_sources()}
    assert {"qr.py", "tsqr.py", "opcodes.py", "fastmath_pow.py"} <= names
