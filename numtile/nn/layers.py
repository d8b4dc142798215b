"""Layers built from differentiable tiled ops: ``Linear``, norms, embeddings, GPT-2's GELU
``MLP`` and LLaMA's SiLU-gated ``GatedMLP``."""

from __future__ import annotations

import numpy as np

from numtile.nn import functional
from numtile.nn.activated import activated_linear
from numtile.nn.module import Module, parameter
from numtile.tiletensor.creation import ones, zeros
from numtile.tiletensor.layout import current_config
from numtile.tiletensor.random import normal
from numtile.tiletensor.tensor import TileTensor


def _default_tiles(*sizes: int) -> tuple[int, ...]:
    """Weight tiles of the runtime's default edge (``nt.init(tile=...)``), capped by the sizes."""
    edge = current_config().tile
    return tuple(max(1, min(size, edge)) for size in sizes)


class Linear(Module):
    """``y = x @ W + b`` over the last axis of ``x``.

    ``weight_layout="in_out"`` stores W as (in, out) like GPT-2's ``Conv1D``;
    ``"out_in"`` stores it as (out, in) like ``torch.nn.Linear`` and multiplies by its
    transpose through a GEMM flag (no copy). ``tile`` is the (in, out) tile of W.

    >>> import numtile as nt
    >>> layer = Linear(4, 3, tile=(2, 2), seed=0)
    >>> layer(nt.ones((5, 4), tile_shape=(2, 2))).shape
    (5, 3)
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        *,
        weight_layout: str = "in_out",
        tile: tuple[int, int] | None = None,
        dtype="float32",
        std: float = 0.02,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if weight_layout not in ("in_out", "out_in"):
            raise ValueError(f"weight_layout must be 'in_out' or 'out_in', got {weight_layout!r}")
        self.in_features, self.out_features = in_features, out_features
        self.weight_layout = weight_layout
        t_in, t_out = tile or _default_tiles(in_features, out_features)
        shape = (in_features, out_features)
        tiles = (t_in, t_out)
        if weight_layout == "out_in":
            shape, tiles = shape[::-1], tiles[::-1]
        self.weight = parameter(normal(0.0, std, shape, seed=seed, dtype=dtype, tile_shape=tiles))
        self.bias = parameter(zeros((out_features,), dtype, (t_out,))) if bias else None

    def forward(self, x: TileTensor) -> TileTensor:
        if x.shape[-1] != self.in_features:
            raise ValueError(
                f"Linear expects inputs with {self.in_features} features, got shape {x.shape}"
            )
        return functional.linear(
            x, self.weight, self.bias, transposed=self.weight_layout == "out_in"
        )

    def activated(self, activation: str, *inputs: TileTensor) -> TileTensor:
        """``self(act(*inputs))`` for act ``"gelu_tanh"`` of one input or ``"swiglu"`` of
        (gate, up) (``activated_linear``): in bf16-mixed, ``act(*inputs)`` is not kept for
        the backward, the weight gradient recomputes it."""
        transposed = self.weight_layout == "out_in"
        return activated_linear(activation, inputs, self.weight, self.bias, transposed=transposed)


class LayerNorm(Module):
    """Layer normalisation over the last axis (``weight``/``bias`` as in torch and HF).

    >>> import numtile as nt
    >>> LayerNorm(4, tile=2)(nt.ones((3, 4), tile_shape=(3, 2))).to_numpy().tolist()[0]
    [0.0, 0.0, 0.0, 0.0]
    """

    def __init__(self, n_features: int, eps: float = 1e-5, *, tile=None, dtype="float32"):
        super().__init__()
        tile = tile or _default_tiles(n_features)[0]
        self.eps = eps
        self.weight = parameter(ones((n_features,), dtype, (tile,)))
        self.bias = parameter(zeros((n_features,), dtype, (tile,)))

    def forward(self, x: TileTensor) -> TileTensor:
        return functional.layer_norm(x, self.weight, self.bias, self.eps)


class RMSNorm(Module):
    """Root-mean-square normalisation over the last axis (``weight`` as in LLaMA's RMSNorm).

    >>> import numtile as nt
    >>> RMSNorm(2, eps=0.0, tile=1)(nt.full((1, 2), 3.0, tile_shape=(1, 1))).to_numpy().tolist()
    [[1.0, 1.0]]
    """

    def __init__(self, n_features: int, eps: float = 1e-6, *, tile=None, dtype="float32"):
        super().__init__()
        tile = tile or _default_tiles(n_features)[0]
        self.eps = eps
        self.weight = parameter(ones((n_features,), dtype, (tile,)))

    def forward(self, x: TileTensor) -> TileTensor:
        return functional.rms_norm(x, self.weight, self.eps)


class Embedding(Module):
    """A (vocabulary, features) table looked up by int64 ids; tiled over both axes."""

    def __init__(
        self,
        n_rows: int,
        n_features: int,
        *,
        tile=None,
        dtype="float32",
        std: float = 0.02,
        seed: int = 0,
    ):
        super().__init__()
        tile = tile or _default_tiles(n_rows, n_features)
        self.weight = parameter(
            normal(0.0, std, (n_rows, n_features), seed=seed, dtype=dtype, tile_shape=tile)
        )

    def forward(self, ids: TileTensor) -> TileTensor:
        return functional.embedding(ids, self.weight)


class ModuleList(Module):
    """Sub-modules named ``0``, ``1``, ... (like ``torch.nn.ModuleList``)."""

    def __init__(self, modules) -> None:
        super().__init__()
        for index, module in enumerate(modules):
            setattr(self, str(index), module)

    def __iter__(self):
        return iter(self._modules.values())

    def __len__(self) -> int:
        return len(self._modules)


class MLP(Module):
    """GPT-2's feed-forward block: ``c_proj(gelu_tanh(c_fc(x)))`` with a 4x wider inner layer.

    >>> import numtile as nt
    >>> MLP(4, 16, tile=(2, 8))(nt.ones((3, 4), tile_shape=(3, 2))).shape
    (3, 4)
    """

    def __init__(
        self,
        n_embd: int,
        n_inner: int,
        *,
        tile=None,
        dtype="float32",
        seed=0,
        proj_std: float = 0.02,
    ):
        super().__init__()
        t_embd, t_inner = tile or _default_tiles(n_embd, n_inner)
        self.c_fc = Linear(n_embd, n_inner, tile=(t_embd, t_inner), dtype=dtype, seed=seed)
        self.c_proj = Linear(
            n_inner, n_embd, tile=(t_inner, t_embd), dtype=dtype, seed=seed + 1, std=proj_std
        )

    def forward(self, x: TileTensor) -> TileTensor:
        # in bf16-mixed, c_proj's weight gradient recomputes gelu_tanh(h) rather than keep it
        return self.c_proj.activated("gelu_tanh", self.c_fc(x))


class GatedMLP(Module):
    """LLaMA's feed-forward block: ``down_proj(silu(gate_proj(x)) * up_proj(x))``, weights
    stored (out, in) like ``torch.nn.Linear``.

    >>> import numtile as nt
    >>> GatedMLP(4, 6, tile=(2, 3))(nt.ones((3, 4), tile_shape=(3, 2))).shape
    (3, 4)
    """

    def __init__(
        self,
        n_embd: int,
        n_inner: int,
        bias: bool = False,
        *,
        tile=None,
        dtype="float32",
        seed=0,
        std: float = 0.02,
    ):
        super().__init__()
        t_embd, t_inner = tile or _default_tiles(n_embd, n_inner)
        up = dict(bias=bias, weight_layout="out_in", tile=(t_embd, t_inner), dtype=dtype, std=std)
        self.gate_proj = Linear(n_embd, n_inner, seed=seed, **up)
        self.up_proj = Linear(n_embd, n_inner, seed=seed + 1, **up)
        self.down_proj = Linear(
            n_inner,
            n_embd,
            bias=bias,
            weight_layout="out_in",
            tile=(t_inner, t_embd),
            dtype=dtype,
            seed=seed + 2,
            std=std,
        )

    def forward(self, x: TileTensor) -> TileTensor:
        with functional.shared_bf16_casts():  # bf16-mixed: x cast once for gate and up
            gate, up = self.gate_proj(x), self.up_proj(x)
        # in bf16-mixed, down_proj's weight gradient recomputes swiglu(gate, up) (see MLP)
        return self.down_proj.activated("swiglu", gate, up)


class TiedHead(Module):
    """An output projection tied to the token embedding: its ``weight`` is the embedding's."""

    def __init__(self, weight: TileTensor) -> None:
        super().__init__()
        self.weight = weight


def weight_dtype(dtype, model: str) -> np.dtype:
    """``dtype`` as the dtype of a model's weights: float32 or float64, else ``TypeError``
    naming it (bfloat16 trains through ``precision("bf16-mixed")``, float32 master weights).

    >>> weight_dtype("float32", "GPT2")
    dtype('float32')
    """
    if str(dtype) in ("float32", "float64") or dtype in (np.float32, np.float64):
        return np.dtype(dtype)
    raise TypeError(
        f"{model} holds its weights in float32 or float64, not {dtype!r}; for bfloat16, keep "
        "float32 weights and train under nt.nn.precision('bf16-mixed') (numtile train "
        "--precision bf16-mixed), or save bfloat16 copies with save_hf(dtype='bfloat16')"
    )


def token_ids(idx, vocab_size: int, context: int, context_field: str) -> np.ndarray:
    """``idx`` as a (batch, seq) integer array of ids in the vocabulary that fits the context,
    or a ``ValueError`` saying what does not (``context_field`` names the config's limit).

    >>> token_ids([[1, 2]], 5, 4, "n_positions").shape
    (1, 2)
    """
    idx = np.asarray(idx)
    if idx.ndim != 2 or idx.dtype.kind not in "iu":
        raise ValueError(f"idx must be a (batch, seq) integer array, got {idx.shape} {idx.dtype}")
    if idx.shape[1] > context:
        raise ValueError(f"sequence length {idx.shape[1]} exceeds {context_field} {context}")
    if idx.size and (idx.min() < 0 or idx.max() >= vocab_size):
        raise ValueError(
            f"token ids must lie in [0, {vocab_size}); got min {idx.min()}, max {idx.max()}"
        )
    return idx
