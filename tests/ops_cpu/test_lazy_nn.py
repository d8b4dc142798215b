"""``ops_cpu.nn`` loads on first use: a script without a neural network does not create its
dispatchers (a tenth of a second of every start-up), and ``ops.nn`` still finds it."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys
import numpy as np
import numtile as nt
x = nt.ones((300, 200), tile_shape=(128, 128))
np.testing.assert_array_equal((x + 1).to_numpy(), np.full((300, 200), 2.0))
assert float(nt.sum(x @ x.T).item()) == 300 * 300 * 200
assert "numtile.ops_cpu.nn" not in sys.modules, "ops_cpu.nn loaded by a script without nn"
from numtile import ops_cpu
from numtile.ops_cpu import nn
assert ops_cpu.nn is nn is sys.modules["numtile.ops_cpu.nn"]
assert ops_cpu.nn.attention_forward_finalize.py_func.__name__ == "attention_forward_finalize"
print("ok")
"""


def test_a_script_without_nn_does_not_load_it():
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    )
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0 and "ok" in run.stdout, run.stdout[-2000:] + run.stderr[-3000:]


def test_unknown_attributes_still_raise():
    from numtile import ops_cpu

    with pytest.raises(AttributeError, match="no_such_kernel"):
        ops_cpu.no_such_kernel  # noqa: B018
