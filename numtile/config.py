"""All of numtile's knobs in one place; each can be overridden by a ``NUMTILE_*`` variable.

Each field of ``Config`` names its variable; the README's Configuration table lists them
all: ``NUMTILE_NCPU``, ``NUMTILE_SCHEDULER``, ``NUMTILE_CACHE_DIR``,
``NUMTILE_GC_THRESHOLD``, ``NUMTILE_POOL_BYTES``,
``NUMTILE_TILE``, ``NUMTILE_TILE_1D``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name}={value!r} is not an integer") from None


def _env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"{name}={value!r} is not a number") from None


def _default_cache_dir() -> str:
    import platformdirs

    return platformdirs.user_cache_dir("numtile")


@dataclass
class Config:
    """Runtime configuration, read from ``NUMTILE_*`` environment variables.

    >>> Config().scheduler in ("eager", "dmda", "sync")
    True
    """

    ncpu: int = field(default_factory=lambda: _env_int("NUMTILE_NCPU", os.cpu_count() or 1))
    scheduler: str = field(default_factory=lambda: os.environ.get("NUMTILE_SCHEDULER", "eager"))
    cache_dir: str = field(
        default_factory=lambda: os.environ.get("NUMTILE_CACHE_DIR") or _default_cache_dir()
    )
    gc_threshold: int = field(default_factory=lambda: _env_int("NUMTILE_GC_THRESHOLD", 20000))
    pool_bytes: int = field(default_factory=lambda: _env_int("NUMTILE_POOL_BYTES", 1 << 30))
    tile: int = field(default_factory=lambda: _env_int("NUMTILE_TILE", 1024))
    tile_1d: int = field(default_factory=lambda: _env_int("NUMTILE_TILE_1D", 1 << 20))

    def __post_init__(self) -> None:
        if self.ncpu < 1:
            raise ValueError(f"ncpu must be >= 1, got {self.ncpu}")
        if self.scheduler not in SCHEDULERS:
            raise ValueError(f"unknown scheduler {self.scheduler!r}; expected one of {SCHEDULERS}")
        if self.tile < 1 or self.tile_1d < 1:
            raise ValueError(f"default tile sizes must be >= 1, got {self.tile}, {self.tile_1d}")

    @classmethod
    def defaults(cls) -> Config:
        """The configuration read from the environment once per process (cheap to call)."""
        global _DEFAULTS
        if _DEFAULTS is None:
            _DEFAULTS = cls()
        return _DEFAULTS


SCHEDULERS = ("eager", "dmda", "sync")
_DEFAULTS: Config | None = None
