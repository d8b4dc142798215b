"""The memory manager's bookkeeping against a brute-force recount, after random task traffic."""

from __future__ import annotations

import collections
import gc

import numpy as np

import numtile.runtime.handle as handle_module
from numtile.runtime import Access, Codelet, DataHandle
from numtile.runtime.handle import DISK, HOST
from numtile.runtime.memory import MemoryManager
from numtile.runtime.task import Task

MiB = 1 << 20


def _recount(manager: MemoryManager, held: list, sizes: dict, scratch: dict) -> None:
    """Pins, pinned bytes, used bytes and the LRU set equal what the outstanding tasks and
    the live tiles say they must be."""
    manager.counters()  # forgets the dead tiles first
    state = manager.nodes[HOST]
    expected = collections.Counter(h.id for pins in held for h, _ in pins)
    assert state.pins == dict(expected)  # no entry left at zero
    held_scratch = sum(scratch[id(pins)] for pins in held)
    assert state.pinned_bytes == sum(sizes[i] for i in expected) + held_scratch
    assert state.used == sum(sizes[i] for i in state.lru) + held_scratch
    assert state.used + state.pooled <= state.peak
    for ref in state.lru.values():
        tile = ref()
        assert tile is not None and HOST in tile.replicas  # reaped: only live host replicas
    for pins in held:  # a pinned tile stays on host
        assert all(HOST in h.replicas for h, _ in pins)


def test_pins_and_bytes_match_a_recount_after_random_traffic(tmp_path):
    rng = np.random.default_rng(7)
    manager = MemoryManager(64 * MiB, str(tmp_path), [], arena=False)
    previous = handle_module.MANAGER
    handle_module.set_manager(manager)
    plain = Codelet("plain", kernel=lambda ops, *tiles: None)
    with_scratch = Codelet("scratch", kernel=lambda ops, *tiles: None, scratch=lambda *t: MiB)
    try:
        tiles: list[DataHandle] = []
        sizes: dict[int, int] = {}
        held: list = []
        scratch: dict[int, int] = {}
        for step in range(400):
            roll = rng.random()
            if roll < 0.45 or not tiles:  # a task writing a new tile from older ones
                out = DataHandle((int(rng.choice([64, 256, 768])), 1024), np.float32)
                sizes[out.id] = out.nbytes
                count = min(len(tiles), int(rng.integers(0, 3)))
                inputs = [tiles[i] for i in rng.integers(0, len(tiles), count)] if count else []
                handles = [*inputs, *inputs[:1], out]  # a tile twice: pinned once
                modes = [Access.R] * (len(handles) - 1) + [Access.W]
                codelet = with_scratch if rng.random() < 0.3 else plain
                task = Task(codelet, handles, modes, (), 0, step, None)
                got = manager.acquire(task, HOST, wait=False)
                if got is None:  # held tasks pin too much for it: refused, not waited for
                    continue
                buffers, pins = got
                for tile, buffer in zip(handles[:-1], buffers):  # read back as written
                    assert buffer.reshape(-1)[0] == tile.id % 1000
                buffers[-1][...] = out.id % 1000
                scratch[id(pins)] = MiB if codelet is with_scratch else 0
                held.append(pins)
                tiles.append(out)
            elif roll < 0.75 and held:
                pins = held.pop(int(rng.integers(len(held))))
                manager.release(pins)
            elif roll < 0.9:
                del tiles[int(rng.integers(len(tiles)))]  # dies (unless a task holds it)
            else:
                manager.evict_early(tiles[int(rng.integers(len(tiles)))])
            if len(held) > 4:
                manager.release(held.pop(0))
            _recount(manager, held, sizes, scratch)
        assert manager.nodes[HOST].evictions > 0 and manager.spilled  # the limit was reached
        assert any(DISK in tile.replicas for tile in tiles)
        for pins in held:
            manager.release(pins)
        held.clear()
        _recount(manager, held, sizes, scratch)
        assert manager.nodes[HOST].pinned_bytes == 0
    finally:
        handle_module.set_manager(previous)
        manager.close()


def test_a_new_manager_collects_garbage_only_with_unmanaged_tiles_to_adopt(tmp_path, monkeypatch):
    # a full collection costs ~1 s in a heap of 650k objects: none where nothing is adopted
    previous = handle_module.MANAGER
    managers = [MemoryManager(64 * MiB, str(tmp_path), [], arena=False) for _ in range(3)]
    collections_run = []
    real_collect = gc.collect
    monkeypatch.setattr(gc, "collect", lambda *a: collections_run.append(a) or real_collect(*a))
    try:
        handle_module.set_manager(managers[0])  # adopts what earlier tests left alive
        handle_module.set_manager(None)
        collections_run.clear()
        handle_module.set_manager(managers[1])
        assert collections_run == []
        handle_module.set_manager(None)
        kept = DataHandle((256, 1024), np.float32, np.ones((256, 1024), np.float32))
        cycle = [DataHandle((512, 1024), np.float32, np.ones((512, 1024), np.float32))]
        cycle.append(cycle)  # garbage that only the collector frees
        del cycle
        handle_module.set_manager(managers[2])
        assert len(collections_run) == 1
        assert managers[2].nodes[HOST].used == kept.nbytes  # the live tile, not the cycle's
    finally:
        handle_module.set_manager(previous)
        for manager in managers:
            manager.close()
