"""Streaming (non-temporal) stores for element-wise kernels whose outputs do not fit in cache.

An ordinary store to a line missing from the cache first reads the line in (read for
ownership), so a one-in-one-out pass over memory moves three bytes for each byte written: the
input, the output's old contents and the output. A non-temporal store (x86's ``movnt*``, LLVM's
``!nontemporal`` metadata) writes whole 64-byte lines through write-combining buffers with no
read, and leaves nothing in the caches.

The binary loops here (``zip_streamed``...) compute an output a block of ``BLOCK_BYTES`` at
a time into a buffer that stays in L1, then stream each block out with
64-byte-aligned vector stores; the elements before the output's first 64-byte boundary and
after its last whole block are stored as usual. Each value is computed by the same scalar
function as the ordinary loop, so both write the same bits. A fence at the end orders the
weakly ordered streaming stores before whatever the thread does next (another worker may read
the tile once the task is done).

A loop bound by its arithmetic, the unary maps (``map_streamed``) and ``nt.fuse``'s kernels
(``fusion``) stream their stores from inside the vectorised loop instead (``store_streamed``,
from the output's first 64-byte boundary; ``aligned_start`` finds the elements before it):
computing a block and then streaming it serialises the two (float32 exp over 4M elements, one
thread: 0.97 ns an element through the buffer, 0.29 from the loop, VML with ordinary stores
0.41; ``fastmath_blocks``), and a loop that reads three streams for the one it writes
(x * y + z) loses to the buffer's bursts of streaming stores: 0.90x its CPU time from the loop
(2 threads over 16 tiles of 4M float32). LLVM vectorises a non-temporal store only where a
vector of two elements is at least 4 bytes: 1-byte outputs (bool, int8) keep the buffer.

Measured (``python bench/streaming_stores.py``; 2-core Xeon with AVX-512, 2 MiB L2 a core,
shared with other benchmarks, load 2-7; medians of 9-15 rounds, the two kinds of store timed
in turn in one process, 2026-12-06):

- the kernels alone, 64M float32 in 16 tiles, 2 threads: -x 0.71x (twice) the time of ordinary
  stores, x * 2 0.59-0.70x; exp (numba's, or VML's into a 4 or 16 KiB buffer streamed out),
  bound by its arithmetic on these cores: 0.94-1.10x, no gain, so exp, log, sin, tanh... keep
  ordinary stores (and VML), except float32 exp, sin and cos, whose short kernels
  (``fastmath_blocks``) now leave the stores to bound them;
- numtile's tiled ops, 64M float32 in 16 tiles (``--tiled``, 4 runs, the last at load 1.1):
  -x 0.60-0.69x (25.6 -> 17.7 ms quiet), x * 2 0.55-0.72x, x * y + z 0.62-0.73x, nt.fuse(x *
  y + z) 0.78-0.88x (three inputs read for one output written), where(x > 0, x, y)
  0.83-0.89x (the comparison's bool tile is not streamed); exp, which does not stream,
  0.91-1.08x: the noise;
- an output read again at once, while an ordinary store leaves it in L2 (-x, then a sum of
  the same tile, 2 threads): 256 KiB 1.39-1.41x, 512 KiB 1.47x, 1 MiB 1.32-1.73x, 2 MiB
  0.78-1.46x, 4 MiB 1.05x, 8 MiB 0.89-0.98x. Two passes y = -x, z = y * 2, each over every
  tile before the next: 0.57-0.78x from 1M to 64M elements (y is not in cache when read).

A loop that computes more than it moves (float32 exp) can also outrun the hardware
prefetcher: ``prefetch_lines`` asks for the lines of its input a few KiB ahead
(``fastmath_blocks``: exp 0.85-0.88x the time); a loop bound by memory alone gains nothing by it
(x * y 1.1x, measured the same way).

Hence ``wanted``: outputs of ``STREAM_MIN_BYTES``, a core's L2, or more stream (with their
inputs they cannot all stay in L2 for the next op), smaller ones keep ordinary stores.
A streamed kernel compiles in 2-3x the time of the ordinary one (about +0.5 s a signature,
on disk after): each is compiled only when an output first streams.
"""

from __future__ import annotations

import platform

import numba
import numpy as np
from llvmlite import ir
from llvmlite.binding import llvm_version_info
from numba.core import cgutils, types
from numba.extending import intrinsic

from numtile.config import Config

_X86 = platform.machine().lower() in ("x86_64", "amd64")
LINE = 64  # bytes one streaming store writes: a cache line (an AVX-512 register)
BLOCK_BYTES = 2048  # computed into an L1 buffer, then streamed out (1-4 KiB measured alike)
STREAM_MIN_BYTES = 2 << 20  # a core's L2 on the Xeons measured: smaller outputs may stay there

_switch: dict[str, bool] = {}


def enabled() -> bool:
    """True where element-wise kernels may stream their outputs (``NUMTILE_STREAM_STORES``,
    default on; ``set_enabled``)."""
    if "on" not in _switch:
        _switch["on"] = Config.defaults().stream_stores
    return _switch["on"]


def set_enabled(on: bool) -> bool:
    """Turns streaming stores on or off for this process; returns the previous setting."""
    previous = enabled()
    _switch["on"] = bool(on)
    return previous


def wanted(out) -> bool:
    """True where a kernel should stream ``out``: the switch is on, ``out`` is C-contiguous
    and at least ``STREAM_MIN_BYTES`` (smaller outputs may still be in L2 when the next op
    reads them), and its elements tile 64-byte lines (an itemsize dividing 64, an address
    that is a multiple of it: a misaligned streaming store faults).

    >>> import numpy as np
    >>> wanted(np.empty(1 << 20, np.float32)) == enabled(), wanted(np.empty(16, np.float32))
    (True, False)
    """
    return (
        out.nbytes >= STREAM_MIN_BYTES
        and LINE % out.itemsize == 0
        and out.flags.c_contiguous
        and out.ctypes.data % out.itemsize == 0
        and enabled()
    )


def _byte_pointer(context, builder, array_type, array, byte_offset):
    """An i8* to ``byte_offset`` bytes into ``array``'s data."""
    data = context.make_array(array_type)(context, builder, array).data
    return builder.gep(builder.bitcast(data, cgutils.voidptr_t), [byte_offset])


@intrinsic
def store_line(typingctx, destination, destination_byte, source, source_byte):
    """Copies the 64 bytes at ``source_byte`` of ``source`` (any alignment) to
    ``destination_byte`` of ``destination``, which must be a 64-byte-aligned address, in one
    non-temporal store."""
    if not (isinstance(destination, types.Array) and isinstance(source, types.Array)):
        return None
    signature = types.none(destination, destination_byte, source, source_byte)

    def codegen(context, builder, signature, args):
        destination_type, _, source_type, _ = signature.args
        line_type = ir.VectorType(ir.IntType(64), LINE // 8)
        source_pointer = _byte_pointer(context, builder, source_type, args[2], args[3])
        value = builder.load(builder.bitcast(source_pointer, line_type.as_pointer()), align=1)
        target = _byte_pointer(context, builder, destination_type, args[0], args[1])
        store = builder.store(value, builder.bitcast(target, line_type.as_pointer()), align=LINE)
        store.set_metadata(
            "nontemporal", builder.module.add_metadata([ir.Constant(ir.IntType(32), 1)])
        )
        return context.get_dummy_value()

    return signature, codegen


@intrinsic
def store_streamed(typingctx, array, index, value):
    """``array[index] = value`` (index >= 0, in bounds: not checked) with a non-temporal store
    that claims 64-byte alignment, so that a loop over it vectorises into aligned streaming
    vector stores (LLVM vectorises a non-temporal store only where its alignment is that of
    the vector). The loop must start at a 64-byte-aligned element and step by one: every
    vector store then lands on a multiple of its own width (the scalar remainder's stores need
    none); anything else faults."""
    if not (isinstance(array, types.Array) and isinstance(index, types.Integer)):
        return None
    signature = types.none(array, index, value)

    def codegen(context, builder, signature, args):
        array_type, _, value_type = signature.args
        data = context.make_array(array_type)(context, builder, args[0]).data
        value = context.cast(builder, args[2], value_type, array_type.dtype)
        value = context.data_model_manager[array_type.dtype].as_data(builder, value)  # bool: i8
        store = builder.store(value, builder.gep(data, [args[1]]), align=LINE)
        store.set_metadata(
            "nontemporal", builder.module.add_metadata([ir.Constant(ir.IntType(32), 1)])
        )
        return context.get_dummy_value()

    return signature, codegen


# llvm.prefetch's name carries its pointer type: opaque pointers from LLVM 15 on
_PREFETCH = "llvm.prefetch.p0" if llvm_version_info[0] >= 15 else "llvm.prefetch.p0i8"


@intrinsic
def prefetch(typingctx, array, index):
    """Asks the CPU to bring the line of ``array[index]`` into its caches (``prefetcht0`` on
    x86): a hint, which never faults (``index`` need not be in bounds) and nothing waits for."""
    if not (isinstance(array, types.Array) and isinstance(index, types.Integer)):
        return None
    signature = types.none(array, index)

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        pointer = builder.bitcast(builder.gep(data, [args[1]]), cgutils.voidptr_t)
        word = ir.IntType(32)
        function_type = ir.FunctionType(ir.VoidType(), [cgutils.voidptr_t, word, word, word])
        function = cgutils.get_or_insert_function(builder.module, function_type, _PREFETCH)
        # a read, kept in every cache level (locality 3), of data (not instructions)
        flags = [ir.Constant(word, value) for value in (0, 3, 1)]
        builder.call(function, [pointer, *flags])
        return context.get_dummy_value()

    return signature, codegen


@intrinsic
def store_fence(typingctx):
    """Orders the streaming stores before it ahead of every later store: they are weakly
    ordered, and another thread may read what they wrote once the kernel returns (``sfence``
    on x86, a sequentially consistent fence elsewhere)."""

    def codegen(context, builder, signature, args):
        if _X86:
            sfence = ir.FunctionType(ir.VoidType(), [])
            function = cgutils.get_or_insert_function(builder.module, sfence, "llvm.x86.sse.sfence")
            builder.call(function, [])
        else:
            builder.fence("seq_cst")
        return context.get_dummy_value()

    return types.none(), codegen


_inlined = numba.njit(nogil=True, error_model="numpy", inline="always")


@_inlined
def aligned_start(out):
    """The index of out's first element on a 64-byte boundary (out.size where none is): where
    streaming stores may begin."""
    return min(out.size, (LINE - out.ctypes.data % LINE) % LINE // out.itemsize)


@_inlined
def block_bounds(out):
    """(buffer, start, end): an L1 buffer of ``BLOCK_BYTES`` of out's dtype, and the elements
    [start, end) of ``out`` that whole buffers stream to, start on a 64-byte boundary."""
    buffer = np.empty(BLOCK_BYTES // out.itemsize, out.dtype)
    start = aligned_start(out)
    end = start + (out.size - start) // buffer.size * buffer.size
    return buffer, start, end


@_inlined
def next_block(first, start, end, size, block):
    """The end of the block of ``out`` that begins at ``first``: the unaligned head [0, start),
    whole buffers up to ``end``, then the tail."""
    if first < start:
        return start
    return first + block if first < end else size


@_inlined
def write_block(buffer, out, first, stop, start, end):
    """``out[first:stop] = buffer[:stop - first]``: one streamed buffer between ``start`` and
    ``end``, ordinary stores for the head and tail."""
    if first >= start and stop <= end:
        offset = first * out.itemsize
        for line in range(0, buffer.nbytes, LINE):
            store_line(out, offset + line, buffer, line)
    else:
        for j in range(stop - first):
            out[first + j] = buffer[j]


@_inlined
def prefetch_lines(array, start, stop):
    """``prefetch`` of every 64-byte line of ``array[start:stop]`` (clipped to the array)."""
    for index in range(max(start, 0), min(stop, array.size), LINE // array.itemsize):
        prefetch(array, index)


# Each loop below computes out block by block into the buffer with one loop (its function
# inlined once: a second loop for the head and tail would double the kernel's compile time),
# then writes the block: streamed, or stored as usual at the ends.


@_inlined
def map_streamed(function, x, out):
    """out[i] = function(x[i]), streamed out (``out`` C-contiguous of a real dtype, x as
    large): ordinary stores up to out's first 64-byte boundary, then one vectorised loop of
    streaming stores (``store_streamed``): -x in 0.84-0.96x the time of the loop through a
    buffer that the others keep (2 threads over 16 tiles of 4M float32, thread CPU time,
    medians of 31-41 interleaved rounds, 5 runs, load 4-5; x * y measured 0.94-1.02x so)."""
    head = aligned_start(out)
    for i in range(head):
        out[i] = function(x[i])
    body, source = out[head:], x[head:]
    for i in range(body.size):
        store_streamed(body, i, function(source[i]))
    store_fence()


@_inlined
def zip_streamed(function, a, b, out):
    """out[i] = function(a[i], b[i]), streamed out."""
    buffer, start, end = block_bounds(out)
    first = 0
    while first < out.size:
        stop = next_block(first, start, end, out.size, buffer.size)
        a_block, b_block = a[first:stop], b[first:stop]
        for j in range(stop - first):
            buffer[j] = function(a_block[j], b_block[j])
        write_block(buffer, out, first, stop, start, end)
        first = stop
    store_fence()


@_inlined
def zip_value_streamed(function, a, value, out):
    """out[i] = function(a[i], value), streamed out."""
    buffer, start, end = block_bounds(out)
    first = 0
    while first < out.size:
        stop = next_block(first, start, end, out.size, buffer.size)
        block = a[first:stop]
        for j in range(stop - first):
            buffer[j] = function(block[j], value)
        write_block(buffer, out, first, stop, start, end)
        first = stop
    store_fence()


@_inlined
def select_streamed(condition, a, b, out):
    """out[i] = a[i] if condition[i] else b[i], streamed out (both loaded first: a select)."""
    buffer, start, end = block_bounds(out)
    first = 0
    while first < out.size:
        stop = next_block(first, start, end, out.size, buffer.size)
        c_block, a_block, b_block = condition[first:stop], a[first:stop], b[first:stop]
        for j in range(stop - first):
            x, y = a_block[j], b_block[j]
            buffer[j] = x if c_block[j] else y
        write_block(buffer, out, first, stop, start, end)
        first = stop
    store_fence()


__all__ = [
    "BLOCK_BYTES",
    "aligned_start",
    "LINE",
    "STREAM_MIN_BYTES",
    "block_bounds",
    "enabled",
    "map_streamed",
    "select_streamed",
    "set_enabled",
    "store_fence",
    "store_line",
    "store_streamed",
    "write_block",
    "next_block",
    "prefetch",
    "prefetch_lines",
    "wanted",
    "zip_streamed",
    "zip_value_streamed",
]
