"""LLaMA folders in and out (``numtile.nn.hf``) against ``transformers``' LlamaForCausalLM:
grouped-query heads, tied and untied heads, llama3 rope scaling, biases on and off."""

import json
import os

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.numpy import save_file
from transformers import LlamaConfig as HFConfig
from transformers import LlamaForCausalLM

from numtile.cli.main import main
from numtile.io import hf as files
from numtile.nn.gpt2 import Tiling
from numtile.nn.hf import load_hf, save_hf
from numtile.nn.llama import Llama, LlamaConfig

BASE = dict(
    vocab_size=37,
    hidden_size=32,
    intermediate_size=40,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=16,
    rms_norm_eps=1e-5,
)
LLAMA3 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8,
}
CASES = {
    "gqa-untied": dict(),
    "mqa-tied": dict(num_key_value_heads=1, tie_word_embeddings=True),
    "bias-llama3": dict(
        num_key_value_heads=4, attention_bias=True, mlp_bias=True, rope_scaling=LLAMA3
    ),
}
ODD = Tiling(batch=1, seq=3, embd=12, inner=7, head=2, vocab=10)  # tiles that divide nothing


def _hf_config(changes, rope_theta=500.0):
    fields = {**BASE, **changes}
    scaling = fields.pop("rope_scaling", None)
    rope = {"rope_type": "default", **(scaling or {}), "rope_theta": rope_theta}
    return HFConfig(**fields, rope_parameters=rope)


def _hf_model(changes, seed=0):
    torch.manual_seed(seed)
    hf = LlamaForCausalLM(_hf_config(changes))
    with torch.no_grad():  # biases and norms start at zero / one: make them matter
        for name, p in hf.named_parameters():
            if name.endswith("bias") or "norm" in name:
                p.add_(0.1 * torch.randn_like(p))
    return hf.eval()


def _ids(seed=1):
    return np.random.default_rng(seed).integers(0, BASE["vocab_size"], (2, 7))


def _hf_logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor(ids)).logits.float().numpy()


def _rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


@pytest.mark.parametrize("case", CASES)
def test_load_hf_gives_transformers_logits(tmp_path, case):
    hf = _hf_model(CASES[case])
    hf.save_pretrained(tmp_path / "m")
    model = load_hf(tmp_path / "m", tiling=ODD)
    assert isinstance(model, Llama) and model.config.rope_theta == 500.0
    assert model.config.rope_scaling == CASES[case].get("rope_scaling")
    if model.config.tie_word_embeddings:
        assert model.lm_head.weight is model.model.embed_tokens.weight
    ids = _ids()
    assert _rel(model(ids)[0].to_numpy(), _hf_logits(hf, ids)) < 1e-5
    ref = hf.model.layers[1].self_attn.k_proj.weight.detach().numpy()
    ours = list(model.model.layers)[1].self_attn.k_proj.weight.to_numpy()
    np.testing.assert_array_equal(ours, ref)


@pytest.mark.parametrize("case", CASES)
def test_save_hf_loads_in_transformers_with_the_same_logits(tmp_path, case):
    model = Llama(LlamaConfig(**{**BASE, **CASES[case]}, rope_theta=300.0), ODD, seed=3)
    save_hf(model, tmp_path / "out")
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["model_type"] == "llama"
    assert sorted(os.listdir(tmp_path)) == ["out"]
    hf = LlamaForCausalLM.from_pretrained(tmp_path / "out").eval()
    assert hf.config.rope_parameters["rope_theta"] == 300.0
    ids = _ids()
    assert _rel(_hf_logits(hf, ids), model(ids)[0].to_numpy()) < 1e-5
    tied = model.config.tie_word_embeddings
    assert (hf.lm_head.weight.data_ptr() == hf.model.embed_tokens.weight.data_ptr()) == tied
    with safe_open(str(tmp_path / "out" / files.WEIGHTS), "numpy") as f:
        assert ("lm_head.weight" in f.keys()) != tied


def test_old_style_config_and_rope_buffer_are_read(tmp_path):
    """transformers 4 wrote ``rope_theta``/``rope_scaling`` and sometimes ``inv_freq``."""
    hf = _hf_model(CASES["bias-llama3"])
    hf.save_pretrained(tmp_path / "m")
    path = tmp_path / "m" / "config.json"
    config = json.loads(path.read_text())
    config.pop("rope_parameters")
    path.write_text(json.dumps({**config, "rope_theta": 500.0, "rope_scaling": LLAMA3}))
    weights = str(tmp_path / "m" / files.WEIGHTS)
    with safe_open(weights, "numpy") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    tensors["model.layers.0.self_attn.rotary_emb.inv_freq"] = np.ones(4, np.float32)
    save_file(tensors, weights)
    model = load_hf(tmp_path / "m")
    assert model.config.rope_scaling == LLAMA3
    ids = _ids()
    assert _rel(model(ids)[0].to_numpy(), _hf_logits(hf, ids)) < 1e-5


def test_sharded_half_precision_round_trip(tmp_path):
    hf = _hf_model(CASES["gqa-untied"]).to(torch.bfloat16)
    hf.save_pretrained(tmp_path / "bf16", max_shard_size="20KB")
    assert os.path.exists(tmp_path / "bf16" / files.INDEX)
    model = load_hf(tmp_path / "bf16")
    ref = hf.model.embed_tokens.weight.detach().float().numpy()
    np.testing.assert_array_equal(model.model.embed_tokens.weight.to_numpy(), ref)
    save_hf(model, tmp_path / "f16", dtype="float16", max_shard_size="20KB")
    back = LlamaForCausalLM.from_pretrained(tmp_path / "f16", dtype=torch.float16)
    for name, tensor in hf.state_dict().items():
        torch.testing.assert_close(back.state_dict()[name].float(), tensor.float(), msg=name)


def test_bad_llama_folders_are_named(tmp_path):
    save_hf(Llama(LlamaConfig(**BASE)), tmp_path / "m")
    path = str(tmp_path / "m" / files.WEIGHTS)
    with safe_open(path, "numpy") as f:
        good = {k: f.get_tensor(k) for k in f.keys()}
    name = "model.layers.1.mlp.up_proj.weight"
    save_file({k: v for k, v in good.items() if k != name}, path)
    with pytest.raises(ValueError, match=rf"LlamaForCausalLM: missing \['{name}'\]"):
        load_hf(tmp_path / "m")
    save_file({**good, "model.layers.2.mlp.up_proj.weight": good[name]}, path)
    with pytest.raises(ValueError, match=r"unexpected \['model.layers.2.mlp.up_proj.weight'\]"):
        load_hf(tmp_path / "m")
    save_file({**good, name: np.zeros((40, 31), np.float32)}, path)
    with pytest.raises(ValueError, match=rf"'{name}' has shape \(40, 31\), .*\(40, 32\)"):
        load_hf(tmp_path / "m")
    save_file(good, path)
    data = open(path, "rb").read()
    open(path, "wb").write(data[: len(data) - 100])  # truncated in the last tensor's data
    with pytest.raises(ValueError, match=f"{path}: not a readable safetensors file"):
        load_hf(tmp_path / "m")
    save_file(good, path)
    config_path = tmp_path / "m" / "config.json"
    config = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({**config, "hidden_act": "gelu"}))
    with pytest.raises(ValueError, match="hidden_act='gelu' is not supported"):
        load_hf(tmp_path / "m")
    scaling = {"rope_type": "yarn", "factor": 2.0, "rope_theta": 1e4}
    config_path.write_text(json.dumps({**config, "rope_parameters": scaling}))
    with pytest.raises(ValueError, match="config.json: LlamaConfig.rope_scaling: only rope_type"):
        load_hf(tmp_path / "m")
    config_path.write_text(json.dumps({**config, "model_type": "mistral"}))
    with pytest.raises(
        ValueError, match=r"unsupported architecture 'mistral'.*gpt2 \(GPT2LMHeadModel\), llama"
    ):
        load_hf(tmp_path / "m")


def test_an_interrupted_llama_save_leaves_no_folder(tmp_path, monkeypatch):
    model = Llama(LlamaConfig(**BASE))
    calls = []

    def crash_on_second(path, tensors, dtype):
        calls.append(path)
        if len(calls) == 2:
            raise KeyboardInterrupt
        original(path, tensors, dtype)

    original = files.write_safetensors
    monkeypatch.setattr(files, "write_safetensors", crash_on_second)
    with pytest.raises(KeyboardInterrupt):
        save_hf(model, tmp_path / "new", max_shard_size="20KB")  # dies after the first shard
    assert os.listdir(tmp_path) == []


def test_convert_llama_both_ways(tmp_path, capsys):
    hf = _hf_model(CASES["mqa-tied"])
    hf.save_pretrained(tmp_path / "hf")
    assert main(["convert", str(tmp_path / "hf"), str(tmp_path / "m.h5")]) == 0
    assert main(["convert", str(tmp_path / "m.h5"), str(tmp_path / "back")]) == 0
    again = LlamaForCausalLM.from_pretrained(tmp_path / "back").eval()
    ids = _ids()
    np.testing.assert_array_equal(_hf_logits(again, ids), _hf_logits(hf, ids))
    assert capsys.readouterr().err.count("wrote") == 2
