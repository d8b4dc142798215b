"""The runtime against sequential execution: random task graphs under every scheduler."""

import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numtile.config import Config
from numtile.runtime import Access, Codelet, DataHandle, InvalidatedError, Runtime

R, W, RW, ACC = Access.R, Access.W, Access.RW, Access.ACCUMULATE
SCHEDULERS = ["eager", "dmda", "sync"]


def _jitter(k):
    if k % 3 == 0:
        time.sleep(2e-5 * (k % 5))  # vary timings so interleavings differ between runs


# int64 arithmetic wraps modulo 2**64, so accumulation order cannot change the result
def _affine(x, a, b):
    _jitter(a)
    x *= a
    x += b


def _copy_add(src, dst, c):
    _jitter(c)
    np.add(src, c, out=dst)


def _mix(a, b, c, k):
    _jitter(k)
    c += a * b - k


def _accumulate(src, dst, k):
    _jitter(k)
    dst += src * k


def _host(function):
    """A CPU implementation of ``function(*tiles, *args)``, which needs no ops namespace."""
    return {"cpu": lambda ops, *arguments: function(*arguments)}


KERNELS = {
    "affine": (Codelet("test_affine", implementations=_host(_affine)), (RW,), _affine),
    "copy_add": (Codelet("test_copy_add", implementations=_host(_copy_add)), (R, W), _copy_add),
    "mix": (Codelet("test_mix", implementations=_host(_mix)), (R, R, RW), _mix),
    "accumulate": (
        Codelet("test_accumulate", implementations=_host(_accumulate)),
        (R, ACC),
        _accumulate,
    ),
}


@st.composite
def task_graphs(draw):
    nhandles = draw(st.integers(3, 6))
    tasks = []
    for _ in range(draw(st.integers(1, 40))):
        kind = draw(st.sampled_from(sorted(KERNELS)))
        arity = len(KERNELS[kind][1])
        handles = draw(
            st.lists(st.integers(0, nhandles - 1), min_size=arity, max_size=arity, unique=True)
        )
        scalars = tuple(draw(st.integers(1, 7)) for _ in range(2 if kind == "affine" else 1))
        tasks.append((kind, handles, scalars))
    return nhandles, tasks


def _initial(nhandles):
    return [np.arange(4, dtype=np.int64) + 10 * i for i in range(nhandles)]


def _sequential(nhandles, tasks):
    data = _initial(nhandles)
    for kind, handles, scalars in tasks:
        KERNELS[kind][2](*[data[h] for h in handles], *scalars)
    return data


@pytest.fixture(params=SCHEDULERS)
def runtime(request, tmp_path):
    rt = Runtime(Config(ncpu=3, scheduler=request.param, cache_dir=str(tmp_path)))
    yield rt
    rt.shutdown()


@settings(max_examples=40, deadline=None)
@given(graph=task_graphs())
@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_random_graphs_match_sequential_execution(scheduler, graph):
    nhandles, tasks = graph
    rt = Runtime(Config(ncpu=3, scheduler=scheduler, cache_dir=None))
    try:
        handles = [DataHandle((4,), np.int64, d) for d in _initial(nhandles)]
        for kind, indices, scalars in tasks:
            codelet, modes, _ = KERNELS[kind]
            rt.submit(codelet, [(handles[i], m) for i, m in zip(indices, modes)], scalars)
        rt.wait_all()
        expected = _sequential(nhandles, tasks)
        for handle, ref in zip(handles, expected):
            np.testing.assert_array_equal(handle.host_array(), ref)
    finally:
        rt.shutdown()


def test_write_after_read_waits_for_the_reader(runtime):
    """A W task must not overwrite data that an earlier, still running, R task reads."""
    release = threading.Event()
    seen = []
    reader = Codelet(
        "test_blocked_reader",
        implementations={"cpu": lambda ops, x: (release.wait(5), seen.append(x.copy()))},
    )
    writer = Codelet("test_overwrite", implementations={"cpu": lambda ops, x: x.fill(-1)})
    h = DataHandle((2,), np.float64, np.ones(2))
    rt = runtime
    if rt.scheduler.inline:
        release.set()
    rt.submit(reader, [(h, R)])
    rt.submit(writer, [(h, W)])
    time.sleep(0.05)
    release.set()
    rt.wait_all()
    np.testing.assert_array_equal(seen[0], np.ones(2))
    np.testing.assert_array_equal(h.host_array(), -np.ones(2))


def test_independent_reads_run_concurrently(tmp_path):
    """Two readers of one handle are both running at the same time (no false dependency)."""
    rt = Runtime(Config(ncpu=2, scheduler="eager", cache_dir=str(tmp_path)))
    barrier = threading.Barrier(2, timeout=5)
    reader = Codelet("test_barrier_reader", implementations={"cpu": lambda ops, x: barrier.wait()})
    h = DataHandle((1,), np.float64, np.zeros(1))
    rt.submit(reader, [(h, R)])
    rt.submit(reader, [(h, R)])
    rt.wait_all()  # a BrokenBarrierError here would mean the readers were serialised
    rt.shutdown()


def test_accumulate_tasks_are_mutually_exclusive(runtime):
    def slow_increment(ops, x):
        value = x[0]
        time.sleep(1e-4)
        x[0] = value + 1

    inc = Codelet("test_slow_increment", implementations={"cpu": slow_increment})
    h = DataHandle((1,), np.float64, np.zeros(1))
    for _ in range(50):
        runtime.submit(inc, [(h, ACC)])
    runtime.wait_all()
    assert h.host_array()[0] == 50


def test_accumulations_of_another_codelet_wait_for_the_open_group(tmp_path):
    """Copied pieces of a tile (one codelet) commute; a sum into that tile (another codelet)
    must wait for all of them: a piece copied after the sum would overwrite it (the race
    that made a gradient wrong one run in ten)."""
    from numtile.runtime.task import TaskState

    rt = Runtime(Config(ncpu=1, scheduler="eager", cache_dir=str(tmp_path)))
    release = threading.Event()

    def piece(ops, x, k):
        release.wait(10)
        x[k] = 10.0 * (k + 1)

    copy = Codelet("test_copy_piece", implementations={"cpu": piece})
    plus = Codelet("test_plus_one", implementations={"cpu": lambda ops, x: x.__iadd__(1.0)})
    h = DataHandle((2,), np.float64, np.zeros(2))
    pieces = [rt.submit(copy, [(h, ACC)], (k,)) for k in range(2)]
    total = rt.submit(plus, [(h, ACC)])
    more = rt.submit(plus, [(h, ACC)])  # the same codelet again: joins the sum's group
    assert total.state is TaskState.WAITING and more.state is TaskState.WAITING
    assert pieces[1].state is not TaskState.WAITING  # pieces of one codelet do not wait
    release.set()
    rt.wait_all()
    np.testing.assert_array_equal(h.host_array(), [12.0, 22.0])
    rt.shutdown()


def test_wait_handles_waits_only_for_needed_tasks(tmp_path):
    rt = Runtime(Config(ncpu=2, scheduler="eager", cache_dir=str(tmp_path)))
    release = threading.Event()
    slow = Codelet("test_slow", implementations={"cpu": lambda ops, x: release.wait(10)})
    fill = Codelet("test_fill7", implementations={"cpu": lambda ops, x: x.fill(7)})
    a = DataHandle((1,), np.float64, np.zeros(1))
    b = DataHandle((1,), np.float64, np.zeros(1))
    task = rt.submit(slow, [(a, RW)])
    rt.submit(fill, [(b, W)])
    rt.wait_handles([b])
    assert b.host_array()[0] == 7
    assert not task.finished  # still blocked: wait_handles did not wait for it
    release.set()
    rt.wait_all()
    assert task.finished
    rt.shutdown()


def test_invalidate_keeps_data_for_earlier_readers_then_refuses_reads(runtime):
    seen = []
    reader = Codelet(
        "test_record_reader", implementations={"cpu": lambda ops, x: seen.append(x.sum())}
    )
    h = DataHandle((3,), np.float64, np.ones(3))
    runtime.submit(reader, [(h, R)])
    runtime.invalidate(h)
    with pytest.raises(InvalidatedError):
        runtime.submit(reader, [(h, R)])
    runtime.wait_all()
    assert seen == [3.0]
    assert h.replicas == {}  # memory released
    with pytest.raises(InvalidatedError):
        runtime.wait_handles([h])
    refill = Codelet("test_refill", implementations={"cpu": lambda ops, x: x.fill(2)})
    runtime.submit(refill, [(h, W)])  # a write makes the handle valid again
    runtime.wait_handles([h])
    np.testing.assert_array_equal(h.host_array(), [2, 2, 2])


def test_priorities_order_ready_tasks(tmp_path):
    """With one worker, queued tasks run highest priority first."""
    rt = Runtime(Config(ncpu=1, scheduler="eager", cache_dir=str(tmp_path)))
    release = threading.Event()
    order = []
    block = Codelet("test_block", implementations={"cpu": lambda ops, x: release.wait(5)})
    record = Codelet("test_record", implementations={"cpu": lambda ops, x, tag: order.append(tag)})
    rt.submit(block, [(DataHandle((1,), np.float64, np.zeros(1)), RW)])
    for tag, priority in [("low", 0), ("high", 5), ("mid", 2)]:
        rt.submit(record, [(DataHandle((1,), np.float64, np.zeros(1)), RW)], (tag,), priority)
    release.set()
    rt.wait_all()
    assert order == ["high", "mid", "low"]
    rt.shutdown()
