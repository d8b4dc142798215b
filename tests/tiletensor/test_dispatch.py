"""The op table under TileTensor: tiletensor stands below the tape and names its ops."""

import ast
import json
import pathlib

import numpy as np
import pytest

import numtile as nt
from numtile import opcodes
from numtile.runtime import Codelet
from numtile.tiletensor import codelets, dispatch

PACKAGE = pathlib.Path(nt.__file__).parent


def _imports(folder: str):
    """(module path, imported module name) of every import in a package, lazy ones included."""
    for path in sorted((PACKAGE / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield path, alias.name
            elif isinstance(node, ast.ImportFrom) and node.module:
                yield path, node.module
                for alias in node.names:
                    yield path, f"{node.module}.{alias.name}"


def test_no_module_of_tiletensor_imports_autograd():
    upward = [(p.name, m) for p, m in _imports("tiletensor") if m.startswith("numtile.autograd")]
    assert upward == []


@pytest.mark.parametrize("folder", ["tiletensor", "autograd", "nn"])
def test_kernels_are_reached_only_through_codelets(folder):
    kernels = [
        (p.name, m)
        for p, m in _imports(folder)
        if m.startswith(("numtile.ops_cpu", "numtile.ops_cuda"))
    ]
    assert kernels == []


def test_nn_builds_no_codelet_and_touches_no_tile():
    for path in sorted((PACKAGE / "nn").rglob("*.py")):
        source = path.read_text()
        for word in ("Codelet", "DataHandle", ".handles", ".submit(", ".tile(", "get_runtime"):
            assert word not in source, f"{path.name} uses {word}"


def test_without_autograd_the_table_runs_plain_ops(monkeypatch):
    monkeypatch.setattr(dispatch, "TABLE", dict(dispatch.PLAIN))
    x = nt.ones((3,)).requires_grad_()
    y = nt.sin(x) + x * 2
    assert not y.requires_grad and y._node is None
    np.testing.assert_allclose(y.to_numpy(), np.sin(1.0) + 2.0)
    with pytest.raises(RuntimeError, match="needs numtile.autograd"):
        y.sum().backward()


def test_an_override_replaces_what_operators_and_functions_run(monkeypatch):
    calls = []

    def spy(x, y):
        calls.append((x.shape, y))
        return dispatch.PLAIN["add"](x, y)

    monkeypatch.setitem(dispatch.TABLE, "add", spy)
    x = nt.ones((2,))
    assert (x + 1.0).to_numpy().tolist() == [2.0, 2.0]
    assert nt.add(x, 2.0).to_numpy().tolist() == [3.0, 3.0]
    assert calls == [((2,), 1.0), ((2,), 2.0)]
    with pytest.raises(KeyError, match="no op named"):
        dispatch.override("no_such_op", spy)


def _codelet_modules():
    return [getattr(codelets, name) for name in codelets.__all__]


@pytest.mark.parametrize("module", _codelet_modules(), ids=lambda m: m.__name__)
def test_each_codelet_variable_is_named_as_registered(module):
    found = 0
    for variable, value in vars(module).items():
        if isinstance(value, Codelet):
            assert value.name == variable
            found += 1
        elif (
            isinstance(value, dict)
            and value
            and all(isinstance(v, Codelet) for v in value.values())
        ):
            for op, codelet in value.items():
                assert codelet.name == f"{variable}:{op}"
                found += 1
    assert found


def test_ops_are_named_end_to_end_in_traces_and_the_summary(tmp_path):
    nt.init()
    path = tmp_path / "trace.json"
    x = nt.random.normal(size=(6, 5), seed=1, tile_shape=(4, 4))
    with nt.trace(str(path)):
        nt.gelu_tanh(x).wait()
        (x + x).wait()
        nt.sum(x, axis=0).wait()
        (x < 0.0).wait()
        nt.random.uniform(size=(3,)).wait()
    names = {event["name"] for event in json.loads(path.read_text())["traceEvents"]}
    expected = {"unary:gelu_tanh", "binary:add", "reduce:sum", "compare_scalar:less"}
    assert expected | {"random:uniform"} <= names
    assert "unary" not in names and "binary" not in names
    summary = nt.runtime_summary(file=open(tmp_path / "summary.txt", "w"))
    for name in expected:
        assert name in summary


def test_each_op_of_a_family_gets_its_own_performance_model():
    assert codelets.elementwise.unary["exp"] is not codelets.elementwise.unary["tanh"]
    names = [c.name for c in codelets.elementwise.unary.values()]
    assert len(set(names)) == len(names) == len(opcodes.UNARY_OPS)
