"""HDF5 checkpoints of named TileTensors, written and read one tile at a time.

On disk a checkpoint is one HDF5 file that plain h5py reads:

- root attributes ``format = "numtile-checkpoint"`` and ``format_version = 1``, and one
  attribute per entry of ``attrs`` (step, model config, RNG and data-sampler state, ...),
  each stored as JSON text;
- one dataset per tensor, at the tensor's name: ``"optimizer/exp_avg/transformer.wte.weight"``
  is dataset ``transformer.wte.weight`` in group ``exp_avg`` of group ``optimizer``. Its
  dtype is the tensor's, its HDF5 chunks are the tensor's tiles (clipped to the shape) and
  its attribute ``tile_shape`` is the tile shape it was saved with;
- the HDF5 1.10 file format (``libver="v110"``), in which every metadata block carries a
  checksum that HDF5 verifies;
- a checksum of every byte of tensor data: each chunk carries HDF5's Fletcher-32 checksum
  (the ``fletcher32`` filter, which HDF5 itself verifies on every read: plain h5py raises
  ``OSError`` on a damaged chunk), and a 0-d dataset, which HDF5 cannot chunk, carries the
  CRC-32 of its bytes in its attribute ``crc32``.

HDF5 has no bfloat16 type: a bfloat16 tensor is stored as its uint16 bit patterns (the
upper halves of the float32 values) with the dataset attribute ``dtype = "bfloat16"``; a
plain h5py reader gets those uint16 values and turns them back with
``bits.view(ml_dtypes.bfloat16)`` or, with NumPy alone, ``(bits.astype(np.uint32) << 16)
.view(np.float32)`` (exact). float16 needs nothing of the kind: HDF5's own IEEE half type
holds it, and plain h5py reads it as ``np.float16``.

Checksums changed nothing else, so the format version is still 1: numtile releases from
before them read these files (and HDF5 verifies the chunks for them), and files they wrote,
which have no checksums, still load here, unverified (``checkpoint_info`` tells which).

Reading one without numtile::

    with h5py.File("ckpt.h5", "r") as f:
        wte = f["model/transformer.wte.weight"][...]      # a NumPy array
        step = json.loads(f.attrs["step"])

Saving waits for each tile separately and writes its hyperslab, so a tensor is never
gathered in memory; loading reads each tile into a new tile and verifies its checksum. A
checkpoint is written to a temporary file next to ``path`` and renamed onto it once complete
and synced, so an interruption never leaves a partial file and never damages the checkpoint
already there; the temporary file of a save that was killed is removed by the next save of
the same path.

Every problem with a file that exists raises ``ValueError`` naming the file and what is wrong
(not HDF5, damaged metadata, a failed checksum naming the tensor, an unknown version, a
folder instead of a file); a missing file raises ``FileNotFoundError``.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import zlib
from collections.abc import Iterator, Mapping
from typing import Any

import h5py
import numpy as np

from numtile.io.files import atomic_output
from numtile.runtime import DataHandle, get_runtime
from numtile.tiletensor import Layout, TileTensor
from numtile.tiletensor.dtypes import bfloat16_dtype, check_dtype, is_bfloat16

FORMAT = "numtile-checkpoint"
FORMAT_VERSION = 1
_RESERVED = ("format", "format_version")


def save_checkpoint(
    path: str | os.PathLike,
    tensors: Mapping[str, TileTensor],
    attrs: Mapping[str, Any] | None = None,
    *,
    check_finite: bool = False,
) -> None:
    """Write ``tensors`` (by slash-separated name) and JSON ``attrs`` to the HDF5 file ``path``.

    Each tile is written as soon as the tasks producing it finish, with a checksum;
    ``path`` is replaced atomically once the whole file is written. With ``check_finite``,
    a floating-point tile holding NaN or infinity aborts the save with ``ValueError``
    naming the tensor, and ``path`` is left as it was.

    >>> import os, tempfile, numpy as np, numtile as nt
    >>> path = os.path.join(tempfile.mkdtemp(), "ckpt.h5")
    >>> w = nt.from_numpy(np.arange(6.0).reshape(2, 3), tile_shape=(1, 2))
    >>> save_checkpoint(path, {"model/w": w}, attrs={"step": 10})
    >>> loaded, attrs = load_checkpoint(path)
    >>> loaded["model/w"].to_numpy().tolist(), attrs
    ([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]], {'step': 10})
    """
    _check_names(tensors)
    encoded = _encode_attrs(attrs or {})
    runtime = get_runtime()
    with (
        atomic_output(path) as tmp,
        h5py.File(tmp, "w", libver=("v110", "latest"), track_order=True) as f,
    ):
        f.attrs["format"] = FORMAT
        f.attrs["format_version"] = FORMAT_VERSION
        for key, text in encoded.items():
            f.attrs[key] = text
        for name, tensor in tensors.items():
            *groups, leaf = name.split("/")
            parent = f
            for group in groups:
                if group not in parent:
                    parent.create_group(group, track_order=True)
                parent = parent[group]
            chunks = None
            if tensor.ndim and tensor.size:
                chunks = tuple(min(t, s) for t, s in zip(tensor.tile_shape, tensor.shape))
            dataset = parent.create_dataset(
                leaf,
                shape=tensor.shape,
                dtype=_disk_dtype(tensor.dtype),
                chunks=chunks,
                fletcher32=chunks is not None,
            )
            dataset.attrs["tile_shape"] = np.array(tensor.tile_shape, dtype=np.int64)
            if is_bfloat16(tensor.dtype):
                dataset.attrs["dtype"] = "bfloat16"
            for index, handle in zip(tensor.layout.indices(), tensor.handles):
                runtime.wait_handles([handle])
                tile = handle.host_array()
                floating = tile.dtype.kind == "f" or is_bfloat16(tile.dtype)
                if check_finite and floating and not np.isfinite(tile).all():
                    raise ValueError(
                        f"tensor {name!r} holds NaN or infinity (tile {index}); "
                        f"not saved, {os.fspath(path)} is left as it was"
                    )
                tile = tile.view(dataset.dtype)  # bfloat16: its bits
                dataset[_region(tensor.layout, index)] = tile
                if chunks is None and tensor.ndim == 0:
                    dataset.attrs["crc32"] = np.int64(_crc32(tile))


def load_checkpoint(
    path: str | os.PathLike,
    like: Mapping[str, TileTensor] | None = None,
    tile_shapes: Mapping[str, tuple] | None = None,
) -> tuple[dict[str, TileTensor], dict[str, Any]]:
    """Read the tensors and attributes of checkpoint ``path``, one tile at a time.

    A tensor's tile shape is ``like[name].tile_shape``, else ``tile_shapes[name]``, else the
    one it was saved with. With ``like``, the names, shapes and dtypes must match it exactly
    (``ValueError`` otherwise). Every tile's checksum is verified as it is read (files from
    numtile releases before checksums have none and load unverified). A missing file raises
    ``FileNotFoundError``; a file that is not a complete, intact numtile checkpoint of a
    supported version, or a folder, raises ``ValueError`` naming the file (and the tensor,
    for damaged data).

    >>> import os, tempfile, numpy as np, numtile as nt
    >>> path = os.path.join(tempfile.mkdtemp(), "ckpt.h5")
    >>> save_checkpoint(path, {"b": nt.zeros((5,), tile_shape=2)})
    >>> tensors, _ = load_checkpoint(path, tile_shapes={"b": (3,)})
    >>> tensors["b"].tile_shape
    (3,)
    """
    tile_shapes = dict(tile_shapes or {})
    with _open(path) as (f, entries, attrs):
        unknown = sorted(set(tile_shapes) - set(entries))
        if unknown:
            raise ValueError(f"tile_shapes names tensors that {path} does not hold: {unknown}")
        if like is not None:
            _check_like(path, entries, like)
            tile_shapes.update((name, tensor.tile_shape) for name, tensor in like.items())
        names = list(like) if like is not None else list(entries)
        tensors = {}
        for name in names:
            dataset = f[name]
            shape, dtype = entries[name]["shape"], entries[name]["dtype"]
            layout = Layout(shape, tile_shapes.get(name, entries[name]["tile_shape"]))
            handles = [
                DataHandle(layout.tile_shape_at(index), dtype, tile)
                for index, tile in _read_tiles(path, name, dataset, layout, dtype)
            ]
            tensors[name] = TileTensor(layout, dtype, handles)
    return tensors, attrs


def _read_tiles(path, name: str, dataset: h5py.Dataset, layout: Layout, dtype: np.dtype):
    """Yield ``(index, array)`` for every tile of ``layout``, checksums verified by HDF5."""
    disk = _disk_dtype(dtype)
    try:
        for index in layout.indices():
            yield index, np.asarray(dataset[_region(layout, index)], dtype=disk).view(dtype)
    except (OSError, RuntimeError, KeyError, ValueError) as exc:
        raise _corrupt(
            path, f"tensor {name!r}: its data is damaged (failed checksum) or unreadable ({exc})"
        ) from exc
    expected = dataset.attrs.get("crc32")
    if expected is not None and _crc32(np.asarray(dataset[()], dtype=disk)) != int(expected):
        raise _corrupt(path, f"tensor {name!r}: its data is damaged (failed CRC-32 checksum)")


def _disk_dtype(dtype: np.dtype) -> np.dtype:
    """The HDF5 dataset's dtype for tensors of ``dtype``: bfloat16 as its uint16 bits."""
    return np.dtype(np.uint16) if is_bfloat16(dtype) else dtype


def _crc32(array: np.ndarray) -> int:
    """CRC-32 of a (0-d) array's bytes, little-endian whatever the machine."""
    return zlib.crc32(np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes())


def checkpoint_info(path: str | os.PathLike) -> dict[str, Any]:
    """Names, shapes, dtypes, tile shapes and attributes of checkpoint ``path`` (no tile read).

    ``checksums`` says whether every tensor's data has a checksum that loading verifies
    (False for files written by numtile releases from before checksums).

    >>> import os, tempfile, numtile as nt
    >>> path = os.path.join(tempfile.mkdtemp(), "ckpt.h5")
    >>> save_checkpoint(path, {"model/w": nt.ones((4, 4), tile_shape=(2, 4))}, {"step": 3})
    >>> info = checkpoint_info(path)
    >>> info["names"], info["shapes"], info["dtypes"], info["attrs"]
    (['model/w'], {'model/w': (4, 4)}, {'model/w': 'float64'}, {'step': 3})
    """
    with _open(path) as (f, entries, attrs):
        return {
            "format_version": int(f.attrs["format_version"]),
            "names": list(entries),
            "shapes": {name: e["shape"] for name, e in entries.items()},
            "dtypes": {name: e["dtype"].name for name, e in entries.items()},
            "tile_shapes": {name: e["tile_shape"] for name, e in entries.items()},
            "checksums": all(e["checksum"] for e in entries.values()),
            "attrs": attrs,
        }


def _region(layout: Layout, index: tuple[int, ...]) -> tuple[slice, ...]:
    """The slice of the whole array that tile ``index`` covers."""
    return tuple(slice(a, b) for a, b in layout.tile_bounds(index))


def _check_names(tensors: Mapping[str, TileTensor]) -> None:
    """Reject non-tensors and names that are not distinct HDF5 paths."""
    groups = set()
    for name, tensor in tensors.items():
        if not isinstance(tensor, TileTensor):
            raise TypeError(
                f"checkpoint entry {name!r} is a {type(tensor).__name__}, not a TileTensor"
            )
        parts = name.split("/") if isinstance(name, str) else [""]
        if any(part in ("", ".", "..") for part in parts):
            raise ValueError(
                f"tensor name {name!r} is not a path like 'model/transformer.wte.weight' "
                f"(non-empty parts separated by '/')"
            )
        groups.update("/".join(parts[:i]) for i in range(1, len(parts)))
    clashes = sorted(groups & set(tensors))
    if clashes:
        raise ValueError(f"tensor names {clashes} are also groups of other tensor names")


def _json_default(value):
    """Let NumPy scalars and arrays (RNG states, configs) go into JSON attributes."""
    if isinstance(value, np.generic | np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _encode_attrs(attrs: Mapping[str, Any]) -> dict[str, str]:
    """Each attribute as JSON text, checked before the file is touched."""
    encoded = {}
    for key, value in attrs.items():
        if not isinstance(key, str) or key in _RESERVED:
            raise ValueError(f"checkpoint attribute name {key!r} is reserved or not a string")
        try:
            encoded[key] = json.dumps(value, default=_json_default)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"checkpoint attribute {key!r} is not JSON serialisable: {exc}"
            ) from None
    return encoded


def _decode_attr(path, key: str, value) -> Any:
    """One root attribute, stored as JSON text by ``save_checkpoint``."""
    if not isinstance(value, str):
        raise _corrupt(path, f"attribute {key!r} is {type(value).__name__}, not JSON text")
    return json.loads(value)


def _corrupt(path, detail: str) -> ValueError:
    return ValueError(
        f"{os.fspath(path)} is not a valid numtile checkpoint (corrupt or unsupported): {detail}"
    )


@contextlib.contextmanager
def _open(path):
    """Open checkpoint ``path``; yield the file, its tensors' metadata and its decoded attrs.

    HDF5 and JSON errors raised while the file is open become ``ValueError`` naming ``path``.
    """
    if not os.path.exists(path):
        raise FileNotFoundError(f"no checkpoint at {os.fspath(path)}")
    if os.path.isdir(path):
        raise _corrupt(path, "it is a folder, not a checkpoint file")
    try:
        f = h5py.File(path, "r")
    except (FileNotFoundError, PermissionError):
        raise
    except OSError as exc:
        raise _corrupt(path, f"not a readable HDF5 file ({exc})") from exc
    try:
        with f:
            fmt = f.attrs.get("format")
            if fmt != FORMAT:
                raise _corrupt(path, f"format attribute is {fmt!r}, expected {FORMAT!r}")
            version = f.attrs.get("format_version")
            if version != FORMAT_VERSION:
                raise _corrupt(
                    path,
                    f"format_version {version}, but this numtile reads version {FORMAT_VERSION}",
                )
            raw_attrs = list(f.attrs.items())  # list(): see _datasets
            attrs = {k: _decode_attr(path, k, v) for k, v in raw_attrs if k not in _RESERVED}
            entries = {}
            for name, dataset in _datasets(f):
                if not isinstance(dataset, h5py.Dataset):
                    raise _corrupt(path, f"damaged metadata: entry {name!r} is not a dataset")
                try:
                    dtype = check_dtype(dataset.dtype)
                except TypeError as exc:
                    raise _corrupt(path, f"tensor {name!r}: {exc}") from None
                if dataset.attrs.get("dtype") == "bfloat16" and dtype == np.uint16:
                    dtype = bfloat16_dtype()
                _check_chunks(path, name, dataset)
                stored = dataset.attrs.get("tile_shape")
                entries[name] = {
                    "shape": dataset.shape,
                    "dtype": dtype,
                    "tile_shape": None if stored is None else tuple(int(t) for t in stored),
                    "checksum": _has_checksum(dataset),
                }
            yield f, entries, attrs
    except (OSError, RuntimeError, KeyError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise _corrupt(path, f"damaged metadata ({type(exc).__name__}: {exc})") from exc


def _check_chunks(path, name: str, dataset: h5py.Dataset) -> None:
    """Every chunk that ``save_checkpoint`` wrote is indexed, with its filters applied.

    A damaged chunk index would make HDF5 read a chunk as zeros, or skip its checksum.
    """
    if dataset.chunks is None or not hasattr(dataset.id, "chunk_iter"):
        return
    expected = set(
        itertools.product(*(range(0, s, c) for s, c in zip(dataset.shape, dataset.chunks)))
    )
    found = []
    dataset.id.chunk_iter(lambda info: found.append((info.chunk_offset, info.filter_mask)))
    offsets = {offset for offset, _ in found}
    if offsets != expected or len(found) != len(expected) or any(mask for _, mask in found):
        raise _corrupt(
            path,
            f"tensor {name!r}: its chunk index is damaged ({len(expected & offsets)} of its "
            f"{len(expected)} chunks found, {len(offsets - expected)} unexpected)",
        )


def _has_checksum(dataset: h5py.Dataset) -> bool:
    """Whether ``dataset`` has Fletcher-32 chunks, a ``crc32`` attribute (0-d) or no data."""
    if dataset.chunks is not None:
        return dataset.fletcher32
    return dataset.size == 0 or "crc32" in dataset.attrs


def _datasets(group: h5py.Group, prefix: str = "") -> Iterator[tuple[str, h5py.Dataset]]:
    """Every dataset under ``group`` with its slash path, in the order they were written."""
    # list(): h5py's items() generator holds h5py's global lock while suspended; an
    # abandoned one, finalised later by the garbage collector in a runtime worker thread,
    # would block that thread on a lock the main thread owns
    for key, item in list(group.items()):
        if isinstance(item, h5py.Group):
            yield from _datasets(item, f"{prefix}{key}/")
        else:
            yield f"{prefix}{key}", item


def _check_like(path, entries: Mapping[str, dict], like: Mapping[str, TileTensor]) -> None:
    """Names, then shapes and dtypes, of the checkpoint must match ``like`` exactly."""
    missing = [name for name in like if name not in entries]
    unexpected = [name for name in entries if name not in like]
    if missing or unexpected:
        raise ValueError(
            f"checkpoint {os.fspath(path)} does not match the expected tensors: "
            f"missing from the checkpoint {missing}, unexpected in the checkpoint {unexpected}"
        )
    for name, tensor in like.items():
        stored = entries[name]
        if stored["shape"] != tensor.shape:
            raise ValueError(
                f"tensor {name!r} has shape {stored['shape']} in checkpoint {os.fspath(path)}, "
                f"but the expected tensor has shape {tensor.shape}"
            )
        if stored["dtype"] != tensor.dtype:
            raise ValueError(
                f"tensor {name!r} has dtype {stored['dtype'].name} in checkpoint "
                f"{os.fspath(path)}, but the expected tensor has dtype {tensor.dtype.name}"
            )
