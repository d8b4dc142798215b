"""Training runs: resume equals not stopping, checkpoints, generate, the command."""

import json

import numpy as np
import pytest

from numtile.cli.main import main
from numtile.io import checkpoint_info, prepare
from numtile.train import TrainConfig, Trainer, generate, load_model, model_config

TINY = json.dumps(dict(vocab_size=256, n_positions=16, n_embd=16, n_layer=2, n_head=2))


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    source = root / "src"
    source.mkdir()
    rng = np.random.default_rng(0)
    words = ["def", "return", "class", "import", "self", "for", "in", "if", "else", ":", "\n"]
    (source / "a.py").write_text(" ".join(rng.choice(words, 4000)))
    prepare([str(source)], str(root / "data"), progress=False)
    return str(root / "data")


def _config(data_dir, tmp_path, **overrides):
    base = dict(
        model=TINY,
        data=data_dir,
        steps=6,
        batch=4,
        micro_batch=2,
        seq_len=16,
        batch_tile=1,
        seq_tile=8,
        lr=3e-3,
        warmup=2,
        eval_every=3,
        eval_batches=2,
        checkpoint=str(tmp_path / "run.h5"),
        checkpoint_every=3,
        sample_tokens=0,
    )
    base.update(overrides)
    return TrainConfig(**base)


def test_resumed_run_matches_uninterrupted_run(data_dir, tmp_path):
    full = Trainer(_config(data_dir, tmp_path, checkpoint=None))
    losses = [full.train_step() for _ in range(6)]
    assert losses[-1] < losses[0]  # it learns

    first = Trainer(_config(data_dir, tmp_path))
    for _ in range(3):
        first.train_step()
    first.save(str(tmp_path / "half.h5"))
    resumed = Trainer(_config(data_dir, tmp_path, resume=str(tmp_path / "half.h5")))
    assert resumed.step == 3
    later = [resumed.train_step() for _ in range(3)]
    np.testing.assert_allclose(later, losses[3:], rtol=1e-5)


def test_run_writes_checkpoints_and_generates(data_dir, tmp_path):
    trainer = Trainer(_config(data_dir, tmp_path))
    result = trainer.run(progress=False)
    assert len(result["train_loss"]) == 6 and len(result["val_loss"]) == 2
    assert np.isfinite(result["final_val_loss"]) and result["tokens_per_s"] > 0
    info = checkpoint_info(str(tmp_path / "run.h5"))
    assert info["attrs"]["step"] == 6
    assert "model/transformer.wte.weight" in info["names"]
    assert "optimizer/exp_avg/transformer.wte.weight" in info["names"]
    model, attrs = load_model(str(tmp_path / "run.h5"))
    np.testing.assert_array_equal(
        model.transformer.wte.weight.to_numpy(), trainer.model.transformer.wte.weight.to_numpy()
    )
    ids = generate(model, np.array([100, 101]), 5, temperature=0.8, top_k=10, seed=1)
    assert ids.shape == (7,) and ids[:2].tolist() == [100, 101] and ids.max() < 256


def test_errors_name_the_problem(data_dir, tmp_path):
    with pytest.raises(FileNotFoundError, match="numtile prepare"):
        Trainer(_config(str(tmp_path / "nowhere"), tmp_path))
    with pytest.raises(ValueError, match="preset"):
        model_config("no-such-model")
    with pytest.raises(ValueError, match="n_embd"):
        model_config(json.dumps(dict(n_embd=10, n_head=3)))
    with pytest.raises(ValueError, match="seq-len"):
        Trainer(_config(data_dir, tmp_path, seq_len=32))
    with pytest.raises(ValueError, match="micro-batch"):
        _config(data_dir, tmp_path, batch=5, micro_batch=2)


def test_train_and_generate_commands(data_dir, tmp_path, capsys):
    checkpoint = str(tmp_path / "cli.h5")
    code = main(
        [
            "train",
            "--model",
            TINY,
            "--data",
            data_dir,
            "--steps",
            "2",
            "--batch",
            "2",
            "--seq-len",
            "16",
            "--eval-every",
            "1",
            "--eval-batches",
            "1",
            "--checkpoint",
            checkpoint,
            "--sample-tokens",
            "5",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "final validation loss" in out and "sample:" in out
    assert main(["generate", "--checkpoint", checkpoint, "--prompt", "def", "--tokens", "4"]) == 0
    assert capsys.readouterr().out.startswith("def")


def test_ctrl_c_keeps_the_last_complete_checkpoint(data_dir, tmp_path):
    import signal
    import subprocess
    import sys
    import time

    from numtile.io import load_checkpoint

    checkpoint = tmp_path / "interrupted.h5"
    command = [
        sys.executable,
        "-m",
        "numtile.cli.main",
        "train",
        "--model",
        TINY,
        "--data",
        data_dir,
        "--steps",
        "100000",
        "--batch",
        "2",
        "--seq-len",
        "16",
        "--eval-every",
        "1000",
        "--checkpoint",
        str(checkpoint),
        "--checkpoint-every",
        "2",
        "--sample-tokens",
        "0",
    ]
    log = tmp_path / "stderr.log"  # a file, not a pipe: the progress bar never blocks the run
    with open(log, "wb") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr)
    deadline = time.time() + 180
    while not checkpoint.exists() and time.time() < deadline and process.poll() is None:
        time.sleep(0.2)
    assert checkpoint.exists(), log.read_text()[-2000:]
    time.sleep(0.5)
    process.send_signal(signal.SIGINT)
    out, _ = process.communicate(timeout=120)
    assert process.returncode == 130, log.read_text()[-2000:]
    assert b"intact" in out
    tensors, attrs = load_checkpoint(str(checkpoint))  # complete and readable
    assert attrs["step"] % 2 == 0 and attrs["step"] >= 2
    assert not [
        p for p in tmp_path.iterdir() if p.name != checkpoint.name and "interrupted" in p.name
    ]
