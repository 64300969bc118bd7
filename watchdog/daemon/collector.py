"""The cyclic garbage collector's share of the daemon's event loop: what lives as long as the process, frozen.

A full (generation 2) collection walks every object the collector tracks, inside whichever callback happens to
allocate: about 0.2 us an object on the 2-core development machine, and a followed launch keeps about 500 (its
follower, analyzer, rule sets, SSH channel, tasks), so at 2,000 launches one walk held the event loop for about
200 ms. Two sets of objects live as long as the daemon: what the imports made, before the loop starts, and what
the launches' start made (their followers, once every log as it was has been read). Frozen (`gc.freeze`), they
are left out of every later collection, which walks only what was made since. A frozen object is still freed
when its reference count falls to 0; one that ends in a reference cycle after it was frozen would stay (none of
the 155,000 frozen at the start of 200 launches did, in 20 s of crashes and relaunches: docs/benchmarks.md).

What the launches make later (each relaunch's incarnation, each crash's verdict, a reconnection's channel) grows
the unfrozen rest again: at 2,000 launches on the quiet machine, 145,000 -> 370,000 objects in 30 s, and full
collections of 50-220 ms. So while the daemon runs, what survives a full collection is frozen as that collection
ends (`freeze_after_full_collections`): every cyclic garbage was just freed, what is frozen is alive, and the next
full collection walks only what was made since. What dies by its reference count is freed as ever; what becomes a
cycle's garbage while frozen waits for `sweep`, an unfrozen collection of everything, every minute to ten
(`next_sweep_in`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import time
from collections.abc import Callable
from typing import Any

# Seconds between sweeps: a thousand times what the last one cost (a sweep walks everything: ~0.5 s of CPU at
# 2,000 launches on the quiet machine), so sweeping takes at most 0.1 % of a core, within these bounds. Between
# two, what dies frozen in a cycle waits: at 200 launches over SSH, 1,580 of the 162,000 frozen objects in 25 s
# (closed connections' key and cipher objects), about a minute's worth at most.
SWEEP_MIN = 60.0
SWEEP_MAX = 600.0
SWEEP_COST_RATIO = 1000.0
# Seconds between heap trims: a thousand times what the last one cost (~1 ms), within these bounds
TRIM_MIN = 5.0
TRIM_MAX = 60.0


def freeze_survivors() -> int:
    """Collect what is garbage now, then leave every object still alive out of later collections; return how
    many objects are frozen in all."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def freeze_after_full_collections() -> Callable[[], None]:
    """From now on, freeze what survives each full collection as it ends (see the module's docstring); return
    the function that stops it."""

    def frozen_at_the_end(phase: str, info: dict[str, Any]) -> None:
        if phase == "stop" and info["generation"] == 2:
            gc.freeze()

    gc.callbacks.append(frozen_at_the_end)
    return lambda: gc.callbacks.remove(frozen_at_the_end)


def sweep() -> tuple[int, float]:
    """Collect everything once, frozen objects included (what became a cycle's garbage after it was frozen), then
    freeze the survivors again; return how many objects were freed and the seconds of CPU it took."""
    began = time.thread_time()
    gc.unfreeze()
    freed = gc.collect()
    gc.freeze()
    return freed, time.thread_time() - began


def next_sweep_in(cost: float) -> float:
    """Seconds until the next sweep, after one that took `cost` seconds of CPU (see `SWEEP_COST_RATIO`)."""
    return min(SWEEP_MAX, max(SWEEP_MIN, SWEEP_COST_RATIO * cost))


def _malloc_trim() -> Callable[[int], int] | None:
    # glibc's malloc_trim; None elsewhere (musl, macOS)
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim: Callable[[int], int] = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


_TRIM = _malloc_trim()


def trim_heap() -> float | None:
    """Give the C heap's free pages back to the system (glibc's `malloc_trim(0)`): what a crash loop's transient
    allocations (its reads, packets, verdicts, records) leave free in the heap, where the allocator keeps it. Over
    SSH, 200 launches, that grew from 2 to 8 MB of the daemon's RSS in 20 s of load, and a trim gave back 4.3 MB.
    Returns the seconds of CPU it took, or None where the C library has no such call."""
    if _TRIM is None:
        return None
    began = time.thread_time()
    _TRIM(0)
    return time.thread_time() - began


def next_trim_in(cost: float) -> float:
    """Seconds until the next heap trim, after one that took `cost` seconds of CPU (`SWEEP_COST_RATIO` of it)."""
    return min(TRIM_MAX, max(TRIM_MIN, SWEEP_COST_RATIO * cost))
