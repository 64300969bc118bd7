"""A launch's queue of slow work (the store's verdicts, the outbox, the silences): done in order by one task."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from types import TracebackType

from watchdog.clock import wake_up

__all__ = ["Effect", "Effects"]

Effect = Callable[[], Awaitable[None]]


class Effects:
    """What a launch's updates leave to do that may wait on the disk or the network, queued without waiting
    (`send_nowait`) and taken in order by the one task that iterates it; closed (`close`, or leaving its
    `async with`), the iteration ends once what was queued is taken.

    A deque and a future, not an anyio memory stream: a launch queues one for each transition and verdict (a
    crash loop's relaunch: six), and the stream's bookkeeping (an event and a receiver made per wait) cost more
    than handing the work over.
    """

    __slots__ = ("_closed", "_loop", "_queue", "_waiter")

    def __init__(self) -> None:
        """Made in the event loop that takes its work."""
        self._queue: deque[Effect] = deque()
        self._waiter: asyncio.Future[None] | None = None  # the taking task's, while it waits
        self._closed = False
        self._loop = asyncio.get_running_loop()

    def send_nowait(self, effect: Effect) -> None:
        """Queue `effect` (unbounded: the work of a launch's own updates)."""
        self._queue.append(effect)
        if self._waiter is not None:
            wake_up(self._waiter)

    def close(self) -> None:
        """No more work comes: the iteration ends once what is queued is taken."""
        self._closed = True
        if self._waiter is not None:
            wake_up(self._waiter)

    async def __aenter__(self) -> Effects:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __aiter__(self) -> Effects:
        return self

    async def __anext__(self) -> Effect:
        while not self._queue:
            if self._closed:
                raise StopAsyncIteration
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._queue.popleft()
