"""oneDNN's matmul primitive through ctypes: the CPU's bf16 GEMM where the CPU has AMX-BF16 or
AVX512-BF16 and the optional ``onednn-cpu-gomp`` wheel is installed (``pip install
numtile[onednn]``).

Why oneDNN, and why oneMKL too: on a Sapphire Rapids core (one thread, thread CPU time)
oneDNN's AMX kernels (brgemm) ran GEMMs whose inner dimension is at most 768, such as the linear
layers of GPT models of width 256-768, at 1.1-2.0x oneMKL's ``cblas_gemm_bf16bf16f32`` rate;
they were level at 1024, and from 1536 on oneMKL ran at 1.1-1.5x oneDNN's (0.66-0.92 the other
way). Where both are installed each GEMM goes to the faster one (``precision.bf16_gemm``). The
whole bf16-mixed step of gpt2-mini took 0.81x the time it took on oneMKL alone. oneDNN also
writes a bfloat16 output with the bias added in the same pass (``linear_bf16_onednn``), so a
linear layer's float32 product never exists.

A primitive is built once per shape, layout and flags, per worker thread (with its own stream
and scratchpad, so threads never share mutable state), and run on the tiles' own buffers. The
wheel's OpenMP build runs each call on the calling thread alone (``omp_set_num_threads(1)``
per thread): one core per worker, the runtime's rule for BLAS. ctypes releases the GIL.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.metadata
import threading

import numpy as np

from numtile.ops_cpu.bf16 import bf16_narrow
from numtile.ops_cpu.mkl_bf16 import leading as _leading

_CPU, _IN_ORDER, _USER_SCRATCHPAD = 1, 1, 1
_BF16, _F32 = 2, 3
_SRC, _WEIGHTS, _BIAS, _DST, _SCRATCHPAD, _SCALES = 1, 33, 41, 17, 80, 4096
_QUERY_SCRATCHPAD = 136  # dnnl_query_scratchpad_md
_Dims = ctypes.c_int64 * 12


class _Arg(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_int), ("memory", ctypes.c_void_p)]


def _candidates() -> list[str]:
    """Paths of libdnnl: the wheel's own file, then the loader's search path."""
    paths = []
    for wheel in ("onednn-cpu-gomp", "onednn"):
        try:
            for file in importlib.metadata.files(wheel) or ():
                if file.name.startswith("libdnnl.so"):
                    paths.append(str(file.locate()))
        except importlib.metadata.PackageNotFoundError:
            pass
    return paths + ["libdnnl.so.3"]


class _Library:
    """libdnnl, its CPU engine, and the OpenMP runtime it runs on."""

    def __init__(self, lib: ctypes.CDLL, openmp: ctypes.CDLL) -> None:
        self.lib, self.openmp = lib, openmp
        lib.dnnl_memory_desc_get_size.restype = ctypes.c_size_t
        lib.dnnl_primitive_desc_query_md.restype = ctypes.c_void_p
        lib.dnnl_post_ops_append_sum.argtypes = [ctypes.c_void_p, ctypes.c_float]
        lib.dnnl_post_ops_append_sum.argtypes += [ctypes.c_int32, ctypes.c_int]
        self.engine = ctypes.c_void_p()
        self.check(lib.dnnl_engine_create(ctypes.byref(self.engine), _CPU, ctypes.c_size_t(0)))

    @staticmethod
    def check(status: int) -> None:
        if status != 0:
            raise RuntimeError(f"oneDNN call failed with status {status}")

    def new(self, create, *args) -> ctypes.c_void_p:
        """An object made by ``create(&handle, *args)``."""
        handle = ctypes.c_void_p()
        self.check(create(ctypes.byref(handle), *args))
        return handle


_loading = threading.Lock()


def library() -> _Library | None:
    """oneDNN with its CPU engine, or None where it is not installed (loaded once: two workers'
    first GEMMs at once would otherwise make two engines, and a primitive of one engine fails
    on the other's stream)."""
    with _loading:
        return _load()


@functools.cache
def _load() -> _Library | None:
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
            lib.dnnl_matmul_primitive_desc_create  # noqa: B018  (present, or AttributeError)
            return _Library(lib, ctypes.CDLL("libgomp.so.1"))
        except (OSError, AttributeError):
            continue
    return None


def available() -> bool:
    """True where oneDNN's bf16 matmul can be called."""
    return library() is not None


class _Matmul:
    """One matmul primitive and its memory objects (their buffers set at each call)."""

    def __init__(self, dnnl: _Library, key: tuple) -> None:
        m, n, k, lda, ldb, ldc, trans_a, trans_b, out_type, has_bias, scaled, beta = key
        lib, new = dnnl.lib, dnnl.new
        make = lib.dnnl_memory_desc_create_with_strides

        def desc(rows, columns, dtype, strides):
            return new(make, 2, _Dims(rows, columns), dtype, _Dims(*strides))

        # logical (m, k) @ (k, n); a transposed operand is the same buffer read by columns
        sources = [
            desc(m, k, _BF16, (1, lda) if trans_a else (lda, 1)),
            desc(k, n, _BF16, (1, ldb) if trans_b else (ldb, 1)),
            desc(m, n, out_type, (ldc, 1)),
        ]
        bias = desc(1, n, _F32, (n, 1)) if has_bias else None
        attr = new(lib.dnnl_primitive_attr_create)
        dnnl.check(lib.dnnl_primitive_attr_set_scratchpad_mode(attr, _USER_SCRATCHPAD))
        if scaled:  # alpha, a run-time scale of the weights
            dnnl.check(lib.dnnl_primitive_attr_set_scales_mask(attr, _WEIGHTS, 0))
        if beta:  # c = alpha a b + beta c: the sum post-op reads the output first
            post_ops = new(lib.dnnl_post_ops_create)
            dnnl.check(lib.dnnl_post_ops_append_sum(post_ops, float(beta), 0, 0))
            dnnl.check(lib.dnnl_primitive_attr_set_post_ops(attr, post_ops))
            lib.dnnl_post_ops_destroy(post_ops)
        create = lib.dnnl_matmul_primitive_desc_create
        descriptor = new(create, dnnl.engine, *sources[:2], bias, sources[2], attr)
        self.primitive = new(lib.dnnl_primitive_create, descriptor)
        scratch = ctypes.c_void_p(
            lib.dnnl_primitive_desc_query_md(descriptor, _QUERY_SCRATCHPAD, 0)
        )
        self.scratch = np.empty(max(int(lib.dnnl_memory_desc_get_size(scratch)), 1), np.uint8)
        memory = lib.dnnl_memory_create
        self.memories = [new(memory, d, dnnl.engine, None) for d in sources]
        if has_bias:
            self.memories.append(new(memory, bias, dnnl.engine, None))
        self.arguments = [_SRC, _WEIGHTS, _DST, _BIAS][: len(self.memories)]
        buffer = ctypes.c_void_p(self.scratch.ctypes.data)
        self.memories.append(new(memory, scratch, dnnl.engine, buffer))
        self.arguments.append(_SCRATCHPAD)
        if scaled:
            self.scale = np.ones(1, np.float32)
            scale_desc = new(make, 1, _Dims(1), _F32, _Dims(1))
            self.memories.append(new(memory, scale_desc, dnnl.engine, None))
            self.arguments.append(_SCALES | _WEIGHTS)
            lib.dnnl_memory_desc_destroy(scale_desc)
        for d in (*sources, bias):
            if d is not None:
                lib.dnnl_memory_desc_destroy(d)
        lib.dnnl_primitive_attr_destroy(attr)
        lib.dnnl_primitive_desc_destroy(descriptor)

    def run(self, dnnl: _Library, stream, buffers: list) -> None:
        lib = dnnl.lib
        arguments = (_Arg * len(self.memories))()
        for position, (argument, memory) in enumerate(zip(self.arguments, self.memories)):
            arguments[position] = _Arg(argument, memory)
        for memory, buffer in zip(self.memories, buffers):
            dnnl.check(lib.dnnl_memory_set_data_handle(memory, ctypes.c_void_p(buffer)))
        dnnl.check(lib.dnnl_primitive_execute(self.primitive, stream, len(arguments), arguments))
        dnnl.check(lib.dnnl_stream_wait(stream))


_local = threading.local()


def _thread_state(dnnl: _Library):
    """This thread's stream and primitives on ``dnnl``'s engine (made on its first call there,
    OpenMP limited to the thread)."""
    state = getattr(_local, "state", None)
    if state is None or state[0] is not dnnl:
        dnnl.openmp.omp_set_num_threads(1)
        stream = dnnl.new(dnnl.lib.dnnl_stream_create, dnnl.engine, ctypes.c_uint(_IN_ORDER))
        state = _local.state = (dnnl, stream, {})
    return state


def _matmul(a, b, c, trans_a, trans_b, bias, alpha, beta) -> None:
    dnnl = library()
    _, stream, primitives = _thread_state(dnnl)
    m, n = c.shape
    k = a.shape[0] if trans_a else a.shape[1]
    assert (b.shape[1] if trans_b else b.shape[0]) == k, "matmul: shapes do not agree"
    out_type = _BF16 if c.dtype == np.uint16 else _F32
    key = (m, n, k, _leading(a), _leading(b), _leading(c), bool(trans_a), bool(trans_b))
    key += (out_type, bias is not None, alpha != 1.0, float(beta))
    primitive = primitives.get(key)
    if primitive is None:
        primitive = primitives[key] = _Matmul(dnnl, key)
    buffers = [a.ctypes.data, b.ctypes.data, c.ctypes.data]
    if bias is not None:
        buffers.append(bias.ctypes.data)
    buffers.append(primitive.scratch.ctypes.data)
    if alpha != 1.0:
        primitive.scale[0] = alpha
        buffers.append(primitive.scale.ctypes.data)
    primitive.run(dnnl, stream, buffers)


def gemm_bf16_onednn(a, b, c, trans_a, trans_b, alpha, beta) -> None:
    """c (float32) = alpha * op(a) @ op(b) + beta * c for bf16 a, b given as uint16 bits,
    through oneDNN (``library()`` must not be None); row-major matrices with contiguous rows."""
    m, n = c.shape
    if m == 0 or n == 0:
        return
    if (a.shape[0] if trans_a else a.shape[1]) == 0:
        c[...] = 0.0 if beta == 0 else beta * c
        return
    _matmul(a, b, c, trans_a, trans_b, None, float(alpha), float(beta))


def linear_bf16_onednn(a, b, bias, out, trans_a, trans_b) -> None:
    """out (bfloat16 bits, uint16) = op(a) @ op(b) + bias, summed in float32 and rounded once to
    nearest even; ``bias`` a float32 vector of out's columns, or None."""
    if out.size == 0:
        return
    if (a.shape[0] if trans_a else a.shape[1]) == 0:  # no products: the bias alone, rounded
        sums = np.zeros(out.shape, np.float32) + (0 if bias is None else bias)
        bf16_narrow(sums.reshape(-1).view(np.uint32), out.reshape(-1))
        return
    _matmul(a, b, out, trans_a, trans_b, bias, 1.0, 0.0)


__all__ = ["available", "gemm_bf16_onednn", "library", "linear_bf16_onednn"]
