"""Hugging Face model folders at the file level: ``config.json`` and safetensors tensors,
read and written one tile at a time (the models on top are in ``numtile.nn.hf``).

Reading goes through ``safetensors.safe_open(...).get_slice``: each tile is read on its
own from the file, so a tensor is never loaded whole. float32, float64, float16 and
bfloat16 tensors are read (bfloat16 through ``ml_dtypes``) and converted to the model's
dtype. Writing goes one row of tiles at a time into the safetensors layout (8-byte header
length, JSON header, little-endian data). A folder is written under a temporary name next
to its target and renamed onto it once complete, so a crash or Ctrl-C never leaves a folder
that looks complete. Every problem with a file raises ``ValueError`` naming it.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
from collections.abc import Iterator
from typing import Any

import numpy as np

from numtile.io.files import _process_alive
from numtile.runtime import DataHandle, get_runtime
from numtile.runtime.distributed import one_writer
from numtile.tiletensor import Layout, TileTensor
from numtile.tiletensor.dtypes import as_dtype, bfloat16_dtype

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
INDEX = "model.safetensors.index.json"
DEFAULT_SHARD_SIZE = 5 * 10**9

# safetensors dtype codes numtile reads (bfloat16 through ml_dtypes, loaded when met) and writes
FILE_DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16"}
DTYPE_CODES = {"float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16"}


# -- reading -----------------------------------------------------------------------------------


def weight_files(folder: str) -> list[str]:
    single, index = os.path.join(folder, WEIGHTS), os.path.join(folder, INDEX)
    if os.path.isfile(index):
        try:
            with open(index) as f:
                weight_map = json.load(f)["weight_map"]
            names = sorted(set(weight_map.values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"{index}: not a readable safetensors index ({exc!r})") from None
        missing = [n for n in names if not os.path.isfile(os.path.join(folder, n))]
        if missing:
            raise ValueError(f"{index} lists shards that are missing: {missing}")
        return [os.path.join(folder, n) for n in names]
    if os.path.isfile(single):
        return [single]
    raise ValueError(f"{folder} holds no weights: expected {WEIGHTS} or {INDEX}")


@contextlib.contextmanager
def open_safetensors(path: str):
    from safetensors import safe_open

    try:
        with safe_open(path, framework="numpy") as f:
            yield f
    except (OSError, ValueError):
        raise
    except Exception as exc:  # SafetensorError: bad header, truncated file, ...
        raise ValueError(f"{path}: not a readable safetensors file ({exc})") from None


def tensor_index(files: list[str]) -> dict[str, tuple[str, str, tuple[int, ...]]]:
    """File tensor name -> (file, dtype code, shape) over every file."""
    entries = {}
    for path in files:
        with open_safetensors(path) as f:
            for name in f.keys():
                s = f.get_slice(name)
                entries[name] = (path, s.get_dtype(), tuple(s.get_shape()))
    return entries


def check_file_dtype(code: str, path: str, name: str):
    if code not in FILE_DTYPES:
        raise ValueError(
            f"{path}: tensor {name!r} has dtype {code}; numtile reads {', '.join(FILE_DTYPES)}"
        )
    if code == "BF16":
        bfloat16_dtype()  # imports ml_dtypes, which registers bfloat16 with NumPy for safetensors


# bytes of file data read per opening of the file: the file is memory-mapped while open and
# the pages read count as resident memory until it is closed, so a big tile is read in pieces
CHUNK_BYTES = 16 * 2**20


def read_tensor(path: str, name: str, layout: Layout, dtype: np.dtype) -> TileTensor:
    """Tensor ``name`` of safetensors file ``path`` as tiles of ``layout``, converted to
    ``dtype``. The file is read in bands of whole rows (axis 0) of at most ``CHUNK_BYTES``,
    each copied into the tiles it crosses, with the file closed between bands."""
    tiles = {index: np.empty(layout.tile_shape_at(index), dtype) for index in layout.indices()}
    shape = layout.shape
    row_bytes = 8 * max(1, int(np.prod(shape[1:], dtype=np.int64))) if shape else 8
    step = max(1, CHUNK_BYTES // row_bytes)
    for start in range(0, shape[0] if shape else 1, step):
        with open_safetensors(path) as f:
            try:
                band = f.get_slice(name)
                band = band[start : min(start + step, shape[0])] if shape else band[:]
            except Exception as exc:
                raise ValueError(f"{path}: tensor {name!r} is unreadable ({exc})") from None
        if not shape:
            tiles[()][()] = band
            continue
        stop = start + band.shape[0]
        for index, tile in tiles.items():
            (a, z), *rest = layout.tile_bounds(index)
            lo, hi = max(a, start), min(z, stop)
            if lo < hi:
                columns = tuple(slice(c0, c1) for c0, c1 in rest)
                tile[(slice(lo - a, hi - a),) + (...,)] = band[
                    (slice(lo - start, hi - start),) + columns
                ]
        del band
    handles = [DataHandle(t.shape, dtype, t) for t in tiles.values()]
    return TileTensor(layout, dtype, handles)


def read_json(path: str) -> Any:
    """The JSON value in ``path`` (``ValueError`` naming it when unreadable)."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: not a readable JSON file ({exc})") from None


# -- writing -----------------------------------------------------------------------------------


def parse_size(size: int | str) -> int:
    """Bytes of a size given as an int or a string such as ``"10MB"`` or ``"2GiB"``."""
    if isinstance(size, int):
        return size
    text = size.strip().upper()
    units = {"GIB": 2**30, "MIB": 2**20, "KIB": 2**10, "GB": 10**9, "MB": 10**6, "KB": 10**3}
    for unit, factor in (*units.items(), ("B", 1)):
        if text.endswith(unit):
            return int(float(text[: -len(unit)]) * factor)
    return int(text)


def write_folder(
    folder: str | os.PathLike,
    config_text: str,
    tensors: list[tuple[str, TileTensor]],
    dtype: str,
    max_shard_size: int | str = DEFAULT_SHARD_SIZE,
    extra_files: tuple[tuple[str, str], ...] = (),
) -> None:
    """Write ``config.json`` and the ``tensors`` (file name, tensor) as safetensors of
    ``dtype`` into ``folder``, sharded above ``max_shard_size`` bytes, with copies of the
    ``extra_files`` (name in the folder, file), replacing it whole."""
    folder = os.path.abspath(os.fspath(folder))
    parent = os.path.dirname(folder)
    if not os.path.isdir(parent):
        raise FileNotFoundError(f"{folder}: its folder {parent} does not exist")
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise ValueError(f"{folder} is a file, not a folder")
    out = as_dtype(dtype)
    limit = parse_size(max_shard_size)
    shards: list[list[tuple[str, TileTensor]]] = [[]]
    size = 0
    for name, tensor in tensors:
        nbytes = tensor.size * out.itemsize
        if shards[-1] and size + nbytes > limit:
            shards.append([])
            size = 0
        shards[-1].append((name, tensor))
        size += nbytes
    handles = [handle for _, tensor in tensors for handle in tensor.handles]
    with one_writer(get_runtime(), handles) as writing:  # under MPI: rank 0 alone writes
        if writing:
            _write_shards(folder, config_text, shards, out, extra_files)


def _write_shards(folder: str, config_text: str, shards, out: np.dtype, extra_files) -> None:
    """``write_folder``'s files (``shards``: lists of (name, tensor)), written into a
    temporary folder renamed onto ``folder``."""
    with temporary_folder(folder) as tmp:
        with open(os.path.join(tmp, CONFIG), "w") as f:
            f.write(config_text + "\n")
        for name, path in extra_files:
            shutil.copyfile(path, os.path.join(tmp, name))
        if len(shards) == 1:
            write_safetensors(os.path.join(tmp, WEIGHTS), shards[0], out)
            return
        weight_map = {}
        for i, shard in enumerate(shards):
            file_name = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
            write_safetensors(os.path.join(tmp, file_name), shard, out)
            weight_map.update((name, file_name) for name, _ in shard)
        total = sum(tensor.size * out.itemsize for shard in shards for _, tensor in shard)
        with open(os.path.join(tmp, INDEX), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)


def write_safetensors(path: str, tensors: list[tuple[str, TileTensor]], dtype: np.dtype) -> None:
    """A safetensors file of ``tensors`` as ``dtype``, written one row of tiles at a time."""
    code = DTYPE_CODES[dtype.name]
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, tensor in tensors:
        end = offset + tensor.size * dtype.itemsize
        header[name] = {"dtype": code, "shape": list(tensor.shape), "data_offsets": [offset, end]}
        offset = end
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    runtime = get_runtime()
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for _, tensor in tensors:
            for slab in _slabs(tensor, runtime):
                f.write(slab.astype(dtype.newbyteorder("<"), copy=False).tobytes())
        f.flush()
        os.fsync(f.fileno())


def _slabs(tensor: TileTensor, runtime) -> Iterator[np.ndarray]:
    """The tensor in C order, one row of tiles (along axis 0) at a time."""
    layout = tensor.layout
    if tensor.ndim == 0:
        runtime.wait_handles(list(tensor.handles))
        yield tensor.handles[0].host_array()
        return
    tiles = dict(zip(layout.indices(), tensor.handles))
    for row in range(layout.grid[0]):
        (a, b), *_ = layout.tile_bounds((row,) + (0,) * (tensor.ndim - 1))
        slab = np.empty((b - a,) + tensor.shape[1:], tensor.dtype)
        for index, handle in tiles.items():
            if index[0] != row:
                continue
            runtime.wait_handles([handle])
            region = (slice(None),) + tuple(
                slice(lo, hi) for lo, hi in layout.tile_bounds(index)[1:]
            )
            slab[region] = handle.host_array()
        yield slab


@contextlib.contextmanager
def temporary_folder(folder: str) -> Iterator[str]:
    """A new folder next to ``folder``, renamed onto it when the body succeeds."""
    parent, base = os.path.split(folder)
    for name in os.listdir(parent):  # leftovers of killed writes of this folder
        if name.startswith(f".{base}.") and name.endswith(".tmp"):
            pid = name[len(base) + 2 :].split(".")[0]
            if pid.isdigit() and not _process_alive(int(pid)):
                shutil.rmtree(os.path.join(parent, name), ignore_errors=True)
    tmp = os.path.join(parent, f".{base}.{os.getpid()}.{secrets.token_hex(6)}.tmp")
    os.mkdir(tmp)
    try:
        yield tmp
        old = None
        if os.path.exists(folder):
            old = os.path.join(parent, f".{base}.{os.getpid()}.{secrets.token_hex(6)}.old.tmp")
            os.rename(folder, old)
        os.rename(tmp, folder)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
