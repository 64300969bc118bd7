"""Fewer malloc arenas for the daemon's threads (glibc).

glibc gives each thread that allocates while another holds the main arena a malloc arena of its own, up to 8
per CPU, and keeps what each one grew: the daemon's helper threads (asyncio's default executor, which resolves
host names and builds asyncssh's connection options: min(32, CPUs + 4) threads) each held one. One arena for
the whole process, as `MALLOC_ARENA_MAX=1` sets it, measured 4-6 MB less peak RSS over SSH with 200 launches
and no CPU change (docs/benchmarks.md): the event loop's thread does nearly all the allocating, so there is
nothing to contend for. `MALLOC_ARENA_MAX` in the environment (read by glibc itself) wins; elsewhere than glibc
nothing is done.
"""

from __future__ import annotations

import ctypes
import os
import sys

M_ARENA_MAX = -8  # glibc's malloc.h


def use_one_arena() -> bool:
    """Ask glibc's malloc for a single arena before the daemon starts its threads; True if it was set here."""
    if sys.platform != "linux" or "MALLOC_ARENA_MAX" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # glibc and musl have it; musl's ignores the option
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_ARENA_MAX, 1))
