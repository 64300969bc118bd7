"""benchmarks/daemon_bench.py's `--serve-seconds`: how long a launch serves before its crash (issue 31, CPU round 11:
the daemon's CPU split into steady lines and each crash and relaunch)."""

from __future__ import annotations

import inspect
import math
import random

from benchscripts import load_script

daemon_bench = load_script("daemon_bench.py")


def _cycle(serve: tuple[float, float], seconds: float) -> tuple[int, int]:
    """One launch serving from 0 s, driven by `next_write` on a virtual clock: (crashes, startups begun)."""
    startup, serving, _crash = daemon_bench._corpus()
    rng = random.Random(1)
    log = daemon_bench._Log("l000", -1, until=rng.uniform(min(2.0, serve[0]), serve[1]))
    crashes = startups = 0
    serve_at, now, mode = 0, 0.0, log.mode
    while now < seconds:
        crashed, _data, serve_at = daemon_bench.next_write(log, now, rng, startup, serving, serve_at, serve)
        crashes += crashed
        startups += mode != "startup" and log.mode == "startup"
        mode = log.mode
        now = round(now + daemon_bench.TICK, 6)
    return crashes, startups


def test_the_usual_range_is_the_default() -> None:
    """Without the option the writer draws as before: each launch crashes 8 to 20 s after it is ready."""
    default = inspect.signature(daemon_bench.next_write).parameters["serve"].default
    assert default == (8.0, 20.0)
    crashes, startups = _cycle(default, 120.0)
    assert 120.0 / (20.0 + 2.0 + 3.0) <= crashes <= 120.0 / 8.0 + 1
    assert startups in (crashes, crashes - 1)


def test_inf_is_no_crash_at_all() -> None:
    """`inf inf`: the launch serves for good, steady lines alone."""
    crashes, startups = _cycle((math.inf, math.inf), 300.0)
    assert (crashes, startups) == (0, 0)


def test_a_shorter_range_crashes_more_often() -> None:
    """`3 6`: about three times the crashes of the usual range."""
    usual, _ = _cycle((8.0, 20.0), 300.0)
    fast, _ = _cycle((3.0, 6.0), 300.0)
    assert fast >= 2 * usual
