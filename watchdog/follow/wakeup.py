"""Waking a task that awaits a bare asyncio future: the cheap wait of the hot paths (no anyio Event, no cancel
scope), woken by whichever comes first of a timer, another task or another thread's callback."""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["wake_up"]


def wake_up(future: asyncio.Future[Any], result: object = None) -> None:
    """Set `future`'s result unless it is already done (woken, timed out or cancelled)."""
    if not future.done():
        future.set_result(result)
