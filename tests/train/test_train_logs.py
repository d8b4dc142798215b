"""``numtile train --log-dir``: TensorBoard scalars (read back from the event file, record
checksums verified) and ``metrics.jsonl`` hold what the run computed, once per step, also
across a resume; a bad log folder stops the command before training."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
from tensorboardX.proto import event_pb2
from tensorboardX.record_writer import masked_crc32c

from numtile.cli.main import main
from numtile.io import prepare
from numtile.nn import optim
from numtile.train import TrainConfig, Trainer
from numtile.train_logs import METRICS_FILE

TINY = json.dumps(dict(vocab_size=256, n_positions=16, n_embd=32, n_layer=2, n_head=2))


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    (root / "src").mkdir()
    words = ["def", "return", "class", "import", "self", "for", "in", "if", ":", "\n"]
    (root / "src" / "a.py").write_text(" ".join(np.random.default_rng(2).choice(words, 2000)))
    prepare([str(root / "src")], str(root / "data"), progress=False)
    return str(root / "data")


def _config(data_dir, tmp_path, **overrides):
    base = dict(
        model=TINY,
        data=data_dir,
        steps=4,
        batch=2,
        seq_len=16,
        batch_tile=1,
        warmup=1,
        eval_every=2,
        eval_batches=1,
        checkpoint=str(tmp_path / "run.h5"),
        checkpoint_every=2,
        sample_tokens=0,
        log_dir=str(tmp_path / "logs"),
    )
    return TrainConfig(**{**base, **overrides})


def read_events(folder) -> list:
    """Every event of the TensorBoard event files in ``folder``, in file order (TFRecord:
    length, masked CRC-32C of the length, the Event proto, masked CRC-32C of the data)."""
    events = []
    for path in sorted(folder.glob("events.out.tfevents.*")):
        data = path.read_bytes()
        pos = 0
        while pos < len(data):
            header = data[pos : pos + 8]
            (length,) = struct.unpack("<Q", header)
            (crc,) = struct.unpack("<I", data[pos + 8 : pos + 12])
            assert crc == masked_crc32c(header)
            body = data[pos + 12 : pos + 12 + length]
            (crc,) = struct.unpack("<I", data[pos + 12 + length : pos + 16 + length])
            assert crc == masked_crc32c(body)
            events.append(event_pb2.Event.FromString(body))
            pos += 16 + length
    return events


def scalars(events) -> dict:
    """tag -> [(step, value)] of the scalar summaries."""
    found: dict = {}
    for event in events:
        for value in event.summary.value:
            found.setdefault(value.tag, []).append((event.step, value.simple_value))
    return found


def _records(tmp_path):
    return [
        json.loads(line) for line in (tmp_path / "logs" / METRICS_FILE).read_text().splitlines()
    ]


def test_scalars_and_metrics_hold_what_the_run_computed(data_dir, tmp_path):
    cfg = _config(data_dir, tmp_path)
    result = Trainer(cfg).run(progress=False)
    tags = scalars(read_events(tmp_path / "logs"))
    assert [s for s, _ in tags["train/loss"]] == [1, 2, 3, 4]
    np.testing.assert_allclose([v for _, v in tags["train/loss"]], result["train_loss"], 1e-6)
    np.testing.assert_allclose(
        [v for _, v in tags["val/loss"]], [v for _, v in result["val_loss"]], 1e-6
    )
    assert [s for s, _ in tags["val/loss"]] == [2, 4]
    schedule = dict(lr=cfg.lr, warmup=1, total=4, min_lr=cfg.min_lr)
    lrs = [optim.cosine_schedule(step, **schedule) for step in range(4)]
    np.testing.assert_allclose([v for _, v in tags["train/learning_rate"]], lrs, 1e-6)
    rates = [v for _, v in tags["perf/tokens_per_s"]]
    np.testing.assert_allclose(rates, [32 / s for s in result["step_seconds"]], 1e-6)
    assert all(0 < v < 1 for _, v in tags["perf/mfu"])
    assert all(v > 1e6 for _, v in tags["memory/host/bytes_in_use"])  # at least the model

    records = _records(tmp_path)
    assert [r["step"] for r in records] == [1, 2, 3, 4]
    assert [r["train/loss"] for r in records] == result["train_loss"]  # exact in JSON
    val = dict(result["val_loss"])
    assert [r.get("val/loss") for r in records] == [val.get(step) for step in (1, 2, 3, 4)]
    assert set(records[1]) == {"step", "wall_time", *tags}


def test_a_resumed_run_logs_each_step_once(data_dir, tmp_path):
    first = Trainer(_config(data_dir, tmp_path))
    first.run(progress=False, stop_requested=lambda: first.step >= 3)  # checkpoint at step 2
    assert [r["step"] for r in _records(tmp_path)] == [1, 2, 3]
    resumed = Trainer(_config(data_dir, tmp_path, resume=str(tmp_path / "run.h5")))
    losses = resumed.run(progress=False)["train_loss"]
    records = _records(tmp_path)
    assert [r["step"] for r in records] == [1, 2, 3, 4]
    assert [r["train/loss"] for r in records[2:]] == losses
    # TensorBoard drops the stale step-3 event at the restart mark the resumed writer leaves
    events = read_events(tmp_path / "logs")
    starts = [e.step for e in events if e.HasField("session_log")]
    assert starts == [3] and [s for s, _ in scalars(events)["train/loss"]] == [1, 2, 3, 3, 4]


def test_two_runs_in_the_same_second_keep_both_event_files(tmp_path, monkeypatch):
    # tensorboardX names an event file by the second and the host: a resume that started in
    # the first run's second overwrote its file (seen in CI)
    from tensorboardX import event_file_writer

    from numtile.train_logs import TrainingLog

    monkeypatch.setattr(event_file_writer.time, "time", lambda: 1.7e9)
    for step in (1, 2):
        log = TrainingLog(tmp_path, start_step=step - 1)
        log.log(step, {"train/loss": float(step)})
        log.close()
    monkeypatch.undo()
    assert [s for s, _ in scalars(read_events(tmp_path))["train/loss"]] == [1, 2]


def test_a_bad_log_dir_stops_before_training(data_dir, tmp_path, capsys):
    (tmp_path / "file").write_text("")
    argv = ["train", "--model", TINY, "--data", data_dir, "--steps", "1", "--seq-len", "16"]
    argv += ["--checkpoint", "", "--log-dir", str(tmp_path / "file")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"numtile train: error: --log-dir {tmp_path / 'file'} is a file, not a folder"
