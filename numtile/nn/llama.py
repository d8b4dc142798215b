"""LLaMA, read top to bottom like ``gpt2.py``; parameter names match ``LlamaForCausalLM``."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from numtile.nn import functional
from numtile.nn.attention import grouped_query_attention
from numtile.nn.gpt2 import Tiling
from numtile.nn.layers import (
    Embedding,
    GatedMLP,
    Linear,
    ModuleList,
    RMSNorm,
    TiedHead,
    token_ids,
    weight_dtype,
)
from numtile.nn.loss import linear_cross_entropy
from numtile.nn.module import Module
from numtile.tiletensor.creation import from_numpy
from numtile.tiletensor.elementwise import add
from numtile.tiletensor.fused.attention import kv_head_tile
from numtile.tiletensor.tensor import TileTensor

_LLAMA3_KEYS = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")


@dataclasses.dataclass
class LlamaConfig:
    """Model sizes (Hugging Face ``LlamaConfig`` field names; ``head_dim`` None means
    ``hidden_size // num_attention_heads``, ``num_key_value_heads`` None means as many as
    query heads; ``rope_scaling`` None or ``{"rope_type": "llama3", "factor": ...,
    "low_freq_factor": ..., "high_freq_factor": ..., "original_max_position_embeddings": ...}``)."""

    vocab_size: int = 32000
    hidden_size: int = 4096
    intermediate_size: int = 11008
    num_hidden_layers: int = 32
    num_attention_heads: int = 32
    num_key_value_heads: int | None = None
    head_dim: int | None = None
    max_position_embeddings: int = 2048
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_scaling: dict | None = None
    attention_bias: bool = False
    mlp_bias: bool = False
    tie_word_embeddings: bool = False
    initializer_range: float = 0.02

    def __post_init__(self) -> None:
        if self.num_key_value_heads is None:
            self.num_key_value_heads = self.num_attention_heads
        if self.head_dim is None and self.num_attention_heads >= 1:
            self.head_dim = self.hidden_size // self.num_attention_heads
        sizes = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers")
        sizes += ("num_attention_heads", "num_key_value_heads", "head_dim")
        for name in sizes + ("max_position_embeddings",):
            if getattr(self, name) < 1:
                raise ValueError(f"LlamaConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"LlamaConfig.num_attention_heads ({self.num_attention_heads}) must be a "
                f"multiple of num_key_value_heads ({self.num_key_value_heads})"
            )
        if self.head_dim % 2:
            raise ValueError(f"LlamaConfig.head_dim must be even for RoPE, got {self.head_dim}")
        scaling = self.rope_scaling
        if scaling is not None:
            kind = scaling.get("rope_type", scaling.get("type"))
            missing = [key for key in _LLAMA3_KEYS if key not in scaling]
            if kind != "llama3" or missing:
                raise ValueError(
                    f"LlamaConfig.rope_scaling: only rope_type 'llama3' with {_LLAMA3_KEYS} is "
                    f"supported, got {scaling}"
                )


def inverse_frequencies(config: LlamaConfig) -> np.ndarray:
    """RoPE's inverse frequencies (head_dim / 2,), float32, computed step by step as
    transformers' default and ``_compute_llama3_parameters`` do (same float32 roundings).

    >>> inverse_frequencies(LlamaConfig(hidden_size=8, num_attention_heads=2)).tolist()
    [1.0, 0.009999999776482582]
    """
    dim = config.head_dim
    exponents = np.arange(0, dim, 2, dtype=np.int64).astype(np.float32) / np.float32(dim)
    # theta ** exponent correctly rounded to float32, as torch's float32 pow gives it (NumPy's
    # float32 power is 1 ulp off for some exponents where it uses SIMD routines, as on AVX-512)
    powers = (np.float64(config.rope_theta) ** exponents.astype(np.float64)).astype(np.float32)
    inv_freq = np.float32(1.0) / powers
    scaling = config.rope_scaling
    if scaling is None:
        return inv_freq
    factor = np.float32(scaling["factor"])
    low_freq_factor, high_freq_factor = scaling["low_freq_factor"], scaling["high_freq_factor"]
    old_context_len = scaling["original_max_position_embeddings"]
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    wavelen = np.float32(2 * math.pi) / inv_freq
    # long wavelengths are divided by the factor, short ones kept, the ones between smoothed
    inv_freq_llama = np.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (np.float32(old_context_len) / wavelen - np.float32(low_freq_factor)) / np.float32(
        high_freq_factor - low_freq_factor
    )
    smoothed = (np.float32(1) - smooth) * inv_freq_llama / factor + smooth * inv_freq_llama
    medium = ~(wavelen < high_freq_wavelen) & ~(wavelen > low_freq_wavelen)
    return np.where(medium, smoothed, inv_freq_llama).astype(np.float32)


def rope_tables(config: LlamaConfig, seq_len: int, dtype, seq_tile: int):
    """(cos, sin) TileTensors (seq_len, head_dim / 2) of the angles of positions 0..seq_len-1,
    computed in float32 as transformers' ``LlamaRotaryEmbedding`` does, then cast."""
    angles = np.arange(seq_len, dtype=np.float32)[:, None] * inverse_frequencies(config)
    tiles = (seq_tile, config.head_dim // 2)
    return tuple(
        from_numpy(np.ascontiguousarray(f(angles)).astype(dtype), tile_shape=tiles)
        for f in (np.cos, np.sin)
    )


def resolve_tiling(tiling: Tiling, config: LlamaConfig, seq_len: int) -> Tiling:
    """``tiling`` with every ``None`` made the whole axis, checked against ``config``."""
    resolved = Tiling(
        batch=tiling.batch,
        seq=tiling.seq or seq_len,
        embd=tiling.embd or config.hidden_size,
        inner=tiling.inner or config.intermediate_size,
        head=tiling.head,
        vocab=tiling.vocab or config.vocab_size,
    )
    heads, group = (
        config.num_attention_heads,
        config.num_attention_heads // config.num_key_value_heads,
    )
    head = resolved.head
    if head < 1 or heads % head or (head % group and group % head):
        raise ValueError(
            f"head tile {head} must divide num_attention_heads {heads} and divide or be a "
            f"multiple of the key/value group size {group}"
        )
    if min(resolved.batch, resolved.seq, resolved.embd, resolved.inner, resolved.vocab) < 1:
        raise ValueError(f"tile sizes must be >= 1, got {resolved}")
    return resolved


class Attention(Module):
    def __init__(self, config: LlamaConfig, tiling: Tiling, dtype, seed: int) -> None:
        super().__init__()
        C, D = config.hidden_size, config.head_dim
        self.n_head, self.n_kv_head = config.num_attention_heads, config.num_key_value_heads
        self.head_dim, self.head_tile = D, tiling.head
        kv_tile = kv_head_tile(tiling.head, self.n_head // self.n_kv_head)
        common = dict(bias=config.attention_bias, weight_layout="out_in", dtype=dtype)
        common["std"] = config.initializer_range
        q_width, kv_width = tiling.head * D, kv_tile * D
        self.q_proj = Linear(C, self.n_head * D, tile=(tiling.embd, q_width), seed=seed, **common)
        self.k_proj = Linear(
            C, self.n_kv_head * D, tile=(tiling.embd, kv_width), seed=seed + 1, **common
        )
        self.v_proj = Linear(
            C, self.n_kv_head * D, tile=(tiling.embd, kv_width), seed=seed + 2, **common
        )
        self.o_proj = Linear(
            self.n_head * D, C, tile=(q_width, tiling.embd), seed=seed + 3, **common
        )

    def forward(self, x: TileTensor, cos: TileTensor, sin: TileTensor) -> TileTensor:
        with functional.shared_bf16_casts():  # bf16-mixed: x cast once for q, k and v
            q = functional.rotary_embedding(self.q_proj(x), cos, sin, self.head_dim)  # (B,T,H*D)
            k = functional.rotary_embedding(self.k_proj(x), cos, sin, self.head_dim)  # (B,T,Hkv*D)
            v = self.v_proj(x)  # (B, T, Hkv*D)
        y = grouped_query_attention(q, k, v, self.n_head, self.n_kv_head, self.head_tile)
        return self.o_proj(y)  # (B, T, C)


class DecoderLayer(Module):
    def __init__(self, config: LlamaConfig, tiling: Tiling, dtype, seed: int) -> None:
        super().__init__()
        eps, C = config.rms_norm_eps, config.hidden_size
        self.input_layernorm = RMSNorm(C, eps, tile=tiling.embd, dtype=dtype)
        self.self_attn = Attention(config, tiling, dtype, seed)
        self.post_attention_layernorm = RMSNorm(C, eps, tile=tiling.embd, dtype=dtype)
        self.mlp = GatedMLP(
            C,
            config.intermediate_size,
            config.mlp_bias,
            tile=(tiling.embd, tiling.inner),
            dtype=dtype,
            seed=seed + 5,
            std=config.initializer_range,
        )

    def forward(self, x: TileTensor, cos: TileTensor, sin: TileTensor) -> TileTensor:
        x = add(x, self.self_attn(self.input_layernorm(x), cos, sin))
        return add(x, self.mlp(self.post_attention_layernorm(x)))


class LlamaModel(Module):
    def __init__(self, config: LlamaConfig, tiling: Tiling, dtype, seed: int) -> None:
        super().__init__()
        C = config.hidden_size
        self.embed_tokens = Embedding(
            config.vocab_size,
            C,
            tile=(tiling.vocab, tiling.embd),
            dtype=dtype,
            std=config.initializer_range,
            seed=seed,
        )
        self.layers = ModuleList(
            DecoderLayer(config, tiling, dtype, seed + 10 * (i + 1))
            for i in range(config.num_hidden_layers)
        )
        self.norm = RMSNorm(C, config.rms_norm_eps, tile=tiling.embd, dtype=dtype)


class Llama(Module):
    """LLaMA causal language model: ``forward(idx, targets) -> (logits, loss)``.

    >>> import numtile as nt, numpy as np
    >>> config = LlamaConfig(vocab_size=11, hidden_size=8, intermediate_size=12,
    ...                      num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1)
    >>> logits, loss = Llama(config, seq_len=8)(np.array([[1, 2, 3]]), np.array([[2, 3, 4]]))
    >>> logits.shape, bool(abs(loss.item() - np.log(11)) < 0.5)
    ((1, 3, 11), True)
    """

    def __init__(
        self,
        config: LlamaConfig,
        tiling: Tiling | None = None,
        *,
        dtype="float32",
        seed: int = 0,
        seq_len: int | None = None,
    ) -> None:
        super().__init__()
        self.config = config
        self.tiling = resolve_tiling(
            tiling or Tiling(), config, seq_len or config.max_position_embeddings
        )
        self.dtype = weight_dtype(dtype, "Llama")
        self.model = LlamaModel(config, self.tiling, dtype, seed)
        if config.tie_word_embeddings:
            self.lm_head = TiedHead(self.model.embed_tokens.weight)
        else:
            self.lm_head = Linear(
                config.hidden_size,
                config.vocab_size,
                bias=False,
                weight_layout="out_in",
                tile=(self.tiling.embd, self.tiling.vocab),
                dtype=dtype,
                std=config.initializer_range,
                seed=seed + 1,
            )
        self._tables: dict = {}  # (cos, sin) tables by length (and by row for decoding)

    def _rope(self, T: int) -> tuple[TileTensor, TileTensor]:
        """The (cos, sin) tables of positions 0..T-1, made once per length."""
        if T not in self._tables:
            self._tables[T] = rope_tables(self.config, T, self.dtype, self.tiling.seq)
        return self._tables[T]

    def forward(self, idx, targets=None) -> tuple[TileTensor, TileTensor | None]:
        idx = token_ids(
            idx,
            self.config.vocab_size,
            self.config.max_position_embeddings,
            "max_position_embeddings",
        )
        T = idx.shape[1]
        ids = from_numpy(idx.astype(np.int64), tile_shape=(self.tiling.batch, self.tiling.seq))
        cos, sin = self._rope(T)
        x = self.model.embed_tokens(ids)  # (B, T, C)
        for layer in self.model.layers:
            x = layer(x, cos, sin)
        x = self.model.norm(x)
        if targets is not None:  # one node: its backward walks the vocabulary once
            return linear_cross_entropy(x, self.lm_head.weight, targets)
        return functional.linear(x, self.lm_head.weight, transposed=True), None  # (B, T, V)

    def generate(self, prompt_ids, max_new_tokens: int, **options):
        """Sample ids after ``prompt_ids`` with a key/value cache (``numtile.nn.generation``)."""
        from numtile.nn.generation import generate

        return generate(self, prompt_ids, max_new_tokens, **options)
