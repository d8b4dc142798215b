"""Tests for numtile/tiletensor/reduction.py (and the norms in tiletensor/linalg/norms.py)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import numtile as nt

REDUCTIONS = ["sum", "mean", "max", "min", "prod"]
AXES = [None, 0, 1, 2, -1, -3, (0, 1), (1, 2), (0, 2), (-1, 0), (0, 1, 2), ()]
TILINGS = [(2, 3, 2), (3, 4, 5), (1, 1, 1), (3, 2, 4)]  # shape (3, 4, 5): leftovers, one tile, ones


def _reference(name, a, axis, keepdims):
    return getattr(np, name)(a, axis=axis, keepdims=keepdims)


def _data(dtype, make_array, name):
    a = make_array((3, 4, 5), dtype, seed=21, low=-3, high=4)
    if name == "prod" and np.dtype(dtype).kind == "f":
        a = (np.sign(a) * (0.8 + 0.4 * np.abs(np.tanh(a)))).astype(dtype)  # no under/overflow
    return a


@pytest.mark.parametrize("name", REDUCTIONS)
@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_reductions_match_numpy(name, axis, keepdims, dtype, make_array, check_tiles):
    a = _data(dtype, make_array, name)
    x = nt.from_numpy(a, tile_shape=(2, 3, 2))
    expected = _reference(name, a, axis, keepdims)
    tolerance = 1e-5 if dtype == np.float32 else 1e-12
    check_tiles(
        getattr(nt, name)(x, axis=axis, keepdims=keepdims), expected, rtol=tolerance, atol=tolerance
    )
    check_tiles(
        getattr(x, name)(axis=axis, keepdims=keepdims), expected, rtol=tolerance, atol=tolerance
    )


@pytest.mark.parametrize("name", REDUCTIONS)
@pytest.mark.parametrize("tile_shape", TILINGS)
@pytest.mark.parametrize("axis", [None, 1, (0, 2)])
def test_reductions_any_tiling(name, tile_shape, axis, make_array, check_tiles):
    a = _data(np.float64, make_array, name)
    out = getattr(nt, name)(nt.from_numpy(a, tile_shape=tile_shape), axis=axis)
    check_tiles(out, _reference(name, a, axis, False))


def test_reductions_under_each_scheduler(scheduler, make_array, check_tiles):
    a = make_array((7, 9), np.float64, seed=2)
    x = nt.from_numpy(a, tile_shape=(2, 4))
    check_tiles(nt.sum(x, axis=0), a.sum(axis=0))
    check_tiles(nt.max(x), a.max())
    check_tiles(nt.mean(x, axis=1, keepdims=True), a.mean(axis=1, keepdims=True))


def test_result_dtypes():
    ints = nt.arange(10, tile_shape=3)
    bools = nt.from_numpy(np.array([True, False, True]), tile_shape=2)
    floats32 = nt.ones((4,), dtype=np.float32, tile_shape=3)
    assert nt.sum(ints).dtype == np.int64
    assert nt.prod(ints).dtype == np.int64
    assert nt.mean(ints).dtype == np.float64
    assert nt.sum(bools).dtype == np.int64
    assert nt.sum(floats32).dtype == np.float32
    assert nt.mean(floats32).dtype == np.float32
    assert nt.max(ints).dtype == np.int64


@pytest.mark.parametrize("name", ["sum", "mean"])
def test_sum_and_mean_of_integers_are_exact(name, check_tiles):
    a = np.arange(-7, 20).reshape(3, 9)
    x = nt.from_numpy(a, tile_shape=(2, 4))
    check_tiles(getattr(nt, name)(x, axis=1), getattr(np, name)(a, axis=1))
    check_tiles(getattr(nt, name)(x), getattr(np, name)(a))


def test_integer_sum_does_not_go_through_floats(check_tiles):
    big = 2**53 + 1  # not representable in float64
    a = np.array([big, 1, 1, 1])
    check_tiles(nt.sum(nt.from_numpy(a, tile_shape=3)), a.sum())


def test_sum_with_dtype(check_tiles):
    a = np.arange(7)
    check_tiles(nt.sum(nt.from_numpy(a, tile_shape=3), dtype=np.float32), a.sum(dtype=np.float32))


def test_bool_reductions(check_tiles):
    a = np.array([[True, False, True], [True, True, False]])
    x = nt.from_numpy(a, tile_shape=(1, 2))
    check_tiles(nt.sum(x, axis=0), a.sum(axis=0))
    check_tiles(nt.sum(x), a.sum())


def test_max_min_propagate_nan_like_numpy(check_tiles):
    a = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, 6.0]])
    x = nt.from_numpy(a, tile_shape=(1, 2))
    check_tiles(nt.max(x, axis=1), a.max(axis=1))
    check_tiles(nt.min(x, axis=1), a.min(axis=1))


@pytest.mark.parametrize("position", [0, 1, 4])
def test_max_min_and_norms_propagate_nan_wherever_it_is(position, check_tiles):
    a = np.arange(5.0)
    a[position] = np.nan
    x = nt.from_numpy(a, tile_shape=2)
    check_tiles(nt.max(x), np.max(a))
    check_tiles(nt.min(x), np.min(a))
    check_tiles(nt.sum(x), np.sum(a))
    check_tiles(nt.linalg.vector_norm(x, ord=np.inf), np.linalg.norm(a, ord=np.inf))
    check_tiles(nt.linalg.vector_norm(x), np.linalg.norm(a))


def test_reductions_of_0d_tensors(check_tiles):
    x = nt.from_numpy(np.float64(2.5))
    check_tiles(nt.sum(x), np.float64(2.5))
    check_tiles(nt.max(x, keepdims=True), np.array(2.5))
    check_tiles(nt.mean(x, axis=()), np.float64(2.5))


def test_reductions_over_empty_axes(check_tiles):
    a = np.zeros((0, 3))
    x = nt.zeros((0, 3), tile_shape=(2, 2))
    check_tiles(nt.sum(x), a.sum())
    check_tiles(nt.sum(x, axis=0), a.sum(axis=0))
    check_tiles(nt.prod(x, axis=0), a.prod(axis=0))
    check_tiles(nt.sum(x, axis=1), a.sum(axis=1))
    check_tiles(nt.max(x, axis=1), a.max(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        check_tiles(nt.mean(x, axis=0), np.full(3, np.nan))


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_of_an_empty_axis_is_a_value_error(name):
    with pytest.raises(ValueError, match="empty"):
        getattr(nt, name)(nt.zeros((0, 3), tile_shape=(2, 2)), axis=0)


@pytest.mark.parametrize("axis", [2, -3, (0, 2)])
def test_out_of_bounds_axis_is_a_value_error(axis):
    with pytest.raises(ValueError, match="out of bounds"):
        nt.sum(nt.ones((2, 3), tile_shape=(1, 2)), axis=axis)


def test_axis_minus_1_on_a_0d_tensor_is_a_value_error():
    with pytest.raises(ValueError, match="out of bounds"):
        nt.sum(nt.from_numpy(np.float64(1.0)), axis=-1)


def test_repeated_axis_is_a_value_error():
    with pytest.raises(ValueError, match="repeated"):
        nt.sum(nt.ones((2, 3)), axis=(1, -1))


def test_non_integer_axis_is_a_type_error():
    with pytest.raises(TypeError):
        nt.sum(nt.ones((2, 3)), axis=1.0)


def test_axis_0_on_a_0d_tensor_is_a_value_error():
    with pytest.raises(ValueError, match="out of bounds"):
        nt.sum(nt.from_numpy(np.float64(1.0)), axis=0)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_sum_and_max_any_shape_tiling_axes(data, make_array, check_tiles):
    shape = tuple(data.draw(st.lists(st.integers(1, 6), min_size=1, max_size=4), label="shape"))
    tiles = tuple(data.draw(st.integers(1, s)) for s in shape)
    ndim = len(shape)
    axis_strategy = st.lists(st.integers(-ndim, ndim - 1), unique_by=lambda a: a % ndim)
    axes = data.draw(axis_strategy, label="axes")
    keepdims = data.draw(st.booleans(), label="keepdims")
    a = make_array(shape, np.float64, seed=5)
    x = nt.from_numpy(a, tile_shape=tiles)
    axis = tuple(axes)
    check_tiles(nt.sum(x, axis=axis, keepdims=keepdims), a.sum(axis=axis, keepdims=keepdims))
    check_tiles(nt.max(x, axis=axis, keepdims=keepdims), a.max(axis=axis, keepdims=keepdims))


# --- norms ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("ord", [2, 1, np.inf, -np.inf, 3, 0.5])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape, tile_shape", [((11,), (4,)), ((11,), (11,)), ((5,), (1,))])
def test_vector_norm_matches_numpy(ord, dtype, shape, tile_shape, make_array, check_tiles):
    a = make_array(shape, dtype, seed=8)
    out = nt.linalg.vector_norm(nt.from_numpy(a, tile_shape=tile_shape), ord=ord)
    expected = np.asarray(np.linalg.norm(a.astype(np.float64), ord=ord), dtype)
    check_tiles(out, expected, rtol=1e-5 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("ord", [2, 1, np.inf, -np.inf, 3])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_vector_norm_over_an_axis(ord, axis, keepdims, make_array, check_tiles):
    a = make_array((5, 7), np.float64, seed=9)
    out = nt.linalg.vector_norm(
        nt.from_numpy(a, tile_shape=(2, 3)), axis=axis, keepdims=keepdims, ord=ord
    )
    check_tiles(out, np.linalg.norm(a, ord=ord, axis=axis, keepdims=keepdims))


def test_vector_norm_over_all_axes_of_a_matrix(make_array, check_tiles):
    a = make_array((5, 7), np.float64, seed=10)
    out = nt.linalg.vector_norm(nt.from_numpy(a, tile_shape=(2, 3)))
    check_tiles(out, np.linalg.norm(a.ravel()))


@pytest.mark.parametrize("ord", ["fro", 1, np.inf])
@pytest.mark.parametrize("tile_shape", [(2, 3), (5, 7), (1, 1)])
def test_matrix_norm_matches_numpy(ord, tile_shape, make_array, check_tiles):
    a = make_array((5, 7), np.float64, seed=11)
    out = nt.linalg.matrix_norm(nt.from_numpy(a, tile_shape=tile_shape), ord=ord)
    check_tiles(out, np.linalg.norm(a, ord=ord))


@pytest.mark.parametrize("ord", ["fro", 1, np.inf])
@pytest.mark.parametrize("keepdims", [False, True])
def test_matrix_norm_batched(ord, keepdims, make_array, check_tiles):
    a = make_array((3, 4, 5), np.float64, seed=12)
    out = nt.linalg.matrix_norm(nt.from_numpy(a, tile_shape=(2, 3, 2)), ord=ord, keepdims=keepdims)
    check_tiles(out, np.linalg.norm(a, ord=ord, axis=(-2, -1), keepdims=keepdims))


def test_matrix_norm_errors():
    with pytest.raises(ValueError, match="2 axes"):
        nt.linalg.matrix_norm(nt.ones((3,)))
    with pytest.raises(ValueError, match="unsupported ord"):
        nt.linalg.matrix_norm(nt.ones((3, 3)), ord=3)  # (ord 2 is supported since issue 14)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    ("shape", "tile_shape", "axis"),
    [
        ((200, 10), (3, 4), 0),  # 67 row tiles into 3 column tiles: chains of several tiles
        ((200, 9), (7, 9), 0),  # one column tile: every chain accumulates into it
        ((5, 40, 6), (2, 3, 4), (0, 1)),  # two axes reduced, leftovers everywhere
        ((4, 30, 7), (3, 4, 2), 1),  # a middle axis: columns of each leading slice
        ((3, 8), (8, 8), 0),  # one tile
    ],
)
def test_column_sums_in_chains_match_numpy(shape, tile_shape, axis, dtype, make_array, check_tiles):
    a = make_array(shape, dtype, seed=5)
    x = nt.from_numpy(a, tile_shape=tile_shape)
    expected = a.astype(np.float64).sum(axis=axis).astype(dtype)
    tolerance = 1e-5 if dtype == np.float32 else 1e-12
    for _ in range(2):  # the second sum's tiles may come from the first's freed buffers
        check_tiles(nt.sum(x, axis=axis), expected, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("workers", [1, 3])
def test_column_sums_of_many_tiles_take_a_few_tasks_a_worker(workers, make_array, check_tiles):
    from numtile.runtime import get_runtime
    from numtile.runtime.trace import Tracer
    from numtile.tiletensor.reduction import TASKS_PER_WORKER

    nt.init(ncpu=workers)
    try:
        a = make_array((300, 12), np.float64, seed=6)
        x = nt.from_numpy(a, tile_shape=(2, 4))  # 150 x 3 tiles
        runtime = get_runtime()
        runtime.wait_all()
        runtime.tracer = tracer = Tracer(0.0)
        check_tiles(nt.sum(x, axis=0), a.sum(axis=0))
        runtime.tracer = None
        names = [event[1] for event in tracer.events]
        # no fill task: each column tile's first chain writes it
        assert names == ["reduce:sum_column_chain"] * len(names)
        assert len(names) == 3 * -(-TASKS_PER_WORKER * workers // 3)
    finally:
        nt.init()


def _events_of_row_tiles(make_array, seed, reductions):
    """The (a, trace events in submission order) of ``reductions(x, a)`` on 3 workers, x a
    (90, 9) float64 matrix in 45 row tiles (one output tile of a reduction over its rows)."""
    from numtile.runtime import get_runtime
    from numtile.runtime.trace import Tracer

    nt.init(ncpu=3)
    try:
        a = make_array((90, 9), np.float64, seed=seed)
        x = nt.from_numpy(a, tile_shape=(2, 9))
        runtime = get_runtime()
        runtime.wait_all()
        runtime.tracer = tracer = Tracer(0.0)
        reductions(x, a)
        runtime.tracer = None
        return sorted(tracer.events, key=lambda event: event[4])
    finally:
        nt.init()


def test_column_sums_into_fewer_tiles_than_workers_write_partials(make_array, check_tiles):
    def sums(x, a):
        for _ in range(2):  # the second sum's partials may come from the first's buffers
            check_tiles(nt.sum(x, axis=0), a.sum(axis=0))

    events = _events_of_row_tiles(make_array, 7, sums)
    *chains, last = events[len(events) // 2 :]
    # each chain writes a partial tile of its own (none waits for another's lock), and the
    # last task sums them into the result
    partials = [event[5][-1] for event in chains]
    assert len(set(partials)) == len(chains) > 1
    assert partials == last[5][:-1]


def test_reductions_into_fewer_tiles_than_workers_go_through_partials(make_array, check_tiles):
    def reductions(x, a):
        check_tiles(nt.max(x, axis=0), a.max(axis=0))
        np.testing.assert_array_equal(nt.all(x > -1, axis=0).to_numpy(), (a > -1).all(axis=0))

    events = _events_of_row_tiles(make_array, 8, reductions)
    tasks = [event for event in events if event[1] == "reduce:max"]
    # the 45 tiles take turns into 6 partial tiles (not one tile, one task at a time), then 6
    # tasks combine the partials into the result
    partials = [event[5][-1] for event in tasks[:45]]
    assert len(tasks) == 45 + 6 and len(set(partials)) == 6
    assert [event[5][0] for event in tasks[45:]] == partials[:6]
