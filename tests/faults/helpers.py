"""Helpers the fault tests import."""

from __future__ import annotations

from numtile.runtime import Codelet


def host_codelet(name: str, function, **options) -> Codelet:
    """A codelet that runs ``function(*tiles, *args)`` on the host kind only."""
    return Codelet(name, implementations={"cpu": lambda ops, *tiles: function(*tiles)}, **options)
