"""``numtile convert SRC DST``: a numtile HDF5 checkpoint to a Hugging Face folder, or back.

The direction follows SRC: a folder is read as a Hugging Face model (``config.json`` and
safetensors) and written as an HDF5 checkpoint that ``numtile generate`` and ``convert``
read; a file is read as a numtile checkpoint (from ``numtile train`` or ``convert``) and
written as a Hugging Face folder that ``transformers``' ``from_pretrained`` loads.
"""

from __future__ import annotations

import argparse
import os
import sys

from numtile.cli.errors import UsageError


def convert_command(args: argparse.Namespace) -> int:
    from numtile.cli.train import _setting_up, _tokenizer_for
    from numtile.io import check_writable
    from numtile.io.prepare import load_tokenizer
    from numtile.nn.hf import load_hf, save_hf
    from numtile.train import load_model, save_model

    src, dst = args.src, args.dst
    if not os.path.exists(src):
        raise UsageError(f"{src}: no such file or folder (expected an .h5 checkpoint or a "
                         f"Hugging Face model folder)")  # fmt: skip
    to_hf = not os.path.isdir(src)
    for flag in ("dtype", "tokenizer"):
        if getattr(args, flag) and not to_hf:
            raise UsageError(f"--{flag} applies to a Hugging Face folder written from a checkpoint")
    with _setting_up("convert"):
        if to_hf:
            parent = os.path.dirname(os.path.abspath(dst))
            if not os.path.isdir(parent):
                raise FileNotFoundError(f"{dst}: its folder {parent} does not exist")
            if os.path.isfile(dst):
                raise UsageError(f"{dst} is a file; a Hugging Face model is written as a folder")
            model, attrs = load_model(src)
            tokenizer = _tokenizer_for(args, attrs)
            if tokenizer is not None:
                load_tokenizer(tokenizer)  # gone or unreadable: said now, not after writing
        else:
            check_writable(dst, "DST")
            model = load_hf(src)
    if to_hf:
        options = dict(dtype=args.dtype, max_shard_size=args.max_shard_size)
        save_hf(model, dst, tokenizer=tokenizer, **options)
    else:
        save_model(dst, model, {"converted_from": os.path.abspath(src)})
    kind = "Hugging Face folder" if to_hf else "numtile checkpoint"
    print(f"wrote {dst} ({kind}, {model.num_parameters():,} parameters)", file=sys.stderr)
    return 0


def register(subparsers) -> None:
    """Add ``convert`` to the ``numtile`` command."""
    p = subparsers.add_parser(
        "convert", help="numtile checkpoint (.h5) <-> Hugging Face model folder"
    )
    p.add_argument("src", help="an .h5 checkpoint, or a folder with config.json + safetensors")
    p.add_argument("dst", help="the folder (from an .h5) or the .h5 file (from a folder)")
    p.add_argument(
        "--dtype",
        choices=["float32", "float16", "bfloat16"],
        help="dtype of the written safetensors (default: the model's)",
    )
    p.add_argument("--max-shard-size", default="5GB", help="shard above this size (e.g. 2GB)")
    p.add_argument(
        "--tokenizer",
        help="tokenizer.json copied into the folder (default: the one the checkpoint was "
        "trained or fine-tuned with, if any)",
    )
    p.set_defaults(func=convert_command)
