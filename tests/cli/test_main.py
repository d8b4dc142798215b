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
