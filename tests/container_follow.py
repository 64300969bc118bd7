"""A container source followed in a test: what it gave, in order, and a way to wait on it (the Docker and Podman
tests)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from watchdog.follow.sources.base import Chunk, FileRestarted, SourceItem
from watchdog.follow.sources.docker import ContainerSource

DEADLINE = 20.0

# prints N numbered lines (its run's number first), a few ms apart, then exits with CODE
NUMBERED = 'r=$(cat /tmp/run 2>/dev/null || echo 0); echo $((r+1)) >/tmp/run; i=0; while [ $i -lt {n} ]; do ' \
    'echo "run $r line $i"; i=$((i+1)); usleep {pace}; done; exit {code}'  # fmt: skip


class Collected:
    """What a follow gave, kept in order, with a way to wait for a condition on it."""

    def __init__(self) -> None:
        self.items: list[SourceItem] = []
        self.changed = anyio.Event()

    def add(self, item: SourceItem) -> None:
        self.items.append(item)
        self.changed.set()
        self.changed = anyio.Event()

    async def until(self, check: object, deadline: float = DEADLINE) -> None:
        assert callable(check)
        with anyio.move_on_after(deadline):
            while not check(self):
                await self.changed.wait()
            return
        raise AssertionError(f"not within {deadline} s; the follow gave: {self.items[-12:]}")

    def lines(self) -> list[bytes]:
        return b"".join(item.data for item in self.items if isinstance(item, Chunk)).splitlines()

    def of(self, kind: type) -> list[SourceItem]:
        return [item for item in self.items if isinstance(item, kind)]


@asynccontextmanager
async def following(
    source: ContainerSource, offset: int = 0, cursor: str | None = None
) -> AsyncIterator[Collected]:
    collected = Collected()

    async def pump(items: AsyncIterator[SourceItem]) -> None:
        async for item in items:
            collected.add(item)

    async with source.open_follow(offset, cursor) as items, anyio.create_task_group() as tg:
        tg.start_soon(pump, items)
        yield collected
        tg.cancel_scope.cancel()


def offsets_follow_on(collected: Collected) -> None:
    """Within each stream the chunks' offsets follow on from 0 (or the resume offset) without a gap."""
    expected: int | None = None
    for item in collected.items:
        if isinstance(item, FileRestarted):
            expected = 0
        elif isinstance(item, Chunk):
            if expected is not None:
                assert item.offset == expected
            expected = item.end
            assert item.data.endswith(b"\n")
            assert item.cursor is not None
