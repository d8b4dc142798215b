"""``Module``: named parameters and sub-modules, state dicts with Hugging Face names."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from numtile.tiletensor.creation import from_numpy
from numtile.tiletensor.precision import check_mode, using_precision, warn_fallback
from numtile.tiletensor.tensor import TileTensor


def parameter(tensor: TileTensor) -> TileTensor:
    """Mark ``tensor`` as a trainable leaf (``requires_grad``)."""
    return tensor.requires_grad_()


class Module:
    """Base class of layers: attributes that are TileTensors requiring grad are parameters.

    Parameter names are dotted paths (``transformer.h.0.attn.c_attn.weight``) so they map one
    to one onto Hugging Face state dicts.

    >>> import numtile as nt
    >>> class Scale(Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.weight = parameter(nt.ones((3,)))
    >>> [name for name, _ in Scale().named_parameters()]
    ['weight']
    """

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "training", True)

    def __setattr__(self, name: str, value) -> None:
        params, modules = self.__dict__.get("_parameters"), self.__dict__.get("_modules")
        if params is None:
            raise AttributeError("call Module.__init__() before assigning attributes")
        params.pop(name, None)
        modules.pop(name, None)
        if isinstance(value, TileTensor) and value.requires_grad:
            params[name] = value
        elif isinstance(value, Module):
            modules[name] = value
        object.__setattr__(self, name, value)

    def named_parameters(
        self, prefix: str = "", remove_duplicate: bool = True
    ) -> Iterator[tuple[str, TileTensor]]:
        """(dotted name, tensor) pairs; a tied tensor is listed once unless asked otherwise."""
        seen: set[int] = set()
        for name, value in self._named_parameters(prefix):
            if remove_duplicate:
                if id(value) in seen:
                    continue
                seen.add(id(value))
            yield name, value

    def _named_parameters(self, prefix: str) -> Iterator[tuple[str, TileTensor]]:
        for name, value in self._parameters.items():
            yield prefix + name, value
        for name, module in self._modules.items():
            yield from module._named_parameters(f"{prefix}{name}.")

    def parameters(self) -> list[TileTensor]:
        return [p for _, p in self.named_parameters()]

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        yield prefix.rstrip("."), self
        for name, module in self._modules.items():
            yield from module.named_modules(f"{prefix}{name}.")

    def num_parameters(self) -> int:
        """Number of trainable scalars (a parameter shared by two layers counts once)."""
        return sum(p.size for p in self.parameters())

    def zero_grad(self) -> None:
        for p in self.parameters():
            p.grad = None

    def train(self, mode: bool = True) -> Module:
        for _, module in self.named_modules():
            object.__setattr__(module, "training", mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    def state_dict(self) -> dict[str, TileTensor]:
        """Parameter name -> tensor (the live tensors, not copies; tied ones under each name)."""
        return dict(self.named_parameters(remove_duplicate=False))

    def load_state_dict(self, state: dict, strict: bool = True) -> None:
        """Replace parameters by the given tensors or arrays, checking names and shapes.

        Values may be TileTensors or anything ``np.asarray`` accepts (a torch state dict's
        tensors included, via ``.detach().numpy()``); each is retiled to the parameter's tiles.
        """
        own = dict(self.named_parameters(remove_duplicate=False))
        if strict:
            missing = sorted(set(own) - set(state))
            unexpected = sorted(set(state) - set(own))
            if missing or unexpected:
                raise ValueError(f"state dict mismatch: missing {missing}, unexpected {unexpected}")
        for name, value in state.items():
            if name not in own:
                continue
            target = own[name]
            if not isinstance(value, TileTensor):
                if hasattr(value, "detach"):
                    value = value.detach().cpu().numpy()
                value = np.asarray(value)
            if tuple(value.shape) != target.shape:
                raise ValueError(
                    f"parameter {name!r}: state has shape {tuple(value.shape)}, "
                    f"the model expects {target.shape}"
                )
            if isinstance(value, TileTensor):
                new = value.detach().astype(target.dtype).retile(target.tile_shape)
            else:
                new = from_numpy(value.astype(target.dtype), tile_shape=target.tile_shape)
            self._assign(name, new.requires_grad_())

    def _assign(self, dotted: str, tensor: TileTensor) -> None:
        old = dict(self.named_parameters(remove_duplicate=False))[dotted]
        # a tied parameter (lm_head = wte) is replaced everywhere it appears
        for _, other in self.named_modules():
            for key, value in list(other._parameters.items()):
                if value is old:
                    setattr(other, key, tensor)

    # the precision mode of this module's forward (``set_precision``); None: the caller's
    precision: str | None = None

    def set_precision(self, mode: str) -> Module:
        """Run this module's forward (and its backward) in precision ``mode`` (one of
        ``numtile.nn.mixed_precision.MODES``); warns once if the hardware falls back. Parameters
        stay float32. Returns the module."""
        object.__setattr__(self, "precision", check_mode(mode))
        warn_fallback(mode)
        return self

    def __call__(self, *args, **kwargs):
        with using_precision(self.precision):
            return self.forward(*args, **kwargs)

    def forward(self, *args, **kwargs):
        raise NotImplementedError
