"""The suite's CUDA kernels run under Numba's simulator on machines without a GPU: conftest.py
turns it on before anything imports Numba. A pytest setting that imports Numba first (a
``filterwarnings`` entry naming one of Numba's warning classes did) leaves the real CUDA
target on, and every CUDA test fails with "CUDA driver library cannot be found" in a plain
``pytest`` run (xdist's workers happened to hide it)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    os.environ.get("NUMTILE_TEST_GPU") == "1", reason="the suite runs on a real GPU"
)


def test_the_cuda_simulator_is_on():
    import numba

    assert numba.config.ENABLE_CUDASIM


def test_a_run_without_xdist_turns_it_on_too():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "PYTEST_"))}
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:xdist",
            "-p",
            "no:cacheprovider",
            "-q",
            f"{Path(__file__).name}::test_the_cuda_simulator_is_on",
        ],
        cwd=Path(__file__).parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
