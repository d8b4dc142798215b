"""The memory manager on host: a limit, LRU eviction to spill files, counters and errors."""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest

import numtile as nt
from numtile.runtime import Access, Codelet, DataHandle
from numtile.runtime.handle import DISK, HOST
from numtile.runtime.memory import OutOfMemoryError

pytestmark = pytest.mark.usefixtures("frozen_heap")

MiB = 1 << 20


@pytest.fixture
def limited(tmp_path):
    """A runtime whose host memory is limited to 1 MiB, spilling under ``tmp_path``."""

    def start(limit=MiB, scheduler="eager", ncpu=2):
        return nt.init(
            ncpu=ncpu, scheduler=scheduler, host_mem_limit=limit, spill_dir=str(tmp_path)
        )

    yield start
    nt.init()


@pytest.mark.parametrize("scheduler", ["eager", "dmda", "sync"])
def test_working_set_four_times_the_limit_matches_numpy(limited, tmp_path, scheduler):
    runtime = limited(scheduler=scheduler)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 256))  # 512 KiB each, 64 KiB tiles
    b = rng.standard_normal((256, 256))
    x = nt.from_numpy(a, tile_shape=(64, 128))
    y = nt.from_numpy(b, tile_shape=(128, 64))
    z = nt.tanh(x @ y) * 2.0 - x  # live: x, y, x@y, tanh, *2, result: 6 x 512 KiB = 3 MiB
    w = z @ y + z
    expected_z = np.tanh(a @ b) * 2.0 - a
    np.testing.assert_allclose(w.to_numpy(), expected_z @ b + expected_z, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(z.to_numpy(), expected_z, rtol=1e-10, atol=1e-10)
    counters = runtime.manager.counters()
    host = counters["nodes"]["host"]
    assert host["peak"] <= MiB
    assert host["evictions"] > 0
    assert counters["spill"]["writes"] > 0 and counters["spill"]["reads"] > 0
    assert counters["transferred_bytes"]["host->disk"] == counters["spill"]["bytes_written"]
    assert any(name.startswith("tile-") for name in os.listdir(tmp_path))
    waits = counters["spill"]["wait_seconds"]  # room is made by writes, which are waited for
    assert set(waits) <= {"room", "read", "admission"} and waits["room"] > 0


def test_mapped_tile_buffers_of_many_sizes_are_reused_and_results_match_numpy(limited):
    # tiles of 128 KiB to 2 MiB, each its own mapping under a limit (huge pages from 2 MiB),
    # evicted, read back and their buffers reused; element-wise steps are exact
    runtime = limited(limit=8 * MiB)
    a = np.random.default_rng(1).standard_normal((1024, 2048)).astype(np.float32)  # 8 MiB
    x = nt.from_numpy(a, tile_shape=(256, 512))  # 512 KiB tiles; bf16 256 KiB, float64 1 MiB
    expected = a
    for _ in range(3):
        x = nt.astype(nt.astype(x * 0.5, nt.bfloat16), np.float64) + 1.0
        x = nt.astype(x, np.float32) - nt.astype(x * 0.25, np.float32)
        e = expected * np.float32(0.5)
        e = e.astype(nt.bfloat16).astype(np.float64) + 1.0
        expected = e.astype(np.float32) - (e * 0.25).astype(np.float32)
    y = nt.from_numpy(a, tile_shape=(512, 1024))  # 2 MiB tiles: huge pages
    z = y * 2.0 + x
    np.testing.assert_array_equal(x.to_numpy(), expected)
    np.testing.assert_array_equal(z.to_numpy(), a * 2.0 + expected)
    counters = runtime.manager.counters()
    host = counters["nodes"]["host"]
    assert host["peak"] <= 8 * MiB and host["evictions"] > 0 and host["reused"] > 0
    assert counters["spill"]["reads"] > 0


@pytest.mark.parametrize("dtype", [nt.bfloat16, np.float16, np.complex64])
def test_tiles_of_any_dtype_spill_and_come_back_bit_for_bit(limited, dtype):
    runtime = limited()
    bits = np.random.default_rng(0).integers(0, 1 << 16, 1 << 19, dtype=np.uint16)
    data = bits.view(np.dtype(dtype))  # every pattern, NaNs included: 1 MiB, the limit
    x = nt.from_numpy(data, tile_shape=data.size // 8)
    y = nt.from_numpy(data.copy(), tile_shape=data.size // 8)  # pushes x's tiles to disk
    assert runtime.manager.counters()["spill"]["writes"] > 0
    np.testing.assert_array_equal(x.to_numpy().view(np.uint16), bits)
    np.testing.assert_array_equal(y.to_numpy().view(np.uint16), bits)
    assert runtime.manager.counters()["spill"]["reads"] > 0


def test_spill_files_and_accounting_go_with_dead_tensors(limited, tmp_path):
    runtime = limited()
    x = nt.from_numpy(np.arange(2 * 65536, dtype=np.float64), tile_shape=16384)  # 1 MiB
    y = nt.from_numpy(np.ones(2 * 65536), tile_shape=16384)  # pushes half of x to disk
    assert runtime.manager.counters()["spill"]["writes"] > 0
    np.testing.assert_array_equal((x + y).to_numpy(), np.arange(2 * 65536) + 1.0)
    del x, y
    gc.collect()
    assert runtime.manager.counters()["nodes"]["host"]["used"] <= 128 * 1024  # the sum's
    nt.wait_all()
    leftovers = [n for n in os.listdir(tmp_path) if n.startswith("tile-")]
    assert leftovers == []


def test_a_task_larger_than_the_limit_fails_at_submission(limited):
    limited(limit=256 * 1024)
    with pytest.raises(OutOfMemoryError, match=r"needs 512\.0 KiB .* limit \(256\.0 KiB\)"):
        nt.ones((256, 256), tile_shape=(256, 256)) + 1  # one 512 KiB tile


def test_the_largest_tile_is_checked_when_data_arrives(limited):
    limited(limit=256 * 1024)
    with pytest.raises(OutOfMemoryError, match="limit"):
        nt.from_numpy(np.ones((256, 256)), tile_shape=(256, 256))


def test_unwritable_spill_directory_fails_at_start(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    with pytest.raises(OSError, match="spill directory .* not writable"):
        nt.init(ncpu=1, host_mem_limit=MiB, spill_dir=str(blocked / "sub"))
    nt.init()


@pytest.mark.parametrize(
    "setting, message",
    [
        ({"restrict": "gpu"}, "unknown restrict value 'gpu'"),
        ({"host_mem_limit": 0}, "host_mem_limit must be a positive"),
        ({"host_mem_limit": "12 parsecs"}, "not a size in bytes"),
        ({"ncuda": 0, "restrict": "cuda"}, "asks for no GPU"),
        ({"colour": "red"}, "unknown setting"),
        ({"cuda_block": 2048}, "at most 1024 threads"),
    ],
)
def test_bad_settings_fail_at_start(setting, message):
    with pytest.raises((ValueError, TypeError), match=message):
        nt.init(ncpu=1, **setting)
    nt.init()


def test_environment_sizes_are_parsed(monkeypatch):
    from numtile.config import Config

    monkeypatch.setenv("NUMTILE_HOST_MEM_LIMIT", "1.5GiB")
    assert Config().host_mem_limit == 3 << 29
    monkeypatch.setenv("NUMTILE_HOST_MEM_LIMIT", "lots")
    with pytest.raises(ValueError, match="NUMTILE_HOST_MEM_LIMIT"):
        Config()


def test_invalidate_drops_spilled_copies_without_reading_them(limited, tmp_path):
    runtime = limited()
    x = nt.from_numpy(np.ones(4 * 65536), tile_shape=16384)  # 2 MiB: half on disk
    assert any(DISK in h.replicas for h in x.handles)
    reads = runtime.manager.counters()["spill"]["reads"]
    for handle in x.handles:
        runtime.invalidate(handle)
    nt.wait_all()
    assert all(not h.replicas for h in x.handles)
    assert runtime.manager.counters()["spill"]["reads"] == reads
    assert [n for n in os.listdir(tmp_path) if n.startswith("tile-")] == []
    assert runtime.manager.counters()["nodes"]["host"]["used"] == 0


def test_wont_use_puts_a_tile_first_in_line(limited):
    runtime = limited()
    x = nt.from_numpy(np.zeros(65536), tile_shape=16384)  # 4 tiles, 512 KiB
    handles = list(x.handles)
    last_used = handles[2]
    runtime.wont_use(last_used)
    nt.wait_all()
    assert next(iter(runtime.manager.nodes[HOST].lru)) == last_used.id
    y = nt.ones(5 * 16384, tile_shape=16384)  # needs one tile of room: the hinted one goes
    y.to_numpy()
    assert DISK in last_used.replicas and HOST not in last_used.replicas


def test_a_task_waits_for_memory_held_by_running_tasks(limited):
    """Two workers, each task needing most of the limit: they take turns instead of failing."""
    import threading

    runtime = limited(limit=3 * 64 * 1024, ncpu=2)
    running = []
    lock = threading.Lock()

    def work(ops, src, dst):
        with lock:
            running.append(1)
            assert len(running) == 1  # both tasks' tiles (4 x 64 KiB) never fit together
        np.multiply(src, 2, out=dst)
        with lock:
            running.pop()

    codelet = Codelet("test_memory_turns", implementations={"cpu": work})
    pairs = [
        (DataHandle((8192,), np.float64, np.full(8192, i, float)), DataHandle((8192,), np.float64))
        for i in range(4)
    ]
    for src, dst in pairs:
        runtime.submit(codelet, [(src, Access.R), (dst, Access.W)])
    nt.wait_all()
    for i, (_, dst) in enumerate(pairs):
        np.testing.assert_array_equal(dst.host_array(), 2.0 * i)


def test_summary_shows_memory_counters(limited):
    limited()
    x = nt.ones(4 * 65536, tile_shape=16384)
    (x * 2).to_numpy()
    text = nt.runtime_summary(file=open(os.devnull, "w"))
    assert "host" in text and "evictions" in text and "host->disk" in text


def test_trace_shows_transfers_on_their_own_rows(limited, tmp_path):
    import json

    limited()
    path = tmp_path / "trace.json"
    with nt.trace(str(path)):
        x = nt.ones(4 * 65536, tile_shape=16384)
        (x * 2).to_numpy()
    events = json.loads(path.read_text())["traceEvents"]
    rows = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert "copy host->disk" in rows
    assert any(e.get("cat") == "transfer" and e["args"]["bytes"] > 0 for e in events)


def test_tensors_outlive_a_limited_runtime(limited, tmp_path):
    limited()
    x = nt.from_numpy(np.arange(4 * 65536, dtype=np.float64), tile_shape=16384)  # half on disk
    y = x * 2.0
    y.wait()
    nt.init()  # the manager closes: spilled tiles come home, spill files go
    np.testing.assert_array_equal(x.to_numpy(), np.arange(4 * 65536))
    np.testing.assert_array_equal(y.to_numpy(), 2.0 * np.arange(4 * 65536))
    assert [n for n in os.listdir(tmp_path) if n.startswith("tile-")] == []


def test_the_manager_names_task_bytes_and_limit_when_a_task_cannot_fit(limited):
    from numtile.runtime.task import Task

    runtime = limited(limit=1000)
    task = Task(
        Codelet("test_probe", implementations={"cpu": lambda ops, x: None}),
        [DataHandle((200,), np.float64)],
        [Access.W],
        (),
        0,
        1,
        None,
    )
    with pytest.raises(OutOfMemoryError, match=r"'test_probe' \(#1\).* 1\.6 KiB on host .* 1000 B"):
        runtime.manager.acquire(task, HOST)


def _scratch_probe(seen, runtime, scratch):
    """A codelet doubling a tile that declares ``scratch`` bytes and records host's ``used``
    while it runs."""

    def work(ops, src, dst):
        seen.append(runtime.manager.counters()["nodes"]["host"]["used"])
        np.multiply(src, 2, out=dst)

    return Codelet(
        "test_scratch_probe", implementations={"cpu": work}, scratch=lambda src, dst: scratch
    )


def test_a_codelets_scratch_is_reserved_while_its_task_runs(limited):
    """Tiles of 16 KiB under a 256 KiB limit: 128 KiB of ballast fits beside the task's two
    tiles, but not beside them and its 160 KiB of scratch: ballast is evicted first."""
    runtime = limited(limit=256 * 1024, ncpu=1)
    ballast = nt.from_numpy(np.arange(8 * 2048, dtype=np.float64), tile_shape=2048)
    src = DataHandle((2048,), np.float64, np.full(2048, 3.0))
    dst = DataHandle((2048,), np.float64)
    ballast.wait()
    assert runtime.manager.counters()["nodes"]["host"]["evictions"] == 0
    seen = []
    runtime.submit(_scratch_probe(seen, runtime, 160 * 1024), [(src, Access.R), (dst, Access.W)])
    nt.wait_all()
    host = runtime.manager.counters()["nodes"]["host"]
    assert host["evictions"] >= 4 and runtime.manager.counters()["spill"]["writes"] >= 4
    assert 192 * 1024 <= seen[0] <= 256 * 1024 and host["peak"] <= 256 * 1024
    assert host["used"] == seen[0] - 160 * 1024  # the scratch is given back when it ends
    np.testing.assert_array_equal(dst.host_array(), 6.0)
    np.testing.assert_array_equal(ballast.to_numpy(), np.arange(8 * 2048))


def test_a_task_whose_scratch_cannot_fit_names_it(limited):
    runtime = limited(limit=256 * 1024, ncpu=1)
    src = DataHandle((2048,), np.float64, np.ones(2048))
    dst = DataHandle((2048,), np.float64)
    probe = _scratch_probe([], runtime, 240 * 1024)
    with pytest.raises(
        OutOfMemoryError,
        match=r"'test_scratch_probe' .* needs 272\.0 KiB for its tiles and scratch "
        r"\(240\.0 KiB of it scratch\), more than the memory limit \(256\.0 KiB\)",
    ):
        runtime.submit(probe, [(src, Access.R), (dst, Access.W)])
    from numtile.runtime.task import Task

    task = Task(probe, [src, dst], [Access.R, Access.W], (), 0, 1, None)
    with pytest.raises(OutOfMemoryError, match=r"240\.0 KiB of it scratch\) on host .* 256\.0"):
        runtime.manager.acquire(task, HOST)


@pytest.mark.parametrize("narrow", ["float16", "bfloat16"])
def test_narrow_float32_copies_are_scratch(limited, narrow):
    """exp of a 16 KiB 16-bit float tile, widened to float32 scratch, would need 64 KiB more:
    under 128 KiB, 64 KiB of ballast fits beside the two tiles but not beside such copies.
    bfloat16 and float16 tiles are read and written in registers (no scratch): nothing is
    evicted."""
    import ml_dtypes

    dtype = np.float16 if narrow == "float16" else ml_dtypes.bfloat16
    runtime = limited(limit=128 * 1024, ncpu=1)
    values = np.linspace(-4, 4, 8192).astype(dtype)
    x = nt.from_numpy(values, tile_shape=8192)
    ballast = nt.from_numpy(np.arange(8192, dtype=np.float64), tile_shape=2048)
    nt.wait_all()
    assert runtime.manager.counters()["nodes"]["host"]["evictions"] == 0
    expected = np.exp(values.astype(np.float32)).astype(dtype)
    np.testing.assert_array_equal(nt.exp(x).to_numpy(), expected)
    host = runtime.manager.counters()["nodes"]["host"]
    assert host["evictions"] == 0 and host["peak"] <= 96 * 1024
    np.testing.assert_array_equal(ballast.to_numpy(), np.arange(8192))


def test_tasks_whose_scratch_cannot_fit_together_take_turns(limited):
    import threading

    runtime = limited(limit=256 * 1024, ncpu=2)
    running, lock = [], threading.Lock()

    def work(ops, src, dst):
        with lock:
            running.append(1)
            assert len(running) == 1  # 2 x (32 KiB of tiles + 160 KiB of scratch) > 256 KiB
        np.multiply(src, 2, out=dst)
        with lock:
            running.pop()

    codelet = Codelet(
        "test_scratch_turns", implementations={"cpu": work}, scratch=lambda *_: 160 << 10
    )
    pairs = [
        (DataHandle((2048,), np.float64, np.full(2048, i, float)), DataHandle((2048,), np.float64))
        for i in range(4)
    ]
    for src, dst in pairs:
        runtime.submit(codelet, [(src, Access.R), (dst, Access.W)])
    nt.wait_all()
    for i, (_, dst) in enumerate(pairs):
        np.testing.assert_array_equal(dst.host_array(), 2.0 * i)
    assert runtime.manager.nodes[HOST].pinned_bytes == 0


def test_a_read_waits_for_the_room_a_running_task_holds(limited):
    """A running task's two tiles fill a two-tile limit: reading back a spilled third tile
    (``to_numpy`` while tasks run) waits for them instead of taking room the task counts on."""
    import threading

    from numtile.runtime.task import Task

    runtime = limited(limit=2 * 64 * 1024)
    values = [np.full(8192, float(i)) for i in range(3)]
    spilled, src, other = (DataHandle((8192,), np.float64, v.copy()) for v in values)
    dst = DataHandle((8192,), np.float64)
    codelet = Codelet("test_read_room", implementations={"cpu": lambda ops, s, d: None})
    task = Task(codelet, [src, dst], [Access.R, Access.W], (), 0, 1, None)
    buffers, pins = runtime.manager.acquire(task, HOST)  # the running task's tiles, pinned
    assert DISK in spilled.replicas and HOST not in spilled.replicas
    read, errors = [], []

    def reader():
        try:
            read.append(spilled.host_array().copy())
        except Exception as exc:  # without the wait: OutOfMemoryError, nothing to evict
            errors.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    thread.join(timeout=0.5)
    assert thread.is_alive() and not errors  # waiting for the task's room
    buffers[1][:] = 2 * buffers[0]
    runtime.manager.release(pins)
    thread.join(timeout=30)
    assert not errors and len(read) == 1
    np.testing.assert_array_equal(read[0], values[0])
    np.testing.assert_array_equal(dst.host_array(), 2 * values[1])
    np.testing.assert_array_equal(other.host_array(), values[2])
