"""The cyclic garbage collector's share of the daemon's event loop: what lives as long as the process, frozen.

A full (generation 2) collection walks every object the collector tracks, inside whichever callback happens to
allocate: about 0.2 us an object on the 2-core development machine, and a followed launch keeps about 500 (its
follower, analyzer, rule sets, SSH channel, tasks), so at 2,000 launches one walk held the event loop for about
200 ms. Two sets of objects live as long as the daemon: what the imports made, before the loop starts, and what
the launches' start made (their followers, once every log as it was has been read). Frozen (`gc.freeze`), they
are left out of every later collection, which walks only what was made since. A frozen object is still freed
when its reference count falls to 0; one that ends in a reference cycle after it was frozen would stay (none of
the 155,000 frozen at the start of 200 launches did, in 20 s of crashes and relaunches: docs/benchmarks.md).
"""

from __future__ import annotations

import gc


def freeze_survivors() -> int:
    """Collect what is garbage now, then leave every object still alive out of later collections; return how
    many objects are frozen in all."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
