"""What a follow that `Pushes` delivered, in order, and by which way: the tests of local and SSH pushes share it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import anyio

from watchdog.follow.sources.base import Chunk, SourceItem


class PushLog:
    """Items delivered, each ("pushed" | "iterated", item), in order; `push` takes those `take` accepts and gives
    the others back. `calls_in` holds the task of every `push` call, `taken_in` of those it took (None: a loop's
    callback, not a task)."""

    def __init__(self, take: Callable[[SourceItem], bool]) -> None:
        self.items: list[tuple[str, SourceItem]] = []
        self.calls_in: list[asyncio.Task[object] | None] = []
        self.taken_in: list[asyncio.Task[object] | None] = []
        self._take = take
        self.changed = anyio.Event()

    def push(self, item: SourceItem) -> object:
        task = asyncio.current_task()
        self.calls_in.append(task)
        if not self._take(item):
            return item
        self.taken_in.append(task)
        self.items.append(("pushed", item))
        self._changed()
        return None

    def iterated(self, item: SourceItem) -> None:
        self.items.append(("iterated", item))
        self._changed()

    def _changed(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    def data(self) -> bytes:
        return b"".join(item.data for _, item in self.items if isinstance(item, Chunk))

    async def until(self, done: Callable[[], bool], within: float = 10.0) -> None:
        with anyio.fail_after(within):
            while not done():
                await self.changed.wait()


def live_read(item: SourceItem) -> bool:
    """A chunk that ends its read (the follow's push takes those)."""
    return isinstance(item, Chunk) and item.caught_up
