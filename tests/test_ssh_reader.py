"""Tests for the SSH source's reader in the follower's task (`watchdog.follow.sources.ssh`), on a channel whose output is
already queued: what no real sshd can be made to do on cue (the channel's side is faked, the rest is real)."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest

from watchdog.follow.sources.base import UNYIELDED_BYTES, CaughtUp, Chunk, Connected
from watchdog.follow.sources.channel import CommandOutput
from watchdog.follow.sources.ssh import SSHSource
from watchdog.follow.sources.sshpool import SSHOptions

pytestmark = pytest.mark.anyio


class _Channel:
    """The part of an asyncssh channel `CommandOutput` uses."""

    def pause_reading(self) -> None:
        """Nothing to pause: the packets are all queued already."""

    def resume_reading(self) -> None:
        """Nothing to resume."""

    def close(self) -> None:
        """Nothing to close."""

    def get_exit_status(self) -> int | None:
        return None


class _Connection:
    def is_closed(self) -> bool:
        return False


class _QueuedPool:
    """A pool whose every stream command has already written `packets` (header first) when it is opened."""

    def __init__(self, packets: list[bytes]) -> None:
        self.options = SSHOptions()
        self.packets = packets

    async def connect(self, host: str, **_: Any) -> None:
        """Connected at once."""

    async def open_reader(self, host: str, name: str, args: list[str], **_: Any) -> Any:
        session = CommandOutput()
        session.connection_made(_Channel())  # type: ignore[arg-type]
        for packet in self.packets:
            session.data_received(packet, None)
        return _Connection(), session


async def test_a_backlog_is_handed_over_at_once_in_small_parts_and_lets_other_tasks_run() -> None:
    """Queued output is taken without a trip round the event loop while it is small (a live log's new lines
    and the CaughtUp after them), but a backlog read in bulk lets other tasks run every UNYIELDED_BYTES, so one
    launch read from its start never holds up the others."""
    half = b"x" * (UNYIELDED_BYTES // 2 + 1)
    size = 6 * len(half)
    pool = _QueuedPool([b"ok 1 %d\n" % size] + [half] * 6)
    source = SSHSource(pool, "gpu1", "/var/log/x.log")  # type: ignore[arg-type]
    rounds = 0  # how many times another task got to run

    async def other() -> None:
        nonlocal rounds
        while True:
            rounds += 1
            await anyio.lowlevel.checkpoint()

    seen: list[tuple[object, int]] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(other)
        async with source.open_follow() as items:
            with anyio.fail_after(10):
                async for item in items:
                    seen.append((item, rounds))
                    if isinstance(item, CaughtUp):
                        break
        tg.cancel_scope.cancel()
    assert [type(item) for item, _ in seen] == [Connected] + [Chunk] * 6 + [CaughtUp]
    assert seen[-1][0] == CaughtUp(size)
    chunks = [r for item, r in seen if isinstance(item, Chunk)]
    assert seen[-1][1] == chunks[-1]  # the CaughtUp right after its chunk: no trip round the loop
    assert len(set(chunks)) >= 3  # other tasks ran between the bulk chunks (every 2 of them here)
    assert chunks[0] == chunks[1] or chunks[1] == chunks[2]  # ... but not before each one
