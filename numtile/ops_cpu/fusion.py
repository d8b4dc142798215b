"""Fused element-wise kernels: one Numba kernel generated per traced expression (``nt.fuse``).

An expression is a tuple of steps in evaluation order; step ``k`` is ``(kind, dtype, ...)``
with the indices of earlier steps as operands, and the last step is the result:

- ``("input", dtype, k)``: the element of input tile ``k``;
- ``("scalar", dtype, k)``: scalar argument ``k`` (already of ``dtype``);
- ``("cast", dtype, a)``: step ``a`` converted to ``dtype`` (``astype``);
- ``("unary" | "predicate", dtype, name, a)``, ``("binary" | "compare" | "bitwise", dtype,
  name, a, b)``: the scalar function the unfused kernel of op ``name`` maps over its tile;
- ``("where", dtype, c, a, b)``: ``a if c else b``.

The generated kernel calls the very scalar functions of the unfused kernels
(``scalar_math``, ``logic``), in the same order and precision, so its results equal the
unfused ops' bit for bit; only the intermediate tiles are gone (one pass over memory). sin,
cos and tan run as ``map_reduced`` runs them: their vectorised form in one flat loop over a
row, and the row again, one element at a time with libm's function where an argument is beyond
their reduction, only if one was (a loop cut into blocks ran 7x slower at some distances
between the tiles' addresses).

The source is written to ``<cache_dir>/fusion/<digest>.py`` and imported, so Numba's
``cache=True`` keeps the compiled kernel on disk; the digest covers the source and the files
whose functions it inlines (Numba would not notice them change).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import pathlib
import sys
import threading

import numba
import numpy as np

from numtile.config import Config
from numtile.ops_cpu import mkl_vml, pow_avx512, streaming
from numtile.ops_cpu.helpers import is_c_contiguous

_TRIGONOMETRIC = ("sin", "cos", "tan")
_BLOCKS_F32 = ("exp", "sin", "cos")  # float32 ops whose own kernels are fastmath_blocks'
# the module holding each family's scalar functions, and how a name maps to a function
_SCALAR_MATH = "numtile.ops_cpu.scalar_math"
_LOGIC = "numtile.ops_cpu.logic"
_BITWISE_FUNCTIONS = {
    "bitwise_and": "_bitwise_and",
    "bitwise_or": "_bitwise_or",
    "bitwise_xor": "_bitwise_xor",
    "bitwise_left_shift": "_left_shift",
    "bitwise_right_shift": "_right_shift",
}
# files whose functions a generated kernel inlines: part of its cache key
_DEPENDENCIES = ("fusion", "scalar_math", "fastmath", "fastmath_trig", "fastmath_f32")
_DEPENDENCIES += ("fastmath_pow", "helpers", "logic", "streaming")


@numba.njit(nogil=True, cache=True, error_model="numpy")
def flat_step(elements, strides, shape, size):
    """1 when a tile of ``elements`` is read whole in C order over ``shape`` (``size``
    elements), 0 when it is one element read everywhere, -1 otherwise (strided). It takes
    the count, not the tile, so it compiles once for every dtype."""
    if elements == 1:
        return 0
    return 1 if elements == size and is_c_contiguous(strides, shape) else -1


@numba.njit(nogil=True, cache=True, error_model="numpy")
def row_start(row, shape, inner, strides):
    """Element offset, under ``strides``, of C-ordered row ``row`` over ``shape[:inner]``."""
    offset = 0
    for axis in range(inner - 1, -1, -1):
        extent = shape[axis]
        offset += (row % extent) * strides[axis]
        row //= extent
    return offset


def _function(kind: str, name: str) -> tuple[str, str]:
    """(module, function) of the scalar function of op ``name`` of ``kind``."""
    if kind == "bitwise":
        return _LOGIC, _BITWISE_FUNCTIONS[name]
    if kind == "predicate":
        return _LOGIC, f"_{name}"
    return _SCALAR_MATH, f"_{name}"


def step_code(step, k: int, exact: bool, flat: bool = False) -> list[str]:
    """Lines computing ``t<k>`` of ``step`` (``exact``: the trigonometric fix-up pass;
    ``flat``: inputs read from their first element, not from a row's offset)."""
    kind, dtype = step[0], step[1]
    if kind == "input":
        offset = "" if flat else f"o{step[2]} + "
        return [f"t{k} = in{step[2]}[unsigned({offset}j * s{step[2]})]"]
    if kind == "scalar":
        return [f"t{k} = c{step[2]}"]
    if kind == "cast":
        value = f"t{step[2]} != 0" if dtype == "bool" else f"np.{dtype}(t{step[2]})"
        return [f"t{k} = {value}"]
    if kind == "where":
        return [f"t{k} = t{step[3]} if t{step[2]} else t{step[4]}"]
    name, args = step[2], ", ".join(f"t{a}" for a in step[3:])
    function = _function(kind, name)[1]
    if kind == "unary" and name in _TRIGONOMETRIC:
        if exact:
            fast = f"_{name}_reduced({args})"
            return [f"t{k} = {function}({args}) if beyond_reduction({args}) else {fast}"]
        return [f"t{k} = _{name}_reduced({args})", f"beyond |= beyond_reduction({args})"]
    return [f"t{k} = {function}({args})"]


def step_imports(expression: tuple, imports: dict[str, set[str]]) -> bool:
    """Add to ``imports`` (module -> names) the scalar functions the steps of ``expression``
    call; True where it has sin, cos or tan (their fix-up pass: ``step_code``'s ``exact``)."""
    trigonometric = False
    for step in expression:
        if step[0] in ("unary", "binary", "compare", "bitwise", "predicate"):
            module, function = _function(step[0], step[2])
            imports.setdefault(module, set()).add(function)
            if step[0] == "unary" and step[2] in _TRIGONOMETRIC:
                trigonometric = True
                imports.setdefault(_SCALAR_MATH, set()).add(f"_{step[2]}_reduced")
    if trigonometric:
        imports["numtile.ops_cpu.fastmath_trig"] = {"beyond_reduction"}
    return trigonometric


def header(title: str, imports: dict[str, set[str]]) -> list[str]:
    """The first lines of a generated module: its docstring ``title`` and ``imports``."""
    lines = [f'"""{title}"""', "", "import numba", "import numpy as np", ""]
    lines += [f"from {m} import {', '.join(sorted(names))}" for m, names in sorted(imports.items())]
    return lines


def source(expression: tuple, inputs: int, scalars: int) -> str:
    """The Python source of the kernel ``fused(out, shape, in0, st0, ..., c0, ...)`` of
    ``expression`` (``inputs`` tiles with their element strides, ``scalars`` values)."""
    imports: dict[str, set[str]] = {
        "numtile.ops_cpu.helpers": {"inner_axis", "unsigned", "wide_vectors"}
    }
    imports["numtile.ops_cpu.fusion"] = {"flat_step", "row_start"}
    imports["numtile.ops_cpu.streaming"] = {"store_fence", "store_streamed", "aligned_start"}
    imports["numtile.ops_cpu.streaming"] |= {"block_bounds", "next_block", "write_block"}
    trigonometric = step_imports(expression, imports)
    ids = range(inputs)
    arguments = ["out", "shape", *(f"in{i}, st{i}" for i in ids)]
    arguments += [f"c{i}" for i in range(scalars)]
    lines = header("A fused element-wise kernel generated by numtile.ops_cpu.fusion.", imports)
    lines += ["", "", '@numba.njit(nogil=True, cache=True, error_model="numpy")']
    lines += [f"def fused({', '.join(arguments)}):", "    size = out.size", "    if size == 0:"]
    lines += [
        "        return",
        "    wide_vectors()",
        "    inner = inner_axis(shape)",
        "    flat = True",
    ]
    for i in ids:
        lines += [f"    s{i} = flat_step(in{i}.size, st{i}, shape, size)", f"    flat &= s{i} >= 0"]
    lines += ["    extent = size if flat else shape[inner]", "    if not flat:"]
    lines += [f"        s{i} = st{i}[inner]" for i in ids] or ["        pass"]
    lines += ["    for row in range(size // extent):", "        start = row * extent"]
    lines += [f"        o{i} = 0 if flat else row_start(row, shape, inner, st{i})" for i in ids]

    def body(indent: str, exact: bool) -> list[str]:
        code = [line for k, step in enumerate(expression) for line in step_code(step, k, exact)]
        code.append(f"out[unsigned(start + j)] = t{len(expression) - 1}")
        return [indent + line for line in code]

    if trigonometric:
        lines += ["        beyond = False", "        for j in range(extent):"]
        lines += body(" " * 12, False)
        lines += ["        if beyond:", "            for j in range(extent):"]
        lines += body(" " * 16, True)
    else:
        lines += ["        for j in range(extent):", *body(" " * 12, False)]
        lines += _streamed_source(expression, arguments, ids)
    return "\n".join(lines) + "\n"


def _streamed_source(expression: tuple, arguments: list[str], ids) -> list[str]:
    """Lines of ``fused_streamed``, ``fused`` with out streamed past the caches
    (``streaming``) where every input is whole or one element; ``fused`` otherwise.
    Expressions with sin, cos or tan, bound by their arithmetic, have none.

    Its loop stores every value by a non-temporal store (``store_streamed``, vectorised into
    aligned streaming vector stores) from out's first element, which must lie on a 64-byte
    boundary (the module's ``fused`` stores the elements before it with the plain kernel; an
    out that starts elsewhere is left to the plain kernel whole): x * y + z of 16 tiles of 4M
    float32 on 2 threads in 0.90x the CPU time of the buffered loop below. LLVM vectorises no
    non-temporal store of 1-byte elements, so a bool or int8 result goes through that loop: a
    buffer in L1 cache streamed out 64 bytes at a time (``write_block``)."""
    lines = ["", "", '@numba.njit(nogil=True, cache=True, error_model="numpy")']
    lines += [
        f"def fused_streamed({', '.join(arguments)}):",
        "    size = out.size",
        "    flat = True",
    ]
    for i in ids:
        lines += [f"    s{i} = flat_step(in{i}.size, st{i}, shape, size)", f"    flat &= s{i} >= 0"]
    result = len(expression) - 1
    if np.dtype(expression[-1][1]).itemsize > 1:
        lines += ["    if not flat or size == 0 or aligned_start(out) != 0:"]
        lines += [f"        fused({', '.join(arguments)})", "        return", "    wide_vectors()"]
        lines += ["    for j in range(size):"]
        for k, step in enumerate(expression):
            lines += [" " * 8 + line for line in step_code(step, k, False, flat=True)]
        lines += [f"        store_streamed(out, unsigned(j), t{result})"]
        return lines + ["    store_fence()"]
    lines += ["    if not flat or size == 0:", f"        fused({', '.join(arguments)})"]
    lines += ["        return", "    wide_vectors()", "    buffer, start, end = block_bounds(out)"]
    lines += ["    first = 0", "    while first < size:"]
    lines += ["        stop = next_block(first, start, end, size, buffer.size)"]
    lines += [f"        o{i} = first * s{i}" for i in ids]
    lines += ["        for j in range(stop - first):"]
    code = [line for k, step in enumerate(expression) for line in step_code(step, k, False)]
    lines += [" " * 12 + line for line in code]
    lines += [f"            buffer[j] = t{result}"]
    lines += ["        write_block(buffer, out, first, stop, start, end)", "        first = stop"]
    return lines + ["    store_fence()"]


_fingerprint: list[str] = []
_kernels: dict[tuple, object] = {}
_lock = threading.Lock()


def _dependencies_digest() -> str:
    if not _fingerprint:
        digest = hashlib.sha256()
        here = pathlib.Path(__file__).parent
        for name in _DEPENDENCIES:
            digest.update((here / f"{name}.py").read_bytes())
        _fingerprint.append(digest.hexdigest()[:16])
    return _fingerprint[0]


def load_module(text: str):
    """The module generated from source ``text``: written once under the cache dir (its name is
    the digest of ``text`` and of the files it inlines) and imported once per process."""
    digest = hashlib.sha256((_dependencies_digest() + text).encode()).hexdigest()[:24]
    folder = pathlib.Path(Config().cache_dir) / "fusion"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"fused_{digest}.py"
    if not path.exists() or path.read_text() != text:
        partial = folder / f".fused_{digest}.{os.getpid()}.{threading.get_ident()}"
        partial.write_text(text)
        os.replace(partial, path)  # atomic: another process never reads half a file
    name = f"numtile_fused_{digest}"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return module


def generated(key: tuple, write):
    """The module of source ``write()``, generated and imported once per process per ``key``."""
    found = _kernels.get(key)
    if found is None:
        with _lock:
            found = _kernels.get(key)
            if found is None:
                found = _kernels[key] = load_module(write())
    return found


def _module(expression: tuple, inputs: int, scalars: int):
    """The generated module of ``expression``."""
    return generated((expression, inputs, scalars), lambda: source(expression, inputs, scalars))


def kernel(expression: tuple, inputs: int, scalars: int):
    """The compiled fused kernel of ``expression``: ``fused(out, shape, in0, st0, ..., c0,
    ...)``."""
    return _module(expression, inputs, scalars).fused


def fused(expression: tuple, out, shape, inputs: tuple, strides: tuple, scalars: tuple) -> None:
    """out = ``expression`` over flat input tiles read through element ``strides`` (0 on
    broadcast axes) over C-ordered ``shape``, with the scalar arguments ``scalars``."""
    module = _module(expression, len(inputs), len(scalars))
    streamed = getattr(module, "fused_streamed", None)
    function = module.fused
    if streamed is not None and streaming.wanted(out) and _flat(out, shape, inputs, strides):
        function = streamed
        # the streamed loop starts on a 64-byte boundary: the elements before out's first one
        # (NumPy often starts a large buffer 16 bytes past one) are stored as usual first
        head = streaming.aligned_start.py_func(out)  # in Python: nothing to compile
        if head:
            pieces = [value for x in inputs for value in (x[:head] if x.size > 1 else x, _UNIT)]
            module.fused(out[:head], _extent(head), *pieces, *scalars)
            out, shape = out[head:], _extent(out.size - head)
            inputs = tuple(x[head:] if x.size > 1 else x for x in inputs)
            strides = (_UNIT,) * len(inputs)
    arguments = [value for pair in zip(inputs, strides) for value in pair]
    function(out, shape, *arguments, *scalars)


def _flat(out, shape, inputs, strides) -> bool:
    """True where every input is one element or a whole tile read in C order: where
    ``flat_step`` is >= 0 for all (``helpers.is_c_contiguous``, in Python: nothing to
    compile)."""
    extents = shape.tolist()
    for x, steps in zip(inputs, strides):
        if x.size == 1:
            continue
        if x.size != out.size:
            return False
        expected = 1
        for extent, step in zip(reversed(extents), reversed(steps.tolist())):
            if extent != 1 and step != expected:
                return False
            expected *= extent
    return True


@functools.lru_cache(maxsize=256)
def _extent(size: int) -> np.ndarray:
    """The read-only shape array ``[size]`` (the kernels' shape arguments are read-only:
    one signature)."""
    array = np.array([size], np.int64)
    array.flags.writeable = False
    return array


_UNIT = _extent(1)  # the element strides of a flat tile


def fused_exact(name: str, dtype) -> bool:
    """True where a fused kernel's step of op ``name`` on ``dtype`` values computes what the
    op's own kernel computes, bit for bit: not where that kernel hands the op to a math
    library (oneMKL's VML, ``pow_avx512``) or, for float32 exp, sin and cos, to
    ``fastmath_blocks``' kernels: each within an ulp of the scalar functions inlined here.
    Automatic fusion (``tiletensor.auto_fusion``) runs those ops unfused."""
    dtype = np.dtype(dtype)
    if dtype == np.float32 and name in _BLOCKS_F32:
        return False
    if name == "power" and dtype == np.float32 and pow_avx512.enabled():
        return False
    return not mkl_vml.routes(name, dtype)
