"""``prepare``: byte-level and tokenizer.json token files, the stdlib corpus, the CLI."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sysconfig

import numpy as np
import pytest

from numtile.io import TokenDataset, prepare, stdlib_corpus

# ``numtile.io.prepare`` is the function once the package is imported; the module is here
prepare_module = importlib.import_module("numtile.io.prepare")

TEXTS = {
    "a.py": "def f(x):\n    return x + 1\n",
    "sub/b.txt": "héllo wörld, the quick brown fox\n" * 3,
    "sub/deeper/c.md": "# title\n\nsome *markdown* text\n",
    "d.rst": "hello world\n=========\n",
    "e.json": '{"not": "taken from folders"}',
}


@pytest.fixture
def corpus(tmp_path):
    """A small source tree with text files, an unlisted extension and two binary files."""
    root = tmp_path / "corpus"
    for name, text in TEXTS.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    (root / "sub" / "binary.py").write_bytes(b"print(1)\x00\x01\x02")
    (root / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    return root


def _read(out_dir, name):
    return np.fromfile(os.path.join(out_dir, name), dtype=np.uint16)


def test_byte_level_tokens_are_the_bytes_of_the_sources_in_sorted_order(corpus, tmp_path):
    out = tmp_path / "out"
    meta = prepare([str(corpus)], str(out), progress=False)
    taken = ["a.py", "d.rst", "sub/b.txt", "sub/deeper/c.md"]  # sorted walk, listed extensions
    assert meta["sources"] == [str(corpus / name) for name in taken]
    assert meta["skipped"] == [str(corpus / "latin1.txt"), str(corpus / "sub" / "binary.py")]
    expected = b"".join(TEXTS[name].encode("utf-8") for name in taken)
    train, val = _read(out, "train.bin"), _read(out, "val.bin")
    assert bytes(np.concatenate([train, val]).astype(np.uint8)) == expected
    assert len(val) == round(len(expected) * 0.1) and len(train) == len(expected) - len(val)
    assert meta["n_train"] == len(train) and meta["n_val"] == len(val)
    assert meta["vocab_size"] == 256 and meta["tokenizer"] == "bytes"
    assert json.loads((out / "meta.json").read_text()) == meta
    assert sorted(os.listdir(out)) == ["meta.json", "train.bin", "val.bin"]
    assert TokenDataset(out / "train.bin", block_size=8).vocab_size == 256


@pytest.mark.parametrize("val_fraction", [0.0, 0.25, 0.5])
def test_val_fraction_sets_the_split_and_output_is_deterministic(corpus, tmp_path, val_fraction):
    first = prepare([corpus], tmp_path / "one", val_fraction=val_fraction, progress=False)
    second = prepare([corpus], tmp_path / "two", val_fraction=val_fraction, progress=False)
    assert first == second
    total = first["n_train"] + first["n_val"]
    assert first["n_val"] == round(total * val_fraction)
    for name in ("train.bin", "val.bin"):
        np.testing.assert_array_equal(_read(tmp_path / "one", name), _read(tmp_path / "two", name))


def test_files_given_by_name_are_taken_whatever_their_extension(corpus, tmp_path):
    meta = prepare(
        [corpus / "e.json", corpus / "a.py"], tmp_path / "out", val_fraction=0, progress=False
    )
    assert meta["sources"] == [str(corpus / "e.json"), str(corpus / "a.py")]
    expected = (TEXTS["e.json"] + TEXTS["a.py"]).encode()
    assert bytes(_read(tmp_path / "out", "train.bin").astype(np.uint8)) == expected


def test_extensions_select_the_files_taken_from_folders(corpus, tmp_path):
    meta = prepare([corpus], tmp_path / "out", extensions=(".md",), progress=False)
    assert meta["sources"] == [str(corpus / "sub" / "deeper" / "c.md")]


def _word_level_tokenizer(path, vocab):
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(path))
    return tokenizer


def _bpe_tokenizer(path):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=80, special_tokens=["[UNK]"])
    tokenizer.train_from_iterator(list(TEXTS.values()), trainer)
    tokenizer.save(str(path))
    return tokenizer


@pytest.mark.parametrize("make", ["word_level", "bpe"])
def test_tokenizer_json_gives_its_ids_and_vocab_size(corpus, tmp_path, make):
    pytest.importorskip("tokenizers")
    path = tmp_path / "tokenizer.json"
    if make == "bpe":
        tokenizer = _bpe_tokenizer(path)
    else:
        words = sorted({w for text in TEXTS.values() for w in text.split()})
        tokenizer = _word_level_tokenizer(
            path, {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(words)}}
        )
    meta = prepare([corpus], tmp_path / "out", tokenizer=path, val_fraction=0.2, progress=False)
    assert meta["tokenizer"] == str(path) and meta["vocab_size"] == tokenizer.get_vocab_size()
    expected = [i for file in meta["sources"] for i in tokenizer.encode(open(file).read()).ids]
    tokens = np.concatenate(
        [_read(tmp_path / "out", "train.bin"), _read(tmp_path / "out", "val.bin")]
    )
    assert tokens.tolist() == expected and len(expected) > 10
    assert meta["n_val"] == round(len(expected) * 0.2)


def test_tokenizer_too_large_for_uint16_is_rejected(corpus, tmp_path):
    pytest.importorskip("tokenizers")
    path = tmp_path / "big.json"
    _word_level_tokenizer(path, {"[UNK]": 0, **{f"w{i}": i + 1 for i in range(70000)}})
    with pytest.raises(ValueError, match="70001 tokens.*65536"):
        prepare([corpus], tmp_path / "out", tokenizer=path, progress=False)


def test_input_errors(corpus, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        prepare([corpus / "missing.txt"], out, progress=False)
    with pytest.raises(FileNotFoundError, match="tokenizer"):
        prepare([corpus], out, tokenizer=tmp_path / "nope.json", progress=False)
    with pytest.raises(ValueError, match=r"no files with extensions \['.cpp'\]"):
        prepare([corpus], out, extensions=(".cpp",), progress=False)
    with pytest.raises(ValueError, match="no tokens"):
        prepare([corpus / "sub" / "binary.py"], out, progress=False)
    with pytest.raises(ValueError, match="val_fraction"):
        prepare([corpus], out, val_fraction=1.0, progress=False)
    assert not out.exists() or os.listdir(out) == []


def test_interrupted_prepare_leaves_no_temp_files_and_no_meta(corpus, tmp_path, monkeypatch):
    out = tmp_path / "out"
    prepare([corpus], out, progress=False)
    train_before = (out / "train.bin").read_bytes()

    def interrupt(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(prepare_module, "_move_tail", interrupt)
    with pytest.raises(KeyboardInterrupt):
        prepare([corpus / "a.py"], out, progress=False)
    assert sorted(os.listdir(out)) == ["train.bin", "val.bin"]  # meta.json gone: incomplete
    assert (out / "train.bin").read_bytes() == train_before


def test_stdlib_corpus_skips_packages_and_tests_and_is_cached(tmp_path, monkeypatch):
    stdlib = tmp_path / "lib" / "python3"
    for name in [
        "os.py",
        "json/decoder.py",
        "site-packages/pkg.py",
        "test/test_os.py",
        "idlelib/idle_test/t.py",
        "json/tests/t.py",
        "README.txt",
    ]:
        (stdlib / name).parent.mkdir(parents=True, exist_ok=True)
        (stdlib / name).write_text(f"# {name}\n")
    paths = {**sysconfig.get_paths(), "stdlib": str(stdlib)}
    monkeypatch.setattr(sysconfig, "get_paths", lambda: paths)
    out = stdlib_corpus(tmp_path / "cache", progress=False)
    assert out == str(tmp_path / "cache" / "stdlib-corpus")
    meta = json.loads(open(os.path.join(out, "meta.json")).read())
    assert meta["sources"] == [str(stdlib / "os.py"), str(stdlib / "json" / "decoder.py")]
    monkeypatch.setattr(prepare_module, "prepare", lambda *a, **k: pytest.fail("not cached"))
    assert stdlib_corpus(tmp_path / "cache") == out


def _cli(argv):
    from numtile.cli.prepare import register

    parser = argparse.ArgumentParser(prog="numtile")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli_prepares_and_reports(corpus, tmp_path, capsys):
    out = tmp_path / "out"
    assert _cli(["prepare", str(corpus), "--out", str(out), "--val-fraction", "0.5"]) == 0
    printed = capsys.readouterr().out
    meta = json.loads((out / "meta.json").read_text())
    assert f"({meta['n_train']} tokens)" in printed and "4 file(s)" in printed
    assert "skipped 2" in printed
    assert meta["n_val"] == round((meta["n_train"] + meta["n_val"]) * 0.5)


def test_cli_extensions_and_tokenizer_flags(corpus, tmp_path):
    pytest.importorskip("tokenizers")
    tokenizer = tmp_path / "tokenizer.json"
    _bpe_tokenizer(tokenizer)
    out = tmp_path / "out"
    argv = [
        "prepare",
        str(corpus),
        "--out",
        str(out),
        "--tokenizer",
        str(tokenizer),
        "--extensions",
        ".py,.md",
    ]
    assert _cli(argv) == 0
    meta = json.loads((out / "meta.json").read_text())
    assert meta["tokenizer"] == str(tokenizer) and len(meta["sources"]) == 2


def test_cli_input_error_is_a_message_and_status_2(tmp_path, capsys):
    assert _cli(["prepare", str(tmp_path / "nothing"), "--out", str(tmp_path / "out")]) == 2
    assert "numtile prepare: error:" in capsys.readouterr().err


def test_cli_requires_inputs_and_out(tmp_path):
    with pytest.raises(SystemExit) as info:
        _cli(["prepare", str(tmp_path)])
    assert info.value.code == 2
