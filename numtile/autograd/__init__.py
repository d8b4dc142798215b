"""Reverse-mode autograd over TileTensors: a tape of ``Function`` nodes."""

from numtile.autograd.tape import (
    Context,
    Function,
    backward,
    enable_grad,
    is_grad_enabled,
    no_grad,
)

__all__ = ["Context", "Function", "backward", "enable_grad", "is_grad_enabled", "no_grad"]
