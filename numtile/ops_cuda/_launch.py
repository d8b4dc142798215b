"""Launch helpers shared by the CUDA kernels: block and grid sizes.

Every 1-D kernel is a grid-stride loop launched as ``kernel[grid(n), block(), stream]``:
``block()`` threads per block (``NUMTILE_CUDA_BLOCK``) and just enough blocks to cover
``n`` items, capped so huge tiles reuse threads instead of launching millions of blocks.
"""

from __future__ import annotations

import math

from numtile.config import Config
from numtile.cuda_driver import SIMULATOR

# the simulator runs every thread as a Python thread: few blocks keep it fast, and grid-stride
# loops make any count correct
MAX_BLOCKS = 2 if SIMULATOR else 8192


def block() -> int:
    """Threads per block of the 1-D grid-stride kernels."""
    return Config.defaults().cuda_block


def grid(n: int) -> int:
    """Blocks for ``n`` items: at least one, at most ``MAX_BLOCKS``."""
    return max(1, min(MAX_BLOCKS, math.ceil(n / block())))
