"""Token datasets in nanoGPT's format: a flat stream of uint16 tokens, memory-mapped.

``numtile prepare INPUT... --out DIR`` writes ``DIR/train.bin``, ``DIR/val.bin`` and
``DIR/meta.json`` (``vocab_size``, tokenizer, token counts, sources).
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

TOKEN_DTYPE = np.dtype(np.uint16)


class TokenDataset:
    """Random ``block_size`` windows of a uint16 token file, drawn from a seeded generator.

    ``batch`` draws offsets from a ``numpy.random.Generator``; ``state_dict`` and
    ``load_state_dict`` save and restore it, so a resumed run draws the same batches.

    >>> import os, tempfile, numpy as np
    >>> path = os.path.join(tempfile.mkdtemp(), "train.bin")
    >>> np.arange(100, dtype=np.uint16).tofile(path)
    >>> data = TokenDataset(path, block_size=8, seed=0)
    >>> x, y = data.batch(4)
    >>> x.shape, x.dtype, bool((y[:, :-1] == x[:, 1:]).all()), len(data)
    ((4, 8), dtype('int64'), True, 100)
    """

    def __init__(self, path: str | os.PathLike, block_size: int, seed: int = 0) -> None:
        self.path = os.fspath(path)
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        if not os.path.isfile(self.path):
            raise FileNotFoundError(
                f"no token file at {self.path}; make one with `numtile prepare INPUT... --out DIR` "
                f"(it writes DIR/train.bin, DIR/val.bin and DIR/meta.json)"
            )
        nbytes = os.path.getsize(self.path)
        if nbytes % TOKEN_DTYPE.itemsize:
            raise ValueError(f"{self.path} has {nbytes} bytes, not a whole number of uint16 tokens")
        ntokens = nbytes // TOKEN_DTYPE.itemsize
        if ntokens < block_size + 1:
            raise ValueError(
                f"{self.path} holds {ntokens} tokens, fewer than block_size + 1 = {block_size + 1}"
            )
        self.block_size = block_size
        self.tokens = np.memmap(self.path, dtype=TOKEN_DTYPE, mode="r")
        self.rng = np.random.default_rng(seed)
        self.vocab_size = read_meta(os.path.dirname(os.path.abspath(self.path))).get("vocab_size")

    def __len__(self) -> int:
        return len(self.tokens)

    def __repr__(self) -> str:
        return (
            f"TokenDataset({self.path!r}, block_size={self.block_size}, tokens={len(self)}, "
            f"vocab_size={self.vocab_size})"
        )

    def batch(self, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        """Inputs ``x`` and targets ``y`` (``x`` shifted by one token), int64 (batch, block)."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        starts = self.rng.integers(0, len(self.tokens) - self.block_size, size=batch_size)
        windows = self.tokens[starts[:, None] + np.arange(self.block_size + 1)]  # (B, T + 1)
        windows = windows.astype(np.int64)
        return np.ascontiguousarray(windows[:, :-1]), np.ascontiguousarray(windows[:, 1:])

    def state_dict(self) -> dict[str, Any]:
        """The sampler's state, JSON-serialisable (the generator's bit generator state)."""
        return {"bit_generator": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a state from ``state_dict``: the next batches are the ones that followed it."""
        self.rng.bit_generator.state = state["bit_generator"]


def read_meta(directory: str | os.PathLike) -> dict[str, Any]:
    """The ``meta.json`` that ``numtile prepare`` wrote in ``directory`` ({} when none):
    ``vocab_size``, ``tokenizer`` ("bytes" or the tokenizer.json used), token counts, sources.

    >>> read_meta("/nonexistent")
    {}
    """
    meta = os.path.join(os.fspath(directory), "meta.json")
    if not os.path.isfile(meta):
        return {}
    try:
        with open(meta, encoding="utf-8") as f:
            value = json.load(f)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{meta}: not a readable JSON file ({exc})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{meta}: expected a JSON object, got {type(value).__name__}")
    return value
