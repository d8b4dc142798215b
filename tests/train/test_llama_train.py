"""Training a LLaMA through the Trainer: it learns, resume equals not stopping, checkpoints
say their architecture and load back (tied and untied heads), old GPT-2 checkpoints still load,
and the llama-mini preset takes its vocabulary from the data."""

import json

import h5py
import numpy as np
import pytest

from numtile.io import checkpoint_info, prepare
from numtile.nn.llama import Llama, LlamaConfig
from numtile.train import TrainConfig, Trainer, generate, load_model, model_config

TINY = dict(
    architecture="llama",
    vocab_size=256,
    hidden_size=16,
    intermediate_size=24,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=16,
)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    source = root / "src"
    source.mkdir()
    words = ["def", "return", "class", "import", "self", "for", "in", "if", "else", ":", "\n"]
    (source / "a.py").write_text(" ".join(np.random.default_rng(0).choice(words, 4000)))
    prepare([str(source)], str(root / "data"), progress=False)
    return str(root / "data")


def _config(data_dir, tmp_path, model=TINY, **overrides):
    base = dict(
        model=json.dumps(model),
        data=data_dir,
        steps=6,
        batch=4,
        micro_batch=2,
        seq_len=16,
        batch_tile=1,
        seq_tile=8,
        head_tile=2,
        lr=3e-3,
        warmup=2,
        eval_every=3,
        eval_batches=1,
        checkpoint=str(tmp_path / "run.h5"),
        checkpoint_every=3,
        sample_tokens=0,
    )
    return TrainConfig(**{**base, **overrides})


@pytest.mark.parametrize("tied", [False, True], ids=["untied", "tied"])
def test_resumed_llama_run_matches_uninterrupted_run(data_dir, tmp_path, tied):
    model = {**TINY, "tie_word_embeddings": tied}
    full = Trainer(_config(data_dir, tmp_path, model, checkpoint=None))
    assert isinstance(full.model, Llama)
    losses = [full.train_step() for _ in range(6)]
    assert losses[-1] < losses[0]  # it learns

    first = Trainer(_config(data_dir, tmp_path, model))
    for _ in range(3):
        first.train_step()
    first.save(str(tmp_path / "half.h5"))
    info = checkpoint_info(str(tmp_path / "half.h5"))
    assert info["attrs"]["model_config"]["architecture"] == "llama"
    assert ("model/lm_head.weight" in info["names"]) == (not tied)
    resumed = Trainer(_config(data_dir, tmp_path, model, resume=str(tmp_path / "half.h5")))
    assert resumed.step == 3
    later = [resumed.train_step() for _ in range(3)]
    np.testing.assert_allclose(later, losses[3:], rtol=1e-5)

    loaded, _ = load_model(str(tmp_path / "half.h5"))
    for name, p in first.model.named_parameters(remove_duplicate=False):
        weights = dict(loaded.named_parameters(remove_duplicate=False))[name]
        np.testing.assert_array_equal(weights.to_numpy(), p.to_numpy(), err_msg=name)
    ids = generate(loaded, np.array([100, 101]), 4, top_k=10, seed=1)
    assert ids.shape == (6,) and ids.max() < 256


def test_gpt2_checkpoint_without_architecture_still_loads(data_dir, tmp_path):
    gpt = dict(vocab_size=256, n_positions=16, n_embd=16, n_layer=1, n_head=2)
    trainer = Trainer(_config(data_dir, tmp_path, gpt, steps=1, head_tile=None))
    trainer.run(progress=False)
    path = str(tmp_path / "run.h5")
    with h5py.File(path, "r+") as f:  # as written before LLaMA: no architecture field
        stored = json.loads(f.attrs["model_config"])
        assert stored.pop("architecture") == "gpt2"
        f.attrs["model_config"] = json.dumps(stored)
    model, _ = load_model(path)
    assert type(model).__name__ == "GPT2"


def test_llama_mini_preset_takes_the_data_vocabulary():
    config = model_config("llama-mini", 256)
    assert isinstance(config, LlamaConfig) and config.vocab_size == 256
    assert (config.hidden_size, config.intermediate_size) == (256, 688)
    assert (config.num_attention_heads, config.num_key_value_heads) == (4, 2)
    assert config.num_hidden_layers == 4
    with pytest.raises(ValueError, match="vocabulary"):
        model_config("llama-mini")
    with pytest.raises(ValueError, match="supported"):
        model_config(json.dumps(dict(architecture="mamba")))
    with pytest.raises(ValueError, match="LlamaConfig field"):
        model_config(json.dumps(dict(architecture="llama", n_embd=4)))
