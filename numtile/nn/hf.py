"""Hugging Face models in and out: ``load_hf(folder)`` and ``save_hf(model, folder)``.

``load_hf`` builds a numtile model from a folder that ``save_pretrained`` wrote
(``config.json`` plus ``model.safetensors``, or shards listed in
``model.safetensors.index.json``), streaming every tensor into tiles one tile at a time
(``numtile.io.hf``); the model is built with parameters that have no tiles yet (no random
initialisation), so the process never holds a second copy of the model. ``save_hf`` writes
the same format so that ``transformers``' ``from_pretrained`` loads it.

Architectures are the rows of ``ARCHITECTURES``: ``model_type`` -> how to read its config,
build its model and name its weights. A folder of another ``model_type``, a missing, extra
or mis-shaped tensor, or an unreadable file raises ``ValueError`` naming the file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
import os
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from numtile.io import hf as files
from numtile.io.prepare import (
    BYTE_LEVEL,
    TOKENIZER_FILE,
    load_tokenizer,
    tokenizer_file,
    tokenizer_vocab_size,
)
from numtile.nn.gpt2 import GPT2, GPT2Config, Tiling
from numtile.nn.llama import Llama, LlamaConfig
from numtile.nn.module import Module
from numtile.tiletensor.creation import empty
from numtile.tiletensor.tensor import TileTensor

__all__ = [
    "ARCHITECTURES",
    "Architecture",
    "check_tokenizer",
    "load_hf",
    "read_config",
    "save_hf",
]


@dataclasses.dataclass(frozen=True)
class Architecture:
    """How one Hugging Face ``model_type`` maps onto a numtile model.

    ``config_from_hf(dict)`` makes the numtile config (``ValueError`` for options numtile
    lacks); ``config_to_hf(config)`` gives the ``config.json`` fields; ``build(config,
    tiling, dtype)`` the model; ``from_hf_name(name)`` the numtile parameter name of a file
    tensor (``None``: a buffer to skip, such as GPT-2's causal mask); ``to_hf_name`` the
    reverse; ``tied(config)`` whether ``lm_head.weight`` is the token embedding (then it is
    not stored).
    """

    model_type: str
    hf_class: str
    model_class: type
    config_from_hf: Callable[[dict], Any]
    config_to_hf: Callable[[Any], dict]
    build: Callable[[Any, Any, str], Module]
    from_hf_name: Callable[[str], str | None] = lambda name: name
    to_hf_name: Callable[[str], str] = lambda name: name
    tied: Callable[[Any], bool] = lambda config: True
    init_modules: tuple[str, ...] = ("numtile.nn.layers",)


_INIT_LOCK = threading.Lock()


def _empty_normal(loc=0.0, scale=1.0, size=None, *, seed=None, dtype="float64", tile_shape=None):
    return empty(size, dtype, tile_shape)


def _empty_filled(shape, dtype="float64", tile_shape=None):
    return empty(shape, dtype, tile_shape)


@contextlib.contextmanager
def _uninitialized(module_names):
    """Layers built inside get parameters with no tiles yet (no random or constant fill):
    ``normal``, ``zeros`` and ``ones`` of the modules that build them make empty tensors,
    whose tiles are allocated when the file's tiles are written into them."""
    modules = [importlib.import_module(name) for name in module_names]
    replacements = {"normal": _empty_normal, "zeros": _empty_filled, "ones": _empty_filled}
    with _INIT_LOCK:
        saved = [(m, k, getattr(m, k)) for m in modules for k in replacements if hasattr(m, k)]
        try:
            for module, name, _ in saved:
                setattr(module, name, replacements[name])
            yield
        finally:
            for module, name, value in saved:
                setattr(module, name, value)


def _check_fixed(hf: dict, fixed: dict, model: str) -> None:
    for key, allowed in fixed.items():
        if key in hf and hf[key] not in allowed:
            raise ValueError(
                f"{key}={hf[key]!r} is not supported (numtile's {model} has {allowed[0]!r})"
            )


# -- GPT-2 -------------------------------------------------------------------------------------

_GPT2_FIXED = {  # options numtile's GPT-2 has one way only: the values it accepts
    "activation_function": ("gelu_new", "gelu_pytorch_tanh"),
    "scale_attn_weights": (True,),
    "scale_attn_by_inverse_layer_idx": (False,),
    "reorder_and_upcast_attn": (False,),
    "add_cross_attention": (False,),
    "tie_word_embeddings": (True,),
}


def _gpt2_from_hf(hf: dict) -> GPT2Config:
    _check_fixed(hf, _GPT2_FIXED, "GPT-2")
    inner = hf.get("n_inner")
    if inner is not None and inner != 4 * hf.get("n_embd", 768):
        raise ValueError(f"n_inner={inner} is not supported (numtile's GPT-2 has 4 * n_embd)")
    fields = {f.name for f in dataclasses.fields(GPT2Config)}
    return GPT2Config(**{k: v for k, v in hf.items() if k in fields})


def _gpt2_to_hf(config: GPT2Config) -> dict:
    return {
        **dataclasses.asdict(config),
        "activation_function": "gelu_new",
        "n_inner": None,
        "tie_word_embeddings": True,
        "scale_attn_weights": True,
        "bos_token_id": config.vocab_size - 1,
        "eos_token_id": config.vocab_size - 1,
        "attn_pdrop": 0.0,
        "embd_pdrop": 0.0,
        "resid_pdrop": 0.0,
    }


def _gpt2_name(name: str) -> str | None:
    if name.endswith((".attn.bias", ".attn.masked_bias")):
        return None  # the causal-mask buffers older GPT-2 files carry
    if name == "lm_head.weight" or name.startswith("transformer."):
        return name
    return "transformer." + name  # GPT2Model files (openai-community/gpt2) have no prefix


# -- LLaMA -------------------------------------------------------------------------------------

_LLAMA_FIXED = {"hidden_act": ("silu",), "pretraining_tp": (1,)}


def _llama_from_hf(hf: dict) -> LlamaConfig:
    """transformers >= 5 writes ``rope_parameters`` (theta and scaling in one dict); older
    versions ``rope_theta`` and ``rope_scaling``: both are read."""
    _check_fixed(hf, _LLAMA_FIXED, "LLaMA")
    rope = hf.get("rope_parameters")
    if isinstance(rope, dict):
        theta = rope.get("rope_theta", hf.get("rope_theta", 10000.0))
        scaling = {k: v for k, v in rope.items() if k != "rope_theta"}
    else:
        theta, scaling = hf.get("rope_theta", 10000.0), hf.get("rope_scaling")
    if scaling and scaling.get("rope_type", scaling.get("type")) == "default":
        scaling = None
    fields = {f.name for f in dataclasses.fields(LlamaConfig)} - {"rope_theta", "rope_scaling"}
    config = {k: v for k, v in hf.items() if k in fields}
    return LlamaConfig(**config, rope_theta=theta, rope_scaling=scaling or None)


def _llama_to_hf(config: LlamaConfig) -> dict:
    """Both spellings of the rotary settings, so that transformers 4 and 5 read them."""
    fields = dataclasses.asdict(config)
    scaling = fields.pop("rope_scaling")
    if scaling is not None:
        scaling = {"rope_type": scaling.get("rope_type", scaling.get("type")), **scaling}
        scaling.pop("type", None)
    rope = {"rope_type": "default", **(scaling or {}), "rope_theta": config.rope_theta}
    return {
        **fields,
        "rope_scaling": scaling,
        "rope_parameters": rope,
        "hidden_act": "silu",
        "pretraining_tp": 1,
        "attention_dropout": 0.0,
    }


def _llama_name(name: str) -> str | None:
    if name.endswith(".rotary_emb.inv_freq"):
        return None  # the RoPE buffer older LLaMA files carry
    if name == "lm_head.weight" or name.startswith("model."):
        return name
    return "model." + name  # LlamaModel files have no prefix


ARCHITECTURES: dict[str, Architecture] = {
    "gpt2": Architecture(
        model_type="gpt2",
        hf_class="GPT2LMHeadModel",
        model_class=GPT2,
        config_from_hf=_gpt2_from_hf,
        config_to_hf=_gpt2_to_hf,
        build=lambda config, tiling, dtype: GPT2(config, tiling or Tiling(), dtype=dtype),
        from_hf_name=_gpt2_name,
    ),
    "llama": Architecture(
        model_type="llama",
        hf_class="LlamaForCausalLM",
        model_class=Llama,
        config_from_hf=_llama_from_hf,
        config_to_hf=_llama_to_hf,
        build=lambda config, tiling, dtype: Llama(config, tiling or Tiling(), dtype=dtype),
        from_hf_name=_llama_name,
        tied=lambda config: config.tie_word_embeddings,
    ),
}


def architecture_of(model: Module) -> Architecture:
    """The ``ARCHITECTURES`` row of ``model`` (``TypeError`` for a model of no row)."""
    for arch in ARCHITECTURES.values():
        if isinstance(model, arch.model_class):
            return arch
    supported = ", ".join(a.model_class.__name__ for a in ARCHITECTURES.values())
    raise TypeError(f"save_hf cannot write a {type(model).__name__}; it writes {supported}")


# -- reading -----------------------------------------------------------------------------------


def read_config(folder: str | os.PathLike) -> tuple[Architecture, Any]:
    """The architecture and numtile config of a Hugging Face folder's ``config.json``."""
    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"{folder}: no such folder (expected a Hugging Face model folder)")
    path = os.path.join(folder, files.CONFIG)
    if not os.path.isfile(path):
        raise ValueError(f"{folder} is not a Hugging Face model folder: it has no {files.CONFIG}")
    hf = files.read_json(path)
    if not isinstance(hf, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(hf).__name__}")
    model_type = hf.get("model_type")
    if model_type not in ARCHITECTURES:
        names = ", ".join(map(str, hf.get("architectures") or []))
        raise ValueError(
            f"{path}: unsupported architecture {model_type!r}{f' ({names})' if names else ''}; "
            f"numtile reads model_type "
            f"{', '.join(f'{a.model_type} ({a.hf_class})' for a in ARCHITECTURES.values())}"
        )
    arch = ARCHITECTURES[model_type]
    try:
        return arch, arch.config_from_hf(hf)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path}: {exc}") from None


def load_hf(folder: str | os.PathLike, *, dtype="float32", tiling: Tiling | None = None) -> Module:
    """The numtile model of a Hugging Face folder (architecture, config and weights).

    >>> import tempfile
    >>> folder = tempfile.mkdtemp() + "/tiny"
    >>> model = GPT2(GPT2Config(vocab_size=11, n_positions=8, n_embd=8, n_layer=1, n_head=2))
    >>> save_hf(model, folder)
    >>> again = load_hf(folder)
    >>> w, w2 = model.transformer.wte.weight, again.transformer.wte.weight
    >>> bool((w.to_numpy() == w2.to_numpy()).all()), again.lm_head.weight is w2
    (True, True)
    """
    folder = os.fspath(folder)
    arch, config = read_config(folder)
    entries = files.tensor_index(files.weight_files(folder))
    with _uninitialized(arch.init_modules):
        model = arch.build(config, tiling, dtype)
    own = dict(model.named_parameters(remove_duplicate=False))
    tied = arch.tied(config)
    wanted: dict[str, str] = {}  # numtile name -> name in the file
    extra = []
    for file_name in entries:
        name = arch.from_hf_name(file_name)
        if name is None or (name == "lm_head.weight" and tied):
            continue  # a buffer, or the tied head (the embedding; some writers store both)
        if name not in own or name in wanted:
            extra.append(file_name)
        else:
            wanted[name] = file_name
    missing = [
        arch.to_hf_name(n) for n in own if n not in wanted and not (tied and n == "lm_head.weight")
    ]
    if missing or extra:
        raise ValueError(
            f"{folder}: its weights do not fit {arch.hf_class}: missing {missing}, "
            f"unexpected {sorted(extra)}"
        )
    for name, file_name in wanted.items():
        path, code, shape = entries[file_name]
        if shape != own[name].shape:
            raise ValueError(
                f"{path}: tensor {file_name!r} has shape {shape}, the model expects "
                f"{own[name].shape}"
            )
        files.check_file_dtype(code, path, file_name)
    for name, file_name in wanted.items():
        layout, dt = own[name].layout, own[name].dtype
        tensor = files.read_tensor(entries[file_name][0], file_name, layout, dt)
        model._assign(name, tensor.requires_grad_())
    return model


def check_tokenizer(folder: str | os.PathLike, config, data_dir: str, meta: dict) -> str | None:
    """The ``tokenizer.json`` of model folder ``folder`` (None when it has none), checked
    against the model's vocabulary and against the tokenizer that the data in ``data_dir``
    was prepared with (``meta``, its ``meta.json``): ``ValueError`` naming both when they
    do not belong together."""
    folder = os.fspath(folder)
    path = os.path.join(folder, TOKENIZER_FILE)
    if not os.path.isfile(path):
        return None
    tokenizer = load_tokenizer(path)
    size = tokenizer_vocab_size(tokenizer)
    if size > config.vocab_size:
        raise ValueError(
            f"{path} has {size} tokens but the model in {folder} a vocabulary of "
            f"{config.vocab_size}: they do not belong together"
        )
    used, used_size = meta.get("tokenizer", BYTE_LEVEL), meta.get("vocab_size")
    same = used != BYTE_LEVEL and used_size == size
    if same and os.path.isfile(used):
        vocab = tokenizer.get_vocab(with_added_tokens=True)
        same = load_tokenizer(used).get_vocab(with_added_tokens=True) == vocab
    if not same:
        raise ValueError(
            f"the data in {data_dir} was tokenized with {used} ({used_size} tokens), not with "
            f"{path} ({size} tokens): prepare it with `numtile prepare INPUT... --tokenizer "
            f"{folder} --out DIR`"
        )
    return path


# -- writing -----------------------------------------------------------------------------------


def save_hf(
    model: Module,
    folder: str | os.PathLike,
    *,
    dtype=None,
    max_shard_size: int | str = files.DEFAULT_SHARD_SIZE,
    tokenizer: str | os.PathLike | None = None,
) -> None:
    """Write ``model`` as a Hugging Face folder that ``transformers`` loads (with a copy of
    ``tokenizer``, a tokenizer.json file, as its ``tokenizer.json`` when given).

    ``dtype`` (``"float32"``, ``"float16"``, ``"bfloat16"``, ...) converts the weights on
    the way out (default: the model's). Above ``max_shard_size`` bytes (an int or "10MB")
    the weights go into shards ``model-0000i-of-0000n.safetensors`` listed in
    ``model.safetensors.index.json``. ``folder`` is replaced as a whole once the new one is
    complete; an interrupted save leaves it as it was.
    """
    arch = architecture_of(model)
    if dtype is None:
        name = model.dtype.name
    else:
        name = "bfloat16" if str(dtype) == "bfloat16" else np.dtype(dtype).name
    if name not in files.DTYPE_CODES:
        raise ValueError(f"save_hf writes {', '.join(files.DTYPE_CODES)}, not {name}")
    tensors: list[tuple[str, TileTensor]] = [
        (arch.to_hf_name(n), p)
        for n, p in model.named_parameters()
        if not (n == "lm_head.weight" and arch.tied(model.config))
    ]
    config = {
        "architectures": [arch.hf_class],
        "model_type": arch.model_type,
        **arch.config_to_hf(model.config),
        "dtype": name,
    }
    extra = ()
    if tokenizer is not None:
        tokenizer = tokenizer_file(tokenizer)
        load_tokenizer(tokenizer)  # a readable tokenizer.json, checked before writing
        extra = ((TOKENIZER_FILE, tokenizer),)
    text = json.dumps(config, indent=2, sort_keys=True)
    files.write_folder(folder, text, tensors, name, max_shard_size, extra_files=extra)
