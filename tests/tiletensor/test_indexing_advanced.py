"""NumPy's advanced indexing in x[key] and x[key] = value: integer arrays mixed with slices,
integers, None and ... (where the broadcast index shape goes), masks past axis 0, boolean
scalars (x[True], x[False]); against NumPy and array_api_strict; gradients through them."""

import numpy as np
import pytest

import numtile as nt

xs = pytest.importorskip("array_api_strict")

DATA = np.arange(60.0).reshape(3, 4, 5)
PAIR = np.array([0, 1])
ROWS = np.array([True, False, True, True])
PLANE = DATA[0] % 3 == 0
KEYS = [
    (0, slice(None), PAIR),  # separated by a slice: the index shape goes first
    (slice(None), 0, PAIR),  # adjacent: it replaces the indexed axes
    (PAIR, None, PAIR),
    (slice(None), PAIR, Ellipsis, PAIR),
    (np.array([[2], [0]]), slice(None, None, -1), np.array([1, 3])),
    (Ellipsis, np.array([[0, 1], [2, 3]]), slice(1, 4)),
    (np.array([2, -1]), 1, np.array([0, 4])),
    (slice(None), ROWS),
    (slice(None), PLANE),
    (1, PLANE),
    (slice(None), ROWS, np.array([0, 4, 4])),
    (slice(1, None), np.array([[3, 0, 2]])),
    True,
    False,
    (slice(None), True),
    (0, slice(None), True),
    (PAIR, slice(None), True),
    (slice(None), 0, None, True),
    (True, Ellipsis, None),
    (None, Ellipsis),
    (Ellipsis, None),
]


def _tensor():
    return nt.from_numpy(DATA, tile_shape=(2, 3, 2))


@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_mixed_keys_get_and_set_like_numpy(key):
    expected = DATA[key]
    got = _tensor()[key].to_numpy()
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)
    values = np.random.default_rng(0).standard_normal(expected.shape)
    for value in (values, nt.from_numpy(values, tile_shape=(2,) * values.ndim), -1.0):
        x, reference = _tensor(), DATA.copy()
        x[key] = value
        reference[key] = value.to_numpy() if isinstance(value, nt.TileTensor) else value
        np.testing.assert_array_equal(x.to_numpy(), reference)


def test_boolean_scalars_and_new_axes_match_array_api_strict():
    x = _tensor()
    strict = xs.asarray(DATA)
    index = xs.asarray([2, 0, 2])
    for key in [(None, Ellipsis), (Ellipsis, None), (1, Ellipsis, None)]:
        np.testing.assert_array_equal(x[key].to_numpy(), np.asarray(strict[key]))
    np.testing.assert_array_equal(
        x[nt.asarray([2, 0, 2]), 1, nt.asarray([0, 4, 4])].to_numpy(),
        np.asarray(strict[index, 1, xs.asarray([0, 4, 4])]),
    )
    zero = nt.asarray(5.0)
    for key in (True, False, (None, True), nt.asarray(True)):
        np.testing.assert_array_equal(zero[key].to_numpy(), np.asarray(5.0)[key])


def test_repeated_positions_keep_the_last_value_and_bad_shapes_raise():
    x, reference = _tensor(), DATA.copy()
    key = (0, slice(None), np.array([3, 1, 3]))
    x[key] = np.arange(12.0).reshape(3, 4)
    reference[key] = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(x.to_numpy(), reference)
    with pytest.raises(IndexError, match=r"boolean index of shape \(4,\)"):
        x[ROWS, 0]
    with pytest.raises(IndexError, match="do not broadcast"):
        x[PAIR, :, np.array([0, 1, 2])]
    with pytest.raises(IndexError, match="out of bounds for axis 2 with size 5"):
        x[0, :, np.array([5])] = 1.0


@pytest.mark.parametrize("key", [KEYS[0], KEYS[4], KEYS[10], KEYS[16]], ids=repr)
def test_gradients_of_mixed_keys_scatter_add(key):
    x = _tensor().requires_grad_()
    weights = np.random.default_rng(1).standard_normal(DATA[key].shape)
    nt.sum(x[key] * nt.from_numpy(weights)).backward()
    positions = np.arange(DATA.size).reshape(DATA.shape)[key]
    expected = np.zeros(DATA.size)
    np.add.at(expected, positions.reshape(-1), weights.reshape(-1))
    np.testing.assert_allclose(x.grad.to_numpy(), expected.reshape(DATA.shape), rtol=1e-12)
    assert x.grad.tile_shape == (2, 3, 2)
