"""Neural-network layers over TileTensors, with Hugging Face parameter names."""

from numtile.nn.layers import MLP, Linear
from numtile.nn.module import Module, parameter

__all__ = ["MLP", "Linear", "Module", "parameter"]
