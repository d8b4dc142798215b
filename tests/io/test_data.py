"""TokenDataset: memory-mapped uint16 streams, shifted targets, seeded and resumable batches."""

from __future__ import annotations

import json

import numpy as np
import pytest

from numtile.io import TokenDataset


@pytest.fixture
def stream(tmp_path):
    """A 1000-token file whose token at position i is i (so a window shows where it starts)."""
    path = tmp_path / "train.bin"
    np.arange(1000, dtype=np.uint16).tofile(path)
    return str(path)


def test_batches_are_windows_of_the_stream_with_targets_shifted_by_one(stream):
    data = TokenDataset(stream, block_size=16, seed=1)
    tokens = np.arange(1000)
    x, y = data.batch(8)
    assert x.shape == y.shape == (8, 16) and x.dtype == y.dtype == np.int64
    assert x.flags.c_contiguous and y.flags.c_contiguous
    for row_x, row_y in zip(x, y):
        start = row_x[0]
        np.testing.assert_array_equal(row_x, tokens[start : start + 16])
        np.testing.assert_array_equal(row_y, tokens[start + 1 : start + 17])


def test_windows_reach_the_last_token_and_stay_in_bounds(tmp_path):
    path = tmp_path / "tiny.bin"
    np.arange(5, dtype=np.uint16).tofile(path)
    data = TokenDataset(path, block_size=4)  # exactly block_size + 1 tokens: one window
    x, y = data.batch(3)
    np.testing.assert_array_equal(x, [[0, 1, 2, 3]] * 3)
    np.testing.assert_array_equal(y, [[1, 2, 3, 4]] * 3)


def test_same_seed_same_batches_other_seed_other_batches(stream):
    first = [TokenDataset(stream, 8, seed=5).batch(4)[0] for _ in range(2)]
    np.testing.assert_array_equal(first[0], first[1])
    other = TokenDataset(stream, 8, seed=6).batch(4)[0]
    assert not np.array_equal(first[0], other)


def test_state_dict_resume_draws_the_same_next_batches(stream):
    data = TokenDataset(stream, block_size=8, seed=0)
    data.batch(4)
    state = json.loads(json.dumps(data.state_dict()))  # as stored in a checkpoint
    expected = [data.batch(4) for _ in range(3)]
    resumed = TokenDataset(stream, block_size=8, seed=123)
    resumed.load_state_dict(state)
    for (x, y), (ex, ey) in zip((resumed.batch(4) for _ in range(3)), expected):
        np.testing.assert_array_equal(x, ex)
        np.testing.assert_array_equal(y, ey)


def test_len_and_vocab_size_from_meta_json(stream, tmp_path):
    assert len(TokenDataset(stream, 8)) == 1000
    assert TokenDataset(stream, 8).vocab_size is None
    (tmp_path / "meta.json").write_text(json.dumps({"vocab_size": 997}))
    assert TokenDataset(stream, 8).vocab_size == 997


def test_missing_file_names_path_and_how_to_make_one(tmp_path):
    with pytest.raises(FileNotFoundError, match="numtile prepare") as info:
        TokenDataset(tmp_path / "val.bin", 8)
    assert str(tmp_path / "val.bin") in str(info.value)


@pytest.mark.parametrize("ntokens", [0, 1, 8])
def test_stream_shorter_than_block_plus_one_is_a_value_error(tmp_path, ntokens):
    path = tmp_path / "short.bin"
    np.zeros(ntokens, np.uint16).tofile(path)
    with pytest.raises(ValueError, match=f"{ntokens} tokens, fewer than block_size \\+ 1 = 9"):
        TokenDataset(path, block_size=8)


def test_odd_byte_count_and_bad_sizes_are_value_errors(tmp_path, stream):
    path = tmp_path / "odd.bin"
    path.write_bytes(b"\x00" * 21)
    with pytest.raises(ValueError, match="21 bytes"):
        TokenDataset(path, 4)
    with pytest.raises(ValueError, match="block_size must be >= 1, got 0"):
        TokenDataset(stream, 0)
    with pytest.raises(ValueError, match="batch_size must be >= 1, got 0"):
        TokenDataset(stream, 4).batch(0)
