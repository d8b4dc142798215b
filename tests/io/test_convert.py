"""``numtile convert`` both ways: HF -> h5 -> HF keeps every tensor; transformers loads it."""

import os

import numpy as np
import pytest
import torch
from safetensors import safe_open
from transformers import GPT2Config as HFConfig
from transformers import GPT2LMHeadModel

from numtile.cli.main import main


def _tensors(folder):
    with safe_open(os.path.join(folder, "model.safetensors"), "numpy") as f:
        return {k: f.get_tensor(k) for k in f.keys()}


def test_round_trip_hf_h5_hf(tmp_path, capsys):
    torch.manual_seed(0)
    hf = GPT2LMHeadModel(HFConfig(vocab_size=29, n_positions=8, n_embd=8, n_layer=2, n_head=2))
    hf.save_pretrained(tmp_path / "hf")
    assert main(["convert", str(tmp_path / "hf"), str(tmp_path / "m.h5")]) == 0
    assert main(["convert", str(tmp_path / "m.h5"), str(tmp_path / "back")]) == 0
    before, after = _tensors(tmp_path / "hf"), _tensors(tmp_path / "back")
    assert before.keys() == after.keys()
    for name in before:
        np.testing.assert_array_equal(after[name], before[name], err_msg=name)
    again = GPT2LMHeadModel.from_pretrained(tmp_path / "back").eval()
    ids = torch.tensor([[1, 5, 7, 2]])
    with torch.no_grad():
        torch.testing.assert_close(again(ids).logits, hf.eval()(ids).logits, rtol=0, atol=0)
    assert "wrote" in capsys.readouterr().err


def test_convert_errors_are_one_line(tmp_path, capsys):
    assert main(["convert", str(tmp_path / "missing.h5"), str(tmp_path / "out")]) == 2
    assert "no such file or folder" in capsys.readouterr().err
    (tmp_path / "junk.h5").write_bytes(b"not hdf5")
    assert main(["convert", str(tmp_path / "junk.h5"), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("numtile convert: error:") and err.count("\n") == 1
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "config.json").write_text('{"model_type": "t5"}')
    assert main(["convert", str(tmp_path / "folder"), str(tmp_path / "x.h5")]) == 2
    assert "unsupported architecture 't5'" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "out") and not os.path.exists(tmp_path / "x.h5")


@pytest.mark.parametrize("flag", [["--dtype", "float16"]])
def test_dtype_flag_only_for_hf_output(tmp_path, flag, capsys):
    (tmp_path / "folder").mkdir()
    assert main(["convert", str(tmp_path / "folder"), str(tmp_path / "x.h5"), *flag]) == 2
    assert "--dtype applies" in capsys.readouterr().err


def test_generate_command_reads_a_hugging_face_folder(tmp_path, capsys):
    torch.manual_seed(0)
    config = HFConfig(vocab_size=256, n_positions=32, n_embd=8, n_layer=1, n_head=2)
    GPT2LMHeadModel(config).save_pretrained(tmp_path / "hf")
    argv = ["generate", "--checkpoint", str(tmp_path / "hf"), "--prompt", "ab", "--tokens", "5"]
    assert main(argv) == 0
    out = capsys.readouterr()
    assert out.out.startswith("ab") and "5 tokens in" in out.err and "tokens/s" in out.err
    assert main(argv + ["--top-p", "0"]) == 2
    assert "--top-p must be in (0, 1]" in capsys.readouterr().err
