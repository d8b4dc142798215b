"""Checkpoints (HDF5), token datasets (uint16 streams) and preparing them from text."""

from numtile.io.checkpoint import checkpoint_info, load_checkpoint, save_checkpoint
from numtile.io.data import TokenDataset, read_meta
from numtile.io.files import atomic_output, check_writable
from numtile.io.prepare import prepare, stdlib_corpus

__all__ = [
    "TokenDataset",
    "atomic_output",
    "check_writable",
    "checkpoint_info",
    "load_checkpoint",
    "prepare",
    "read_meta",
    "save_checkpoint",
    "stdlib_corpus",
]
