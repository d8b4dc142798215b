"""Turn text files into ``train.bin``/``val.bin`` token streams (``numtile prepare``).

The default tokenizer is byte-level (each byte of a file is one token, vocab 256); a local
``tokenizer.json`` (or the one in a Hugging Face model folder) is used through the
``tokenizers`` library. Files are tokenized one at
a time and appended to the stream, so a corpus never has to fit in memory; the last
``val_fraction`` of the stream becomes ``val.bin``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sysconfig
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from numtile.io.data import TOKEN_DTYPE
from numtile.io.files import atomic_output
from numtile.io.hf import read_json

BYTE_LEVEL = "bytes"
DEFAULT_EXTENSIONS = (".py", ".txt", ".md", ".rst")
# left out of the default corpus: installed packages and the (large, repetitive) test suites
STDLIB_SKIP = frozenset({"site-packages", "dist-packages", "test", "tests", "idle_test"})
_COPY_TOKENS = 1 << 22  # tokens per step when moving the validation tail into val.bin


def prepare(
    inputs: Sequence[str | os.PathLike],
    out_dir: str | os.PathLike,
    *,
    tokenizer: str | os.PathLike | None = None,
    val_fraction: float = 0.1,
    extensions: Sequence[str] = DEFAULT_EXTENSIONS,
    progress: bool = True,
) -> dict[str, Any]:
    """Tokenize ``inputs`` (files, or folders walked for ``extensions``) into ``out_dir``.

    Writes ``train.bin`` and ``val.bin`` (uint16 tokens, the last ``val_fraction`` of the
    stream in ``val.bin``) and ``meta.json`` (``vocab_size``, ``tokenizer``, ``n_train``,
    ``n_val``, ``sources``: the files used, in order; ``skipped``: unreadable or binary
    files), each atomically, ``meta.json`` last; returns that metadata.

    >>> import os, tempfile
    >>> src = os.path.join(tempfile.mkdtemp(), "a.txt")
    >>> _ = open(src, "w").write("hello world")
    >>> meta = prepare([src], tempfile.mkdtemp(), val_fraction=0.2, progress=False)
    >>> meta["vocab_size"], meta["n_train"], meta["n_val"]
    (256, 9, 2)
    """
    if not 0 <= val_fraction < 1:
        raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
    encode, vocab_size, tokenizer_name = _load_tokenizer(tokenizer)
    files = _collect(inputs, tuple(extensions))
    out_dir = os.fspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    meta_path = os.path.join(out_dir, "meta.json")
    with contextlib.suppress(FileNotFoundError):  # no meta.json while the streams change
        os.remove(meta_path)
    sources, skipped = [], []
    train_path, val_path = (os.path.join(out_dir, n) for n in ("train.bin", "val.bin"))
    with atomic_output(train_path) as train_tmp, atomic_output(val_path) as val_tmp:
        with open(train_tmp, "wb") as stream:
            for file in tqdm(files, desc="prepare", unit="file", disable=not progress):
                text = _read_text(file)
                if text is None:
                    skipped.append(file)
                    continue
                np.asarray(encode(text), dtype=TOKEN_DTYPE).tofile(stream)
                sources.append(file)
        total = os.path.getsize(train_tmp) // TOKEN_DTYPE.itemsize
        if total == 0:
            raise ValueError(f"no tokens in {len(files)} input file(s) from {list(inputs)}")
        n_val = round(total * val_fraction)
        n_train = total - n_val
        _move_tail(train_tmp, val_tmp, n_train)
    meta = {
        "vocab_size": vocab_size,
        "tokenizer": tokenizer_name,
        "n_train": n_train,
        "n_val": n_val,
        "sources": sources,
        "skipped": skipped,
    }
    with atomic_output(meta_path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1)
    return meta


def stdlib_corpus(cache_dir: str | os.PathLike, progress: bool = True) -> str:
    """The default corpus: the standard library's own ``.py`` files, prepared once and cached.

    Returns ``cache_dir/stdlib-corpus`` (``train.bin``, ``val.bin``, ``meta.json``),
    preparing it only if its ``meta.json`` is missing. Installed packages and test suites
    are left out, which keeps it to about ten MB of tokens.

    >>> import os, platformdirs
    >>> corpus = stdlib_corpus(platformdirs.user_cache_dir("numtile"))  # doctest: +SKIP
    >>> sorted(os.listdir(corpus))  # doctest: +SKIP
    ['meta.json', 'train.bin', 'val.bin']
    """
    out_dir = os.path.join(os.fspath(cache_dir), "stdlib-corpus")
    if not os.path.isfile(os.path.join(out_dir, "meta.json")):
        root = sysconfig.get_paths()["stdlib"]
        files = list(_walk(root, (".py",), skip=STDLIB_SKIP))
        prepare(files, out_dir, progress=progress)
    return out_dir


TOKENIZER_FILE = "tokenizer.json"


def tokenizer_file(path: str | os.PathLike) -> str:
    """The tokenizer.json that ``path`` names: the file itself, or the ``tokenizer.json`` of a
    Hugging Face model folder (``FileNotFoundError`` naming what is missing)."""
    path = os.path.abspath(os.fspath(path))
    if os.path.isdir(path):
        inside = os.path.join(path, TOKENIZER_FILE)
        if not os.path.isfile(inside):
            raise FileNotFoundError(f"{path} has no {TOKENIZER_FILE}")
        return inside
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no tokenizer file at {path} (expected a tokenizer.json)")
    return path


def load_tokenizer(path: str | os.PathLike):
    """The ``tokenizers.Tokenizer`` of a tokenizer.json or a model folder holding one
    (``ValueError`` naming the file when it is not a tokenizer)."""
    path = tokenizer_file(path)
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise ImportError(
            "a tokenizer.json needs the `tokenizers` library: pip install tokenizers "
            "(or numtile[hf])"
        ) from None
    try:
        return Tokenizer.from_file(path)
    except Exception as exc:  # tokenizers raises a bare Exception for a malformed file
        raise ValueError(f"{path}: not a readable tokenizer.json ({exc})") from None


def tokenizer_vocab_size(tokenizer) -> int:
    """Token ids a ``tokenizers.Tokenizer`` can produce (its vocabulary and added tokens)."""
    return tokenizer.get_vocab_size(with_added_tokens=True)


def _load_tokenizer(tokenizer) -> tuple[Callable[[str], Any], int, str]:
    """``(encode, vocab_size, name)`` for the byte-level tokenizer or a ``tokenizer.json``
    (a model folder's, checked against the vocabulary size in its ``config.json``)."""
    if tokenizer is None:
        return (lambda text: np.frombuffer(text.encode("utf-8"), np.uint8)), 256, BYTE_LEVEL
    path = tokenizer_file(tokenizer)
    loaded = load_tokenizer(path)
    vocab_size = tokenizer_vocab_size(loaded)
    if vocab_size > 1 << 16:
        raise ValueError(
            f"tokenizer {path} has {vocab_size} tokens; uint16 token files hold at most 65536"
        )
    config = os.path.join(os.path.dirname(path), "config.json")
    if os.path.isdir(tokenizer) and os.path.isfile(config):
        model_vocab = read_json(config).get("vocab_size")
        if isinstance(model_vocab, int) and vocab_size > model_vocab:
            raise ValueError(
                f"tokenizer {path} has {vocab_size} tokens but the model in {tokenizer} a "
                f"vocabulary of {model_vocab}: they do not belong together"
            )
    return (lambda text: loaded.encode(text).ids), vocab_size, path


def _collect(inputs, extensions: tuple[str, ...]) -> list[str]:
    """Input files, and the files under input folders with ``extensions``, sorted per folder."""
    files = []
    for item in inputs:
        item = os.fspath(item)
        if os.path.isdir(item):
            files.extend(_walk(item, extensions))
        elif os.path.isfile(item):
            files.append(os.path.abspath(item))
        else:
            raise FileNotFoundError(f"input {item} does not exist")
    if not files:
        raise ValueError(f"no files with extensions {list(extensions)} in {list(inputs)}")
    return files


def _walk(root: str, extensions: tuple[str, ...], skip=frozenset()) -> Iterator[str]:
    """Files under ``root`` ending in ``extensions``, in sorted order, skipping ``skip`` dirs."""
    for directory, dirs, names in os.walk(os.path.abspath(root)):
        dirs[:] = sorted(d for d in dirs if d not in skip)
        for name in sorted(names):
            if name.endswith(extensions):
                yield os.path.join(directory, name)


def _read_text(path: str) -> str | None:
    """The file's text, or None when it cannot be read or is binary (NUL bytes, not UTF-8)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        if b"\0" in data:
            return None
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _move_tail(train_path: str, val_path: str, n_train: int) -> None:
    """Copy the tokens after ``n_train`` of ``train_path`` into ``val_path``; cut them off."""
    tokens = np.memmap(train_path, dtype=TOKEN_DTYPE, mode="r")
    with open(val_path, "wb") as val:
        for start in range(n_train, len(tokens), _COPY_TOKENS):
            tokens[start : start + _COPY_TOKENS].tofile(val)
    del tokens  # unmap before truncating
    os.truncate(train_path, n_train * TOKEN_DTYPE.itemsize)
