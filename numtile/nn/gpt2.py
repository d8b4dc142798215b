"""GPT-2, read top to bottom like nanoGPT's ``model.py``; parameter names match Hugging Face."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from numtile.nn import functional
from numtile.nn.attention import causal_self_attention
from numtile.nn.layers import (
    MLP,
    Embedding,
    LayerNorm,
    Linear,
    ModuleList,
    TiedHead,
    token_ids,
    weight_dtype,
)
from numtile.nn.loss import linear_cross_entropy
from numtile.nn.module import Module
from numtile.tiletensor.creation import from_numpy
from numtile.tiletensor.elementwise import add
from numtile.tiletensor.tensor import TileTensor


@dataclasses.dataclass
class GPT2Config:
    """Model sizes (Hugging Face ``GPT2Config`` field names)."""

    vocab_size: int = 50304
    n_positions: int = 1024
    n_embd: int = 768
    n_layer: int = 12
    n_head: int = 12
    layer_norm_epsilon: float = 1e-5

    def __post_init__(self) -> None:
        for name in ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head"):
            if getattr(self, name) < 1:
                raise ValueError(f"GPT2Config.{name} must be >= 1, got {getattr(self, name)}")
        if self.n_embd % self.n_head:
            raise ValueError(
                f"GPT2Config.n_embd ({self.n_embd}) must be divisible by n_head ({self.n_head})"
            )


@dataclasses.dataclass
class Tiling:
    """Tile sizes: activations are (batch, seq, embd) tiles; weights follow.

    ``head`` heads share an attention tile; ``inner`` tiles the 4x MLP width and ``vocab``
    the vocabulary. ``None`` means "whole axis".
    """

    batch: int = 1
    seq: int | None = None
    embd: int | None = None
    inner: int | None = None
    head: int = 1
    vocab: int | None = None

    def resolve(self, config: GPT2Config, seq_len: int) -> Tiling:
        tiling = Tiling(
            batch=self.batch,
            seq=self.seq or seq_len,
            embd=self.embd or config.n_embd,
            inner=self.inner or 4 * config.n_embd,
            head=self.head,
            vocab=self.vocab or config.vocab_size,
        )
        if config.n_head % tiling.head:
            raise ValueError(f"n_head {config.n_head} is not a multiple of head tile {tiling.head}")
        if min(tiling.batch, tiling.seq, tiling.embd, tiling.inner, tiling.vocab) < 1:
            raise ValueError(f"tile sizes must be >= 1, got {tiling}")
        return tiling


class SelfAttention(Module):
    def __init__(self, config: GPT2Config, tiling: Tiling, dtype, seed: int) -> None:
        super().__init__()
        C, head_width = config.n_embd, tiling.head * (config.n_embd // config.n_head)
        self.n_head, self.head_tile = config.n_head, tiling.head
        self.c_attn = Linear(C, 3 * C, tile=(tiling.embd, head_width), dtype=dtype, seed=seed)
        self.c_proj = Linear(
            C,
            C,
            tile=(head_width, tiling.embd),
            dtype=dtype,
            seed=seed + 1,
            std=0.02 / math.sqrt(2 * config.n_layer),
        )

    def forward(self, x: TileTensor) -> TileTensor:
        qkv = self.c_attn(x)  # (B, T, 3C)
        y = causal_self_attention(qkv, self.n_head, self.head_tile)  # (B, T, C)
        return self.c_proj(y)


class Block(Module):
    def __init__(self, config: GPT2Config, tiling: Tiling, dtype, seed: int) -> None:
        super().__init__()
        eps, C = config.layer_norm_epsilon, config.n_embd
        self.ln_1 = LayerNorm(C, eps, tile=tiling.embd, dtype=dtype)
        self.attn = SelfAttention(config, tiling, dtype, seed)
        self.ln_2 = LayerNorm(C, eps, tile=tiling.embd, dtype=dtype)
        self.mlp = MLP(
            C,
            4 * C,
            tile=(tiling.embd, tiling.inner),
            dtype=dtype,
            seed=seed + 2,
            proj_std=0.02 / math.sqrt(2 * config.n_layer),
        )

    def forward(self, x: TileTensor) -> TileTensor:
        x = add(x, self.attn(self.ln_1(x)))
        return add(x, self.mlp(self.ln_2(x)))


class Transformer(Module):
    def __init__(self, config: GPT2Config, tiling: Tiling, dtype, seed: int) -> None:
        super().__init__()
        C = config.n_embd
        self.wte = Embedding(
            config.vocab_size, C, tile=(tiling.vocab, tiling.embd), dtype=dtype, seed=seed
        )
        self.wpe = Embedding(
            config.n_positions,
            C,
            tile=(tiling.seq, tiling.embd),
            dtype=dtype,
            std=0.01,
            seed=seed + 1,
        )
        self.h = ModuleList(
            Block(config, tiling, dtype, seed + 10 * (i + 1)) for i in range(config.n_layer)
        )
        self.ln_f = LayerNorm(C, config.layer_norm_epsilon, tile=tiling.embd, dtype=dtype)


class GPT2(Module):
    """GPT-2 language model: ``forward(idx, targets) -> (logits, loss)``.

    >>> import numtile as nt, numpy as np
    >>> model = GPT2(GPT2Config(vocab_size=11, n_positions=8, n_embd=8, n_layer=1, n_head=2))
    >>> logits, loss = model(np.array([[1, 2, 3]]), np.array([[2, 3, 4]]))
    >>> logits.shape, bool(abs(loss.item() - np.log(11)) < 0.5)
    ((1, 3, 11), True)
    """

    def __init__(
        self,
        config: GPT2Config,
        tiling: Tiling | None = None,
        *,
        dtype="float32",
        seed: int = 0,
        seq_len: int | None = None,
    ) -> None:
        super().__init__()
        self.config = config
        self.tiling = (tiling or Tiling()).resolve(config, seq_len or config.n_positions)
        self.dtype = weight_dtype(dtype, "GPT2")
        self.transformer = Transformer(config, self.tiling, dtype, seed)
        self.lm_head = TiedHead(self.transformer.wte.weight)

    def _ids(self, values: np.ndarray) -> TileTensor:
        return from_numpy(values.astype(np.int64), tile_shape=(self.tiling.batch, self.tiling.seq))

    def forward(self, idx, targets=None) -> tuple[TileTensor, TileTensor | None]:
        idx = token_ids(idx, self.config.vocab_size, self.config.n_positions, "n_positions")
        B, T = idx.shape
        positions = np.broadcast_to(np.arange(T), (B, T))
        tok = self.transformer.wte(self._ids(idx))  # (B, T, C)
        pos = self.transformer.wpe(self._ids(positions))  # (B, T, C)
        x = add(tok, pos)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        if targets is not None:  # one node: its backward walks the vocabulary once
            return linear_cross_entropy(x, self.lm_head.weight, targets)
        return functional.linear(x, self.lm_head.weight, transposed=True), None  # (B, T, V)

    def generate(self, prompt_ids, max_new_tokens: int, **options):
        """Sample ids after ``prompt_ids`` with a key/value cache (``numtile.nn.generation``)."""
        from numtile.nn.generation import generate

        return generate(self, prompt_ids, max_new_tokens, **options)
