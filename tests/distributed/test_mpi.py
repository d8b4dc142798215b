"""Distributed runs (issue 12): ``mpiexec -n 2`` and ``-n 3`` launches of
tests/distributed/program.py, each running every check on every rank under a timeout; and
the single-process side: ``import numtile`` and plain use never import mpi4py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.distributed.program import CHECKS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TIMEOUT = 240  # seconds: a rank that hangs fails the test instead of the suite (3 ranks on
# 2 loaded cores start slowly; at 120 s, 3-dmda failed once, unexplained, and passed 15+ runs)


def _environment() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")]))
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    env["NUMTILE_NCUDA"] = "0"
    return env


def _mpiexec() -> str:
    found = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which("mpiexec")
    if found is None:
        pytest.skip("no mpiexec: pip install numtile[mpi]")
    return found


@pytest.mark.parametrize(("nranks", "scheduler"), [(2, "eager"), (3, "dmda")])
def test_checks_under_mpiexec(nranks, scheduler, tmp_path):
    pytest.importorskip("mpi4py")
    command = [_mpiexec(), "-n", str(nranks), sys.executable, "-m", "tests.distributed.program"]
    env = {**_environment(), "NUMTILE_SCHEDULER": scheduler}
    env["NUMTILE_TEST_CHECKS_DIR"] = str(tmp_path)  # each rank lists the checks it passed
    try:
        done = subprocess.run(
            command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"timed out after {TIMEOUT} s\n{_ranks_report(tmp_path, nranks)}")
    output = (done.stdout + done.stderr)[-2000:]
    assert done.returncode == 0, f"{output}\n{_ranks_report(tmp_path, nranks)}"
    for rank in range(nranks):
        passed = _read(tmp_path / f"rank{rank}").split()
        assert passed == list(CHECKS), f"rank {rank}\n{_ranks_report(tmp_path, nranks)}"


def _read(path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def _ranks_report(folder, nranks: int) -> str:
    """Each rank's passed checks and the end of its own output (the launch's files)."""
    lines = []
    for rank in range(nranks):
        passed = _read(folder / f"rank{rank}").split()
        lines.append(f"--- rank {rank}: passed {passed}")
        lines.append(_read(folder / f"rank{rank}.log")[-1500:])
    return "\n".join(lines)


def test_single_process_never_imports_mpi4py():
    code = (
        "import sys, numpy as np, numtile as nt\n"
        "x = nt.from_numpy(np.ones((4, 4)), tile_shape=(2, 2), "
        "distribution=nt.distribution.block_cyclic())\n"
        "assert (x + 1).to_numpy().sum() == 32 and (nt.rank(), nt.nranks()) == (0, 1)\n"
        "assert 'mpi4py' not in sys.modules, 'mpi4py imported'\n"
        "assert 'mpi' not in nt.get_runtime().worker_counts or nt.get_runtime().nmpi == 0\n"
    )
    env = _environment()
    for variable in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "SLURM_NTASKS"):
        env.pop(variable, None)
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=TIMEOUT
    )
    assert done.returncode == 0, done.stderr[-4000:]


def test_distributed_true_without_mpiexec_is_one_rank_with_an_mpi_worker():
    pytest.importorskip("mpi4py")
    code = (
        "import sys, numpy as np, numtile as nt\n"
        "runtime = nt.init(ncpu=1, distributed=True)\n"
        "assert runtime.nmpi == 1 and (nt.rank(), nt.nranks()) == (0, 1)\n"
        "x = nt.from_numpy(np.arange(6.0), tile_shape=4, distribution=nt.distribution.by_axis(0))\n"
        "assert (x * 2).to_numpy().tolist() == [0, 2, 4, 6, 8, 10]\n"
        "assert nt.init(ncpu=1, distributed=False).nmpi == 0\n"
    )
    env = _environment()
    env["NUMTILE_DISTRIBUTED"] = "0"  # the setting given to init wins over the variable
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=TIMEOUT
    )
    assert done.returncode == 0, done.stderr[-4000:]


def test_a_distribution_naming_a_missing_rank_is_refused():
    import numpy as np

    import numtile as nt

    with pytest.raises(ValueError, match="rank 5"):
        nt.from_numpy(np.ones(4), tile_shape=2, distribution=lambda index: 5)
    with pytest.raises(ValueError, match="names 2 ranks"):
        nt.distribution.block_cyclic((2, 1))
    with pytest.raises(TypeError, match="distribution must be"):
        nt.from_numpy(np.ones(4), tile_shape=2, distribution="cyclic")


def test_an_uncaught_exception_on_one_rank_aborts_every_rank():
    pytest.importorskip("mpi4py")
    code = (
        "import numpy as np, numtile as nt\n"
        "nt.init(ncpu=1)\n"
        "x = nt.from_numpy(np.ones(4), tile_shape=2, distribution=lambda index: 0)\n"
        "y = nt.from_numpy(np.ones(4), tile_shape=2, distribution=lambda index: 1)\n"
        "if nt.rank() == 0:\n"
        "    raise RuntimeError('rank 0 went wrong')\n"
        "print((x + y).to_numpy())\n"  # rank 1 would wait for rank 0's tiles forever
    )
    done = subprocess.run(
        [_mpiexec(), "-n", "2", sys.executable, "-c", code],
        cwd=ROOT,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode != 0
    assert "rank 0 went wrong" in done.stderr and "uncaught exception on rank 0" in done.stderr


def test_redistribute_on_one_process_retiles_and_passes_the_gradient_back():
    import numpy as np

    import numtile as nt

    a = np.arange(12.0).reshape(3, 4)
    x = nt.from_numpy(a, tile_shape=(2, 3)).requires_grad_()
    y = nt.redistribute(x, nt.distribution.by_axis(0), tile_shape=(1, 4))
    assert y.tile_shape == (1, 4) and isinstance(y.distribution, nt.distribution.ByAxis)
    np.testing.assert_array_equal(y.to_numpy(), a)
    nt.sum(y * y).backward()
    assert x.grad.tile_shape == (2, 3)
    np.testing.assert_array_equal(x.grad.to_numpy(), 2 * a)
    with pytest.raises(ValueError, match="rank 3"):
        nt.redistribute(x.detach(), lambda index: 3)


def test_to_numpy_on_root_0_of_one_process_is_the_array_and_other_roots_are_refused():
    import numpy as np

    import numtile as nt

    a = np.arange(6.0).reshape(2, 3)
    x = nt.from_numpy(a, tile_shape=(1, 2))
    np.testing.assert_array_equal(x.to_numpy(root=0), a)
    with pytest.raises(ValueError, match=r"root must be a rank in 0 \.\. 0, got 1"):
        x.to_numpy(root=1)
