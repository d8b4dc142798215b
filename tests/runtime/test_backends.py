"""The backends table: a new kind of worker is one row, with no edit to the runtime."""

from __future__ import annotations

import ast
import pathlib
import types

import numpy as np
import pytest

import numtile as nt
from numtile.backends import BACKENDS
from numtile.config import Config
from numtile.runtime import Access, Codelet, DataHandle, Runtime
from numtile.runtime.kinds import WorkerKind

RUNTIME_DIR = pathlib.Path(nt.__file__).parent / "runtime"
SCHEDULERS = ["eager", "dmda", "sync"]


def _fake_ops(node):
    """A namespace of its own: ``scale`` multiplies by 10, where ops_cpu has nothing alike."""
    assert node is None  # the fake kind computes in host RAM
    return types.SimpleNamespace(name="fake", scale=lambda x: np.multiply(x, 10, out=x))


FAKE = WorkerKind(ops=_fake_ops, workers=lambda config, required: 1)
TABLE = {**BACKENDS, "fake": FAKE}


def _start(scheduler, tmp_path, **settings):
    config = Config(ncpu=1, ncuda=0, scheduler=scheduler, cache_dir=str(tmp_path), **settings)
    return Runtime(config, backends=TABLE)


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_a_fake_kind_runs_its_own_implementation_with_its_own_ops(scheduler, tmp_path):
    runtime = _start(scheduler, tmp_path)
    try:
        assert runtime.kinds == ["cpu", "fake"] and runtime.worker_names == ["cpu0", "fake0"]
        assert runtime.nfake == 1 and runtime.ncpu == 1
        scale = Codelet("test_fake_scale", implementations={"fake": lambda ops, x: ops.scale(x)})
        h = DataHandle((3,), np.float64, np.arange(3.0))
        task = runtime.submit(scale, [(h, Access.RW)])
        runtime.wait_all()
        np.testing.assert_array_equal(h.host_array(), [0.0, 10.0, 20.0])
        assert task.worker == 1  # the fake worker ran it
    finally:
        runtime.shutdown()


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_a_kernel_receives_the_ops_of_the_kind_that_runs_it(scheduler, tmp_path):
    runtime = _start(scheduler, tmp_path, restrict="fake")
    try:
        seen = []
        probe = Codelet("test_fake_probe", kernel=lambda ops, x: seen.append(ops.name))
        cpu_only = Codelet("test_fake_cpu_only", implementations={"cpu": lambda ops, x: x.fill(4)})
        h = DataHandle((2,), np.float64, np.zeros(2))
        runtime.submit(probe, [(h, Access.R)])
        runtime.submit(cpu_only, [(h, Access.W)])  # no fake implementation: runs on cpu
        runtime.invalidate(DataHandle((2,), np.float64, np.zeros(2)))  # control: the host kind
        runtime.wait_all()
        assert seen == ["fake"]  # restrict="fake": the kernel ran there, not on cpu
        np.testing.assert_array_equal(h.host_array(), 4.0)
    finally:
        runtime.shutdown()


def test_nt_init_takes_a_table(tmp_path):
    runtime = nt.init(ncpu=1, ncuda=0, backends=TABLE, cache_dir=str(tmp_path))
    try:
        assert nt.get_runtime() is runtime and "fake" in runtime.kinds
        h = DataHandle((1,), np.float64, np.ones(1))
        scale = Codelet("test_fake_init", implementations={"fake": lambda ops, x: ops.scale(x)})
        runtime.submit(scale, [(h, Access.RW)])
        runtime.wait_handles([h])
        assert h.host_array()[0] == 10.0
    finally:
        nt.init()
    assert "fake" not in nt.get_runtime().kinds  # the default table again


def test_a_codelet_no_running_kind_implements_is_refused_at_submission(tmp_path):
    runtime = Runtime(Config(ncpu=1, ncuda=0, cache_dir=str(tmp_path)))
    try:
        fake_only = Codelet("test_fake_only", implementations={"fake": lambda ops, x: None})
        h = DataHandle((1,), np.float64, np.zeros(1))
        with pytest.raises(ValueError, match=r"'test_fake_only' has no implementation .*cpu"):
            runtime.submit(fake_only, [(h, Access.RW)])
        runtime.wait_all()  # nothing was left pending
    finally:
        runtime.shutdown()


def test_the_table_is_checked_at_start(tmp_path):
    two_hosts = {**BACKENDS, "fake": WorkerKind(ops=_fake_ops, workers=lambda c, r: 1, host=True)}
    with pytest.raises(ValueError, match="exactly one host kind"):
        Runtime(Config(ncpu=1, ncuda=0, cache_dir=str(tmp_path)), backends=two_hosts)
    with pytest.raises(ValueError, match=r"unknown restrict value 'fake'.*\['cpu', 'cuda'\]"):
        Runtime(Config(ncpu=1, ncuda=0, restrict="fake", cache_dir=str(tmp_path)))


def test_the_default_table_is_numtile_backends():
    assert nt.get_runtime().backends == BACKENDS
    assert nt.get_runtime().ops[0] is __import__("numtile.ops_cpu").ops_cpu


def _runtime_modules():
    return sorted(RUNTIME_DIR.glob("*.py"))


@pytest.mark.parametrize("path", _runtime_modules(), ids=lambda p: p.name)
def test_the_runtime_imports_no_kernel_package(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            assert not name.startswith(("numtile.ops_cpu", "numtile.ops_cuda")), (path, name)
            assert name != "numtile.backends", (path, name)


@pytest.mark.parametrize("name", ["engine.py", "scheduler.py", "dependencies.py", "gpu_worker.py"])
def test_the_engine_and_schedulers_name_no_kind(name):
    tree = ast.parse((RUNTIME_DIR / name).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            assert node.value not in BACKENDS, (name, node.value, node.lineno)
