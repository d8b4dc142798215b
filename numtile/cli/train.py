"""``numtile train`` and ``numtile generate``."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import math
import os
import signal
import sys
import threading
import warnings

import numpy as np

from numtile.cli.errors import UsageError, one_line


def _add_train_flags(parser: argparse.ArgumentParser) -> None:
    from numtile.train import TrainConfig

    help_text = {
        "model": "preset (default, gpt2-mini, gpt2-small), a JSON file or inline JSON",
        "data": "folder with train.bin/val.bin (default: the Python stdlib corpus)",
        "micro_batch": "sequences per forward/backward; batch/micro-batch steps accumulate",
        "checkpoint": "HDF5 checkpoint written every --checkpoint-every steps ('' for none)",
        "resume": "continue from this checkpoint",
        "trace": "write a Chrome/Perfetto trace of the run's tasks to this file",
        "init_from": "fine-tune a Hugging Face GPT-2/LLaMA folder (its config sets the model)",
        "log_dir": "write TensorBoard scalars and metrics.jsonl here (tensorboard --logdir DIR)",
        "precision": "GEMM precision: fp32, bf16-mixed, fp32-fast-bf16 or tf32 (weights stay fp32)",
    }
    for field in dataclasses.fields(TrainConfig):
        flag = "--" + field.name.replace("_", "-")
        # annotations are strings here ("int", "int | None", ...): their first word decides
        kind = {"int": int, "float": float}.get(str(field.type).split(" ")[0], str)
        parser.add_argument(
            flag,
            type=kind,
            default=field.default,
            dest=field.name,
            help=help_text.get(field.name, f"(default {field.default})"),
        )


def _add_runtime_flags(parser: argparse.ArgumentParser) -> None:
    """Where kernels run and how much memory they may use (override NUMTILE_* variables)."""
    group = parser.add_argument_group("runtime")
    group.add_argument("--restrict", choices=["cpu", "cuda"], help="run kernels only there")
    group.add_argument("--ncuda", type=int, help="GPU workers (default: every GPU found)")
    group.add_argument("--cuda-mem-limit", metavar="SIZE", help="bytes per GPU, e.g. 20GiB")
    group.add_argument("--host-mem-limit", metavar="SIZE", help="host bytes before spilling")
    group.add_argument("--spill-dir", metavar="DIR", help="where host tiles spill")


def _start_runtime(args: argparse.Namespace) -> None:
    import numtile as nt

    names = ("restrict", "ncuda", "cuda_mem_limit", "host_mem_limit", "spill_dir")
    settings = {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}
    if settings:
        try:
            nt.init(**settings)
        except (ValueError, OSError, RuntimeError) as exc:  # bad settings: say so, no traceback
            raise SystemExit(f"numtile: error: {exc}") from None


@contextlib.contextmanager
def _setting_up(command: str):
    """While the command line is being checked and its files opened: every error there is a
    ``UsageError`` (exit status 2), and warnings are one line each on stderr."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)  # one line each, every time
        try:
            yield
        except (ValueError, OSError, ImportError) as exc:
            raise UsageError(one_line(exc)) from exc
        finally:
            for warning in caught:
                print(f"numtile {command}: warning: {one_line(warning.message)}", file=sys.stderr)


def train_command(args: argparse.Namespace) -> int:
    import numtile as nt

    _start_runtime(args)
    if nt.rank() == 0:
        return _train(args, nt)
    # under mpiexec every rank trains (and samples: the tasks are collective); rank 0 reports
    with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
        return _train(args, nt)


def _train(args: argparse.Namespace, nt) -> int:
    from numtile.train import TrainConfig, Trainer, generate

    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    with _setting_up("train"):
        cfg = TrainConfig(**{k: v for k, v in vars(args).items() if k in fields})
        if cfg.checkpoint == "":
            cfg.checkpoint = None
        trainer = Trainer(cfg)
    if trainer.step >= cfg.steps:
        print(
            f"numtile train: nothing to do: {cfg.resume} is at step {trainer.step} and --steps "
            f"is {cfg.steps}; to train further, pass a larger --steps"
        )
        return 0
    from numtile.train_config import architecture, model_shape

    model, shape = trainer.model, model_shape(trainer.config)
    runtime = nt.get_runtime()
    gpus = f" + {runtime.ncuda} GPU" if runtime.ncuda else ""
    print(
        f"numtile train: {model.num_parameters():,} parameters "
        f"({architecture(trainer.config)}, {shape['layers']} layers, {shape['width']} wide, "
        f"{shape['heads']} heads{f', fine-tuning {cfg.init_from}' if cfg.init_from else ''}), "
        f"{runtime.ncpu} CPU{gpus} workers, data {trainer.data_dir}, "
        f"{len(trainer.train_data):,} training tokens"
    )
    stop = _StopOnInterrupt()
    try:
        with stop:
            if cfg.trace:
                with nt.trace(cfg.trace):
                    result = trainer.run(progress=nt.rank() == 0, stop_requested=stop.requested)
            else:
                result = trainer.run(progress=nt.rank() == 0, stop_requested=stop.requested)
    except KeyboardInterrupt:  # a second Ctrl-C
        result = {"interrupted": True}
    if result["interrupted"]:
        print(
            f"\ninterrupted at step {trainer.step}; the last complete checkpoint "
            f"({cfg.checkpoint}) is intact"
        )
        return 130
    print(
        f"final validation loss {result['final_val_loss']:.4f} nats/token, "
        f"{result['tokens_per_s']:,.0f} tokens/s, MFU {100 * result['mfu']:.1f}% "
        f"of {result['gemm_peak_gflops']:.0f} GFLOP/s {_peak_name(cfg.precision)} peak"
    )
    if cfg.sample_tokens > 0:
        tokenizer = _data_tokenizer(trainer.data_dir)
        if tokenizer is None:
            prompt = np.frombuffer(b"def ", np.uint8).astype(np.int64)
        else:
            prompt = np.array(_load_tokenizer(tokenizer).encode("def ").ids, np.int64)
        ids = generate(model, prompt, cfg.sample_tokens, temperature=0.8, top_k=40, seed=cfg.seed)
        print("sample:\n" + _decode(ids, tokenizer))
    return 0


class _StopOnInterrupt:
    """Ctrl-C asks the training loop to stop after the current step; a second one stops now.

    A KeyboardInterrupt raised at an arbitrary point can be lost (Python drops exceptions
    raised inside finalisers and weakref callbacks, which h5py and the runtime run all the
    time), so the first Ctrl-C only sets a flag that the loop reads between steps.
    """

    def __init__(self) -> None:
        self.flag = False
        self.previous = None

    def requested(self) -> bool:
        return self.flag

    def _handle(self, signum, frame) -> None:
        if self.flag:
            raise KeyboardInterrupt
        self.flag = True

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)


def _peak_name(precision: str) -> str:
    """Which GEMM the MFU of ``precision`` is measured against."""
    return "bf16 GEMM" if precision in ("bf16-mixed", "fp32-fast-bf16") else "sgemm"


def _load_tokenizer(path: str):
    from numtile.io.prepare import load_tokenizer

    return load_tokenizer(path)


def _data_tokenizer(data_dir: str | None) -> str | None:
    """The tokenizer.json the data in ``data_dir`` was prepared with (None: bytes)."""
    from numtile.io import read_meta

    name = read_meta(data_dir).get("tokenizer", "bytes") if data_dir else "bytes"
    return None if name == "bytes" else name


def _decode(ids: np.ndarray, tokenizer: str | None) -> str:
    if tokenizer:
        return _load_tokenizer(tokenizer).decode([int(i) for i in ids])
    return bytes(int(i) % 256 for i in ids).decode("utf-8", errors="replace")


def _check_generate_flags(args: argparse.Namespace) -> None:
    rules = {
        "tokens": (args.tokens >= 0, ">= 0"),
        "temperature": (math.isfinite(args.temperature) and args.temperature > 0, "> 0"),
        "top_k": (args.top_k is None or args.top_k >= 1, ">= 1"),
        "top_p": (args.top_p is None or 0 < args.top_p <= 1, "in (0, 1]"),
        "seed": (args.seed >= 0, ">= 0"),
    }
    for name, (ok, rule) in rules.items():
        if not ok:
            raise UsageError(
                f"--{name.replace('_', '-')} must be {rule}, got {getattr(args, name)}"
            )
    if not args.prompt:
        raise UsageError("--prompt must not be empty (the model needs a token to start from)")
    if args.tokenizer and not os.path.exists(args.tokenizer):
        raise UsageError(
            f"--tokenizer {args.tokenizer}: no such file (expected a tokenizer.json or a model "
            f"folder holding one)"
        )


class _Stream:
    """Prints text as token ids come: bytes through an incremental UTF-8 decoder, tokenizer
    ids by decoding everything so far and printing what is new."""

    def __init__(self, tokenizer: str | None, out=None) -> None:
        import codecs

        self.out = out or sys.stdout
        self.tokenizer = _load_tokenizer(tokenizer) if tokenizer else None
        self.bytes = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.ids: list[int] = []
        self.printed = ""

    def __call__(self, token: int) -> None:
        self.ids.append(int(token))
        if self.tokenizer is None:
            text = self.bytes.decode(bytes([int(token) % 256]))
        else:
            full = self.tokenizer.decode(self.ids)
            text, self.printed = full[len(self.printed) :], full
        self.out.write(text)
        self.out.flush()


def _tokenizer_for(args: argparse.Namespace, attrs: dict) -> str | None:
    """--tokenizer, else the tokenizer.json of a Hugging Face folder (the one given, or the
    one a checkpoint was fine-tuned or converted from), else the data's (None: bytes)."""
    if args.tokenizer:
        return args.tokenizer
    train_config = attrs.get("train_config") or {}
    folders = (attrs.get("hf_folder"), train_config.get("init_from"), attrs.get("converted_from"))
    for folder in folders:
        if folder and os.path.isfile(os.path.join(folder, "tokenizer.json")):
            return os.path.join(folder, "tokenizer.json")
    return _data_tokenizer(train_config.get("data"))


def generate_command(args: argparse.Namespace) -> int:
    import time

    from numtile.train import generate, load_model

    _check_generate_flags(args)
    _start_runtime(args)
    with _setting_up("generate"):
        model, attrs = load_model(args.checkpoint)
        tokenizer = _tokenizer_for(args, attrs)
        stream = _Stream(tokenizer)
        if stream.tokenizer is not None:
            size = stream.tokenizer.get_vocab_size(with_added_tokens=True)
            if size > model.config.vocab_size:
                raise UsageError(
                    f"tokenizer {tokenizer} has {size} tokens but the model "
                    f"{args.checkpoint} a vocabulary of {model.config.vocab_size}: they do not "
                    f"belong together"
                )
            prompt = np.array(stream.tokenizer.encode(args.prompt).ids)
        else:
            prompt = np.frombuffer(args.prompt.encode(), np.uint8).astype(np.int64)
        if prompt.size == 0:
            raise UsageError(f"--prompt {args.prompt!r} encodes to no tokens")
        if prompt.max() >= model.config.vocab_size:
            raise UsageError(
                f"--prompt encodes to token id {prompt.max()}, beyond the model's vocabulary "
                f"of {model.config.vocab_size} (a tokenizer that does not match the model?)"
            )
    sys.stdout.write(args.prompt)
    sys.stdout.flush()
    start = time.perf_counter()
    ids = generate(
        model,
        prompt,
        args.tokens,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        seed=args.seed,
        stop_tokens=args.stop_token,
        on_token=stream,
    )
    seconds = time.perf_counter() - start
    print()
    new = ids.size - prompt.size
    print(
        f"numtile generate: {new} tokens in {seconds:.2f} s ({new / seconds:,.1f} tokens/s, "
        f"key/value cache)",
        file=sys.stderr,
    )
    return 0


def register(subparsers) -> None:
    """Add ``train`` and ``generate`` to the ``numtile`` command."""
    train = subparsers.add_parser(
        "train", help="train a GPT (default: a small byte-level model on the stdlib sources)"
    )
    _add_train_flags(train)
    _add_runtime_flags(train)
    train.set_defaults(func=train_command)
    gen = subparsers.add_parser(
        "generate", help="sample text from a training checkpoint or a Hugging Face folder"
    )
    gen.add_argument(
        "--checkpoint", required=True, help="an .h5 checkpoint or a Hugging Face model folder"
    )
    gen.add_argument("--prompt", default="def ")
    gen.add_argument("--tokens", type=int, default=200)
    gen.add_argument("--temperature", type=float, default=0.8)
    gen.add_argument("--top-k", type=int, default=40)
    gen.add_argument("--top-p", type=float, help="sample from the smallest set this likely")
    gen.add_argument(
        "--stop-token", type=int, action="append", help="stop at this token id (repeatable)"
    )
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument(
        "--tokenizer",
        help="tokenizer.json (or a model folder with one); default: the model's or the data's",
    )
    _add_runtime_flags(gen)
    gen.set_defaults(func=generate_command)


if __name__ == "__main__":
    sys.exit(0)
