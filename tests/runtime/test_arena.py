"""The arena a limited host cuts its tile buffers from (runtime/arena.py)."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import numtile as nt
import numtile.runtime.host_malloc as host_malloc
from numtile.runtime.arena import CHUNK, PAGE, HostArena

pytestmark = pytest.mark.usefixtures("frozen_heap")

MiB = 1 << 20


def _check(arena: HostArena, live: dict, kept: tuple = ()) -> None:
    """Free ranges, live arrays and ``kept`` ones (held for reuse) tile the arena exactly
    once; the counts add up (a kept array's pages count as pooled, not used)."""
    spans = sorted(
        [(s, s + n, "free") for s, n in arena.lengths.items()]
        + [
            (a.ctypes.data - arena.base, a.ctypes.data - arena.base + -(-n // PAGE) * PAGE, "live")
            for a, n in [*live.values(), *kept]
        ]
    )
    position = 0
    for start, end, _ in spans:
        assert start == position, "a gap or an overlap between ranges"
        position = end
    assert position == arena.size
    assert arena.starts == sorted(arena.lengths)
    assert arena.by_size == sorted((n, s) for s, n in arena.lengths.items())
    for start, n in arena.lengths.items():  # each range's touched pages, kept as a count
        count = arena.touched.count(1, start // PAGE, (start + n) // PAGE)
        assert arena.dirty.get(start, 0) == count
    assert all(arena.dirty.values()), "a range without touched pages listed as dirty"
    assert set(arena.dirty) <= set(arena.lengths)
    assert arena.kept_sizes == sorted(arena.kept) and all(arena.kept.values())
    for start, _ in arena.live.items():  # a tile's (or kept buffer's) pages are all touched
        length = arena.live[start][0]
        assert arena.touched.count(0, start // PAGE, (start + length) // PAGE) == 0
    assert all(arena.ends[s + n] == s for s, n in arena.lengths.items())
    free_kinds = [kind for _, _, kind in spans]
    assert all(not (a == b == "free") for a, b in zip(free_kinds, free_kinds[1:])), "uncoalesced"
    assert arena.used == sum(-(-n // PAGE) * PAGE for _, n in live.values())
    assert arena.touched_bytes == arena.touched.count(1) * PAGE
    assert 0 <= arena.pooled <= arena.touched_bytes


def _pop_unharmed(live: dict, rng) -> np.ndarray:
    """A random live array, taken out of ``live``, that nobody wrote over."""
    key = list(live)[rng.integers(len(live))]
    array, _ = live.pop(key)
    assert array[0] == key % 251 and array[-1] == key % 251
    return array


def test_random_allocations_never_overlap_and_free_ranges_coalesce():
    rng = np.random.default_rng(0)
    arena = HostArena(64 * MiB)
    live: dict[int, tuple[np.ndarray, int]] = {}
    for step in range(600):
        if live and (rng.random() < 0.45 or arena.used > 100 * MiB):
            arena.free(_pop_unharmed(live, rng))
        else:
            n = int(rng.choice([128 << 10, 300 << 10, MiB, 3 * MiB + 5, 8 * MiB]))
            array = arena.allocate(n)
            if array is None:
                continue
            assert array.nbytes == n
            array[:] = step % 251
            live[step] = (array, n)
        if step % 50 == 0:
            arena.release()
        _check(arena, live)
    for array, _ in live.values():
        arena.free(array)
    assert arena.used == 0 and arena.starts == [0] and arena.lengths == {0: arena.size}


def test_kept_buffers_serve_their_size_as_they_are_and_drain_for_other_sizes():
    rng = np.random.default_rng(1)
    arena = HostArena(64 * MiB)
    live: dict[int, tuple[np.ndarray, int]] = {}
    sizes = [300 << 10, MiB, 3 * MiB + 5]
    for step in range(600):
        kept = [(a, n) for n, arrays in arena.kept.items() for a in arrays]
        roll = rng.random()
        if live and (roll < 0.45 or arena.used > 100 * MiB):
            array = _pop_unharmed(live, rng)
            arena.keep(array) if rng.random() < 0.7 else arena.free(array)
        else:
            n = int(rng.choice(sizes))
            held = {a.ctypes.data for a, m in kept if m == n}
            touched = arena.touched_bytes
            array = arena.reuse(n) if rng.random() < 0.5 else None
            if array is not None:  # a kept one of that size, no page made resident
                assert array.ctypes.data in held and arena.touched_bytes == touched
            else:
                array = arena.allocate(n)
            if array is None:
                continue
            assert array.nbytes == n
            array[:] = step % 251
            live[step] = (array, n)
        if step % 50 == 0:
            count = sum(len(arrays) for arrays in arena.kept.values())
            arena.release()  # one kept buffer back to the ranges first
            assert sum(len(arrays) for arrays in arena.kept.values()) == max(count - 1, 0)
        _check(arena, live, [(a, n) for n, arrays in arena.kept.items() for a in arrays])
    while arena._return_one() is not None:  # the kept buffers back to the ranges
        pass
    for array, _ in live.values():
        arena.free(array)
    assert arena.used == 0 and arena.starts == [0] and arena.lengths == {0: arena.size}


def test_a_tile_of_a_size_not_kept_is_cut_from_the_smallest_kept_buffer_that_holds_it():
    arena = HostArena(64 * MiB)
    tiles = [arena.allocate(n) for n in (5 * MiB, MiB, 3 * MiB, MiB, 8 * MiB, MiB)]
    for tile in tiles[0:5:2]:  # kept: 5, 3 and 8 MiB, each between live 1 MiB tiles
        arena.keep(tile)
    touched = arena.touched_bytes
    assert arena.fits(2 * MiB) and arena.kept_sizes == [3 * MiB, 5 * MiB, 8 * MiB]
    a = arena.allocate(2 * MiB)
    assert a.ctypes.data == tiles[2].ctypes.data  # the 3 MiB one; 5 and 8 MiB stay kept
    assert arena.kept_sizes == [5 * MiB, 8 * MiB] and arena.touched_bytes == touched
    b = arena.allocate(MiB)  # the 1 MiB left of the 3 MiB buffer: a resident free range
    assert b.ctypes.data == tiles[2].ctypes.data + 2 * MiB and len(arena.kept) == 2
    c = arena.allocate(6 * MiB)
    assert c.ctypes.data == tiles[4].ctypes.data and arena.kept_sizes == [5 * MiB]
    assert arena.touched_bytes == touched
    _check(
        arena,
        {i: (t, t.nbytes) for i, t in enumerate([a, b, c, *tiles[1:6:2]])},
        [(tiles[0], 5 * MiB)],
    )


def test_random_traffic_keeps_the_counts_equal_to_a_recount_and_contents_intact():
    rng = np.random.default_rng(2)
    arena = HostArena(64 * MiB)
    live: dict[int, tuple[np.ndarray, int]] = {}
    sizes = [128 << 10, 300 << 10, MiB, 1536 << 10, 3 * MiB + 5, 6 * MiB, 8 * MiB]
    for step in range(1500):
        roll = rng.random()
        if live and (roll < 0.4 or arena.used > 100 * MiB):
            array = _pop_unharmed(live, rng)
            arena.keep(array) if rng.random() < 0.6 else arena.free(array)
        elif roll < 0.93:
            n = int(rng.choice(sizes))
            array = arena.reuse(n) if rng.random() < 0.5 else None
            if array is None and (rng.random() < 0.5 or arena.fits(n)):
                array = arena.allocate(n)
            if array is None:
                continue
            array[:] = step % 251
            live[step] = (array, n)
        else:
            sizes_kept = list(arena.kept)
            arena.release(keep=sizes_kept[0] if sizes_kept else None)
        _check(arena, live, [(a, n) for n, arrays in arena.kept.items() for a in arrays])
    for array, _ in live.values():
        arena.free(array)
    while arena.release():  # the kept buffers go back first, then every page
        pass
    assert not arena.kept and arena.used == 0 and arena.touched_bytes == 0
    assert arena.lengths == {0: arena.size} and arena.dirty == {}


def test_a_kept_tile_comes_back_as_it_is_and_another_size_takes_its_pages():
    arena = HostArena(64 * MiB)
    a = arena.allocate(3 * MiB).view(np.float32).reshape(3, MiB // 4)
    keep = arena.allocate(MiB)  # after a: a's range does not merge with the untouched rest
    touched, used = arena.touched_bytes, arena.used
    arena.keep(a)
    assert arena.used == used - 3 * MiB and arena.pooled == touched - arena.used
    assert arena.fits(3 * MiB) and arena.reuse(MiB) is None
    b = arena.reuse(3 * MiB, np.dtype(np.float32), (3, MiB // 4))
    assert b is a and arena.used == used  # the tile's own array: no view made, nothing cut
    arena.keep(b)
    c = arena.reuse(3 * MiB, np.dtype(np.int16), (3 * MiB // 2,))  # another dtype: a view
    assert c.dtype == np.int16 and c.ctypes.data == a.ctypes.data
    arena.keep(c)
    del a, b, c
    # a tile of another size takes the kept buffer's resident pages, not fresh ones
    assert arena.plan(2 * MiB)[1] == 0 and not arena.kept
    d = arena.allocate(2 * MiB)
    assert arena.touched_bytes == touched
    arena.free(d), arena.free(keep)


def test_a_freed_range_serves_a_tile_of_another_size_in_resident_pages():
    arena = HostArena(64 * MiB)
    a = arena.allocate(6 * MiB)
    keep = arena.allocate(MiB)  # after a: a's range does not merge with the untouched rest
    touched = arena.touched_bytes
    arena.free(a)
    assert arena.pooled == touched - MiB
    assert arena.fits(1536 << 10)
    small = [arena.allocate(1536 << 10) for _ in range(4)]  # 4 x 1.5 MiB, resident first
    assert all(s is not None for s in small)
    assert arena.touched_bytes == touched  # no fresh page: all inside a's old range
    assert not arena.fits(8 * MiB)  # no resident range holds 8 MiB
    assert arena.plan(8 * MiB)[1] >= 8 * MiB - CHUNK
    del keep


def test_release_gives_the_pages_back_and_they_fault_in_zeroed():
    arena = HostArena(64 * MiB)
    a = arena.allocate(4 * MiB)
    a[:] = 7
    address = a.ctypes.data
    b = arena.allocate(4 * MiB)
    arena.free(a)
    del a
    before = arena.touched_bytes
    assert arena.release() >= 4 * MiB
    assert arena.touched_bytes <= before - 4 * MiB and arena.pooled >= 0
    again = arena.allocate(4 * MiB)  # best fit: the released range, the smallest that holds it
    assert again.ctypes.data == address
    assert not again.any()  # MADV_DONTNEED: fresh zero pages, not the sevens
    assert arena.touched_bytes == before
    b[:] = 1
    assert not again.any()


def test_a_range_still_viewed_is_freed_when_its_last_view_dies():
    arena = HostArena(64 * MiB)
    array = arena.allocate(2 * MiB)
    view = array.view(np.float32)[10:20]
    used = arena.used
    del array
    gc.collect()
    arena.collect()
    assert arena.used == used  # the view keeps the range
    del view
    gc.collect()
    arena.collect()
    assert arena.used == 0 and arena.starts == [0]


def test_an_array_freed_then_dropped_frees_nothing_more():
    arena = HostArena(64 * MiB)
    array = arena.allocate(2 * MiB)
    arena.free(array)
    again = arena.allocate(2 * MiB)  # the same range, live again
    assert again.ctypes.data == array.ctypes.data
    del array  # its weak reference went with ``free``: no callback queues the range now
    gc.collect()
    arena.collect()
    assert not arena.orphans and arena.used == 2 * MiB
    del again


def test_a_typed_array_is_freed_through_its_view_even_after_its_id_is_reused():
    arena = HostArena(64 * MiB)
    tile = arena.allocate(2 * MiB, dtype=np.dtype(np.float32)).reshape(512, 1024)
    assert tile.dtype == np.float32 and tile.base.size == MiB // 2
    dead = arena.allocate(2 * MiB)
    plan = arena.plan(MiB)
    del dead  # queued, not freed yet: the next array may take its id (CPython's do)
    later = arena.allocate(MiB, plan)
    arena.collect()  # frees the dead array's range, not the id's newer owner
    arena.free(tile), arena.free(later)
    assert arena.used == 0 and arena.starts == [0]


# The runtime-level tests below run the arena under a 64 MiB limit, a quarter of the
# smallest that gets one (``memory.ARENA_MIN``, 256 MiB, lowered here): the same tile sizes
# (2 MiB chunks and more) and the same live-to-limit ratios, on a quarter of the data. The
# real threshold is exercised by train/test_host_mem_limit.py's arena-size training run.
LIMIT = 64 * MiB


@pytest.fixture
def small_arena(monkeypatch):
    monkeypatch.setattr("numtile.runtime.memory.ARENA_MIN", LIMIT)


@pytest.mark.parametrize("arena", [True, False])
def test_training_shaped_traffic_under_a_limit_matches_numpy(
    tmp_path, monkeypatch, small_arena, arena
):
    # tiles of several sizes (8, 3 and 2 MiB) made and freed in turn under the limit, with
    # about twice that in live tensors: evicted, read back, results exact
    fresh = []
    original = host_malloc.huge_page_buffer
    monkeypatch.setattr(
        "numtile.runtime.memory_nodes.huge_page_buffer",
        lambda n: fresh.append(n) or original(n),
    )
    runtime = nt.init(ncpu=2, host_mem_limit=LIMIT, spill_dir=str(tmp_path), host_arena=arena)
    try:
        assert (runtime.manager.host.arena is not None) == arena
        rng = np.random.default_rng(3)
        a = rng.standard_normal((2048, 4096), dtype=np.float32)  # 32 MiB
        x = nt.from_numpy(a, tile_shape=(1024, 2048))  # 8 MiB tiles
        y = nt.from_numpy(a[:, :2560] * 0.5, tile_shape=(512, 1536))  # 3 MiB and 2 MiB
        expected_x, expected_y = a, a[:, :2560] * np.float32(0.5)
        for _ in range(3):  # each round: new tiles of both sizes, the old ones freed
            x = nt.astype(nt.astype(x, np.float64) * 0.5 + 1.0, np.float32)
            y = y * 2.0 - 1.0
            expected_x = (expected_x.astype(np.float64) * 0.5 + 1.0).astype(np.float32)
            expected_y = expected_y * np.float32(2.0) - np.float32(1.0)
        np.testing.assert_array_equal(x.to_numpy(), expected_x)
        np.testing.assert_array_equal(y.to_numpy(), expected_y)
        host = runtime.manager.counters()["nodes"]["host"]
        assert host["peak"] <= LIMIT and host["evictions"] > 0
        if arena:
            # the arena served every tile: no mapping of its own (small ones are malloc's)
            assert not [n for n in fresh if n >= host_malloc.MMAP_THRESHOLD]
            assert runtime.manager.host.arena.touched_bytes <= LIMIT
            assert host["reused"] > 0
        else:
            assert len(fresh) > 0
    finally:
        nt.init()


def test_tensors_spilled_from_an_arena_outlive_the_runtime(tmp_path, small_arena):
    # nt.init() brings spilled tiles home after the limit is lifted: not into the arena's
    # accounting any more, and the values intact
    nt.init(ncpu=2, host_mem_limit=LIMIT, spill_dir=str(tmp_path))
    try:
        rng = np.random.default_rng(5)
        arrays = [rng.standard_normal((1024, 2048), dtype=np.float32) for _ in range(5)]
        inputs = [nt.from_numpy(a, tile_shape=(1024, 1024)) for a in arrays]  # 40 MiB
        tensors = [x * 3.0 for x in inputs]  # as much again: more than the limit
        nt.wait_all()
        counters = nt.get_runtime().manager.counters()
        assert counters["spill"]["writes"] > 0 and nt.get_runtime().manager.host.arena
        nt.init()  # the old runtime closes and brings every tile back
        for array, x, tensor in zip(arrays, inputs, tensors):
            np.testing.assert_array_equal(x.to_numpy(), array)
            np.testing.assert_array_equal(tensor.to_numpy(), array * np.float32(3.0))
    finally:
        nt.init()


def test_a_refused_reservation_leaves_the_pool_in_charge(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError(12, "Cannot allocate memory")

    monkeypatch.setattr("numtile.runtime.arena.TileMapping", refuse)
    runtime = nt.init(ncpu=2, host_mem_limit=256 * MiB, spill_dir=str(tmp_path))
    try:
        assert runtime.manager.host.arena is None
        x = nt.from_numpy(np.arange(1 << 22, dtype=np.float32), tile_shape=(1 << 20,))
        np.testing.assert_array_equal((x * 2.0).to_numpy(), np.arange(1 << 22) * 2.0)
    finally:
        nt.init()
