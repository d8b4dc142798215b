"""What ``numtile train`` takes: its settings, their checks, and model presets.

``TrainConfig`` holds every setting (the command's flags have the same names, with dashes)
and rejects values that cannot work with ``ConfigError``, a ``ValueError``; the command
turns it into one line on stderr and exit status 2.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import warnings

from numtile.nn.gpt2 import GPT2Config
from numtile.nn.llama import LlamaConfig
from numtile.nn.mixed_precision import MODES

# a model config's ``architecture`` field names its class; configs without one (every
# checkpoint written before LLaMA) are GPT-2
ARCHITECTURES = {"gpt2": GPT2Config, "llama": LlamaConfig}

PRESETS = {
    # byte-level model for the default corpus (the Python standard library's sources)
    "default": dict(vocab_size=256, n_positions=256, n_embd=256, n_layer=4, n_head=4),
    "gpt2-mini": dict(vocab_size=50304, n_positions=256, n_embd=256, n_layer=4, n_head=4),
    "gpt2-small": dict(vocab_size=50304, n_positions=1024, n_embd=768, n_layer=12, n_head=12),
    # vocab_size None: the data's (256 for the byte-level default corpus)
    "llama-mini": dict(
        architecture="llama",
        vocab_size=None,
        max_position_embeddings=256,
        hidden_size=256,
        intermediate_size=688,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
    ),
}

ModelConfig = GPT2Config | LlamaConfig


class ConfigError(ValueError):
    """A setting of a run that cannot work (out of range, or contradicting another one)."""


class TrainingDiverged(FloatingPointError):
    """The loss or the gradient norm became NaN or infinite; nothing of that step was kept."""


class ScheduleChangeWarning(UserWarning):
    """A resumed run trains with other settings than the run that wrote the checkpoint."""


# settings that change what a resumed run computes (the others only change what it reports)
_SCHEDULE_FIELDS = ("steps", "lr", "min_lr", "warmup")
_TRAINING_FIELDS = ("batch", "micro_batch", "seq_len", "weight_decay", "beta1", "beta2")
_TRAINING_FIELDS += ("grad_clip", "data", "precision")
_TILE_FIELDS = ("seq_tile", "embd_tile", "inner_tile", "head_tile", "vocab_tile")
# attributes a training checkpoint holds beyond its tensors
_TRAINING_ATTRS = ("step", "model_config", "optimizer_step", "train_sampler", "val_sampler")


@dataclasses.dataclass
class TrainConfig:
    """Everything ``numtile train`` takes (its flags have the same names, with dashes)."""

    model: str = "default"
    data: str | None = None  # folder with train.bin/val.bin; None: the stdlib corpus
    steps: int = 700
    batch: int = 16
    micro_batch: int | None = None  # sequences per forward/backward (gradient accumulation)
    seq_len: int = 256
    batch_tile: int = 4
    seq_tile: int | None = None
    embd_tile: int | None = None
    inner_tile: int | None = None
    head_tile: int | None = None
    vocab_tile: int | None = None
    lr: float = 1e-3
    min_lr: float = 1e-4
    warmup: int = 50
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.99
    grad_clip: float = 1.0
    eval_every: int = 100
    eval_batches: int = 8
    checkpoint: str | None = "numtile-checkpoint.h5"
    checkpoint_every: int = 200
    resume: str | None = None
    init_from: str | None = None  # a Hugging Face model folder to fine-tune (sets the model)
    log_dir: str | None = None  # TensorBoard scalars and metrics.jsonl of the run
    seed: int = 0
    sample_tokens: int = 200
    trace: str | None = None
    precision: str = "fp32"  # GEMM precision mode (numtile.nn.mixed_precision); weights stay fp32

    def __post_init__(self) -> None:
        at_least_one = ("steps", "batch", "seq_len", "batch_tile", "eval_every", "eval_batches")
        rules = {name: (value >= 1, ">= 1") for name, value in self._values(at_least_one)}
        for name, value in self._values(("micro_batch",) + _TILE_FIELDS):
            rules[name] = (value is None or value >= 1, ">= 1")
        rules["checkpoint_every"] = (self.checkpoint_every >= 1, ">= 1")
        for name, value in self._values(("warmup", "sample_tokens", "seed")):
            rules[name] = (value >= 0, ">= 0")
        rules["lr"] = (math.isfinite(self.lr) and self.lr > 0, "a finite number > 0")
        for name, value in self._values(("min_lr", "weight_decay", "grad_clip")):
            rules[name] = (math.isfinite(value) and value >= 0, "a finite number >= 0")
        for name, value in self._values(("beta1", "beta2")):
            rules[name] = (0 <= value < 1, "in [0, 1)")
        for name, (ok, rule) in rules.items():
            if not ok:
                raise ConfigError(
                    f"--{name.replace('_', '-')} must be {rule}, got {getattr(self, name)}"
                )
        if self.init_from is not None and self.model != "default":
            raise ConfigError(
                f"--init-from {self.init_from} takes the model from that folder; drop --model "
                f"{self.model}"
            )
        if self.precision not in MODES:
            raise ConfigError(
                f"--precision must be one of {', '.join(MODES)}, got {self.precision}"
            )
        micro = self.micro_batch or self.batch
        if self.batch % micro:
            raise ConfigError(f"--batch {self.batch} is not a multiple of --micro-batch {micro}")

    def _values(self, names) -> list[tuple[str, object]]:
        return [(name, getattr(self, name)) for name in names]


def model_config(spec: str, vocab_size: int | None = None) -> ModelConfig:
    """A preset name, a JSON file, or inline JSON with GPT2Config fields (or, with
    ``"architecture": "llama"``, LlamaConfig fields); ``vocab_size`` fills a preset's
    ``vocab_size`` None (the data's vocabulary)."""
    if spec in PRESETS:
        fields = dict(PRESETS[spec])
        if fields["vocab_size"] is None:
            if vocab_size is None:
                raise ConfigError(
                    f"--model {spec} takes its vocabulary size from the data, whose meta.json "
                    f"does not give one: prepare the data with `numtile prepare`"
                )
            fields["vocab_size"] = vocab_size
        return _model_config(fields, f"--model {spec}")
    text = spec
    if os.path.exists(spec):
        with open(spec) as f:
            text = f.read()
    try:
        fields = json.loads(text)
    except json.JSONDecodeError:
        raise ConfigError(
            f"--model {spec!r} is neither a preset ({', '.join(PRESETS)}), a JSON file nor JSON"
        ) from None
    return _model_config(fields, "--model")


def _model_config(fields, source: str) -> ModelConfig:
    """The config class its ``architecture`` field names (GPT-2 without one), built from the
    other fields; a wrong field or value is a ``ConfigError`` naming ``source``."""
    if not isinstance(fields, dict):
        raise ConfigError(
            f"{source}: expected a JSON object of model config fields, got {fields!r}"
        )
    fields = dict(fields)
    architecture = fields.pop("architecture", "gpt2")
    if architecture not in ARCHITECTURES:
        raise ConfigError(
            f"{source}: unknown architecture {architecture!r}; supported: {list(ARCHITECTURES)}"
        )
    cls = ARCHITECTURES[architecture]
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(fields) - set(names))
    if unknown:
        raise ConfigError(f"{source}: unknown {cls.__name__} field(s) {unknown}; known: {names}")
    try:
        return cls(**fields)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{source}: {exc}") from None


def architecture(config: ModelConfig) -> str:
    """The ``architecture`` name of a model config (``"gpt2"`` or ``"llama"``)."""
    return next(name for name, cls in ARCHITECTURES.items() if isinstance(config, cls))


def config_fields(config: ModelConfig) -> dict:
    """A model config as the JSON a checkpoint stores: its fields and its architecture."""
    return {"architecture": architecture(config), **dataclasses.asdict(config)}


def model_shape(config: ModelConfig) -> dict:
    """layers, width, heads, head_dim, context (the longest sequence) and the name of the
    config field that sets it, of a model config."""
    if isinstance(config, LlamaConfig):
        return dict(
            layers=config.num_hidden_layers,
            width=config.hidden_size,
            heads=config.num_attention_heads,
            head_dim=config.head_dim,
            context=config.max_position_embeddings,
            context_field="max_position_embeddings",
        )
    return dict(
        layers=config.n_layer,
        width=config.n_embd,
        heads=config.n_head,
        head_dim=config.n_embd // config.n_head,
        context=config.n_positions,
        context_field="n_positions",
    )


def _warn_on_changes(path: str, stored: dict | None, cfg: TrainConfig, step: int) -> None:
    """Warn (``ScheduleChangeWarning``) when a resume changes what the run computes."""
    if not isinstance(stored, dict):
        return

    def differs(name: str) -> bool:
        before, now = stored.get(name, getattr(cfg, name)), getattr(cfg, name)
        if name == "data" and before and now:  # the same folder, however it was spelled
            return os.path.realpath(before) != os.path.realpath(now)
        return before != now

    names = [name for name in _SCHEDULE_FIELDS + _TRAINING_FIELDS if differs(name)]
    if not names:
        return
    changed = [
        f"--{name.replace('_', '-')} {stored[name]} -> {getattr(cfg, name)}" for name in names
    ]
    schedule = any(name in _SCHEDULE_FIELDS for name in names)
    detail = (
        f"the learning-rate schedule (warm-up, then cosine decay to --min-lr) is recomputed "
        f"for the new settings from step {step} on, so the run does not continue as it "
        f"would have"
        if schedule
        else "the run does not continue exactly as it would have"
    )
    warnings.warn(
        f"resuming {path} with other settings than it was trained with "
        f"({', '.join(changed)}): {detail}",
        ScheduleChangeWarning,
        stacklevel=3,
    )
