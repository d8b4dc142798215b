"""``numtile prepare``: tokenize text files into ``train.bin``/``val.bin``/``meta.json``."""

from __future__ import annotations

import argparse
import os
import sys


def register(subparsers) -> None:
    """Add the ``prepare`` subcommand to ``subparsers`` (from ``add_subparsers``)."""
    parser = subparsers.add_parser(
        "prepare",
        help="tokenize text files into train.bin/val.bin token streams",
        description=(
            "Tokenize files, and the files under folders, into DIR/train.bin and DIR/val.bin "
            "(uint16 tokens, nanoGPT's format) and DIR/meta.json. Byte-level tokens "
            "(vocab 256) unless --tokenizer names a tokenizer.json."
        ),
    )
    parser.add_argument("inputs", nargs="+", metavar="INPUT", help="files or folders")
    parser.add_argument("--out", required=True, metavar="DIR", help="output folder")
    parser.add_argument(
        "--tokenizer", metavar="TOKENIZER_JSON", help="a local tokenizer.json (needs tokenizers)"
    )
    parser.add_argument(
        "--val-fraction",
        type=float,
        default=0.1,
        metavar="F",
        help="share of the stream, at its end, that goes to val.bin (default 0.1)",
    )
    parser.add_argument(
        "--extensions",
        default=".py,.txt,.md,.rst",
        metavar="EXTS",
        help="comma-separated file endings taken from folders (default .py,.txt,.md,.rst)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Prepare the token files and print what was written; 2 on a usage or input error."""
    from numtile.io.prepare import prepare
    from numtile.train_config import TrainConfig

    extensions = tuple(e.strip() for e in args.extensions.split(",") if e.strip())
    if not 0 < args.val_fraction < 1:  # val.bin must hold tokens: train evaluates on it
        print(
            f"numtile prepare: error: --val-fraction must be in (0, 1), got {args.val_fraction} "
            f"(numtile train evaluates on val.bin)",
            file=sys.stderr,
        )
        return 2
    try:
        meta = prepare(
            args.inputs,
            args.out,
            tokenizer=args.tokenizer,
            val_fraction=args.val_fraction,
            extensions=extensions,
        )
    except (OSError, ValueError, ImportError) as exc:
        print(f"numtile prepare: error: {exc}", file=sys.stderr)
        return 2
    print(
        f"wrote {os.path.join(args.out, 'train.bin')} ({meta['n_train']} tokens) and "
        f"{os.path.join(args.out, 'val.bin')} ({meta['n_val']} tokens) from "
        f"{len(meta['sources'])} file(s), vocab {meta['vocab_size']} ({meta['tokenizer']})"
    )
    if meta["skipped"]:
        print(f"skipped {len(meta['skipped'])} unreadable or binary file(s)")
    needed = TrainConfig.seq_len + 1  # what numtile train needs with its default --seq-len
    if meta["n_val"] < needed:
        print(
            f"numtile prepare: warning: val.bin holds {meta['n_val']} tokens; numtile train "
            f"needs at least --seq-len + 1 of them ({needed} for the default --seq-len): use "
            f"a larger --val-fraction or more text",
            file=sys.stderr,
        )
    return 0
