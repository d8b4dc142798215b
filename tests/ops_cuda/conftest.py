"""Shared by the CUDA kernel tests: compiling every kernel for a real GPU.

The simulator runs the kernels as Python, so it cannot tell whether numba-cuda can compile
them. Each test module therefore ends with a test that hands ``compile_for_a_real_gpu`` a
script compiling its kernels to PTX for sm_90 (``cuda.compile_ptx(..., cc=(9, 0))``); the
script runs in a process without the simulator and needs NVVM (the CUDA toolkit), not a GPU.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# run before a module's script: NVVM or a skip, and a stand-in for the current device
_PRELUDE = textwrap.dedent(
    """
    import numba.cuda.dispatcher as dispatcher
    from numba import cuda, types
    from numba.cuda.cudadrv import nvvm

    try:
        nvvm.NVVM()
    except Exception as exc:
        print("SKIP no NVVM:", exc)
        raise SystemExit(0)


    class Device:  # device functions ask the current device for its compute capability
        compute_capability = (9, 0)


    dispatcher.get_current_device = Device
    """
)


@pytest.fixture
def compile_for_a_real_gpu():
    """A function that runs ``script`` (which may use ``cuda`` and ``types``) after the prelude
    in a process with the simulator off, from the repository root; it fails on any error and
    skips the test where NVVM is missing."""

    def run(script: str) -> None:
        source = _PRELUDE + textwrap.dedent(script) + '\nprint("OK")\n'
        result = subprocess.run(
            [sys.executable, "-c", source],
            env={**os.environ, "NUMBA_ENABLE_CUDASIM": "0"},
            cwd=Path(__file__).resolve().parents[2],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        if result.stdout.startswith("SKIP"):
            pytest.skip(result.stdout.strip())
        assert result.stdout.strip().endswith("OK"), result.stdout

    return run
