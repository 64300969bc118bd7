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

What a full collection walks is then what generation 2 took in since the one before: the survivors of the
generation-1 collections in between (CPython runs a full one once `threshold2` of them have passed and what they
moved there is a quarter of what the last full one kept, `long_lived_pending` against `long_lived_total`). At 2,000
launches a relaunch wave moves tens of thousands of objects a second into it, and with the default 10 a full
collection walked 60,000-135,000 objects: 30-120 ms holding the loop (2-core machine, traced), the daemon's
longest callbacks once it runs. So the collector's generation-2 threshold follows what each full collection cost
(`next_full_threshold`): halved while one takes more than `FULL_PAUSE` of CPU, back up by one at a time while they
take under a quarter of it, never above what it was: each walk is shorter and the walks more frequent; their sum
is larger, as objects are walked (and frozen) sooner, before many of them would have died by their count (1,200
local launches, 20 s of load, traced on the 2-core machine: 8 full collections of 16-52 ms, 0.2 s in all, instead of
2 of 40-73 ms, 0.11 s: about half a percent of a core more). Where full collections are cheap (200 launches: what
the start made is frozen, the walks are short) nothing changes. The start's freeze (`freeze_survivors`) also leaves
the collector counting nothing as long-lived (a full collection of the few objects left unfrozen), so that the first
full collection after it does not wait for a quarter of everything the start made.
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
# Seconds of CPU a full collection may take before the next one is asked for sooner (`next_full_threshold`): a
# fifth of the 50 ms a callback may hold the loop (tests/test_daemon_loop.py's slow callback)
FULL_PAUSE = 0.01


def freeze_survivors() -> int:
    """Collect what is garbage now, then leave every object still alive out of later collections; return how
    many objects are frozen in all."""
    gc.collect()
    gc.freeze()
    # a full collection of what is left (nothing much): CPython's `long_lived_total` is then what it kept, not
    # everything the first one kept, and the next full collection comes after `threshold2` younger ones as usual
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def freeze_after_full_collections(pause: float = FULL_PAUSE) -> Callable[[], None]:
    """From now on, freeze what survives each full collection as it ends, and keep full collections near `pause`
    seconds of CPU each by their threshold (see the module's docstring); return the function that stops it (and
    gives the threshold back)."""
    default = gc.get_threshold()
    began = 0.0

    def frozen_at_the_end(phase: str, info: dict[str, Any]) -> None:
        nonlocal began
        if info["generation"] != 2:
            return
        if phase == "start":
            began = time.thread_time()  # the thread that collects holds the interpreter (the loop's or not)
            return
        gc.freeze()
        first, second, third = gc.get_threshold()
        gc.set_threshold(
            first, second, next_full_threshold(third, time.thread_time() - began, pause, default[2])
        )

    def stop() -> None:
        gc.callbacks.remove(frozen_at_the_end)
        gc.set_threshold(*default)

    gc.callbacks.append(frozen_at_the_end)
    return stop


def next_full_threshold(threshold: int, cost: float, pause: float, most: int) -> int:
    """Generation 2's threshold after a full collection that took `cost` seconds of CPU: halved (to 1 at the
    least) when it took more than `pause`, one more (to `most` at the most) when it took under a quarter of it,
    else the same."""
    if cost > pause:
        return max(1, threshold // 2)
    if cost < pause / 4:
        return min(most, threshold + 1)
    return threshold


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
