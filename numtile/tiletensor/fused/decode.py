"""Decoding with a key/value cache: the cache, writing new key/value rows into it, and the
attention of the newest position against it.

A cache holds one layer's keys or values as a (B, L, Ckv) TileTensor preallocated to its final
length ``L``: tiles are (batch tile, cache tile, key/value heads per tile * D), the heads
grouped as in the projection, so that a key tile of the projection lands in the cache tile of
the same column. ``cache_write`` copies rows [position, position + T) of GPT-2's fused
projection ``qkv`` (B, T, 3C) into the k and v caches, ``cache_write_rows`` those of one
projection (LLaMA's k or v), one task per (source tile, cache tile) overlap, each writing one
cache tile. ``decode_attention`` (``qkv``) and ``grouped_decode_attention`` (a separate q with
fewer key/value heads) are the attention of a single new query position against the first
``n_keys`` cached rows: per (batch tile, head group) one task per cache tile updates a running
max, sum and output (online softmax; the first task starts them afresh, so a ``DecodeState``
made once serves every layer and step), then one finalize task writes the output tile. The
cost of a step is one position, not a re-run of the prefix.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable

import numpy as np

from numtile.runtime import Access, get_runtime
from numtile.tiletensor import auto_fusion, codelets
from numtile.tiletensor.creation import empty
from numtile.tiletensor.fused.attention import kv_head_tile
from numtile.tiletensor.fused.rows import match_last_tile
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.tensor import TileTensor

R, W, RW = Access.R, Access.W, Access.RW


def kv_cache(batch: int, length: int, n_embd: int, tile_shape, dtype) -> TileTensor:
    """An empty (batch, length, n_embd) cache; ``tile_shape`` is (batch, seq, head width)."""
    return empty((batch, length, n_embd), dtype, tile_shape)


def row_view(table: TileTensor, row: int) -> TileTensor:
    """Row ``row`` of a 2-D ``table`` tiled by single rows, as a (1, width) tensor on the same
    tile (no copy): the RoPE angles of one position.

    >>> import numtile as nt, numpy as np
    >>> table = nt.from_numpy(np.arange(6.0).reshape(3, 2), tile_shape=(1, 2))
    >>> row_view(table, 2).to_numpy().tolist()
    [[4.0, 5.0]]
    """
    if table.ndim != 2 or table.tile_shape[0] != 1 or table.grid[1] != 1:
        raise ValueError(f"row_view needs a 2-D table tiled by whole rows, got {table}")
    width = table.shape[1]
    return TileTensor(Layout((1, width), (1, width)), table.dtype, [table.tile((row, 0))])


class DecodeState:
    """The running max, sum (B, 1, n_head) and output (B, 1, n_head * D) of decode attention,
    float64, tiled as the query (batch tile, ``head_tile`` heads), and the attention's result
    ``out`` (``dtype``): every call that is given the state reuses these tiles."""

    def __init__(self, batch, n_head, head_dim, batch_tile, head_tile, dtype=np.float32):
        stats = Layout((batch, 1, n_head), (batch_tile, 1, head_tile))
        self.m, self.l = TileTensor(stats, np.float64), TileTensor(stats, np.float64)
        acc = Layout((batch, 1, n_head * head_dim), (batch_tile, 1, head_tile * head_dim))
        self.acc, self.out = TileTensor(acc, np.float64), TileTensor(acc, dtype)


class TaskRecording:
    """The tasks submitted inside ``with recording.recording(segment):``, which
    ``replay(segment)`` submits again in the same order on the same tiles (dependencies are
    inferred anew each time); ``segment=None`` records tasks that are not replayed (the caller
    submits those afresh: position-dependent ones).

    A decode step's position-independent ops (norms, projections, MLP, the head) are recorded
    once and replayed each step: the tiled ops' Python work is not redone and their
    intermediate tiles are reused. ``hoist()`` drops from the replay the tasks whose result
    cannot change from one replay to the next (a bias broadcast: it reads only tiles nothing
    in the recording writes, and is the only writer of its output); ``fuse(segment)`` makes a
    segment one task. Only tasks whose inputs are tiles written by tasks (not data given from
    the host, as ``from_numpy`` does) replay correctly, and tiles read but not written by the
    recording must not change between replays (weights during generation).

    >>> import numtile as nt
    >>> from numtile.tiletensor.elementwise import copy_into
    >>> x, one = nt.zeros((2,)), nt.ones((2,)); recording = TaskRecording()
    >>> with recording.recording(0):
    ...     copy_into(x, x + one * 2.0)
    >>> recording.hoist(); recording.replay(0); recording.replay(0); x.to_numpy().tolist()
    [6.0, 6.0]
    >>> [task[0].name for task in recording.segments[0]]  # one * 2.0 is not replayed
    ['binary:add', 'copy_strided']
    """

    def __init__(self) -> None:
        self.tasks: list[tuple] = []
        self.tags: list[int | None] = []
        self.segments: dict[int, list[tuple]] = {}

    @contextlib.contextmanager
    def recording(self, segment: int | None, submit: bool = True):
        """Record the tasks submitted inside; ``submit=False`` only records them (to ``fuse``
        and ``replay`` the segment: the code inside must not wait for them)."""
        runtime = get_runtime()
        run = runtime.submit

        def record(codelet, accesses, args=(), priority=0, name=None):
            task = (codelet, list(accesses), args, priority, name)
            self.tasks.append(task)
            self.tags.append(segment)
            if segment is not None:
                self.segments.setdefault(segment, []).append(task)
            return run(*task) if submit else None

        shadowed = vars(runtime).get("submit")  # under MPI the distributed front's submit
        runtime.submit = record  # the tiled ops look ``submit`` up on the runtime each call
        # the ops inside submit at once (a deferred op would submit outside, unrecorded)
        fusing = auto_fusion.set_enabled(False)
        try:
            yield self
        finally:
            auto_fusion.set_enabled(fusing)
            if shadowed is None:
                del runtime.submit
            else:
                runtime.submit = shadowed

    def hoist(self, varying: Iterable[TileTensor] = ()) -> None:
        """Keep in each segment only the tasks whose result may change between replays;
        ``varying`` are tensors written between replays by tasks not recorded here."""
        writers: dict[int, set[int]] = {h.id: {-1} for t in varying for h in t.handles}
        for n, task in enumerate(self.tasks):
            for handle, mode in task[1]:
                if mode is not R:
                    writers.setdefault(handle.id, set()).add(n)
        invariant: set[int] = set()
        for n, (task, tag) in enumerate(zip(self.tasks, self.tags)):
            # invariant: reads only tiles that no task writes or that invariant tasks wrote
            # earlier in the step, and is the only writer of what it writes
            if tag is not None and all(
                writers.get(handle.id, set()) <= invariant
                if mode is R
                else mode is W and writers[handle.id] == {n}
                for handle, mode in task[1]
            ):
                invariant.add(n)
        self.segments = {}
        for n, (task, tag) in enumerate(zip(self.tasks, self.tags)):
            if tag is not None and n not in invariant:
                self.segments.setdefault(tag, []).append(task)

    def fuse(self, segment: int) -> None:
        """Make ``segment`` one task that runs its tasks' kernels in order on the union of
        their tiles (each read-only tile read, every other one read and written): one task a
        segment instead of dozens. Segments with a codelet that has kind-specific
        implementations stay as they are."""
        tasks = self.segments.get(segment, [])
        if len(tasks) < 2 or any(t[0].kernel is None or t[0].implementations for t in tasks):
            return
        handles: dict[int, list] = {}  # id -> [handle, index, read only]
        plan = []
        for codelet, accesses, args, _, _ in tasks:
            indices = []
            for handle, mode in accesses:
                entry = handles.setdefault(handle.id, [handle, len(handles), True])
                entry[2] = entry[2] and mode is R
                indices.append(entry[1])
            plan.append((codelet.kernel, tuple(indices), args))
        accesses = [(handle, R if read_only else RW) for handle, _, read_only in handles.values()]
        fused = (codelets.decode.decode_segment, accesses, (tuple(plan),), 0, None)
        self.segments[segment] = [fused]

    def replay(self, segment: int) -> None:
        submit = get_runtime().submit
        for task in self.segments.get(segment, ()):
            submit(*task)


def _check_rows(source: TileTensor, cache: TileTensor, position: int) -> None:
    B, T = source.shape[:2]
    if position < 0 or position + T > cache.shape[1]:
        raise ValueError(
            f"rows [{position}, {position + T}) do not fit a cache of length {cache.shape[1]}"
        )
    # a tile edge larger than the axis is the whole axis (a model's batch tile 2, one prompt)
    same_tiles = min(source.tile_shape[0], B) == min(cache.tile_shape[0], cache.shape[0])
    if not same_tiles or cache.shape[0] != B:
        raise ValueError(f"rows {source.shape} tiles {source.tile_shape} do not fit cache {cache}")


def _write_rows(source: TileTensor, first: int, cache: TileTensor, position: int) -> None:
    """Column tile ``first + h`` of ``source`` (B, T, .) into rows [position, position + T) of
    column tile h of ``cache``."""
    runtime = get_runtime()
    s_starts, c_starts = source.layout.starts[1], cache.layout.starts[1]
    for b in range(source.grid[0]):
        for i in range(source.grid[1]):
            lo, hi = position + s_starts[i], position + s_starts[i + 1]
            for j in range(cache.grid[1]):
                a, z = max(lo, c_starts[j]), min(hi, c_starts[j + 1])
                if a >= z:
                    continue
                args = (a - lo, a - c_starts[j], z - a)
                for h in range(cache.grid[2]):
                    runtime.submit(
                        codelets.decode.kv_cache_write,
                        [(source.tile((b, i, first + h)), R), (cache.tile((b, j, h)), RW)],
                        args,
                    )


def cache_write(qkv: TileTensor, k_cache: TileTensor, v_cache: TileTensor, position: int) -> None:
    """Copy the keys and values of ``qkv`` (B, T, 3C) into rows [position, position + T) of
    the caches (B, L, C), whose tiles must match ``qkv``'s in batch and head width.

    >>> import numtile as nt, numpy as np
    >>> qkv = nt.from_numpy(np.arange(12.0).reshape(1, 2, 6), tile_shape=(1, 1, 2))
    >>> k, v = (kv_cache(1, 4, 2, (1, 3, 2), np.float64) for _ in range(2))
    >>> cache_write(qkv, k, v, 1)
    >>> v.to_numpy()[0, 1:3].tolist()
    [[4.0, 5.0], [10.0, 11.0]]
    """
    C = qkv.shape[2] // 3
    qkv = match_last_tile(qkv, k_cache.tile_shape[2])
    _check_rows(qkv, k_cache, position)
    if k_cache.shape[2] != C:
        raise ValueError(f"qkv {qkv.shape} does not fit cache {k_cache}")
    groups = qkv.grid[2] // 3
    _write_rows(qkv, groups, k_cache, position)
    _write_rows(qkv, 2 * groups, v_cache, position)


def cache_write_rows(x: TileTensor, cache: TileTensor, position: int) -> None:
    """Copy ``x`` (B, T, C) into rows [position, position + T) of ``cache`` (B, L, C).

    >>> import numtile as nt, numpy as np
    >>> k = kv_cache(1, 3, 2, (1, 3, 2), np.float64)
    >>> cache_write_rows(nt.from_numpy(np.array([[[1.0, 2.0]]])), k, 2)
    >>> k.to_numpy()[0, 2].tolist()
    [1.0, 2.0]
    """
    x = match_last_tile(x, cache.tile_shape[2])
    _check_rows(x, cache, position)
    if x.shape[2] != cache.shape[2]:
        raise ValueError(f"rows {x.shape} do not fit cache {cache}")
    _write_rows(x, 0, cache, position)


def decode_attention(
    qkv: TileTensor,
    k_cache: TileTensor,
    v_cache: TileTensor,
    n_keys: int,
    n_head: int,
    state: DecodeState | None = None,
) -> TileTensor:
    """Attention (B, 1, C) of the one query position of ``qkv`` (B, 1, 3C) against the first
    ``n_keys`` rows of the caches (its own key and value already written there).

    >>> import numtile as nt, numpy as np
    >>> qkv = nt.random.normal(size=(1, 1, 6), seed=0, tile_shape=(1, 1, 2))
    >>> k, v = (kv_cache(1, 3, 2, (1, 2, 2), np.float64) for _ in range(2))
    >>> cache_write(qkv, k, v, 0)
    >>> out = decode_attention(qkv, k, v, 1, n_head=1).to_numpy()
    >>> bool(np.allclose(out, qkv.to_numpy()[..., 4:]))  # one key: the output is its value
    True
    """
    if qkv.ndim != 3 or qkv.shape[1] != 1:
        raise ValueError(f"decode_attention takes one query position, got qkv of shape {qkv.shape}")
    qkv = match_last_tile(qkv, k_cache.tile_shape[2])
    return _attend(qkv, qkv.shape[2] // 3 // n_head, k_cache, v_cache, n_keys, n_head, 1, state)


def grouped_decode_attention(
    q: TileTensor,
    k_cache: TileTensor,
    v_cache: TileTensor,
    n_keys: int,
    n_head: int,
    n_kv_head: int,
    head_tile: int,
    state: DecodeState | None = None,
) -> TileTensor:
    """Attention (B, 1, n_head * D) of the one query position ``q`` (B, 1, n_head * D), tiles
    of ``head_tile`` heads, against the first ``n_keys`` rows of caches (B, L, n_kv_head * D)
    whose tiles hold the key/value heads of those query heads (grouped-query attention: query
    head h reads key/value head h // (n_head // n_kv_head)).

    >>> import numtile as nt, numpy as np
    >>> q = nt.random.normal(size=(1, 1, 4), seed=0, tile_shape=(1, 1, 2))
    >>> kv = nt.random.normal(size=(1, 1, 2), seed=1)
    >>> k, v = (kv_cache(1, 3, 2, (1, 3, 2), np.float64) for _ in range(2))
    >>> cache_write_rows(kv, k, 0); cache_write_rows(kv, v, 0)
    >>> out = grouped_decode_attention(q, k, v, 1, n_head=2, n_kv_head=1, head_tile=1)
    >>> bool(np.allclose(out.to_numpy(), np.tile(kv.to_numpy(), 2)))  # one key: its value
    True
    """
    if q.ndim != 3 or q.shape[1] != 1 or n_head % n_kv_head or q.shape[2] % n_head:
        raise ValueError(
            f"grouped_decode_attention takes q (B, 1, n_head * D), got {q.shape} with n_head "
            f"{n_head}, n_kv_head {n_kv_head}"
        )
    D, group = q.shape[2] // n_head, n_head // n_kv_head
    q = match_last_tile(q, head_tile * D)
    if (
        k_cache.shape[2] != n_kv_head * D
        or k_cache.tile_shape[2] != kv_head_tile(head_tile, group) * D
    ):
        raise ValueError(f"cache {k_cache} does not hold the key/value heads of q {q.shape}")
    return _attend(q, D, k_cache, v_cache, n_keys, n_head, group, state)


def _attend(source, D, k_cache, v_cache, n_keys, n_head, group, state) -> TileTensor:
    """Decode attention of the query heads in the first column tiles of ``source`` (B, 1, .),
    ``width // D`` heads of width ``D`` a tile, against the caches."""
    B, width = source.shape[0], source.tile_shape[2]
    head_tile = width // D
    batch_tile, groups = source.tile_shape[0], n_head // head_tile
    kv_tile = kv_head_tile(head_tile, group)
    if not 0 < n_keys <= k_cache.shape[1]:
        raise ValueError(f"n_keys {n_keys} must be in [1, {k_cache.shape[1]}]")
    if state is None:
        state = DecodeState(B, n_head, D, batch_tile, head_tile, source.dtype)
    out = state.out
    scale = 1.0 / math.sqrt(D)
    starts = k_cache.layout.starts[1]
    submit = get_runtime().submit
    block, finalize = codelets.decode.decode_attention, codelets.decode.decode_finalize
    for b in range(source.grid[0]):
        for h in range(groups):
            kv = (h * head_tile // group) // kv_tile
            m, l, acc = state.m.tile((b, 0, h)), state.l.tile((b, 0, h)), state.acc.tile((b, 0, h))
            q_tile = source.tile((b, 0, h))
            for j in range(k_cache.grid[1]):
                if starts[j] >= n_keys:
                    break
                count = min(n_keys, starts[j + 1]) - starts[j]
                submit(
                    block,
                    [(q_tile, R), (k_cache.tile((b, j, kv)), R), (v_cache.tile((b, j, kv)), R)]
                    + [(m, W if j == 0 else RW), (l, W if j == 0 else RW)]
                    + [(acc, W if j == 0 else RW)],
                    (head_tile, scale, count, group, j == 0),
                )
            submit(finalize, [(acc, R), (l, R), (out.tile((b, 0, h)), W)], (head_tile,))
    return out
