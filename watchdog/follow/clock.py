"""The follower's clock: where it gets the time and waits (a `ManualClock` in tests, see `follow.testing`)."""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

import anyio

from watchdog.follow.wakeup import wake_up

__all__ = ["Clock", "MonotonicClock"]


class Clock(Protocol):
    """Where a follower gets the time and waits: monotonic seconds."""

    def now(self) -> float:
        """The current time in seconds."""
        ...

    async def sleep(self, seconds: float, wake: asyncio.Future[object] | None = None) -> None:
        """Wait `seconds`, or less if `wake` is done first (the waker sets its result)."""
        ...


class MonotonicClock:
    """The real clock: `time.monotonic` and `anyio.sleep`."""

    def now(self) -> float:
        """The current monotonic time in seconds."""
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
