"""Hugging Face folders in and out (``numtile.nn.hf``) against ``transformers`` itself."""

import json
import os

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.numpy import save_file
from transformers import GPT2Config as HFConfig
from transformers import GPT2LMHeadModel

from numtile.io import hf as files
from numtile.nn.gpt2 import GPT2, GPT2Config, Tiling
from numtile.nn.hf import load_hf, save_hf

CONFIG = dict(vocab_size=37, n_positions=16, n_embd=12, n_layer=2, n_head=3)
ODD = Tiling(batch=1, seq=4, embd=8, inner=20, head=1, vocab=10)  # tiles that divide nothing


def _hf_model(seed=0):
    torch.manual_seed(seed)
    config = HFConfig(**CONFIG, bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(config).eval()


def _ids(seed=1):
    return np.random.default_rng(seed).integers(0, CONFIG["vocab_size"], (2, 7))


def _hf_logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor(ids)).logits.numpy()


def _rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


def test_load_hf_gives_transformers_logits(tmp_path):
    hf = _hf_model()
    hf.save_pretrained(tmp_path / "m")
    model = load_hf(tmp_path / "m", tiling=ODD)
    assert list(model.transformer.h)[0].attn.c_attn.weight.tile_shape == (8, 4)
    assert model.lm_head.weight is model.transformer.wte.weight  # still tied
    ids = _ids()
    assert _rel(model(ids)[0].to_numpy(), _hf_logits(hf, ids)) < 1e-5
    # Conv1D weights are (in, out) in the file and in numtile: no transpose either way
    ref = hf.transformer.h[1].mlp.c_fc.weight.detach().numpy()
    np.testing.assert_array_equal(list(model.transformer.h)[1].mlp.c_fc.weight.to_numpy(), ref)


def test_save_hf_loads_in_transformers_with_the_same_logits(tmp_path):
    model = GPT2(GPT2Config(**CONFIG), ODD, seed=3)
    save_hf(model, tmp_path / "out")
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["architectures"] == ["GPT2LMHeadModel"] and config["model_type"] == "gpt2"
    assert sorted(os.listdir(tmp_path)) == ["out"]  # no temporary folder left behind
    hf = GPT2LMHeadModel.from_pretrained(tmp_path / "out").eval()
    ids = _ids()
    assert _rel(_hf_logits(hf, ids), model(ids)[0].to_numpy()) < 1e-5
    ours = list(model.transformer.h)[0].attn.c_attn.weight.to_numpy()
    np.testing.assert_array_equal(hf.transformer.h[0].attn.c_attn.weight.detach().numpy(), ours)
    assert hf.lm_head.weight.data_ptr() == hf.transformer.wte.weight.data_ptr()


def test_sharded_save_and_load(tmp_path):
    model = GPT2(GPT2Config(**CONFIG), ODD, seed=4)
    save_hf(model, tmp_path / "sharded", max_shard_size="3KB")
    names = sorted(os.listdir(tmp_path / "sharded"))
    shards = [n for n in names if n.startswith("model-")]
    assert len(shards) > 2 and files.INDEX in names and files.WEIGHTS not in names
    hf = GPT2LMHeadModel.from_pretrained(tmp_path / "sharded").eval()
    again = load_hf(tmp_path / "sharded")
    loaded = again.state_dict()
    for name, tensor in model.state_dict().items():
        np.testing.assert_array_equal(loaded[name].to_numpy(), tensor.to_numpy(), err_msg=name)
    ids = _ids()
    assert _rel(_hf_logits(hf, ids), model(ids)[0].to_numpy()) < 1e-5


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_files_are_converted(tmp_path, dtype):
    hf = _hf_model().to(dtype)
    hf.save_pretrained(tmp_path / "half")
    model = load_hf(tmp_path / "half")
    ref = hf.transformer.wte.weight.detach().float().numpy()
    np.testing.assert_array_equal(model.transformer.wte.weight.to_numpy(), ref)
    assert model.transformer.wte.weight.dtype == np.float32
    save_hf(model, tmp_path / "again", dtype="bfloat16" if dtype == torch.bfloat16 else "float16")
    back = GPT2LMHeadModel.from_pretrained(tmp_path / "again", dtype=dtype)
    loaded = back.state_dict()
    for name, tensor in hf.state_dict().items():
        assert loaded[name].dtype == dtype and torch.equal(loaded[name], tensor), name


def _tensors(folder):
    with safe_open(str(folder / files.WEIGHTS), "numpy") as f:
        return {k: f.get_tensor(k) for k in f.keys()}


def test_bad_folders_are_named(tmp_path):
    save_hf(GPT2(GPT2Config(**CONFIG)), tmp_path / "m")
    good = _tensors(tmp_path / "m")
    path = str(tmp_path / "m" / files.WEIGHTS)

    with pytest.raises(FileNotFoundError, match="no such folder"):
        load_hf(tmp_path / "nothing")
    name = "transformer.h.1.ln_2.bias"
    save_file({k: v for k, v in good.items() if k != name}, path)
    with pytest.raises(ValueError, match=rf"missing \['{name}'\]"):
        load_hf(tmp_path / "m")
    save_file({**good, "transformer.h.9.x": good[name]}, path)
    with pytest.raises(ValueError, match=r"unexpected \['transformer.h.9.x'\]"):
        load_hf(tmp_path / "m")
    save_file({**good, name: np.zeros(5, np.float32)}, path)
    with pytest.raises(ValueError, match=rf"{path}: tensor '{name}' has shape \(5,\), .*\(12,\)"):
        load_hf(tmp_path / "m")
    save_file(good, path)
    data = open(path, "rb").read()
    open(path, "wb").write(data[: len(data) // 2])
    with pytest.raises(ValueError, match=f"{path}: not a readable safetensors file"):
        load_hf(tmp_path / "m")
    open(path, "wb").write(b"not a safetensors file at all")
    with pytest.raises(ValueError, match=f"{path}: not a readable safetensors file"):
        load_hf(tmp_path / "m")
    os.remove(path)
    with pytest.raises(ValueError, match="holds no weights: expected model.safetensors"):
        load_hf(tmp_path / "m")

    config_path = tmp_path / "m" / "config.json"
    config = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({**config, "model_type": "bert"}))
    with pytest.raises(ValueError, match="unsupported architecture 'bert'.*model_type gpt2"):
        load_hf(tmp_path / "m")
    config_path.write_text(json.dumps({**config, "activation_function": "relu"}))
    with pytest.raises(ValueError, match="activation_function='relu' is not supported"):
        load_hf(tmp_path / "m")


def test_an_interrupted_save_leaves_the_old_folder(tmp_path, monkeypatch):
    first = GPT2(GPT2Config(**CONFIG), seed=1)
    save_hf(first, tmp_path / "m")
    before = _tensors(tmp_path / "m")

    def crash(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(files, "write_safetensors", crash)
    with pytest.raises(KeyboardInterrupt):
        save_hf(GPT2(GPT2Config(**CONFIG), seed=2), tmp_path / "m")
    assert sorted(os.listdir(tmp_path)) == ["m"]
    after = _tensors(tmp_path / "m")
    assert all(np.array_equal(before[k], after[k]) for k in before)
    with pytest.raises(KeyboardInterrupt):
        save_hf(first, tmp_path / "new")
    assert sorted(os.listdir(tmp_path)) == ["m"]  # nothing that looks like a model folder
