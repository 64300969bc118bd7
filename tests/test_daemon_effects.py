"""Tests for watchdog.daemon.effects: a launch's queue of slow work, taken in order by one task."""

from __future__ import annotations

import anyio
import pytest

from watchdog.daemon.effects import Effect, Effects

pytestmark = pytest.mark.anyio

DEADLINE = 5.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_work_is_done_in_the_order_queued_and_the_queue_ends_once_drained() -> None:
    """Work queued without waiting (before the taker waits, and while it waits) is taken in the order it was
    queued; closed, the iteration ends once what was queued is taken, none lost."""
    done: list[int] = []
    took = anyio.Event()

    def work(n: int) -> Effect:
        async def effect() -> None:
            done.append(n)
            if n == 1:
                took.set()

        return effect

    with anyio.fail_after(DEADLINE):
        async with anyio.create_task_group() as tg:
            queue = Effects()

            async def take() -> None:
                async for effect in queue:
                    await effect()

            queue.send_nowait(work(0))  # queued before the taker runs
            queue.send_nowait(work(1))
            tg.start_soon(take)
            await took.wait()
            await anyio.wait_all_tasks_blocked()  # the taker waits for more
            queue.send_nowait(work(2))  # wakes it
            queue.send_nowait(work(3))
            async with queue:  # leaving it closes the queue: the taker takes 2 and 3, then ends
                pass
    assert done == [0, 1, 2, 3]


async def test_a_closed_empty_queue_ends_a_waiting_taker() -> None:
    """A taker waiting on an empty queue ends when the queue is closed."""
    with anyio.fail_after(DEADLINE):
        queue = Effects()
        async with anyio.create_task_group() as tg:

            async def take() -> None:
                async for _ in queue:
                    pytest.fail("nothing was queued")

            tg.start_soon(take)
            await anyio.wait_all_tasks_blocked()
            queue.close()
