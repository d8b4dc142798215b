"""Resuming: what changes with other settings, nothing-to-do resumes, broken checkpoints."""

from __future__ import annotations

import json
import shutil
import warnings

import h5py
import numpy as np
import pytest

import numtile as nt
from numtile.cli.main import main
from numtile.io import prepare
from numtile.train import (
    ConfigError,
    ScheduleChangeWarning,
    TrainConfig,
    Trainer,
    TrainingDiverged,
    load_model,
)

TINY = json.dumps(dict(vocab_size=256, n_positions=16, n_embd=16, n_layer=2, n_head=2))


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    (root / "src").mkdir()
    words = ["def", "return", "class", "import", "self", "for", "in", "if", ":", "\n"]
    (root / "src" / "a.py").write_text(" ".join(np.random.default_rng(1).choice(words, 3000)))
    prepare([str(root / "src")], str(root / "data"), progress=False)
    return str(root / "data")


def _config(data_dir, checkpoint, **overrides):
    base = dict(
        model=TINY,
        data=data_dir,
        steps=4,
        batch=2,
        seq_len=16,
        batch_tile=1,
        warmup=1,
        eval_every=100,
        eval_batches=1,
        checkpoint=checkpoint,
        checkpoint_every=100,
        sample_tokens=0,
    )
    return TrainConfig(**{**base, **overrides})


@pytest.fixture(scope="module")
def finished(data_dir, tmp_path_factory):
    """A checkpoint at step 4 of a 4-step run."""
    path = str(tmp_path_factory.mktemp("run") / "run.h5")
    Trainer(_config(data_dir, path)).run(progress=False)
    return path


def test_resume_with_the_same_settings_does_not_warn(data_dir, finished, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ScheduleChangeWarning)
        trainer = Trainer(_config(data_dir, str(tmp_path / "b.h5"), resume=finished))
    assert trainer.step == 4


def test_the_same_data_folder_spelled_otherwise_does_not_warn(
    data_dir, finished, tmp_path, monkeypatch
):
    import os

    monkeypatch.chdir(os.path.dirname(data_dir))
    cfg = _config(os.path.basename(data_dir), str(tmp_path / "b.h5"), resume=finished)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ScheduleChangeWarning)
        Trainer(cfg)
    other = tmp_path / "other-data"  # another folder (with the same tokens) does warn
    shutil.copytree(data_dir, other)
    with pytest.warns(ScheduleChangeWarning, match="--data .* -> .*other-data"):
        Trainer(_config(str(other), str(tmp_path / "c.h5"), resume=finished))


def test_extending_a_run_warns_that_the_schedule_is_recomputed(data_dir, finished, tmp_path):
    cfg = _config(data_dir, str(tmp_path / "longer.h5"), resume=finished, steps=8)
    with pytest.warns(ScheduleChangeWarning, match=r"--steps 4 -> 8.*schedule.*from step 4"):
        trainer = Trainer(cfg)
    result = trainer.run(progress=False)
    assert trainer.step == 8 and len(result["train_loss"]) == 4
    assert np.isfinite(result["final_val_loss"])


def test_other_training_settings_warn_too(data_dir, finished, tmp_path):
    cfg = _config(data_dir, str(tmp_path / "b.h5"), resume=finished, weight_decay=0.0)
    with pytest.warns(ScheduleChangeWarning, match="--weight-decay 0.1 -> 0.0") as record:
        Trainer(cfg)
    assert "schedule" not in str(record[0].message)


def test_steps_below_the_checkpoint_is_refused(data_dir, finished, tmp_path, capsys):
    with pytest.raises(ConfigError, match="at step 4, beyond --steps 2"):
        Trainer(_config(data_dir, None, resume=finished, steps=2))
    argv = ["train", "--model", TINY, "--data", data_dir, "--batch", "2", "--seq-len", "16"]
    argv += ["--batch-tile", "1", "--warmup", "1", "--resume", finished, "--checkpoint", ""]
    assert main(argv + ["--steps", "2"]) == 2
    assert "pass a larger --steps" in capsys.readouterr().err


def test_steps_equal_to_the_checkpoint_is_nothing_to_do(data_dir, finished, capsys):
    argv = ["train", "--model", TINY, "--data", data_dir, "--batch", "2", "--seq-len", "16"]
    argv += ["--batch-tile", "1", "--warmup", "1", "--resume", finished, "--checkpoint", ""]
    assert main(argv + ["--steps", "4", "--eval-every", "100", "--eval-batches", "1"]) == 0
    out = capsys.readouterr().out
    assert "nothing to do" in out and "at step 4" in out and "final validation loss" not in out


def _drop_attr(name):
    def damage(path):
        with h5py.File(path, "a") as f:
            del f.attrs[name]

    return damage


def _unknown_field(path):
    with h5py.File(path, "a") as f:
        config = json.loads(f.attrs["model_config"])
        f.attrs["model_config"] = json.dumps({**config, "n_experts": 8})


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (_drop_attr("model_config"), "has no model_config attribute"),
        (_drop_attr("step"), "has no step attribute"),
        (_unknown_field, r"model_config: unknown GPT2Config field\(s\) \['n_experts'\]"),
    ],
)
def test_broken_training_checkpoints_name_the_file(data_dir, finished, tmp_path, damage, expected):
    path = str(tmp_path / "broken.h5")
    with open(finished, "rb") as src, open(path, "wb") as dst:
        dst.write(src.read())
    damage(path)
    with pytest.raises(ValueError, match=expected) as info:
        Trainer(_config(data_dir, None, resume=path, steps=8))
    assert path in str(info.value)
    if "step" not in expected:
        with pytest.raises(ValueError, match=expected):
            load_model(path)


def test_a_non_finite_loss_stops_training_and_keeps_the_checkpoint(data_dir, tmp_path):
    path = tmp_path / "run.h5"
    trainer = Trainer(_config(data_dir, str(path), steps=6, checkpoint_every=2))
    trainer.run(progress=False, stop_requested=lambda: trainer.step >= 2)
    before = path.read_bytes()
    weight = trainer.model.transformer.wte.weight
    broken = weight.to_numpy()
    broken[3, 5] = np.nan
    trainer.model.load_state_dict(
        {"transformer.wte.weight": nt.from_numpy(broken, tile_shape=weight.tile_shape)},
        strict=False,
    )
    with pytest.raises(TrainingDiverged, match=r"step 3: loss nan.*run.h5 \(step 2\) is kept"):
        trainer.run(progress=False)
    assert trainer.step == 2 and path.read_bytes() == before
