"""Tests for watchdog.sources.base: the item stream between a source's producer and its consumer."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from watchdog.sources.base import UNYIELDED_BYTES, CaughtUp, Chunk, ItemSink, open_item_stream, send_item

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_small_items_pass_at_once_and_bulk_chunks_let_other_tasks_run() -> None:
    """A live log's small chunk and the CaughtUp after it are taken without a trip round the event loop, but
    a consumer of chunks read in bulk lets other tasks run every UNYIELDED_BYTES, so one launch read from
    its start never holds up the others."""
    half = b"x" * (UNYIELDED_BYTES // 2 + 1)
    rounds = 0  # how many times another task got to run

    async def other() -> None:
        nonlocal rounds
        while True:
            rounds += 1
            await anyio.lowlevel.checkpoint()

    async def produce(sink: ItemSink) -> None:
        await send_item(sink, Chunk(0, b"line\n"))
        await send_item(sink, CaughtUp(5))
        for i in range(6):
            await send_item(sink, Chunk(5 + i * len(half), half))

    seen: list[int] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(other)
        async with open_item_stream(produce) as items:
            seen.extend([rounds async for _ in items])
        tg.cancel_scope.cancel()
    assert len(seen) == 8
    assert seen[1] == seen[0]  # the CaughtUp right after its chunk: no trip round the loop
    bulk = seen[2:]
    assert len(set(bulk)) >= 3  # other tasks ran between the bulk chunks (every 2 of them here)
    assert bulk[0] == bulk[1] or bulk[1] == bulk[2]  # ... but not before each one
