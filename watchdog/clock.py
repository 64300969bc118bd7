"""The `Clock` protocol (time and waits) of the follower and the alerting, so both run on a `ManualClock` in
tests; and `wake_up`, the cheap wake of a task that awaits a bare asyncio future.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Protocol

import anyio

__all__ = ["Clock", "MonotonicClock", "WallClock", "wake_up"]


def wake_up(future: asyncio.Future[Any], result: object = None) -> None:
    """Set `future`'s result unless it is already done (woken, timed out or cancelled)."""
    if not future.done():
        future.set_result(result)


class Clock(Protocol):
    """Where a follower or the alerting gets the time and waits: seconds."""

    def now(self) -> float:
        """The current time in seconds."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that no one steps (an NTP correction, a VM restored from a snapshot): what timers
        (rate limits, retries, outages, reminders) and `sleep` measure; `now` is for what is shown and kept."""
        ...

    async def sleep(self, seconds: float, wake: asyncio.Future[object] | None = None) -> None:
        """Wait `seconds`, or less if `wake` is done first (the waker sets its result)."""
        ...


class _RealClock:
    """Real waits, for the real clocks below (each says its own time)."""

    def monotonic(self) -> float:
        """`time.monotonic`."""
        return time.monotonic()

    async def sleep(self, seconds: float, wake: asyncio.Future[object] | None = None) -> None:
        """Wait `seconds` of real time, or less if `wake` is done first."""
        if wake is None:
            await anyio.sleep(seconds)
            return
        timer = asyncio.get_running_loop().call_later(max(seconds, 0.0), wake_up, wake, None)
        try:
            await wake
        finally:
            timer.cancel()


class MonotonicClock(_RealClock):
    """The real clock of a follower: `time.monotonic` and real waits."""

    # `time.monotonic` itself, no method around it: a follower asks it at each chunk it reads
    now = staticmethod(time.monotonic)


class WallClock(_RealClock):
    """The real clock of the alerting: unix time (what the outbox and silences keep), and real waits."""

    def now(self) -> float:
        """The current unix time in seconds."""
        return time.time()
