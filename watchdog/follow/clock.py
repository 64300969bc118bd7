"""The follower's clock: where it gets the time and waits (a `ManualClock` in tests, see `follow.testing`).

The protocol lives in `watchdog.clock`, below both the follower and the alerting; this module keeps its
import path."""

from __future__ import annotations

from watchdog.clock import Clock, MonotonicClock

__all__ = ["Clock", "MonotonicClock"]
