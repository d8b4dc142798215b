"""Neural-network layers over TileTensors, with Hugging Face parameter names."""

from numtile.nn.layers import MLP, Embedding, LayerNorm, Linear, ModuleList
from numtile.nn.module import Module, parameter

__all__ = ["MLP", "Embedding", "LayerNorm", "Linear", "Module", "ModuleList", "parameter"]
