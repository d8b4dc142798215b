"""The command's errors: one line on stderr, exit status 2 (command line) or 1 (the run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from numtile.cli.main import main
from numtile.io import prepare, save_checkpoint

TINY = json.dumps(dict(vocab_size=256, n_positions=16, n_embd=16, n_layer=2, n_head=2))


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    (root / "src").mkdir()
    words = ["def", "return", "class", "import", "self", "for", "in", "if", ":", "\n"]
    text = " ".join(np.random.default_rng(0).choice(words, 3000))
    (root / "src" / "a.py").write_text(text)
    prepare([str(root / "src")], str(root / "data"), progress=False)
    return str(root / "data")


def _train(data_dir, tmp_path, *flags):
    base = ["train", "--model", TINY, "--data", data_dir, "--steps", "2", "--batch", "2"]
    base += ["--seq-len", "16", "--eval-every", "1", "--eval-batches", "1"]
    base += ["--checkpoint", str(tmp_path / "run.h5"), "--sample-tokens", "0"]
    return base + list(flags)


def _error(argv, capsys, status):
    """Run ``numtile argv``; check the exit status and a one-line error; return that line."""
    assert main(argv) == status
    err = capsys.readouterr().err
    # the progress bar's lines aside (a run that fails midway has drawn it)
    lines = [line for line in err.splitlines() if line.strip() and "%|" not in line]
    assert "Traceback" not in err
    assert len(lines) == 1 and lines[0].startswith("numtile "), err
    return lines[0]


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--steps", "-1"], "--steps must be >= 1, got -1"),
        (["--batch", "0"], "--batch must be >= 1, got 0"),
        (["--seq-len", "1000"], "--seq-len 1000 exceeds the model's n_positions 16"),
        (["--lr", "inf"], "--lr must be a finite number > 0, got inf"),
        (["--lr", "-0.1"], "--lr must be a finite number > 0"),
        (["--lr", "nan"], "--lr must be a finite number > 0"),
        (["--min-lr", "-0.0001"], "--min-lr must be a finite number >= 0"),
        (["--micro-batch", "0"], "--micro-batch must be >= 1, got 0"),
        (["--embd-tile", "0"], "--embd-tile must be >= 1, got 0"),
        (["--vocab-tile", "0"], "--vocab-tile must be >= 1"),
        (["--inner-tile", "0"], "--inner-tile must be >= 1"),
        (["--head-tile", "0"], "--head-tile must be >= 1"),
        (["--sample-tokens", "-5"], "--sample-tokens must be >= 0, got -5"),
        (["--beta2", "1"], "--beta2 must be in [0, 1)"),
        (["--batch", "3", "--micro-batch", "2"], "not a multiple of --micro-batch"),
        (["--model", "{not json"], "neither a preset"),
        (["--model", '{"n_embd": 10, "n_head": 3}'], "--model: "),
        (["--model", '{"n_embd": 16, "n_heads": 2}'], "unknown GPT2Config field(s) ['n_heads']"),
        (["--model", "[1, 2]"], "expected a JSON object"),
    ],
)
def test_bad_train_flags_are_one_line_and_status_2(data_dir, tmp_path, capsys, flags, expected):
    line = _error(_train(data_dir, tmp_path, *flags), capsys, 2)
    assert line.startswith("numtile train: error: ") and expected in line
    assert not os.path.exists(tmp_path / "run.h5")


def test_missing_data_is_status_2(tmp_path, capsys):
    line = _error(_train(str(tmp_path / "nowhere"), tmp_path), capsys, 2)
    assert "nowhere" in line and "numtile prepare" in line


@pytest.mark.parametrize("damage", ["text", "folder", "missing", "corrupt"])
def test_bad_resume_file_is_status_2(data_dir, tmp_path, capsys, damage):
    resume = tmp_path / "resume.h5"
    if damage == "text":
        resume.write_text("not a checkpoint")
    elif damage == "folder":
        resume.mkdir()
    elif damage == "corrupt":
        save_checkpoint(str(resume), {}, {"step": 1})  # no model_config, no tensors
    line = _error(_train(data_dir, tmp_path, "--resume", str(resume)), capsys, 2)
    assert str(resume) in line


@pytest.mark.parametrize(
    ("flag", "make", "expected"),
    [
        ("--checkpoint", lambda tmp: tmp / "missing" / "run.h5", "folder .*missing does not exist"),
        ("--checkpoint", lambda tmp: tmp, "is a folder, not a file name"),
        ("--trace", lambda tmp: tmp / "missing" / "trace.json", "folder .*missing does not exist"),
    ],
)
def test_unwritable_outputs_fail_before_training(data_dir, tmp_path, capsys, flag, make, expected):
    import re

    line = _error(_train(data_dir, tmp_path, flag, str(make(tmp_path))), capsys, 2)
    assert re.search(f"{flag} .*{expected}", line), line
    assert "step" not in capsys.readouterr().out


def test_checkpoint_on_a_read_only_file_system_fails_before_training(
    data_dir, tmp_path, capsys, read_only_folder
):
    target = os.path.join(read_only_folder, "run.h5")
    line = _error(_train(data_dir, tmp_path, "--checkpoint", target), capsys, 2)
    assert "Read-only file system" in line and target in line


@pytest.fixture(scope="module")
def checkpoint(data_dir, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("ckpt") / "run.h5")
    argv = ["train", "--model", TINY, "--data", data_dir, "--steps", "2", "--batch", "2"]
    argv += ["--seq-len", "16", "--eval-every", "2", "--eval-batches", "1"]
    assert main(argv + ["--checkpoint", path, "--sample-tokens", "0"]) == 0
    return path


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--temperature", "0"], "--temperature must be > 0, got 0.0"),
        (["--temperature", "nan"], "--temperature must be > 0"),
        (["--tokens", "-1"], "--tokens must be >= 0, got -1"),
        (["--top-k", "0"], "--top-k must be >= 1, got 0"),
        (["--prompt", ""], "--prompt must not be empty"),
        (["--tokenizer", "/no/such/tokenizer.json"], "no such file"),
    ],
)
def test_bad_generate_flags_are_one_line_and_status_2(checkpoint, capsys, flags, expected):
    line = _error(["generate", "--checkpoint", checkpoint, *flags], capsys, 2)
    assert line.startswith("numtile generate: error: ") and expected in line


def test_generate_from_a_bad_checkpoint_is_status_2(tmp_path, capsys):
    bad = tmp_path / "bad.h5"
    bad.write_bytes(b"\0" * 100)
    line = _error(["generate", "--checkpoint", str(bad)], capsys, 2)
    assert str(bad) in line and "not a valid numtile checkpoint" in line


def test_prepare_val_fraction_0_is_refused(data_dir, tmp_path, capsys):
    out = tmp_path / "out"
    src = os.path.join(os.path.dirname(data_dir), "src")
    line = _error(["prepare", src, "--out", str(out), "--val-fraction", "0"], capsys, 2)
    assert "--val-fraction must be in (0, 1)" in line and not out.exists()


def test_prepare_warns_when_val_bin_is_too_small_for_training(data_dir, tmp_path, capsys):
    src = os.path.join(os.path.dirname(data_dir), "src")
    assert main(["prepare", src, "--out", str(tmp_path / "out"), "--val-fraction", "0.01"]) == 0
    assert "warning: val.bin holds" in capsys.readouterr().err


def test_a_diverging_run_is_status_1_and_keeps_the_last_good_checkpoint(data_dir, tmp_path, capsys):
    path = tmp_path / "run.h5"
    flags = ["--lr", "1e30", "--warmup", "0", "--steps", "6", "--checkpoint-every", "1"]
    flags += ["--eval-every", "100"]
    line = _error(_train(data_dir, tmp_path, *flags), capsys, 1)
    assert "training diverged at step" in line and f"{path} (step " in line
    from numtile.io import load_checkpoint

    tensors, attrs = load_checkpoint(str(path))
    assert 1 <= attrs["step"] < 6
    assert all(np.isfinite(t.to_numpy()).all() for t in tensors.values())


def test_the_installed_command_prints_no_traceback(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "numtile.cli.main", "train", "--steps", "-1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr == "numtile train: error: --steps must be >= 1, got -1\n"


def test_resuming_from_damaged_data_stops_and_leaves_the_file_alone(
    checkpoint, data_dir, tmp_path, capsys
):
    import h5py

    damaged = tmp_path / "damaged.h5"
    damaged.write_bytes(open(checkpoint, "rb").read())
    with h5py.File(damaged, "r") as f:
        chunk = f["model/transformer.h.0.mlp.c_fc.weight"].id.get_chunk_info(0)
    with open(damaged, "r+b") as f:
        f.seek(chunk.byte_offset + chunk.size // 4)
        f.write(os.urandom(min(4096, chunk.size // 2)))
    before = damaged.read_bytes()
    flags = ["--resume", str(damaged), "--checkpoint", str(damaged), "--steps", "4"]
    line = _error(_train(data_dir, tmp_path, *flags), capsys, 2)
    assert "'model/transformer.h.0.mlp.c_fc.weight'" in line and "checksum" in line
    assert damaged.read_bytes() == before
