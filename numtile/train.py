"""Training and sampling GPT models: the engine behind ``numtile train`` and ``generate``."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable

import numpy as np

import numtile as nt
from numtile.io import TokenDataset, load_checkpoint, save_checkpoint, stdlib_corpus
from numtile.nn import optim
from numtile.nn.gpt2 import GPT2, GPT2Config, Tiling

PRESETS = {
    # byte-level model for the default corpus (the Python standard library's sources)
    "default": dict(vocab_size=256, n_positions=256, n_embd=256, n_layer=4, n_head=4),
    "gpt2-mini": dict(vocab_size=50304, n_positions=256, n_embd=256, n_layer=4, n_head=4),
    "gpt2-small": dict(vocab_size=50304, n_positions=1024, n_embd=768, n_layer=12, n_head=12),
}


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
    seed: int = 0
    sample_tokens: int = 200
    trace: str | None = None

    def __post_init__(self) -> None:
        micro = self.micro_batch or self.batch
        checks = {
            "steps": self.steps >= 1,
            "batch": self.batch >= 1,
            "micro_batch": micro >= 1,
            "seq_len": self.seq_len >= 1,
            "lr": self.lr > 0,
            "warmup": self.warmup >= 0,
            "grad_clip": self.grad_clip >= 0,
            "eval_every": self.eval_every >= 1,
            "eval_batches": self.eval_batches >= 1,
            "checkpoint_every": self.checkpoint_every >= 1,
        }
        for name, ok in checks.items():
            if not ok:
                raise ValueError(
                    f"--{name.replace('_', '-')} is out of range: {getattr(self, name)}"
                )
        if self.batch % micro:
            raise ValueError(f"--batch {self.batch} is not a multiple of --micro-batch {micro}")


def model_config(spec: str) -> GPT2Config:
    """A preset name, a JSON file, or inline JSON with GPT2Config fields."""
    if spec in PRESETS:
        return GPT2Config(**PRESETS[spec])
    text = spec
    if os.path.exists(spec):
        with open(spec) as f:
            text = f.read()
    try:
        fields = json.loads(text)
    except json.JSONDecodeError:
        raise ValueError(
            f"--model {spec!r} is neither a preset ({', '.join(PRESETS)}), a JSON file nor JSON"
        ) from None
    try:
        return GPT2Config(**fields)
    except TypeError as exc:
        raise ValueError(f"--model: {exc}") from None


def _tiling(cfg: TrainConfig, config: GPT2Config) -> Tiling:
    return Tiling(
        batch=min(cfg.batch_tile, cfg.micro_batch or cfg.batch),
        seq=cfg.seq_tile,
        embd=cfg.embd_tile,
        inner=cfg.inner_tile,
        head=cfg.head_tile or config.n_head,
        vocab=cfg.vocab_tile,
    )


def flops_per_token(config: GPT2Config, n_params: int, seq_len: int) -> float:
    """Training FLOPs per token: 6 per parameter plus attention (PaLM appendix B)."""
    head_dim = config.n_embd // config.n_head
    return 6.0 * n_params + 12.0 * config.n_layer * config.n_head * head_dim * seq_len


def sgemm_peak(workers: int) -> float:
    """FLOP/s of single-threaded float32 GEMM on this machine, times the worker count."""
    from threadpoolctl import threadpool_limits

    from numtile import ops_cpu

    n = 1024
    a = np.ones((n, n), np.float32)
    c = np.empty((n, n), np.float32)
    with threadpool_limits(1):  # the workers run BLAS single-threaded
        ops_cpu.gemm(a, a, c, False, False, 1.0, 0.0)
        start, calls = time.perf_counter(), 0
        while time.perf_counter() - start < 0.3:
            ops_cpu.gemm(a, a, c, False, False, 1.0, 0.0)
            calls += 1
        seconds = time.perf_counter() - start
    return workers * 2.0 * n**3 * calls / seconds


class Trainer:
    """Holds the model, optimizer and data of one run; ``run()`` trains it."""

    def __init__(self, cfg: TrainConfig, cache_dir: str | None = None, log=print) -> None:
        self.cfg, self.log = cfg, log
        self.data_dir = cfg.data or stdlib_corpus(cache_dir or nt.get_runtime().config.cache_dir)
        for name in ("train.bin", "val.bin"):
            path = os.path.join(self.data_dir, name)
            if not os.path.exists(path):
                raise FileNotFoundError(
                    f"{path} not found: make it with `numtile prepare INPUT... --out "
                    f"{self.data_dir}`"
                )
        self.config = model_config(cfg.model)
        if cfg.seq_len > self.config.n_positions:
            raise ValueError(
                f"--seq-len {cfg.seq_len} exceeds the model's n_positions {self.config.n_positions}"
            )
        self.train_data = TokenDataset(
            os.path.join(self.data_dir, "train.bin"), cfg.seq_len, seed=cfg.seed
        )
        self.val_data = TokenDataset(
            os.path.join(self.data_dir, "val.bin"), cfg.seq_len, seed=cfg.seed + 1
        )
        vocab = self.train_data.vocab_size
        if vocab is not None and vocab > self.config.vocab_size:
            raise ValueError(
                f"the data has a vocabulary of {vocab} but the model only {self.config.vocab_size}"
            )
        self.model = GPT2(
            self.config, _tiling(cfg, self.config), seed=cfg.seed, seq_len=cfg.seq_len
        )
        self.step = 0
        if cfg.resume:
            self._load(cfg.resume)
        else:
            self.optimizer = self._make_optimizer()

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
            "model_config": dataclasses.asdict(self.config),
            "tiling": dataclasses.asdict(self.model.tiling),
            "train_config": dataclasses.asdict(self.cfg),
            "optimizer_step": self.optimizer.step_count,
            "train_sampler": self.train_data.state_dict(),
            "val_sampler": self.val_data.state_dict(),
        }
        save_checkpoint(path, self._tensors(), attrs)

    def _load(self, path: str) -> None:
        tensors, attrs = load_checkpoint(path)
        stored = GPT2Config(**attrs["model_config"])
        if stored != self.config:
            raise ValueError(f"{path} holds a model {stored}, not the requested {self.config}")
        self.model.load_state_dict(_model_state(tensors))
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
        self.train_data.load_state_dict(attrs["train_sampler"])
        self.val_data.load_state_dict(attrs["val_sampler"])

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
            _, loss = self.model(x, y)
            losses.append(loss)
            (loss * (1.0 / accumulation) if accumulation > 1 else loss).backward()
        if cfg.grad_clip > 0:
            optim.clip_grad_norm(self.model.parameters(), cfg.grad_clip)
        self.optimizer.step()
        self.optimizer.zero_grad()
        self.step += 1
        return float(np.mean([loss.item() for loss in losses]))

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
        peak = sgemm_peak(nt.get_runtime().ncpu)
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
                if self.step % cfg.eval_every == 0 or self.step == cfg.steps:
                    val_loss = self.evaluate()
                    history["val_loss"].append((self.step, val_loss))
                    bar.write(f"step {self.step}: train loss {loss:.4f}, val loss {val_loss:.4f}")
                if cfg.checkpoint and (
                    self.step % cfg.checkpoint_every == 0 or self.step == cfg.steps
                ):
                    self.save(cfg.checkpoint)
        finally:
            bar.close()
        steady = history["step_seconds"][min(2, len(history["step_seconds"]) - 1) :]
        tokens_per_s = tokens_per_step / float(np.median(steady)) if steady else 0.0
        return {
            **history,
            "interrupted": interrupted,
            "final_val_loss": val_loss,
            "tokens_per_s": tokens_per_s,
            "mfu": tokens_per_s * per_token / peak,
            "sgemm_peak_gflops": peak / 1e9,
        }


def generate(
    model: GPT2,
    prompt: np.ndarray,
    max_new_tokens: int,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    seed: int = 0,
) -> np.ndarray:
    """Sample ``max_new_tokens`` ids after ``prompt`` (1-D ids), one forward per token.

    >>> m = GPT2(GPT2Config(vocab_size=7, n_positions=8, n_embd=4, n_layer=1, n_head=1))
    >>> generate(m, np.array([1, 2]), 3, top_k=2).shape
    (5,)
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    rng = np.random.default_rng(seed)
    ids = [int(i) for i in np.asarray(prompt).reshape(-1)] or [0]
    with nt.no_grad():
        for _ in range(max_new_tokens):
            context = np.array([ids[-model.config.n_positions :]])
            logits, _ = model(context)
            last = logits[0, context.shape[1] - 1 :].to_numpy()[0].astype(np.float64)
            last = last / temperature
            if top_k is not None and top_k < last.size:
                cutoff = np.partition(last, -top_k)[-top_k]
                last[last < cutoff] = -np.inf
            probs = np.exp(last - last.max())
            ids.append(int(rng.choice(last.size, p=probs / probs.sum())))
    return np.array(ids)


def _model_state(tensors: dict) -> dict:
    """The ``model/...`` tensors of a checkpoint as a state dict (with the tied head)."""
    state = {k[len("model/") :]: v for k, v in tensors.items() if k.startswith("model/")}
    state["lm_head.weight"] = state["transformer.wte.weight"]
    return state


def load_model(path: str) -> tuple[GPT2, dict]:
    """The model of a checkpoint written by ``numtile train`` (and the checkpoint's attrs)."""
    tensors, attrs = load_checkpoint(path)
    if "model_config" not in attrs:
        raise ValueError(f"{path} is not a numtile training checkpoint (no model_config)")
    config = GPT2Config(**attrs["model_config"])
    tiling = Tiling(**{**attrs["tiling"], "batch": 1})
    model = GPT2(config, tiling, seq_len=attrs["tiling"]["seq"])
    model.load_state_dict(_model_state(tensors))
    return model, attrs
