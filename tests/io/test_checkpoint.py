"""HDF5 checkpoints: round trips, on-disk layout, tile-by-tile I/O, errors and atomicity."""

from __future__ import annotations

import json
import os

import h5py
import numpy as np
import pytest

import numtile as nt
from numtile.io import checkpoint_info, load_checkpoint, save_checkpoint
from numtile.io.checkpoint import FORMAT, FORMAT_VERSION
from numtile.tiletensor import TileTensor

DTYPES = ("float32", "float64", "int64", "bool")
# (shape, tile_shape): tiles that do not divide the shape, one tile, 0-d, 0-size
LAYOUTS = [
    ((7, 5), (3, 2)),
    ((10,), (4,)),
    ((2, 5, 3), (1, 2, 3)),
    ((3, 4), (3, 4)),
    ((4, 3), (8, 8)),
    ((), ()),
    ((0, 3), (2, 2)),
]


_DIVIDE_BY_ZERO = nt.Codelet(
    "test_io_divide_by_zero", implementations={"cpu": lambda ops, x: 1 / 0}
)


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "ckpt.h5")


def _tensors(make_array):
    """A model-like set of tensors: nested names with dots, several dtypes and tilings."""
    return {
        "model/transformer.wte.weight": nt.from_numpy(
            make_array((9, 4), "float32", 1), tile_shape=(4, 3)
        ),
        "model/transformer.h.0.attn.c_attn.bias": nt.from_numpy(
            make_array((6,), "float64", 2), tile_shape=4
        ),
        "optimizer/exp_avg/transformer.wte.weight": nt.from_numpy(
            make_array((9, 4), "float32", 3), tile_shape=(4, 3)
        ),
        "optimizer/step": nt.from_numpy(np.array(7, np.int64)),
    }


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("shape", "tile_shape"), LAYOUTS)
def test_round_trip_keeps_values_dtype_and_tiling(
    path, dtype, shape, tile_shape, make_array, check_tiles
):
    expected = make_array(shape, dtype)
    save_checkpoint(path, {"model/w": nt.from_numpy(expected, tile_shape=tile_shape)})
    tensors, attrs = load_checkpoint(path)
    assert list(tensors) == ["model/w"] and attrs == {}
    loaded = tensors["model/w"]
    assert loaded.tile_shape == nt.from_numpy(expected, tile_shape=tile_shape).tile_shape
    check_tiles(loaded, expected)


@pytest.mark.parametrize(("shape", "tile_shape"), LAYOUTS)
def test_plain_h5py_reads_datasets_chunked_by_tile(path, shape, tile_shape, make_array):
    expected = make_array(shape, "float32")
    tensor = nt.from_numpy(expected, tile_shape=tile_shape)
    save_checkpoint(path, {"model/transformer.h.0.mlp.c_fc.weight": tensor}, {"step": 5})
    with h5py.File(path, "r") as f:
        assert f.attrs["format"] == FORMAT and f.attrs["format_version"] == FORMAT_VERSION
        assert json.loads(f.attrs["step"]) == 5
        assert isinstance(f["model"], h5py.Group)
        dataset = f["model"]["transformer.h.0.mlp.c_fc.weight"]
        assert dataset.dtype == np.float32 and dataset.shape == shape
        if tensor.ndim and tensor.size:
            assert dataset.chunks == tuple(min(t, s) for t, s in zip(tensor.tile_shape, shape))
        else:
            assert dataset.chunks is None
        assert tuple(dataset.attrs["tile_shape"]) == tensor.tile_shape
        np.testing.assert_array_equal(dataset[()], expected)


def test_attrs_round_trip_as_json(path):
    state = np.random.default_rng(3).bit_generator.state
    attrs = {
        "step": 1200,
        "config": {"n_layer": 2, "n_embd": 64, "bias": False, "dropout": 0.0},
        "rng": state,
        "lr": np.float64(3e-4),
        "betas": np.array([0.9, 0.95]),
        "note": "héllo",
        "nothing": None,
    }
    save_checkpoint(path, {}, attrs)
    _, loaded = load_checkpoint(path)
    assert loaded == {**attrs, "lr": 3e-4, "betas": [0.9, 0.95]}
    restored = np.random.default_rng(0)
    restored.bit_generator.state = loaded["rng"]
    assert restored.random() == np.random.default_rng(3).random()


def test_model_and_optimizer_names_keep_order_and_nesting(path, make_array, check_tiles):
    tensors = _tensors(make_array)
    save_checkpoint(path, tensors, {"step": 3})
    loaded, attrs = load_checkpoint(path, like=tensors)
    assert list(loaded) == list(tensors) and attrs == {"step": 3}
    for name, tensor in tensors.items():
        assert loaded[name].tile_shape == tensor.tile_shape
        check_tiles(loaded[name], tensor.to_numpy())
    info = checkpoint_info(path)
    assert info["names"] == list(tensors)
    assert info["shapes"]["model/transformer.wte.weight"] == (9, 4)
    assert info["dtypes"]["model/transformer.h.0.attn.c_attn.bias"] == "float64"
    assert info["tile_shapes"]["optimizer/step"] == ()
    assert info["attrs"] == {"step": 3} and info["format_version"] == 1


def test_save_waits_per_tile_for_pending_tasks_and_never_gathers(path, monkeypatch):
    x = nt.from_numpy(np.arange(30.0).reshape(5, 6), tile_shape=(2, 4))
    y = nt.tanh(x * 0.1) + 1.0  # tasks still queued or running when the save starts
    runtime = nt.get_runtime()
    waited = []
    wait_handles = runtime.wait_handles

    def record(handles):
        handles = list(handles)
        waited.append(len(handles))
        wait_handles(handles)

    monkeypatch.setattr(runtime, "wait_handles", record)
    monkeypatch.setattr(TileTensor, "to_numpy", lambda self: pytest.fail("gathered a tensor"))
    save_checkpoint(path, {"y": y})
    loaded, _ = load_checkpoint(path)
    assert waited == [1] * len(y.handles)
    monkeypatch.undo()
    np.testing.assert_allclose(
        loaded["y"].to_numpy(), np.tanh(np.arange(30.0) * 0.1).reshape(5, 6) + 1
    )


@pytest.mark.parametrize("new_tile", [(2, 2), (7, 1), (100, 100)])
def test_load_with_another_tile_shape(path, new_tile, make_array, check_tiles):
    expected = make_array((7, 5), "float64")
    save_checkpoint(path, {"w": nt.from_numpy(expected, tile_shape=(3, 2))})
    by_name, _ = load_checkpoint(path, tile_shapes={"w": new_tile})
    assert by_name["w"].tile_shape == new_tile
    check_tiles(by_name["w"], expected)
    like = {"w": nt.zeros((7, 5), tile_shape=new_tile)}
    by_like, _ = load_checkpoint(path, like=like, tile_shapes={"w": (1, 1)})
    assert by_like["w"].tile_shape == new_tile  # ``like`` wins over ``tile_shapes``
    check_tiles(by_like["w"], expected)


def test_tile_shapes_for_unknown_names_is_an_error(path):
    save_checkpoint(path, {"w": nt.zeros((3,))})
    with pytest.raises(ValueError, match=r"\['v'\]"):
        load_checkpoint(path, tile_shapes={"v": (1,)})


def test_like_with_other_names_lists_missing_and_unexpected(path, make_array):
    tensors = _tensors(make_array)
    save_checkpoint(path, tensors)
    like = dict(tensors)
    del like["optimizer/step"]
    like["model/lm_head.weight"] = nt.zeros((2, 2))
    with pytest.raises(ValueError, match="missing") as info:
        load_checkpoint(path, like=like)
    message = str(info.value)
    assert "model/lm_head.weight" in message and "optimizer/step" in message
    assert path in message


def test_like_with_another_shape_names_tensor_and_both_shapes(path):
    save_checkpoint(path, {"model/w": nt.zeros((4, 3))})
    with pytest.raises(ValueError, match=r"'model/w'.*\(4, 3\).*\(3, 4\)"):
        load_checkpoint(path, like={"model/w": nt.zeros((3, 4))})


def test_like_with_another_dtype_names_tensor_and_both_dtypes(path):
    save_checkpoint(path, {"model/w": nt.zeros((4, 3), dtype="float32")})
    with pytest.raises(ValueError, match=r"'model/w'.*float32.*float64"):
        load_checkpoint(path, like={"model/w": nt.zeros((4, 3), dtype="float64")})


def test_missing_file_is_file_not_found_naming_the_path(tmp_path):
    path = str(tmp_path / "nope.h5")
    with pytest.raises(FileNotFoundError, match="nope.h5"):
        load_checkpoint(path)
    with pytest.raises(FileNotFoundError, match="nope.h5"):
        checkpoint_info(path)


def _truncate(path):
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)


def _write_text(path):
    with open(path, "w") as f:
        f.write("not a checkpoint\n")


def _write_empty(path):
    open(path, "wb").close()


def _other_hdf5(path):
    with h5py.File(path, "w") as f:
        f["w"] = np.zeros(3)


def _future_version(path):
    with h5py.File(path, "a") as f:
        f.attrs["format_version"] = FORMAT_VERSION + 1


def _attr_not_json(path):
    with h5py.File(path, "a") as f:
        f.attrs["step"] = "{not json"


def _unsupported_dtype(path):
    with h5py.File(path, "a") as f:
        f["half"] = np.zeros(3, np.longdouble)


@pytest.mark.parametrize(
    ("damage", "detail"),
    [
        (_truncate, "HDF5"),
        (_write_text, "HDF5"),
        (_write_empty, "HDF5"),
        (_other_hdf5, "format"),
        (_future_version, "format_version 2"),
        (_attr_not_json, "JSONDecodeError"),
        (_unsupported_dtype, np.dtype(np.longdouble).name),
    ],
)
def test_damaged_or_foreign_files_are_value_errors_naming_the_path(path, damage, detail):
    big = nt.from_numpy(np.arange(20000.0).reshape(200, 100), tile_shape=(64, 64))
    save_checkpoint(path, {"model/w": big}, {"step": 1})
    damage(path)
    for read in (load_checkpoint, checkpoint_info):
        with pytest.raises(ValueError, match="corrupt or unsupported") as info:
            read(path)
        assert path in str(info.value) and detail in str(info.value)


# a fresh exception per test: a shared instance would keep its last traceback, and with it the
# test's tensors, alive for the rest of the session
@pytest.mark.parametrize(
    "make_failure", [lambda: OSError("disk full"), KeyboardInterrupt], ids=["OSError", "Ctrl-C"]
)
def test_failure_midway_leaves_old_checkpoint_intact_and_no_temp_file(
    path, monkeypatch, make_failure
):
    failure = make_failure()
    save_checkpoint(path, {"w": nt.ones((6, 6), tile_shape=(2, 2))}, {"step": 1})
    with open(path, "rb") as f:
        before = f.read()
    writes = []
    setitem = h5py.Dataset.__setitem__

    def fail_on_third_tile(self, key, value):
        writes.append(key)
        if len(writes) == 3:
            raise failure
        setitem(self, key, value)

    monkeypatch.setattr(h5py.Dataset, "__setitem__", fail_on_third_tile)
    new = {"w": nt.zeros((6, 6), tile_shape=(2, 2)), "v": nt.zeros((4,))}
    with pytest.raises(type(failure)):
        save_checkpoint(path, new, {"step": 2})
    monkeypatch.undo()
    assert len(writes) == 3
    with open(path, "rb") as f:
        assert f.read() == before
    assert os.listdir(os.path.dirname(path)) == ["ckpt.h5"]
    tensors, attrs = load_checkpoint(path)
    assert attrs == {"step": 1} and tensors["w"].to_numpy().sum() == 36


def test_failure_on_first_save_leaves_no_file(path, monkeypatch):
    monkeypatch.setattr(h5py.Dataset, "__setitem__", lambda *args: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        save_checkpoint(path, {"w": nt.ones((3,))})
    assert os.listdir(os.path.dirname(path)) == []


def test_failed_task_aborts_save_without_a_file(path):
    bad = nt.from_numpy(np.ones((4,)), tile_shape=2)
    nt.get_runtime().submit(_DIVIDE_BY_ZERO, [(bad.handles[1], nt.Access.RW)])
    with pytest.raises(ZeroDivisionError):
        save_checkpoint(path, {"w": bad})
    assert os.listdir(os.path.dirname(path)) == []


def test_save_overwrites_an_existing_checkpoint(path):
    save_checkpoint(path, {"w": nt.ones((3,))}, {"step": 1})
    save_checkpoint(path, {"v": nt.zeros((2,))}, {"step": 2})
    tensors, attrs = load_checkpoint(path)
    assert list(tensors) == ["v"] and attrs == {"step": 2}


@pytest.mark.parametrize("name", ["", "a//b", "/a", "a/", "a/./b", "../a"])
def test_bad_tensor_names_are_rejected(path, name):
    with pytest.raises(ValueError, match="not a path"):
        save_checkpoint(path, {name: nt.zeros((2,))})
    assert not os.path.exists(path)


def test_name_that_is_also_a_group_is_rejected(path):
    with pytest.raises(ValueError, match=r"\['model'\]"):
        save_checkpoint(path, {"model": nt.zeros((2,)), "model/w": nt.zeros((2,))})


def test_bad_entries_and_attrs_are_rejected_before_writing(path):
    with pytest.raises(TypeError, match="'w' is a ndarray"):
        save_checkpoint(path, {"w": np.zeros(3)})
    with pytest.raises(ValueError, match="'format'"):
        save_checkpoint(path, {}, {"format": "mine"})
    with pytest.raises(TypeError, match="'cfg' is not JSON"):
        save_checkpoint(path, {}, {"cfg": object()})
    assert not os.path.exists(path)
