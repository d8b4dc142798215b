"""Neural-network layers over TileTensors, with Hugging Face parameter names."""

from numtile.nn.layers import MLP, Embedding, GatedMLP, LayerNorm, Linear, ModuleList, RMSNorm
from numtile.nn.mixed_precision import precision
from numtile.nn.module import Module, parameter

__all__ = [
    "MLP",
    "Embedding",
    "GatedMLP",
    "LayerNorm",
    "Linear",
    "Module",
    "ModuleList",
    "RMSNorm",
    "parameter",
    # precision modes (issue 15)
    "precision",
]
