"""All of numtile's knobs in one place; each can be overridden by a ``NUMTILE_*`` variable.

| variable                   | default            | meaning                                            |
|----------------------------|--------------------|----------------------------------------------------|
| ``NUMTILE_NCPU``           | number of cores    | CPU worker threads                                 |
| ``NUMTILE_SCHEDULER``      | ``eager``          | ``eager``, ``dmda`` or ``sync``                    |
| ``NUMTILE_CACHE_DIR``      | user cache dir     | where performance models are persisted             |
| ``NUMTILE_SWITCH_INTERVAL``| ``0.0002``         | Python GIL switch interval (s) while workers run   |
| ``NUMTILE_GC_THRESHOLD``   | ``20000``          | Python gc gen-0 threshold while the runtime is up  |
| ``NUMTILE_TILE``           | ``1024``           | default tile edge for 2-D and higher tensors       |
| ``NUMTILE_TILE_1D``        | ``1048576``        | default tile length for 1-D tensors                |
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
    switch_interval: float = field(
        default_factory=lambda: _env_float("NUMTILE_SWITCH_INTERVAL", 0.0002)
    )
    gc_threshold: int = field(default_factory=lambda: _env_int("NUMTILE_GC_THRESHOLD", 20000))
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
