"""Checkpoints under faults: damaged data and metadata, killed saves, unwritable targets."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import h5py
import numpy as np
import pytest

import numtile as nt
from numtile.io import check_writable, checkpoint_info, load_checkpoint, save_checkpoint
from numtile.io.files import atomic_output


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "ckpt.h5")


def _model(seed=0):
    rng = np.random.default_rng(seed)
    return {
        "model/w": nt.from_numpy(rng.standard_normal((96, 80)), tile_shape=(32, 32)),
        "model/b": nt.from_numpy(rng.standard_normal(50).astype(np.float32), tile_shape=16),
        "optimizer/step": nt.from_numpy(np.array(7, np.int64)),
    }


def _overwrite(path, offset, data):
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def test_random_bytes_in_a_tile_are_a_value_error_naming_file_and_tensor(path):
    save_checkpoint(path, _model(), {"step": 3})
    with h5py.File(path, "r") as f:
        chunk = f["model/w"].id.get_chunk_info(4)  # a chunk in the middle of the tensor
    assert chunk.size >= 4096
    _overwrite(path, chunk.byte_offset + (chunk.size - 4096) // 2, os.urandom(4096))
    with pytest.raises(ValueError, match="checksum") as info:
        load_checkpoint(path)
    assert path in str(info.value) and "'model/w'" in str(info.value)
    with h5py.File(path, "r") as f, pytest.raises(OSError):  # plain h5py verifies it too
        f["model/w"][...]


def test_a_damaged_0d_tensor_is_caught_by_its_crc32(path):
    save_checkpoint(path, _model())
    with h5py.File(path, "r") as f:
        offset = f["optimizer/step"].id.get_offset()  # 0-d datasets are contiguous
    _overwrite(path, offset, np.int64(8).tobytes())
    with pytest.raises(ValueError, match="'optimizer/step'.*CRC-32"):
        load_checkpoint(path)


def test_any_damaged_byte_range_raises_value_error_or_loads_identical_values(path, tmp_path):
    tensors = _model()
    save_checkpoint(path, tensors, {"step": 3, "model_config": {"n_layer": 2}})
    original = open(path, "rb").read()
    expected = {name: t.to_numpy() for name, t in tensors.items()}
    damaged = str(tmp_path / "damaged.h5")
    rng = np.random.default_rng(0)
    outcomes = {"error": 0, "intact": 0}
    for _ in range(80):
        data = bytearray(original)
        start = int(rng.integers(0, len(data) - 16))
        length = int(rng.integers(1, 16))
        data[start : start + length] = rng.integers(0, 256, length, np.uint8).tobytes()
        with open(damaged, "wb") as f:
            f.write(bytes(data))
        try:
            loaded, attrs = load_checkpoint(damaged)
        except ValueError as exc:
            assert damaged in str(exc)
            outcomes["error"] += 1
            continue
        assert attrs == {"step": 3, "model_config": {"n_layer": 2}}, (start, length)
        assert set(loaded) == set(expected), (start, length)
        for name, values in expected.items():
            np.testing.assert_array_equal(loaded[name].to_numpy(), values, err_msg=str(start))
        outcomes["intact"] += 1
    assert outcomes["error"] > 40  # most damage is seen (the rest hits unused bytes)


def test_an_entry_that_is_not_a_dataset_is_a_value_error(path):
    save_checkpoint(path, _model())
    with h5py.File(path, "a") as f:
        f["model/x"] = h5py.SoftLink("/nowhere")  # h5py yields None for it
    for read in (load_checkpoint, checkpoint_info):
        with pytest.raises(ValueError, match="'model/x' is not a dataset") as info:
            read(path)
        assert path in str(info.value)


def test_a_folder_is_a_value_error_naming_it(tmp_path):
    for read in (load_checkpoint, checkpoint_info):
        with pytest.raises(ValueError, match="is a folder") as info:
            read(str(tmp_path))
        assert str(tmp_path) in str(info.value)


def test_checksums_are_stored_and_files_without_them_still_load(path, tmp_path):
    save_checkpoint(path, _model())
    assert checkpoint_info(path)["checksums"] is True
    with h5py.File(path, "r") as f:
        assert f["model/w"].fletcher32 and f["model/b"].fletcher32
        assert "crc32" in f["optimizer/step"].attrs
    legacy = str(tmp_path / "legacy.h5")  # as numtile wrote them before checksums
    with h5py.File(legacy, "w") as f:
        f.attrs["format"], f.attrs["format_version"] = "numtile-checkpoint", 1
        f.create_dataset("w", data=np.arange(12.0).reshape(3, 4), chunks=(2, 2))
    assert checkpoint_info(legacy)["checksums"] is False
    loaded, _ = load_checkpoint(legacy)
    np.testing.assert_array_equal(loaded["w"].to_numpy(), np.arange(12.0).reshape(3, 4))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_check_finite_refuses_to_save_and_keeps_the_old_file(path, bad):
    save_checkpoint(path, {"w": nt.ones((6,), tile_shape=2)}, {"step": 1})
    before = open(path, "rb").read()
    values = np.ones(6)
    values[4] = bad
    with pytest.raises(ValueError, match=r"'w' holds NaN or infinity \(tile \(2,\)\)"):
        save_checkpoint(path, {"w": nt.from_numpy(values, tile_shape=2)}, check_finite=True)
    assert open(path, "rb").read() == before
    assert os.listdir(os.path.dirname(path)) == ["ckpt.h5"]
    save_checkpoint(path, {"w": nt.from_numpy(values, tile_shape=2)})  # allowed by default


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_next_save_removes_temporary_files_of_killed_saves(path, tmp_path):
    stale = [f".ckpt.h5.{_dead_pid()}.0123456789ab.tmp", ".ckpt.h5.0123456789ab.tmp"]
    kept = [
        f".ckpt.h5.{os.getppid()}.0123456789ab.tmp",  # a save of a process still running
        ".other.h5.0123456789ab.tmp",  # another checkpoint's
        "notes.tmp",
    ]
    for name in stale + kept:
        (tmp_path / name).write_bytes(b"partial")
    save_checkpoint(path, {"w": nt.ones((2,))})
    assert sorted(os.listdir(tmp_path)) == sorted(kept + ["ckpt.h5"])


def test_a_save_killed_midway_leaves_a_temporary_file_that_the_next_save_removes(path):
    script = (
        "import os, signal, sys\n"
        "from numtile.io.files import atomic_output\n"
        "with atomic_output(sys.argv[1]) as tmp:\n"
        "    open(tmp, 'wb').write(b'half a checkpoint')\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    result = subprocess.run([sys.executable, "-c", script, path], timeout=120)
    assert result.returncode == -signal.SIGKILL
    leftovers = [n for n in os.listdir(os.path.dirname(path)) if n.endswith(".tmp")]
    assert len(leftovers) == 1 and not os.path.exists(path)
    with atomic_output(path) as tmp:
        open(tmp, "wb").write(b"complete")
    assert os.listdir(os.path.dirname(path)) == ["ckpt.h5"]


def test_check_writable_names_the_problem(tmp_path):
    target = str(tmp_path / "run.h5")
    assert check_writable(target, "--checkpoint") == target
    assert os.listdir(tmp_path) == []  # the probe file is gone
    with pytest.raises(IsADirectoryError, match=f"--checkpoint {tmp_path} is a folder"):
        check_writable(str(tmp_path), "--checkpoint")
    with pytest.raises(FileNotFoundError, match="--trace .*missing/t.json: its folder"):
        check_writable(str(tmp_path / "missing" / "t.json"), "--trace")


def test_check_writable_on_a_read_only_file_system(read_only_folder):
    with pytest.raises(OSError, match="--checkpoint .*cannot write in .*Read-only file system"):
        check_writable(os.path.join(read_only_folder, "ckpt.h5"), "--checkpoint")
