"""Training and sampling GPT-2 and LLaMA models: the engine behind ``numtile train`` and
``generate``."""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable

import numpy as np

import numtile as nt
from numtile.io import (
    TokenDataset,
    check_writable,
    load_checkpoint,
    read_meta,
    save_checkpoint,
    stdlib_corpus,
)
from numtile.nn import optim
from numtile.nn.gpt2 import GPT2, Tiling
from numtile.nn.hf import check_tokenizer, load_hf, read_config
from numtile.nn.llama import Llama, LlamaConfig
from numtile.train_config import (
    _TRAINING_ATTRS,
    PRESETS,
    ConfigError,
    ModelConfig,
    ScheduleChangeWarning,
    TrainConfig,
    TrainingDiverged,
    _model_config,
    _warn_on_changes,
    config_fields,
    model_config,
    model_shape,
)
from numtile.train_logs import TrainingLog

__all__ = [
    "PRESETS",
    "ConfigError",
    "ScheduleChangeWarning",
    "TrainConfig",
    "Trainer",
    "TrainingDiverged",
    "build_model",
    "flops_per_token",
    "generate",
    "load_model",
    "save_model",
    "model_config",
    "bf16_gemm_description",
    "kernel_blas_description",
    "gemm_peak",
    "sgemm_peak",
]


def build_model(config: ModelConfig, tiling: Tiling, *, seed: int = 0, seq_len=None):
    """The GPT-2 or LLaMA model of ``config``.

    >>> config = LlamaConfig(vocab_size=5, hidden_size=4, intermediate_size=6,
    ...                      num_hidden_layers=1, num_attention_heads=1)
    >>> type(build_model(config, Tiling())).__name__
    'Llama'
    """
    model_class = Llama if isinstance(config, LlamaConfig) else GPT2
    return model_class(config, tiling, seed=seed, seq_len=seq_len)


def _tiling(cfg: TrainConfig, config: ModelConfig) -> Tiling:
    return Tiling(
        batch=min(cfg.batch_tile, cfg.micro_batch or cfg.batch),
        seq=cfg.seq_tile,
        embd=cfg.embd_tile,
        inner=cfg.inner_tile,
        head=cfg.head_tile or model_shape(config)["heads"],
        vocab=cfg.vocab_tile,
    )


def flops_per_token(config: ModelConfig, n_params: int, seq_len: int) -> float:
    """Training FLOPs per token: 6 per parameter plus attention (PaLM appendix B)."""
    shape = model_shape(config)
    return 6.0 * n_params + 12.0 * shape["layers"] * shape["heads"] * shape["head_dim"] * seq_len


def gemm_peak(workers: int, precision: str = "fp32") -> float:
    """FLOP/s of the single-threaded GEMM that ``precision``'s matmuls run on, times the worker
    count: float32 sgemm, or in the bf16 modes the bf16 x bf16 -> float32 GEMM (oneMKL's where
    the CPU has bf16 units, else widen + sgemm), as a CPU worker runs it."""
    from threadpoolctl import threadpool_limits

    from numtile import ops_cpu
    from numtile.tiletensor.precision import bf16_gemm

    n = 1024
    c = np.empty((n, n), np.float32)
    if precision in ("bf16-mixed", "fp32-fast-bf16"):
        a = np.ones((n, n), np.uint16) * np.uint16(0x3F80)  # bfloat16 ones
        kernel = bf16_gemm(ops_cpu)
    else:
        a, kernel = np.ones((n, n), np.float32), ops_cpu.gemm
    with threadpool_limits(1):  # the workers run BLAS single-threaded
        kernel(a, a, c, False, False, 1.0, 0.0)
        start, calls = time.perf_counter(), 0
        while time.perf_counter() - start < 0.3:
            kernel(a, a, c, False, False, 1.0, 0.0)
            calls += 1
        seconds = time.perf_counter() - start
    return workers * 2.0 * n**3 * calls / seconds


def bf16_gemm_description() -> str:
    """The CPU's bf16 GEMM: its libraries, or the fallback and why (``numtile info``)."""
    from numtile import ops_cpu
    from numtile.tiletensor.precision import bf16_gemm_library, cpu_has_bf16_gemm

    library = bf16_gemm_library(ops_cpu)
    if library is not None:
        return f"{library} (the CPU has bf16 units)"
    if cpu_has_bf16_gemm():
        return "widen + sgemm (pip install numtile[onednn] for the CPU's bf16 units)"
    return "widen + sgemm (the CPU has no AVX512-BF16 or AMX-BF16 units)"


def kernel_blas_description() -> str:
    """The BLAS/LAPACK the CPU tile kernels call, and why (``numtile info``)."""
    from numtile.ops_cpu.kernel_blas import kernel_blas_description as description

    return description()


def sgemm_peak(workers: int) -> float:
    """FLOP/s of single-threaded float32 GEMM on this machine, times the worker count."""
    return gemm_peak(workers, "fp32")


class Trainer:
    """Holds the model, optimizer and data of one run; ``run()`` trains it."""

    def __init__(self, cfg: TrainConfig, cache_dir: str | None = None, log=print) -> None:
        self.cfg, self.log = cfg, log
        # every file the run writes is checked now, not at its first save after hours of work
        if cfg.checkpoint:
            check_writable(cfg.checkpoint, "--checkpoint")
        if cfg.trace:
            check_writable(cfg.trace, "--trace")
        self.data_dir = cfg.data or stdlib_corpus(cache_dir or nt.get_runtime().config.cache_dir)
        for name in ("train.bin", "val.bin"):
            path = os.path.join(self.data_dir, name)
            if not os.path.exists(path):
                raise FileNotFoundError(
                    f"{path} not found: make it with `numtile prepare INPUT... --out "
                    f"{self.data_dir}`"
                )
        self.train_data = TokenDataset(
            os.path.join(self.data_dir, "train.bin"), cfg.seq_len, seed=cfg.seed
        )
        self.val_data = TokenDataset(
            os.path.join(self.data_dir, "val.bin"), cfg.seq_len, seed=cfg.seed + 1
        )
        vocab = self.train_data.vocab_size
        if cfg.init_from:  # fine-tuning: the folder's model; its tokenizer must be the data's
            _, self.config = read_config(cfg.init_from)
            check_tokenizer(cfg.init_from, self.config, self.data_dir, read_meta(self.data_dir))
        else:
            self.config = model_config(cfg.model, vocab)
        shape = model_shape(self.config)
        if cfg.seq_len > shape["context"]:
            raise ConfigError(
                f"--seq-len {cfg.seq_len} exceeds the model's {shape['context_field']} "
                f"{shape['context']}"
            )
        if vocab is not None and vocab > self.config.vocab_size:
            raise ConfigError(
                f"the data has a vocabulary of {vocab} but the model only {self.config.vocab_size}"
            )
        tiling = _tiling(cfg, self.config)
        if cfg.init_from and not cfg.resume:  # streamed from the folder: no random weights
            self.model = load_hf(
                cfg.init_from, tiling=dataclasses.replace(tiling, seq=tiling.seq or cfg.seq_len)
            )
        else:
            self.model = build_model(self.config, tiling, seed=cfg.seed, seq_len=cfg.seq_len)
        self.model.set_precision(cfg.precision)  # says once if the hardware falls back
        if nt.nranks() > 1:  # under mpiexec: data-parallel (numtile/train_distributed.py)
            from numtile.train_distributed import data_parallel

            data_parallel(self.model)
        self.step = 0
        self.saved_step: int | None = None  # step of the last checkpoint this run wrote
        if cfg.resume:
            self._load(cfg.resume)
        else:
            self.optimizer = self._make_optimizer()
        # under mpiexec every rank trains and rank 0 alone writes the logs
        logs = cfg.log_dir and nt.rank() == 0
        self.training_log = TrainingLog(cfg.log_dir, self.step) if logs else None

    def _make_optimizer(self) -> optim.AdamW:
        decay, no_decay = [], []
        for _, p in self.model.named_parameters():
            (decay if p.ndim >= 2 else no_decay).append(p)
        cfg = self.cfg
        return optim.AdamW(
            [
                {"params": decay, "weight_decay": cfg.weight_decay},
                {"params": no_decay, "weight_decay": 0.0},
            ],
            lr=cfg.lr,
            betas=(cfg.beta1, cfg.beta2),
        )

    # -- checkpoints ----------------------------------------------------------------------------

    def _tensors(self) -> dict:
        tensors = {}
        for name, p in self.model.named_parameters():
            tensors[f"model/{name}"] = p
            if id(p) in self.optimizer.state:
                m, v = self.optimizer.state[id(p)]
                tensors[f"optimizer/exp_avg/{name}"] = m
                tensors[f"optimizer/exp_avg_sq/{name}"] = v
        return tensors

    def save(self, path: str) -> None:
        attrs = {
            "step": self.step,
            "model_config": config_fields(self.config),
            "tiling": dataclasses.asdict(self.model.tiling),
            "train_config": dataclasses.asdict(self.cfg),
            "optimizer_step": self.optimizer.step_count,
            "precision": self.cfg.precision,  # the weights and AdamW state are float32 in all
            "train_sampler": self.train_data.state_dict(),
            "val_sampler": self.val_data.state_dict(),
        }
        if nt.nranks() > 1:  # the tiles go to one writer, rank 0
            from numtile.train_distributed import save_distributed_checkpoint

            save_distributed_checkpoint(path, self._tensors(), attrs, check_finite=True)
        else:
            save_checkpoint(path, self._tensors(), attrs, check_finite=True)
        if path == self.cfg.checkpoint:
            self.saved_step = self.step

    def _load(self, path: str) -> None:
        tensors, attrs = load_checkpoint(path)
        _require_attrs(path, attrs, _TRAINING_ATTRS)
        stored = _model_config(attrs["model_config"], f"{path}: model_config")
        if stored != self.config:
            folder = (attrs.get("train_config") or {}).get("init_from")
            hint = f" (it was fine-tuned from {folder}: pass --init-from)" if folder else ""
            raise ConfigError(
                f"{path} holds a model {stored}, not the requested {self.config}{hint}"
            )
        _load_state(path, self.model, tensors)
        self.optimizer = self._make_optimizer()
        for name, p in self.model.named_parameters():
            m, v = (
                tensors.get(f"optimizer/exp_avg/{name}"),
                tensors.get(f"optimizer/exp_avg_sq/{name}"),
            )
            if m is not None and v is not None:
                self.optimizer.state[id(p)] = (m.retile(p.tile_shape), v.retile(p.tile_shape))
        self.optimizer.step_count = int(attrs["optimizer_step"])
        self.step = int(attrs["step"])
        try:
            self.train_data.load_state_dict(attrs["train_sampler"])
            self.val_data.load_state_dict(attrs["val_sampler"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}: its data-sampler state is not usable ({exc!r})") from None
        if self.step > self.cfg.steps:
            raise ConfigError(
                f"{path} is at step {self.step}, beyond --steps {self.cfg.steps}: pass a "
                f"larger --steps to train further"
            )
        _warn_on_changes(path, attrs.get("train_config"), self.cfg, self.step)

    # -- training -------------------------------------------------------------------------------

    def train_step(self) -> float:
        cfg = self.cfg
        micro = cfg.micro_batch or cfg.batch
        accumulation = cfg.batch // micro
        self.optimizer.lr = optim.cosine_schedule(
            self.step, lr=cfg.lr, warmup=cfg.warmup, total=cfg.steps, min_lr=cfg.min_lr
        )
        losses = []
        for _ in range(accumulation):
            x, y = self.train_data.batch(micro)
            loss = self.model(x, y)[1]  # logits dropped: freed tile by tile
            losses.append(loss)
            (loss * (1.0 / accumulation) if accumulation > 1 else loss).backward()
        # the norm is read anyway (clipping needs it); with grad_clip 0 it only checks
        norm = optim.clip_grad_norm(self.model.parameters(), cfg.grad_clip)
        mean_loss = float(np.mean([loss.item() for loss in losses]))
        if not (math.isfinite(mean_loss) and math.isfinite(norm)):
            kept = ""
            if self.saved_step is not None:
                kept = f"; the last checkpoint {cfg.checkpoint} (step {self.saved_step}) is kept"
            elif cfg.checkpoint and os.path.exists(cfg.checkpoint):
                kept = f"; {cfg.checkpoint} is left as it was"
            raise TrainingDiverged(
                f"training diverged at step {self.step + 1}: loss {mean_loss}, gradient norm "
                f"{norm}; the parameters were not updated{kept} (try a lower --lr, a longer "
                f"--warmup or --grad-clip)"
            )
        self.optimizer.step()
        self.optimizer.zero_grad()
        self.step += 1
        return mean_loss

    def evaluate(self) -> float:
        losses = []
        with nt.no_grad():
            for _ in range(self.cfg.eval_batches):
                x, y = self.val_data.batch(self.cfg.micro_batch or self.cfg.batch)
                losses.append(self.model(x, y)[1].item())
        return float(np.mean(losses))

    def run(
        self,
        progress: bool = True,
        on_step: Callable[[int, float], None] | None = None,
        stop_requested: Callable[[], bool] = lambda: False,
    ):
        """Train to ``cfg.steps`` (or until ``stop_requested()`` says so between steps).

        Returns {"train_loss", "val_loss", "tokens_per_s", "interrupted", ...}.
        """
        from tqdm import tqdm

        cfg = self.cfg
        tokens_per_step = cfg.batch * cfg.seq_len
        peak = gemm_peak(nt.get_runtime().ncpu, cfg.precision)
        per_token = flops_per_token(self.config, self.model.num_parameters(), cfg.seq_len)
        history = {"train_loss": [], "val_loss": [], "step_seconds": []}
        bar = tqdm(
            total=cfg.steps,
            initial=self.step,
            disable=not progress,
            unit="step",
            dynamic_ncols=True,
        )
        val_loss = float("nan")
        interrupted = False
        try:
            while self.step < cfg.steps:
                if stop_requested():
                    interrupted = True
                    break
                start = time.perf_counter()
                loss = self.train_step()
                elapsed = time.perf_counter() - start
                history["train_loss"].append(loss)
                history["step_seconds"].append(elapsed)
                rate = tokens_per_step / elapsed
                bar.set_postfix(
                    loss=f"{loss:.3f}",
                    tok_s=f"{rate:,.0f}",
                    mfu=f"{100 * rate * per_token / peak:.0f}%",
                )
                bar.update(1)
                if on_step is not None:
                    on_step(self.step, loss)
                evaluated = self.step % cfg.eval_every == 0 or self.step == cfg.steps
                if evaluated:
                    val_loss = self.evaluate()
                    history["val_loss"].append((self.step, val_loss))
                    bar.write(f"step {self.step}: train loss {loss:.4f}, val loss {val_loss:.4f}")
                if self.training_log is not None:
                    mfu, lr = rate * per_token / peak, self.optimizer.lr
                    last_val = val_loss if evaluated else None
                    log = (self.step, loss, lr, rate, mfu, last_val, nt.get_runtime())
                    self.training_log.log_step(*log)
                if cfg.checkpoint and (
                    self.step % cfg.checkpoint_every == 0 or self.step == cfg.steps
                ):
                    self.save(cfg.checkpoint)
        finally:
            bar.close()
            if self.training_log is not None:
                self.training_log.close()
        steady = history["step_seconds"][min(2, len(history["step_seconds"]) - 1) :]
        tokens_per_s = tokens_per_step / float(np.median(steady)) if steady else 0.0
        return {
            **history,
            "interrupted": interrupted,
            "final_val_loss": val_loss,
            "tokens_per_s": tokens_per_s,
            "mfu": tokens_per_s * per_token / peak,
            "gemm_peak_gflops": peak / 1e9,
        }


def generate(
    model: GPT2 | Llama,
    prompt: np.ndarray,
    max_new_tokens: int,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int = 0,
    stop_tokens=None,
    on_token: Callable[[int], None] | None = None,
) -> np.ndarray:
    """Sample ``max_new_tokens`` ids after ``prompt`` (1-D ids) with the key/value cache
    (``GPT2.generate``, ``Llama.generate``); ``on_token(id)`` gets each new id as it comes.

    >>> from numtile.nn.gpt2 import GPT2Config
    >>> m = GPT2(GPT2Config(vocab_size=7, n_positions=8, n_embd=4, n_layer=1, n_head=1))
    >>> generate(m, np.array([1, 2]), 3, top_k=2).shape
    (5,)
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    ids = np.asarray(prompt).reshape(-1).astype(np.int64)
    if ids.size == 0:
        ids = np.zeros(1, np.int64)
    callback = None if on_token is None else (lambda new: on_token(int(new[0])))
    options = dict(temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)
    return model.generate(
        ids[None], max_new_tokens, stop_tokens=stop_tokens, on_token=callback, **options
    )[0]


def _model_state(tensors: dict, model) -> dict:
    """The ``model/...`` tensors of a checkpoint as a state dict (with a tied head)."""
    state = {k[len("model/") :]: v for k, v in tensors.items() if k.startswith("model/")}
    if isinstance(model, GPT2):
        state["lm_head.weight"] = state.get("transformer.wte.weight")
    elif model.config.tie_word_embeddings:
        state["lm_head.weight"] = state.get("model.embed_tokens.weight")
    return {name: value for name, value in state.items() if value is not None}


def save_model(path: str, model: GPT2 | Llama, attrs: dict | None = None) -> None:
    """Write ``model`` as an HDF5 checkpoint that ``load_model`` reads (no optimizer state)."""
    tensors = {f"model/{name}": p for name, p in model.named_parameters()}
    meta = {
        "model_config": config_fields(model.config),
        "tiling": dataclasses.asdict(model.tiling),
        **(attrs or {}),
    }
    save_checkpoint(path, tensors, meta)


def load_model(path: str) -> tuple[GPT2 | Llama, dict]:
    """The model of a checkpoint written by ``numtile train`` (and the checkpoint's attrs),
    or of a Hugging Face model folder (``numtile.nn.hf.load_hf``; attrs has its config).

    A checkpoint that lacks what ``numtile train`` stores, or holds something else, raises
    ``ValueError`` naming the file and what is wrong.
    """
    if os.path.isdir(path):
        model = load_hf(path)
        return model, {"model_config": config_fields(model.config), "hf_folder": path}
    tensors, attrs = load_checkpoint(path)
    _require_attrs(path, attrs, ("model_config", "tiling"))
    config = _model_config(attrs["model_config"], f"{path}: model_config")
    try:
        tiling = Tiling(**{**attrs["tiling"], "batch": 1})
        seq_len = attrs["tiling"]["seq"]
    except (TypeError, KeyError, ValueError) as exc:
        raise ValueError(f"{path}: its tiling attribute is not usable ({exc!r})") from None
    model = build_model(config, tiling, seq_len=seq_len)
    _load_state(path, model, tensors)
    return model, attrs


def _require_attrs(path: str, attrs: dict, names) -> None:
    """A training checkpoint has every attribute in ``names`` (ValueError naming the rest)."""
    missing = [name for name in names if name not in attrs]
    if missing:
        raise ValueError(
            f"{path} is not a numtile training checkpoint: it has no {', '.join(missing)} "
            f"attribute{'s' if len(missing) > 1 else ''}"
        )


def _load_state(path: str, model: GPT2 | Llama, tensors: dict) -> None:
    """Load the checkpoint's ``model/...`` tensors into ``model``, naming ``path`` on a mismatch."""
    try:
        model.load_state_dict(_model_state(tensors, model))
    except (KeyError, ValueError, TypeError) as exc:
        raise ValueError(f"{path}: its model tensors do not fit the model ({exc})") from None
