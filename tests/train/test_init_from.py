"""Fine-tuning: ``numtile train --init-from FOLDER`` starts from a transformers folder (GPT-2
and LLaMA) with its tokenizer.json, resumes exactly, and refuses a tokenizer or data that do
not belong to the model before training starts."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    AutoModelForCausalLM,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
)

from numtile.cli.main import main
from numtile.io import TokenDataset, prepare
from numtile.train import TrainConfig, Trainer, generate, load_model

WORDS = ["def", "return", "class", "import", "self", "for", "in", "if", "else", ":", "\n"]
SEQ = 16


def _tokenizer(text: str) -> Tokenizer:
    """A byte-level BPE tokenizer trained on ``text`` (decodes back to the same text)."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=280, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tokenizer.train_from_iterator([text], trainer)
    return tokenizer


def _hf_model(kind: str, vocab: int):
    torch.manual_seed(0)
    if kind == "gpt2":
        config = GPT2Config(vocab_size=vocab, n_positions=SEQ, n_embd=32, n_layer=2, n_head=2)
        return GPT2LMHeadModel(config)
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=32,
        intermediate_size=40,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=SEQ,
    )
    return LlamaForCausalLM(config)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """(root, source folder, tokenizer size): a tokenizer.json trained on the corpus."""
    root = tmp_path_factory.mktemp("finetune")
    (root / "src").mkdir()
    text = " ".join(np.random.default_rng(0).choice(WORDS, 3000))
    (root / "src" / "a.py").write_text(text)
    tokenizer = _tokenizer(text)
    tokenizer.save(str(root / "tokenizer.json"))
    return root, tokenizer.get_vocab_size(with_added_tokens=True)


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def folder(request, corpus):
    """A transformers folder with the corpus's tokenizer.json, and its data prepared with it."""
    root, size = corpus
    kind = request.param
    hf = _hf_model(kind, size + 3)  # models often have a few more rows than the tokenizer
    hf.save_pretrained(root / kind)
    (root / kind / "tokenizer.json").write_bytes((root / "tokenizer.json").read_bytes())
    data = root / f"data-{kind}"
    argv = ["prepare", str(root / "src"), "--tokenizer", str(root / kind), "--out", str(data)]
    assert main(argv) == 0
    return str(root / kind), str(data), hf.eval()


def _config(folder, data, checkpoint, **overrides):
    base = dict(
        init_from=folder,
        data=data,
        steps=4,
        batch=2,
        seq_len=SEQ,
        batch_tile=1,
        warmup=1,
        eval_every=100,
        eval_batches=1,
        checkpoint=checkpoint,
        checkpoint_every=2,
        sample_tokens=0,
    )
    return TrainConfig(**{**base, **overrides})


def test_fine_tuning_starts_from_the_folder_and_resumes_exactly(folder, tmp_path):
    path, data, hf = folder
    trainer = Trainer(_config(path, data, str(tmp_path / "run.h5")))
    x, y = TokenDataset(f"{data}/train.bin", SEQ, seed=0).batch(2)  # the first batch drawn
    with torch.no_grad():
        logits = hf(torch.tensor(x)).logits
        expected = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), torch.tensor(y).reshape(-1)
        ).item()
    straight = trainer.run(progress=False)["train_loss"]
    assert straight[0] == pytest.approx(expected, rel=1e-5)  # the folder's weights, trained
    assert straight[-1] < straight[0]

    half = str(tmp_path / "half.h5")
    stopped = Trainer(_config(path, data, half))
    first = stopped.run(progress=False, stop_requested=lambda: stopped.step >= 2)["train_loss"]
    resumed = Trainer(_config(path, data, half, resume=half))
    assert resumed.step == 2
    assert first + resumed.run(progress=False)["train_loss"] == straight  # bit for bit
    with pytest.raises(ValueError, match=f"fine-tuned from {path}: pass --init-from"):
        other = '{"vocab_size": 400, "n_positions": 16, "n_embd": 32, "n_layer": 1, "n_head": 2}'
        Trainer(_config(None, data, half, resume=half, model=other))

    model, attrs = load_model(str(tmp_path / "run.h5"))
    assert type(model).__name__ == ("GPT2" if "gpt2" in path else "Llama")
    assert attrs["train_config"]["init_from"] == path


def test_generate_uses_the_folder_tokenizer(folder, tmp_path, capsys):
    path, data, _ = folder
    argv = ["train", "--init-from", path, "--data", data, "--steps", "1", "--batch", "2"]
    argv += ["--seq-len", str(SEQ), "--eval-every", "1", "--eval-batches", "1"]
    argv += ["--checkpoint", str(tmp_path / "ft.h5"), "--sample-tokens", "4"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "sample:\ndef " in out  # the prompt encoded and decoded with the tokenizer
    tokenizer = Tokenizer.from_file(f"{path}/tokenizer.json")
    prompt = np.array(tokenizer.encode("def return").ids)
    for checkpoint in (str(tmp_path / "ft.h5"), path):
        argv = ["generate", "--checkpoint", checkpoint, "--prompt", "def return", "--tokens", "6"]
        assert main(argv) == 0
        out = capsys.readouterr()
        assert "6 tokens in" in out.err
        ids = generate(load_model(checkpoint)[0], prompt, 6, temperature=0.8, top_k=40)
        assert out.out == "def return" + tokenizer.decode(ids[prompt.size :].tolist()) + "\n"


def test_a_fine_tuned_checkpoint_converts_back_with_its_tokenizer(folder, tmp_path, capsys):
    path, data, _ = folder
    checkpoint = str(tmp_path / "ft.h5")
    Trainer(_config(path, data, checkpoint, steps=1)).run(progress=False)
    assert main(["convert", checkpoint, str(tmp_path / "out")]) == 0
    tokenizer = (tmp_path / "out" / "tokenizer.json").read_bytes()
    assert tokenizer == open(f"{path}/tokenizer.json", "rb").read()
    hf = AutoModelForCausalLM.from_pretrained(tmp_path / "out").eval()
    ids = np.array([Tokenizer.from_file(f"{path}/tokenizer.json").encode("def return").ids])
    with torch.no_grad():
        theirs = hf(torch.tensor(ids)).logits.numpy()
    ours = load_model(checkpoint)[0](ids)[0].to_numpy()
    assert np.linalg.norm(theirs - ours) / np.linalg.norm(ours) < 1e-5
    capsys.readouterr()
    argv = ["convert", checkpoint, str(tmp_path / "again"), "--tokenizer", str(tmp_path / "no")]
    line = _one_line_error(argv, capsys, 2)
    assert "no tokenizer file at" in line and not (tmp_path / "again").exists()


def _one_line_error(argv, capsys, status):
    assert main(argv) == status
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_mismatched_tokenizer_or_data_stops_before_training(folder, corpus, tmp_path, capsys):
    path, data, _ = folder
    root, size = corpus
    base = ["train", "--init-from", path, "--steps", "1", "--seq-len", str(SEQ)]
    base += ["--checkpoint", str(tmp_path / "x.h5"), "--sample-tokens", "0"]
    prepare([str(root / "src")], str(tmp_path / "bytes"), progress=False)
    line = _one_line_error(base + ["--data", str(tmp_path / "bytes")], capsys, 2)
    assert "was tokenized with bytes (256 tokens), not with" in line and "--tokenizer" in line
    line = _one_line_error(base + ["--data", data, "--model", "gpt2-mini"], capsys, 2)
    assert "--init-from" in line and "drop --model gpt2-mini" in line
    line = _one_line_error(
        base[:2] + [str(tmp_path / "none")] + base[3:] + ["--data", data], capsys, 2
    )
    assert "no such folder" in line
    assert not (tmp_path / "x.h5").exists()


def test_tokenizer_larger_than_the_model_is_refused(corpus, tmp_path, capsys):
    root, size = corpus
    small = _hf_model("llama", size - 10)
    small.save_pretrained(tmp_path / "small")
    (tmp_path / "small" / "tokenizer.json").write_bytes((root / "tokenizer.json").read_bytes())
    capsys.readouterr()  # transformers' progress bar
    argv = ["prepare", str(root / "src"), "--tokenizer", str(tmp_path / "small")]
    line = _one_line_error(argv + ["--out", str(tmp_path / "d")], capsys, 2)
    assert f"has {size} tokens but the model in" in line and f"vocabulary of {size - 10}" in line
    # data prepared from the file itself (no model to check against): train refuses it
    assert main(["prepare", str(root / "src"), "--tokenizer", str(root / "tokenizer.json"),
                 "--out", str(tmp_path / "d")]) == 0  # fmt: skip
    capsys.readouterr()
    argv = ["train", "--init-from", str(tmp_path / "small"), "--data", str(tmp_path / "d")]
    line = _one_line_error(argv + ["--seq-len", str(SEQ), "--checkpoint", ""], capsys, 2)
    assert f"has {size} tokens but the model in" in line
    argv = ["generate", "--checkpoint", str(tmp_path / "small"), "--tokens", "2"]
    line = _one_line_error(argv, capsys, 2)
    assert f"has {size} tokens but the model" in line


def test_truncated_weights_stop_before_training(corpus, tmp_path, capsys):
    root, size = corpus
    _hf_model("gpt2", size).save_pretrained(tmp_path / "m")
    weights = tmp_path / "m" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    prepare([str(root / "src")], str(tmp_path / "bytes"), progress=False)
    capsys.readouterr()
    argv = ["train", "--init-from", str(tmp_path / "m"), "--data", str(tmp_path / "bytes")]
    argv += ["--seq-len", str(SEQ)]
    line = _one_line_error(argv + ["--checkpoint", ""], capsys, 2)
    assert "not a readable safetensors file" in line and str(weights) in line
    (tmp_path / "m" / "config.json").write_text('{"model_type": "t5"}')
    line = _one_line_error(argv + ["--checkpoint", ""], capsys, 2)
    assert "unsupported architecture 't5'" in line and "llama (LlamaForCausalLM)" in line
