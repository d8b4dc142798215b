"""The ``numtile`` command."""

import subprocess
import sys

import pytest

from numtile.cli.main import main


def test_info_reports_workers_scheduler_blas_and_cuda(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "numtile 0.1.0" in out
    assert "workers:" in out and "scheduler:" in out
    assert "BLAS" in out and "thread(s)" in out
    assert "CUDA:" in out
    from numtile import ops_cuda

    paths = f"CUDA kernels: GEMM {ops_cuda.gemm_path()}, factorisations {ops_cuda.solver_path()}"
    assert paths in out
    from numtile import ops_cpu
    from numtile.tiletensor.precision import bf16_gemm_library

    assert f"bf16 GEMM: {bf16_gemm_library(ops_cpu) or 'widen + sgemm'}" in out


def test_info_warmup_compiles_kernels(capsys):
    assert main(["info", "--warmup"]) == 0
    out = capsys.readouterr().out
    count = int(out.split("compiled ")[1].split()[0])
    assert count >= 10


def test_console_script_runs_as_a_module():
    result = subprocess.run(
        [sys.executable, "-m", "numtile.cli.main", "info"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "scheduler" in result.stdout


def test_unknown_command_is_a_usage_error():
    with pytest.raises(SystemExit) as info:
        main(["frobnicate"])
    assert info.value.code == 2


def test_runtime_flags_are_checked_before_training(capsys):
    import numtile as nt
    from numtile.cli.main import main

    with pytest.raises(SystemExit, match="host_mem_limit.*not a size in bytes|not a size"):
        main(["train", "--host-mem-limit", "plenty", "--steps", "1"])
    with pytest.raises(SystemExit) as info:
        main(["train", "--restrict", "gpu"])
    assert info.value.code == 2  # argparse: invalid choice
    assert "invalid choice: 'gpu'" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="restrict='cuda' but NUMTILE_NCUDA=0"):
        main(["train", "--restrict", "cuda", "--ncuda", "0"])
    nt.init()
