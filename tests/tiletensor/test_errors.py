"""Tests for the errors the tensor layer raises: shapes, operand types, invalidation, shutdown."""

import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import numtile as nt


def finishes(function, seconds=10.0):
    """Run ``function`` in a thread; return ('value', v) or ('error', e), or fail if it hangs."""
    outcome = []

    def target():
        try:
            outcome.append(("value", function()))
        except BaseException as error:  # noqa: BLE001  (handed back to the test)
            outcome.append(("error", error))

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"{function} did not finish within {seconds} s (a hang)"
    return outcome[0]


def raises_within(error_type, function, match=None, seconds=10.0):
    kind, value = finishes(function, seconds)
    assert kind == "error", f"expected {error_type.__name__}, got the value {value!r}"
    assert isinstance(value, error_type), f"expected {error_type.__name__}, got {value!r}"
    if match is not None:
        assert match in str(value), f"{match!r} not in {value}"
    return value


# --- shapes ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "operation",
    [
        lambda x, y: x + y,
        lambda x, y: x - y,
        lambda x, y: x * y,
        lambda x, y: x / y,
        lambda x, y: x // y,
        lambda x, y: x % y,
        lambda x, y: x**y,
        lambda x, y: x < y,
        lambda x, y: x == y,
        nt.maximum,
        nt.logical_and,
    ],
)
@pytest.mark.parametrize(
    "shape_a, shape_b", [((2, 3), (4,)), ((2, 3), (3, 2)), ((5, 1, 3), (2, 4))]
)
def test_binary_shape_mismatch_names_both_shapes(operation, shape_a, shape_b):
    x = nt.ones(shape_a, tile_shape=(1,) * len(shape_a))
    y = nt.ones(shape_b)
    with pytest.raises(ValueError) as info:
        operation(x, y)
    assert str(shape_a) in str(info.value) and str(shape_b) in str(info.value)


@pytest.mark.parametrize(
    "shape_a, shape_b",
    [((2, 3), (2, 3)), ((4, 5), (4, 2)), ((2, 2, 3), (3, 3, 2)), ((2, 3, 4), (5, 4, 2))],
)
def test_matmul_shape_mismatch_names_both_shapes(shape_a, shape_b):
    with pytest.raises(ValueError) as info:
        nt.ones(shape_a) @ nt.ones(shape_b)
    assert str(shape_a) in str(info.value) and str(shape_b) in str(info.value)


def test_matmul_shape_mismatch_with_a_vector_names_the_given_shapes():
    with pytest.raises(ValueError) as info:
        nt.ones((4,)) @ nt.ones((3, 2))
    assert "(4,)" in str(info.value) and "(3, 2)" in str(info.value)


# --- operand types -----------------------------------------------------------------------------


@pytest.mark.parametrize("other", [np.ones(3), np.array(2.0)], ids=["array", "0-d array"])
def test_mixing_with_numpy_arrays_is_a_type_error(other):
    x = nt.ones((3,))
    with pytest.raises(TypeError, match="from_numpy"):
        x + other
    with pytest.raises(TypeError, match="from_numpy"):
        other + x
    with pytest.raises(TypeError, match="from_numpy"):
        nt.multiply(other, x)


@pytest.mark.parametrize(
    "other", [[1, 2, 3], "a", None, object()], ids=["list", "str", "None", "object"]
)
def test_unsupported_operands_are_type_errors(other):
    with pytest.raises(TypeError, match="unsupported operand"):
        nt.add(nt.ones((3,)), other)


def test_two_scalars_are_a_type_error():
    with pytest.raises(TypeError, match="TileTensor"):
        nt.add(1, 2)


def test_complex_scalar_promotes_and_unsupported_ops_name_complex():
    assert (nt.ones((3,)) + 1j).dtype == np.complex128
    with pytest.raises(TypeError, match="complex"):
        nt.maximum(nt.ones((3,)), 1j)


def test_out_of_range_integer_scalar_is_an_error():
    with pytest.raises(OverflowError):
        nt.arange(3) + 2**70


def test_negative_integer_power_of_integers_is_an_error():
    with pytest.raises(ValueError):
        (nt.arange(4) ** -1).to_numpy()


def test_tensors_are_not_hashable_and_not_ambiguous_as_bools():
    with pytest.raises(TypeError):
        hash(nt.ones((2,)))
    with pytest.raises(ValueError, match="size 1"):
        bool(nt.ones((2,)) == nt.ones((2,)))


# --- invalidated tensors -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "use",
    [
        lambda x: x.to_numpy(),
        lambda x: np.asarray(x),
        lambda x: x + 1,
        lambda x: 1 - x,
        lambda x: x * nt.ones((4, 4), tile_shape=(2, 2)),
        lambda x: nt.exp(x),
        lambda x: nt.sum(x, axis=0),
        lambda x: x @ x,
        lambda x: x.retile((4, 4)),
        lambda x: x.T,
        lambda x: x[1:3],
        lambda x: x[:2].to_numpy(),  # a view sharing the invalidated tiles
        lambda x: x.astype(np.float32),
        lambda x: x.wait(),
    ],
)
def test_using_an_invalidated_tensor_raises(use, scheduler):
    x = nt.ones((4, 4), tile_shape=(2, 2))
    x.invalidate()
    error = raises_within(nt.InvalidatedError, lambda: use(x))
    assert "invalidated" in str(error)
    # the runtime is fine afterwards
    assert finishes(nt.wait_all) == ("value", None)
    np.testing.assert_array_equal(finishes((nt.ones((2, 2)) + 1).to_numpy)[1], np.full((2, 2), 2.0))


def test_results_computed_before_invalidation_survive(check_tiles):
    x = nt.from_numpy(np.arange(16.0).reshape(4, 4), tile_shape=(2, 3))
    y = x * 2
    x.invalidate()
    check_tiles(y, np.arange(16.0).reshape(4, 4) * 2)
    check_tiles(nt.zeros_like(x), np.zeros((4, 4)))  # metadata is still usable


def test_invalidating_a_view_invalidates_the_shared_tiles_only():
    x = nt.from_numpy(np.arange(16.0).reshape(4, 4), tile_shape=(2, 2))
    x[:2].invalidate()  # shares the top row of tiles
    raises_within(nt.InvalidatedError, x.to_numpy)
    np.testing.assert_array_equal(x[2:].to_numpy(), np.arange(8.0, 16.0).reshape(2, 4))


def test_failed_submission_on_an_invalidated_operand_leaves_no_ghost_task():
    # in a subprocess: the bug makes wait_all hang for good
    script = textwrap.dedent(
        """
        import os, threading
        import numtile as nt
        a, b = nt.ones((4,), tile_shape=4), nt.ones((4,), tile_shape=4)
        b.invalidate()
        try:
            a + b
        except nt.InvalidatedError:
            pass
        a.invalidate()
        thread = threading.Thread(target=nt.wait_all, daemon=True)
        thread.start()
        thread.join(3)
        print("hang" if thread.is_alive() else "ok", flush=True)
        os._exit(0)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


# --- shutdown ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "use",
    [
        lambda x: x + 1,
        lambda x: nt.zeros((2, 2)),
        lambda x: nt.arange(5),
        lambda x: nt.random.normal(size=3, seed=1),
        lambda x: nt.sum(x),
        lambda x: x @ x,
        lambda x: x.retile((1, 1)),
        lambda x: x.to_numpy(),
        lambda x: nt.wait_all(),
    ],
)
@pytest.mark.parametrize("scheduler_name", ["eager", "dmda", "sync"])
def test_after_shutdown_ops_raise_and_init_restores_service(use, scheduler_name, check_tiles):
    nt.init(scheduler=scheduler_name)
    a = np.arange(9.0).reshape(3, 3)
    x = nt.from_numpy(a, tile_shape=(2, 2))
    y = x + 1
    try:
        nt.shutdown()
        raises_within(nt.RuntimeShutdownError, lambda: use(x), match="init")
        nt.shutdown()  # a second shutdown is harmless
    finally:
        nt.init()
    assert not nt.get_runtime().closed
    check_tiles(x @ x, a @ a)
    check_tiles(y, a + 1)  # finished before shutdown: kept


def test_work_cancelled_by_shutdown_raises_instead_of_hanging():
    x = nt.ones((64, 64), tile_shape=(8, 8))
    for _ in range(10):
        x = x + 1
    try:
        nt.shutdown(wait=False)
    finally:
        nt.init()
    kind, value = finishes(x.to_numpy)
    if kind == "error":  # the chain was cut by the shutdown: say so
        assert isinstance(value, nt.RuntimeShutdownError), value
    else:  # or it had already finished
        np.testing.assert_array_equal(value, np.full((64, 64), 11.0))
    assert finishes(nt.wait_all) == ("value", None)
