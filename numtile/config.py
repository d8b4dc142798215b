"""All of numtile's knobs in one place; each can be overridden by a ``NUMTILE_*`` variable.

Each field of ``Config`` names its variable; the README's Configuration table lists them
all: ``NUMTILE_NCPU``, ``NUMTILE_SCHEDULER``, ``NUMTILE_CACHE_DIR``,
``NUMTILE_GC_THRESHOLD``, ``NUMTILE_POOL_BYTES``,
``NUMTILE_TILE``, ``NUMTILE_TILE_1D``, ``NUMTILE_NCUDA``, ``NUMTILE_RESTRICT``,
``NUMTILE_CUDA_MEM_LIMIT``, ``NUMTILE_HOST_MEM_LIMIT``, ``NUMTILE_SPILL_DIR``,
``NUMTILE_CUDA_BLOCK``, ``NUMTILE_CUDA_GEMM_TILE``, ``NUMTILE_DISTRIBUTED``,
``NUMTILE_MPI_MAX_POLL``, ``NUMTILE_VML``, ``NUMTILE_STREAM_STORES``, ``NUMTILE_AUTO_FUSE``,
``NUMTILE_HOST_ARENA``, and per process
``NUMTILE_BLAS`` (``kernel_blas_setting``).
"""

from __future__ import annotations

import math
import numbers
import os
from dataclasses import dataclass, field

# more CPU workers than this many per core is a typo (NUMTILE_NCPU=100000), not a setting:
# each worker is a thread with its own stack, and more threads than cores only add switches
MAX_WORKERS_PER_CORE = 64


def _env_number(name: str, default, parse=int):
    """The variable ``name`` read by ``parse`` (``int`` or ``float``), or ``default``."""
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return parse(value)
    except ValueError:
        expected = "an integer" if parse is int else "a number"
        raise ValueError(f"{name}={value!r} is not {expected}") from None


def _default_cache_dir() -> str:
    import platformdirs

    return platformdirs.user_cache_dir("numtile")


@dataclass
class Config:
    """Runtime configuration, read from ``NUMTILE_*`` environment variables.

    >>> Config().scheduler in ("eager", "dmda", "sync")
    True
    """

    ncpu: int = field(default_factory=lambda: _env_number("NUMTILE_NCPU", os.cpu_count() or 1))
    scheduler: str = field(default_factory=lambda: os.environ.get("NUMTILE_SCHEDULER", "eager"))
    cache_dir: str = field(
        default_factory=lambda: os.environ.get("NUMTILE_CACHE_DIR") or _default_cache_dir()
    )
    gc_threshold: int = field(default_factory=lambda: _env_number("NUMTILE_GC_THRESHOLD", 20000))
    pool_bytes: int = field(default_factory=lambda: _env_number("NUMTILE_POOL_BYTES", 1 << 30))
    tile: int = field(default_factory=lambda: _env_number("NUMTILE_TILE", 1024))
    tile_1d: int = field(default_factory=lambda: _env_number("NUMTILE_TILE_1D", 1 << 20))
    # GPUs: -1 means every GPU found (none under Numba's CUDA simulator unless asked for)
    ncuda: int = field(default_factory=lambda: _env_number("NUMTILE_NCUDA", -1))
    # a kind of worker of the backends table (``cpu``, ``cuda``): the runtime checks the name
    restrict: str | None = field(default_factory=lambda: os.environ.get("NUMTILE_RESTRICT") or None)
    # memory limits in bytes; None: the GPU's free memory / host RAM unlimited
    cuda_mem_limit: int | None = field(default_factory=lambda: _env_bytes("NUMTILE_CUDA_MEM_LIMIT"))
    host_mem_limit: int | None = field(default_factory=lambda: _env_bytes("NUMTILE_HOST_MEM_LIMIT"))
    spill_dir: str | None = field(
        default_factory=lambda: os.environ.get("NUMTILE_SPILL_DIR") or None
    )
    # CUDA launch shapes: threads per block of the 1-D grid-stride kernels, and the square
    # shared-memory tile of the @cuda.jit GEMM (tests under the simulator shrink both)
    cuda_block: int = field(default_factory=lambda: _env_number("NUMTILE_CUDA_BLOCK", 256))
    cuda_gemm_tile: int = field(default_factory=lambda: _env_number("NUMTILE_CUDA_GEMM_TILE", 16))
    # MPI: True/False, or None to follow the launcher (distributed when mpiexec -n P, P > 1)
    distributed: bool | None = field(default_factory=lambda: _env_flag("NUMTILE_DISTRIBUTED"))
    # seconds between the MPI worker's polls of its requests in flight while every worker
    # computes (it also polls when a worker runs out of tasks, and every <= 1 ms while one
    # waits): each poll costs ~0.1 ms of a core
    mpi_max_poll: float = field(
        default_factory=lambda: _env_number("NUMTILE_MPI_MAX_POLL", 2e-2, float)
    )
    # element-wise maths through oneMKL's VML where MKL loads (ops_cpu.mkl_vml: the ops it
    # measured faster, by CPU vendor); 0 keeps numtile's own kernels
    vml: bool = field(default_factory=lambda: _env_flag("NUMTILE_VML") is not False)
    # element-wise kernels write outputs of a core's L2 or more with streaming (non-temporal)
    # stores (ops_cpu.streaming); 0 keeps ordinary stores everywhere
    stream_stores: bool = field(
        default_factory=lambda: _env_flag("NUMTILE_STREAM_STORES") is not False
    )
    # float32 power in explicit AVX-512 code where the CPU has it (ops_cpu.pow_avx512); 0 sends
    # it to VML (Intel CPUs) or ops_cpu.pow_blocks, as on CPUs without AVX-512
    avx512: bool = field(default_factory=lambda: _env_flag("NUMTILE_AVX512") is not False)
    # element-wise ops on tensors that need no gradient wait and run fused with the ops that
    # use them, one kernel per chain (tiletensor.auto_fusion); 0 runs each op at once
    auto_fuse: bool = field(default_factory=lambda: _env_flag("NUMTILE_AUTO_FUSE") is not False)

    # a limited host cuts its tile buffers from one mapping (runtime/arena.py); 0 keeps a
    # mapping per tile and the pool of same-size buffers
    host_arena: bool = field(default_factory=lambda: _env_flag("NUMTILE_HOST_ARENA") is not False)

    def __post_init__(self) -> None:
        self._check_types()
        if self.ncpu < 1:
            raise ValueError(f"ncpu (NUMTILE_NCPU) must be >= 1, got {self.ncpu}")
        cores = os.cpu_count() or 1
        if self.ncpu > MAX_WORKERS_PER_CORE * cores:
            raise ValueError(
                f"ncpu (NUMTILE_NCPU) = {self.ncpu} is more than {MAX_WORKERS_PER_CORE} worker "
                f"threads per core on this machine's {cores} core(s): one per core is the most "
                "that helps; leave NUMTILE_NCPU unset to use every core"
            )
        if self.scheduler not in SCHEDULERS:
            raise ValueError(f"unknown scheduler {self.scheduler!r}; expected one of {SCHEDULERS}")
        if self.tile < 1 or self.tile_1d < 1:
            raise ValueError(f"default tile sizes must be >= 1, got {self.tile}, {self.tile_1d}")
        for name in ("cuda_mem_limit", "host_mem_limit"):
            limit = getattr(self, name)
            if limit is not None and limit <= 0:
                raise ValueError(f"{name} must be a positive number of bytes, got {limit}")
        poll = self.mpi_max_poll
        if isinstance(poll, bool) or not (isinstance(poll, numbers.Real) and 0 < poll <= 1):
            raise ValueError(
                f"mpi_max_poll (NUMTILE_MPI_MAX_POLL) must be seconds in (0, 1], got "
                f"{self.mpi_max_poll!r}"
            )
        if not (1 <= self.cuda_block <= 1024 and 1 <= self.cuda_gemm_tile <= 32):
            raise ValueError(
                "a CUDA block holds at most 1024 threads: NUMTILE_CUDA_BLOCK must be in "
                f"1..1024 (got {self.cuda_block}) and NUMTILE_CUDA_GEMM_TILE in 1..32 (got "
                f"{self.cuda_gemm_tile})"
            )

    def _check_types(self) -> None:
        """Whole numbers where they are expected (``ncpu='2'``, ``ncpu=2.5`` are refused with
        the value; NumPy integers are accepted) and finite byte counts for the limits."""
        for name in _INTEGER_FIELDS:
            setattr(self, name, _whole_number(name, getattr(self, name)))
        for name in ("cuda_mem_limit", "host_mem_limit"):
            limit = getattr(self, name)
            if limit is None:
                continue
            if isinstance(limit, float):
                if not (math.isfinite(limit) and limit == int(limit)):
                    raise ValueError(
                        f"{name} must be a whole, finite number of bytes, got {limit!r} "
                        "(leave it unset for no limit)"
                    )
                limit = int(limit)  # 2e9 bytes
            setattr(self, name, _whole_number(name, limit, "a size in bytes such as 2**30"))

    @classmethod
    def defaults(cls) -> Config:
        """The configuration read from the environment once per process (cheap to call)."""
        global _DEFAULTS
        if _DEFAULTS is None:
            _DEFAULTS = cls()
        return _DEFAULTS


_INTEGER_FIELDS = (
    "ncpu",
    "gc_threshold",
    "pool_bytes",
    "tile",
    "tile_1d",
    "ncuda",
    "cuda_block",
    "cuda_gemm_tile",
)


def _env_flag(name: str) -> bool | None:
    """``1``/``true``/``yes`` -> True, ``0``/``false``/``no`` -> False, unset -> None."""
    value = os.environ.get(name, "").strip().lower()
    if not value:
        return None
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{name} must be 1 or 0 (or unset), got {value!r}")


def _whole_number(name: str, value, expected: str = "an integer") -> int:
    """``value`` as an ``int``, or a ``TypeError`` naming the setting and its variable."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    raise TypeError(
        f"{name} (NUMTILE_{name.upper()}) must be {expected}, got {value!r} "
        f"({type(value).__name__})"
    )


SCHEDULERS = ("eager", "dmda", "sync")
KERNEL_BLAS = ("auto", "mkl", "scipy")


def kernel_blas_setting() -> str:
    """``NUMTILE_BLAS``: where the CPU tile kernels take BLAS/LAPACK from, chosen once per
    process when ``numtile.ops_cpu`` is imported: ``mkl`` (oneMKL, an error where it does not
    load), ``scipy`` (SciPy's own OpenBLAS) or ``auto`` (unset: oneMKL where it loads).

    >>> kernel_blas_setting() in KERNEL_BLAS
    True
    """
    value = os.environ.get("NUMTILE_BLAS", "").strip().lower() or "auto"
    if value not in KERNEL_BLAS:
        raise ValueError(f"NUMTILE_BLAS must be one of {', '.join(KERNEL_BLAS)}, got {value!r}")
    return value


_UNITS = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kb": 1 << 10,
    "kib": 1 << 10,
    "m": 1 << 20,
    "mb": 1 << 20,
    "mib": 1 << 20,
    "g": 1 << 30,
    "gb": 1 << 30,
    "gib": 1 << 30,
    "t": 1 << 40,
    "tb": 1 << 40,
    "tib": 1 << 40,
}


def parse_bytes(text: str) -> int:
    """``"512MiB"`` -> 536870912; plain integers are bytes; units are powers of 1024.

    >>> parse_bytes("1.5G"), parse_bytes("4096")
    (1610612736, 4096)
    """
    value = text.strip().lower().replace(" ", "")
    number = value.rstrip("kmgtib")
    unit = value[len(number) :]
    if unit not in _UNITS or not number:
        raise ValueError(f"{text!r} is not a size in bytes (examples: 4096, 512MiB, 2G)")
    try:
        size = float(number) * _UNITS[unit]
    except ValueError:
        raise ValueError(f"{text!r} is not a size in bytes (examples: 4096, 512MiB, 2G)") from None
    if not math.isfinite(size):
        raise ValueError(
            f"{text!r} is not a finite size in bytes (examples: 4096, 512MiB, 2G; leave the "
            "limit unset for no limit)"
        )
    return int(size)


def _env_bytes(name: str) -> int | None:
    value = os.environ.get(name)
    if value is None or value == "":
        return None
    try:
        return parse_bytes(value)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


_DEFAULTS: Config | None = None
