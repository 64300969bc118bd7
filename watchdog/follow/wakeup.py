"""Waking a task that awaits a bare asyncio future: the cheap wait of the hot paths (no anyio Event, no cancel
scope), woken by whichever comes first of a timer, another task or another thread's callback. It lives in
`watchdog.clock` (the alerting waits the same way); this module keeps its import path."""

from __future__ import annotations

from watchdog.clock import wake_up

__all__ = ["wake_up"]
