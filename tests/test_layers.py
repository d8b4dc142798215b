"""The package's layers (../shared/DESIGN.md, README "Layout of the code"): imports only go down.

Every ``import`` and ``from ... import`` in ``numtile/`` (at module level or inside a function:
a lazy import is still a dependency) is resolved to the layer it names, and must be one that
layer may use. A layer that may not import another cannot form a cycle with it, so the
allowed graph being acyclic (checked too) rules out cycles between layers.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "numtile"
MAX_LINES = 500

# layer -> the layers it may import (besides itself). ``api`` is the public namespace:
# numtile/__init__.py, numtile/linalg.py, numtile/random.py.
ALLOWED = {
    "config": set(),
    "opcodes": set(),
    "cuda_driver": set(),
    # complex scalar functions over real math, compiled by each kernel package for its target
    "complex_math": set(),
    # Numba's disk cache stamped with all kernel sources at once
    "kernel_cache": set(),
    "ops_cpu": {"opcodes", "config", "complex_math", "kernel_cache"},
    "ops_cuda": {"opcodes", "config", "cuda_driver", "complex_math", "kernel_cache"},
    "runtime": {"config", "cuda_driver"},
    "backends": {"runtime", "ops_cpu", "ops_cuda", "config", "cuda_driver"},
    "tiletensor": {"runtime", "opcodes", "config"},
    "autograd": {"tiletensor", "runtime", "opcodes", "config"},
    "io": {"tiletensor", "runtime", "config"},
    "nn": {"autograd", "tiletensor", "io", "config", "opcodes"},
    "api": {"backends", "runtime", "tiletensor", "autograd", "config", "cuda_driver", "opcodes"},
    # the applications on top may call a kernel directly: the sgemm peak behind MFU, and
    # counting the signatures compiled ahead of time
    "train_config": {"nn", "config"},
    # TensorBoard scalars and metrics.jsonl of a run: numtile-free (the runtime is passed in)
    "train_logs": set(),
    "train": {
        "api",
        "train_config",
        "train_logs",
        "train_distributed",
        "nn",
        "io",
        "autograd",
        "tiletensor",
        "runtime",
        "config",
        "ops_cpu",
    },
    "train_distributed": {"api", "io", "tiletensor", "runtime", "config"},
    "warmup": {"api", "config", "ops_cpu"},
    # ... and `numtile info` says where the CUDA kernels' GEMM and factorisations go
    "cli": {"api", "train", "train_config", "warmup", "nn", "io", "runtime", "config", "ops_cuda"},
}
API_MODULES = {"__init__", "distribution", "linalg", "random"}
# the one upward reference allowed: the array API standard has an array return its namespace
# (``x.__array_namespace__()``), imported when called, never at import time
EXCEPTIONS = {("tiletensor/tensor.py", "numtile")}


def layer_of(module: str) -> str:
    """The layer of a dotted module name inside numtile (``numtile.nn.gpt2`` -> ``nn``)."""
    parts = module.split(".")
    assert parts[0] == "numtile", module
    if len(parts) == 1 or parts[1] in API_MODULES:
        return "api"
    return parts[1]


def module_name(path: pathlib.Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(dotted: str) -> bool:
    """Whether ``dotted`` names a module or package of numtile (not a name inside one)."""
    path = PACKAGE.parent.joinpath(*dotted.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def imported_modules(path: pathlib.Path, source: str | None = None) -> list[tuple[int, str]]:
    """(line, numtile module) for every import of numtile in the file at ``path`` (whose text
    is ``source`` when given)."""
    tree = ast.parse(path.read_text() if source is None else source, filename=str(path))
    package = module_name(path)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative import
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.append((node.lineno, candidate if is_module(candidate) else base))
    return sorted({(line, name) for line, name in found if name.split(".")[0] == "numtile"})


SOURCES = sorted(PACKAGE.rglob("*.py"))


def test_every_layer_is_known():
    layers = {layer_of(module_name(path)) for path in SOURCES}
    assert layers <= ALLOWED.keys(), f"layers missing from ALLOWED: {layers - ALLOWED.keys()}"


def test_allowed_graph_is_acyclic():
    state: dict[str, str] = {}

    def visit(layer: str, trail: list[str]) -> None:
        if state.get(layer) == "done":
            return
        assert state.get(layer) != "open", f"cycle between layers: {' -> '.join(trail)}"
        state[layer] = "open"
        for lower in ALLOWED[layer]:
            visit(lower, [*trail, lower])
        state[layer] = "done"

    for layer in ALLOWED:
        visit(layer, [layer])


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_only_go_down(path):
    layer = layer_of(module_name(path))
    wrong = [
        f"line {line}: imports {name} ({layer_of(name)})"
        for line, name in imported_modules(path)
        if layer_of(name) != layer
        and layer_of(name) not in ALLOWED[layer]
        and (str(path.relative_to(PACKAGE)), name) not in EXCEPTIONS
    ]
    assert not wrong, (
        f"{path.relative_to(PACKAGE)} ({layer}) may import only "
        + ", ".join(sorted(ALLOWED[layer] | {layer}))
        + ":\n"
        + "\n".join(wrong)
    )


def test_the_checker_sees_upward_imports():
    # upward imports written the four ways the package uses must be caught
    source = (
        "from numtile import ops_cpu\nimport numtile.tiletensor.tensor\n"
        "from ..nn import gpt2\n"
        "def later():\n    from numtile.autograd.tape import backward\n"
    )
    found = imported_modules(PACKAGE / "runtime" / "probe.py", source)
    names = {layer_of(name) for _, name in found}
    assert names == {"ops_cpu", "tiletensor", "nn", "autograd"}
    assert not names & ALLOWED["runtime"]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_are_short(path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(PACKAGE)} has {lines} lines (max {MAX_LINES})"
