"""Sampling from a GPT-2 or a LLaMA with a key/value cache: each new token costs one position.

``generate`` runs the prompt through the model once (the prefill), writing every layer's
keys and values into caches preallocated to the final length (``tiletensor.fused.decode``),
then feeds one new token per step: a step projects only that position, appends its key and
value to the caches and attends to them with the decode-attention kernel. Logits are
computed for the last position only. Sampling (temperature, top-k, top-p) happens on the
host in float64; ``temperature=0`` is greedy decoding, as transformers' ``do_sample=False``.

Generation runs in the model's precision mode (``model.set_precision``, else the caller's
``nt.nn.precision``). In ``bf16-mixed`` a float32 model's key/value caches and attention
output are bfloat16, as under ``torch.autocast``: the projections' bfloat16 keys and values
are stored as they are (half the float32 cache), and the decode attention reads them in
float32 (exact), keeping float64 softmax statistics, and rounds its output once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from numtile.autograd import no_grad
from numtile.nn import functional
from numtile.nn.attention import causal_self_attention, grouped_query_attention
from numtile.nn.llama import rope_tables
from numtile.tiletensor.creation import from_numpy
from numtile.tiletensor.dtypes import bfloat16_dtype
from numtile.tiletensor.elementwise import add, copy_into
from numtile.tiletensor.fused.attention import kv_head_tile
from numtile.tiletensor.fused.decode import (
    DecodeState,
    TaskRecording,
    cache_write,
    cache_write_rows,
    decode_attention,
    grouped_decode_attention,
    kv_cache,
    row_view,
)
from numtile.tiletensor.fused.rows import match_last_tile
from numtile.tiletensor.precision import current_precision, using_precision
from numtile.tiletensor.tensor import TileTensor


class KVCache:
    """The k and v caches of every layer, (B, length, key/value width) TileTensors, how much
    of them is filled, the decode-attention state every layer reuses, and the recorded step."""

    def __init__(self, model, batch: int, length: int, seq_tile: int | None = None) -> None:
        n_head, n_kv_head, head_dim, layers = _heads(model)
        group = n_head // n_kv_head
        kv_tile = kv_head_tile(model.tiling.head, group)
        batch_tile = min(model.tiling.batch, batch)
        tiles = (batch_tile, seq_tile or length, kv_tile * head_dim)
        self.length, self.filled = length, 0
        # bf16-mixed: a float32 model's keys and values are bfloat16, kept so (as autocast)
        bf16 = current_precision() == "bf16-mixed" and model.dtype == np.float32
        dtype = bfloat16_dtype() if bf16 else model.dtype
        self.k = [kv_cache(batch, length, n_kv_head * head_dim, tiles, dtype) for _ in layers]
        self.v = [kv_cache(batch, length, n_kv_head * head_dim, tiles, dtype) for _ in layers]
        head_tile = model.tiling.head
        self.state = DecodeState(batch, n_head, head_dim, batch_tile, head_tile, dtype)
        self.step: _Step | None = None


def _heads(model):
    """(query heads, key/value heads, head width, layers) of a GPT-2 or a LLaMA."""
    config = model.config
    if hasattr(model, "transformer"):
        return config.n_head, config.n_head, config.n_embd // config.n_head, model.transformer.h
    heads = config.num_attention_heads, config.num_key_value_heads
    return heads + (config.head_dim, model.model.layers)


def _context(model) -> int:
    config = model.config
    return getattr(config, "n_positions", None) or config.max_position_embeddings


def _ids(model, values: np.ndarray) -> TileTensor:
    return from_numpy(values.astype(np.int64), tile_shape=(model.tiling.batch, model.tiling.seq))


class _GPT2:
    """GPT-2's forward cut where the key/value cache comes in: ``embed``, then per block
    ``before`` (up to the qkv projection), ``attend`` (cache write and attention) and
    ``after`` (the rest of the block), then ``final`` (the last norm)."""

    def __init__(self, model) -> None:
        self.model, self.layers = model, list(model.transformer.h)

    def inputs(self, ids: np.ndarray, start: int) -> list[np.ndarray]:
        B, T = ids.shape
        return [ids, np.broadcast_to(np.arange(start, start + T), (B, T))]

    def embed(self, ids: TileTensor, positions: TileTensor) -> TileTensor:
        return add(self.model.transformer.wte(ids), self.model.transformer.wpe(positions))

    def before(self, i: int, x: TileTensor, cache: KVCache):
        block = self.layers[i]
        return match_last_tile(block.attn.c_attn(block.ln_1(x)), cache.k[i].tile_shape[2])

    def attend(self, i: int, qkv: TileTensor, cache: KVCache, start: int) -> TileTensor:
        k, v, n_head = cache.k[i], cache.v[i], self.model.config.n_head
        cache_write(qkv, k, v, start)
        if qkv.shape[1] == 1:
            return decode_attention(qkv, k, v, start + 1, n_head, cache.state)
        return causal_self_attention(qkv, n_head, self.model.tiling.head)

    def after(self, i: int, x: TileTensor, y: TileTensor) -> TileTensor:
        block = self.layers[i]
        x = add(x, block.attn.c_proj(y))
        return add(x, block.mlp(block.ln_2(x)))

    def final(self, x: TileTensor) -> TileTensor:
        return self.model.transformer.ln_f(x)


class _Llama(_GPT2):
    """LLaMA's forward cut as ``_GPT2``'s; RoPE is applied in ``attend``, at the position."""

    def __init__(self, model) -> None:
        self.model, self.layers = model, list(model.model.layers)

    def inputs(self, ids: np.ndarray, start: int) -> list[np.ndarray]:
        return [ids]

    def embed(self, ids: TileTensor) -> TileTensor:
        return self.model.model.embed_tokens(ids)  # (B, T, C)

    def before(self, i: int, x: TileTensor, cache: KVCache):
        attn = self.layers[i].self_attn
        h = self.layers[i].input_layernorm(x)
        return attn.q_proj(h), attn.k_proj(h), attn.v_proj(h)  # (B, T, H*D), 2 x (B, T, Hkv*D)

    def attend(self, i: int, qkv, cache: KVCache, start: int) -> TileTensor:
        attn = self.layers[i].self_attn
        T = qkv[0].shape[1]
        cos, sin = _rope_rows(self.model, start, T)
        q, k = (functional.rotary_embedding(t, cos, sin, attn.head_dim) for t in qkv[:2])
        cache_write_rows(k, cache.k[i], start)
        cache_write_rows(qkv[2], cache.v[i], start)
        heads = (attn.n_head, attn.n_kv_head, attn.head_tile)
        if T == 1:
            return grouped_decode_attention(
                q, cache.k[i], cache.v[i], start + 1, *heads, cache.state
            )
        return grouped_query_attention(q, k, qkv[2], *heads)

    def after(self, i: int, x: TileTensor, y: TileTensor) -> TileTensor:
        layer = self.layers[i]
        x = add(x, layer.self_attn.o_proj(y))
        return add(x, layer.mlp(layer.post_attention_layernorm(x)))

    def final(self, x: TileTensor) -> TileTensor:
        return self.model.model.norm(x)


def _rope_rows(model, start: int, T: int) -> tuple[TileTensor, TileTensor]:
    """The (cos, sin) tables (T, head_dim / 2) of positions start..start+T-1: the model's own
    prefill tables at start 0, else views of one row of tables tiled by row."""
    if start == 0:
        return model._rope(T)
    key = ("rows", _context(model))
    if key not in model._tables:
        model._tables[key] = rope_tables(model.config, key[1], model.dtype, 1)
    return tuple(row_view(table, start) for table in model._tables[key])


def _logits(model, x: TileTensor) -> TileTensor:
    return functional.linear(x, model.lm_head.weight, transposed=True)  # (B, T, V)


class _Step:
    """One decode step, recorded while the first one runs: the position-independent ops
    between two attentions are replayed (``TaskRecording``), the position-dependent ones
    (input ids, cache writes, attention) submitted afresh; inputs are copied into the same
    tiles each step and every intermediate tile is reused. Each segment between two
    attentions runs as one task (``TaskRecording.fuse``), the head's GEMMs as their own."""

    def __init__(self, arch: _GPT2, arrays: list[np.ndarray], cache: KVCache, start: int):
        self.arch = arch
        self.inputs = [_ids(arch.model, a) for a in arrays]
        self.tasks = TaskRecording()
        n = len(arch.layers)
        with self.tasks.recording(0):
            x = arch.embed(*self.inputs)
            self.mids = [arch.before(0, x, cache)]
        for i in range(n):
            with self.tasks.recording(None):
                y = arch.attend(i, self.mids[i], cache, start)
            with self.tasks.recording(i + 1):
                x = arch.after(i, x, y)
                if i + 1 < n:
                    self.mids.append(arch.before(i + 1, x, cache))
                else:
                    x = arch.final(x)
        with self.tasks.recording(n + 1):  # the head's vocabulary tiles stay apart: parallel
            self.logits = _logits(arch.model, x)
        self.tasks.hoist(varying=self.inputs)
        for segment in range(n + 1):
            self.tasks.fuse(segment)

    def __call__(self, arrays: list[np.ndarray], cache: KVCache, start: int) -> TileTensor:
        for tensor, values in zip(self.inputs, arrays):
            copy_into(tensor, from_numpy(values.astype(np.int64), tile_shape=tensor.tile_shape))
        self.tasks.replay(0)
        for i, mid in enumerate(self.mids):
            attention = TaskRecording()  # the layer's cache writes and attention: one task
            with attention.recording(0, submit=False):
                self.arch.attend(i, mid, cache, start)  # writes cache.state.out, read next
            attention.fuse(0)
            attention.replay(0)
            self.tasks.replay(i + 1)
        self.tasks.replay(len(self.mids) + 1)
        return self.logits


def _forward(model, ids: np.ndarray, cache: KVCache) -> np.ndarray:
    """Logits (B, V) of the last of ``ids`` (B, T) placed at ``cache.filled``; fills the cache."""
    T, start = ids.shape[1], cache.filled
    if T > 1 and start:
        raise ValueError("a cached forward takes the whole prompt first, then one token")
    arch = _GPT2(model) if hasattr(model, "transformer") else _Llama(model)
    arrays = arch.inputs(ids, start)
    if T == 1 and cache.step is not None:
        logits = cache.step(arrays, cache, start)
    elif T == 1:
        cache.step = _Step(arch, arrays, cache, start)
        logits = cache.step.logits
    else:
        x = arch.embed(*(_ids(model, a) for a in arrays))
        for i in range(len(arch.layers)):
            x = arch.after(i, x, arch.attend(i, arch.before(i, x, cache), cache, start))
        logits = _logits(model, arch.final(x)[:, T - 1 :])
    cache.filled = start + T
    return logits.to_numpy()[:, 0].astype(np.float64)


def sample(logits, rng, temperature, top_k, top_p) -> np.ndarray:
    """One id per row of ``logits`` (batch, vocab): greedy at temperature 0, else sampled
    after temperature, top-k and top-p (nucleus) filtering."""
    if temperature == 0:
        return logits.argmax(axis=1)
    logits = logits / temperature
    if top_k is not None and top_k < logits.shape[1]:
        cutoff = np.partition(logits, -top_k, axis=1)[:, -top_k][:, None]
        logits = np.where(logits < cutoff, -np.inf, logits)
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    if top_p is not None and top_p < 1.0:
        order = np.argsort(-probs, axis=1, kind="stable")
        sorted_probs = np.take_along_axis(probs, order, axis=1)
        # keep the most likely tokens up to and including the one that reaches top_p
        drop = np.cumsum(sorted_probs, axis=1) - sorted_probs >= top_p
        sorted_probs[drop] = 0.0
        probs = np.zeros_like(probs)
        np.put_along_axis(probs, order, sorted_probs, axis=1)
        probs /= probs.sum(axis=1, keepdims=True)
    return np.array([rng.choice(p.size, p=p) for p in probs])


def generate(
    model,
    prompt_ids,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    stop_tokens: Iterable[int] | None = None,
    *,
    on_token: Callable[[np.ndarray], None] | None = None,
    cache_tile: int | None = None,
) -> np.ndarray:
    """``prompt_ids`` (B, T) or (T,) followed by up to ``max_new_tokens`` sampled ids.

    ``temperature=0`` picks the most likely token (greedy); otherwise logits are divided by
    ``temperature`` and sampled, restricted to the ``top_k`` most likely tokens and to the
    smallest set whose probability reaches ``top_p``, with NumPy's generator of ``seed``.
    A row that produces one of ``stop_tokens`` is done: its later places repeat that token,
    and generation ends when every row is done. ``on_token(ids)`` gets each step's new ids
    (B,) as they come. When the context reaches ``n_positions``, the last half of it is run
    again as a new prompt. ``cache_tile`` is the cache's sequence tile (default: its length).

    >>> from numtile.nn.gpt2 import GPT2, GPT2Config
    >>> m = GPT2(GPT2Config(vocab_size=7, n_positions=8, n_embd=4, n_layer=1, n_head=1))
    >>> generate(m, np.array([[1, 2], [3, 4]]), 3, temperature=0).shape
    (2, 5)
    """
    prompt = np.asarray(prompt_ids)
    flat = prompt.ndim == 1
    prompt = np.atleast_2d(prompt).astype(np.int64)
    if prompt.ndim != 2 or prompt.shape[1] == 0:
        raise ValueError(
            f"prompt_ids must be (batch, seq) or (seq,) with seq >= 1, got {prompt.shape}"
        )
    if temperature < 0 or not np.isfinite(temperature):
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    n_positions = _context(model)
    if prompt.shape[1] > n_positions:
        prompt = prompt[:, -n_positions:]
    stops = np.array(sorted(set(stop_tokens or ())), np.int64)
    rng = np.random.default_rng(seed)
    B = prompt.shape[0]
    ids = [prompt[:, i] for i in range(prompt.shape[1])]
    done = np.zeros(B, bool)
    last = np.zeros(B, np.int64)
    with no_grad(), using_precision(model.precision):
        cache = KVCache(model, B, min(n_positions, prompt.shape[1] + max_new_tokens), cache_tile)
        logits = _forward(model, prompt, cache)
        for step in range(max_new_tokens):
            new = sample(logits, rng, temperature, top_k, top_p)
            new = np.where(done, last, new)
            last = np.where(done, last, new)
            done |= np.isin(new, stops)
            ids.append(new)
            if on_token is not None:
                on_token(new)
            if done.all() or step == max_new_tokens - 1:
                break
            if cache.filled == cache.length:  # the context is full: start again from its end
                context = np.stack(ids[-(n_positions // 2 or 1) :], axis=1)
                remaining = max_new_tokens - step - 1
                cache = KVCache(
                    model, B, min(n_positions, context.shape[1] + remaining), cache_tile
                )
                logits = _forward(model, context, cache)
            else:
                logits = _forward(model, new[:, None], cache)
    out = np.stack(ids, axis=1)
    return out[0] if flat else out
