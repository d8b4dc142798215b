"""Bad runtime settings fail with the value and what was expected; a host memory limit
holds for tensors made before the runtime started, and the peak stays under it (issue 9,
item 8)."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

import numtile as nt
from numtile.runtime import Access, DataHandle
from tests.faults.helpers import host_codelet

MiB = 1 << 20


@pytest.mark.parametrize(
    ("settings", "error", "pattern"),
    [
        ({"ncpu": "2"}, TypeError, r"ncpu \(NUMTILE_NCPU\) must be an integer, got '2' \(str\)"),
        ({"ncpu": 2.5}, TypeError, r"ncpu .* integer, got 2.5 \(float\)"),
        ({"ncpu": True}, TypeError, r"ncpu .* integer, got True \(bool\)"),
        ({"ncpu": 0}, ValueError, r"ncpu \(NUMTILE_NCPU\) must be >= 1, got 0"),
        ({"ncpu": 10**5}, ValueError, r"= 100000 is more than 64 worker threads per core"),
        ({"ncuda": "1"}, TypeError, r"ncuda \(NUMTILE_NCUDA\) must be an integer, got '1'"),
        ({"host_mem_limit": float("inf")}, ValueError, r"whole, finite number of bytes, got inf"),
        ({"host_mem_limit": 1.5}, ValueError, r"host_mem_limit .* got 1.5"),
        ({"host_mem_limit": "inf"}, ValueError, r"host_mem_limit: 'inf' is not a finite size"),
        ({"host_mem_limit": "nan"}, ValueError, r"'nan' is not a finite size"),
        ({"host_mem_limit": [1]}, TypeError, r"host_mem_limit .* got \[1\] \(list\)"),
    ],
)
def test_bad_init_settings_name_the_value(settings, error, pattern):
    with pytest.raises(error, match=pattern):
        nt.init(**settings)
    assert nt.get_runtime().config.ncpu >= 1  # the running runtime was kept


@pytest.mark.parametrize(
    ("variable", "value", "pattern"),
    [
        ("NUMTILE_NCPU", "100000", r"NUMTILE_NCPU\) = 100000 is more than 64"),
        ("NUMTILE_NCPU", "2.5", r"NUMTILE_NCPU='2.5' is not an integer"),
        ("NUMTILE_HOST_MEM_LIMIT", "inf", r"NUMTILE_HOST_MEM_LIMIT: 'inf' is not a finite size"),
        ("NUMTILE_HOST_MEM_LIMIT", "-1M", r"host_mem_limit must be a positive number of bytes"),
    ],
)
def test_bad_environment_settings_name_the_variable(monkeypatch, variable, value, pattern):
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValueError, match=pattern):
        nt.init()


def test_accepted_forms_of_the_settings():
    runtime = nt.init(ncpu=np.int64(1), host_mem_limit=2e6)
    assert runtime.ncpu == 1 and type(runtime.ncpu) is int
    assert runtime.config.host_mem_limit == 2_000_000
    nt.init()


def _chain(x, y, steps: int):
    z = x
    for _ in range(steps):
        z = nt.tanh(z @ y) * 2.0 - x
    return z


def _chain_numpy(a, b, steps: int):
    z = a
    for _ in range(steps):
        z = np.tanh(z @ b) * 2.0 - a
    return z


@pytest.mark.parametrize("scheduler", ["eager", "dmda"])
def test_tensors_made_before_the_runtime_count_against_its_limit(monkeypatch, tmp_path, scheduler):
    """The limit set by the environment, tensors made before anything started the runtime:
    they are counted (and spilled) from the start, so the peak stays under the limit in a
    chain whose working set is 4x the limit (it went 6% over: they were counted only when a
    task first touched them, without making room)."""
    nt.shutdown()
    monkeypatch.setenv("NUMTILE_HOST_MEM_LIMIT", "1MiB")
    monkeypatch.setenv("NUMTILE_SPILL_DIR", str(tmp_path))
    monkeypatch.setenv("NUMTILE_SCHEDULER", scheduler)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 256))  # 512 KiB each: the two fill the limit
    b = rng.standard_normal((256, 256))
    x = nt.from_numpy(a, tile_shape=(64, 128))
    y = nt.from_numpy(b, tile_shape=(128, 64))
    runtime = nt.init(ncpu=2)
    host = runtime.manager.counters()["nodes"]["host"]
    assert host["used"] == a.nbytes + b.nbytes  # adopted at start
    z = _chain(x, y, 2)
    w = z @ y + z
    expected = _chain_numpy(a, b, 2)
    np.testing.assert_allclose(w.to_numpy(), expected @ b + expected, rtol=1e-10, atol=1e-10)
    counters = runtime.manager.counters()
    assert counters["nodes"]["host"]["peak"] <= MiB
    assert counters["spill"]["writes"] > 0
    monkeypatch.delenv("NUMTILE_HOST_MEM_LIMIT")
    nt.init()
    assert os.listdir(tmp_path) == []  # spilled tiles came home, their files went


def test_tensors_kept_from_a_previous_runtime_count_too(tmp_path):
    nt.init()  # no limit: tiles computed here are nobody's accounting
    rng = np.random.default_rng(1)
    a = rng.standard_normal((256, 256))
    x = nt.from_numpy(a, tile_shape=(128, 128)) + 0.0  # computed, 128 KiB tiles
    x.wait()
    runtime = nt.init(ncpu=2, host_mem_limit=MiB // 2, spill_dir=str(tmp_path))
    counters = runtime.manager.counters()
    assert counters["nodes"]["host"]["used"] <= MiB // 2
    assert counters["transferred_bytes"].get("host->disk", 0) >= a.nbytes - MiB // 2
    np.testing.assert_array_equal(x.to_numpy(), a)
    nt.init()


def test_a_tile_made_while_tasks_hold_the_memory_waits_for_room(tmp_path):
    """from_numpy while running tasks pin every byte of the limit (a training loop loading
    the next batch): it waits for them instead of going over the limit."""
    shape = (128, 128)  # 128 KiB tiles, 4 under the limit
    tile = 128 * 128 * 8
    runtime = nt.init(ncpu=2, host_mem_limit=4 * tile, spill_dir=str(tmp_path))
    started = threading.Barrier(3)

    def slow_copy(x, y):
        started.wait(timeout=5)
        time.sleep(0.2)
        np.copyto(y, x)

    slow = host_codelet("test_slow_copy", slow_copy)
    sources = [DataHandle(shape, np.float64, np.full(shape, float(i))) for i in range(2)]
    targets = [DataHandle(shape, np.float64) for _ in range(2)]
    for x, y in zip(sources, targets):
        runtime.submit(slow, [(x, Access.R), (y, Access.W)])
    started.wait(timeout=5)  # both tasks run: their 4 tiles are pinned
    z = nt.from_numpy(np.ones(shape), tile_shape=shape)
    assert runtime.manager.counters()["nodes"]["host"]["peak"] <= 4 * tile
    runtime.wait_handles(targets)
    assert [float(y.host_array()[0, 0]) for y in targets] == [0.0, 1.0]
    np.testing.assert_array_equal(z.to_numpy(), 1.0)
    nt.init()
