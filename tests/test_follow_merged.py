"""The follower takes a read's CaughtUp with its last chunk (`Merges`, `Chunk.caught_up`): one item per read, and
the same updates as when the CaughtUp comes as an item of its own."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from watchdog.follow.follower import Concluded, LaunchFollower, LaunchSpec, Transitioned, Update
from watchdog.follow.sources import CaughtUp, Chunk, Merges, SourceItem, parse_target
from watchdog.follow.testing import ManualClock
from watchdog.vocabulary import State

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).parent / "fixtures"
LOGS = sorted((FIXTURES / "corpus").rglob("*.log")) + sorted((FIXTURES / "cases").rglob("*.log"))
GRACE = 5.0


class _Reads:
    """A source's iterator as a file's goes: each read a chunk, then its CaughtUp as an item of its own."""

    def __init__(self, reads: anyio.abc.ObjectReceiveStream[Chunk]) -> None:
        self._reads = reads
        self._then: CaughtUp | None = None
        self.items = 0  # items given

    def __aiter__(self) -> _Reads:
        return self

    async def __anext__(self) -> SourceItem:
        self.items += 1
        then, self._then = self._then, None
        if then is not None:
            return then
        try:
            chunk = await self._reads.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None
        return self._read(chunk)

    def _read(self, chunk: Chunk) -> SourceItem:
        self._then = CaughtUp(chunk.end)
        return chunk


class _MergingReads(_Reads):
    """... or, where the consumer sets `merge`, one chunk that is its CaughtUp as well."""

    def __init__(self, reads: anyio.abc.ObjectReceiveStream[Chunk]) -> None:
        super().__init__(reads)
        self.merge = False

    def _read(self, chunk: Chunk) -> SourceItem:
        if self.merge:
            return Chunk(chunk.offset, chunk.data, caught_up=True)
        return super()._read(chunk)


class _Source:
    """The reads a test sends, given by `_MergingReads` (`merging`) or `_Reads`."""

    def __init__(self, merging: bool) -> None:
        self.merging = merging
        self.send, self._receive = anyio.create_memory_object_stream[Chunk](1000)
        self.reads: _Reads | None = None

    def open_follow(
        self, offset: int = 0, cursor: str | None = None
    ) -> AbstractAsyncContextManager[AsyncIterator[SourceItem]]:
        return self._open()

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[AsyncIterator[SourceItem]]:
        self.reads = _MergingReads(self._receive) if self.merging else _Reads(self._receive)
        try:
            yield self.reads
        finally:
            self._receive.close()
            self.send.close()


def _read(path: Path) -> bytes:
    return path.read_bytes()  # a small fixture, read before the follower starts


def _spec() -> LaunchSpec:
    return LaunchSpec(name="t", target=parse_target("/x.log"))


async def _follow(data: bytes, seed: int, merging: bool) -> tuple[list[Any], _Source]:
    """`data` read live in seeded pieces with seeded pauses (some past the crash grace): every update published."""
    clock, source = ManualClock(), _Source(merging)
    follower = LaunchFollower(_spec(), source=source, clock=clock)
    updates: list[Update] = []

    async def collect() -> None:
        with follower.updates:
            async for update in follower.updates:
                updates.append(update)  # noqa: PERF401 - kept as they come: this task is cancelled at the end

    rnd = random.Random(seed)
    async with anyio.create_task_group() as tg:
        tg.start_soon(follower.run)
        tg.start_soon(collect)
        pos = 0
        while pos < len(data):
            end = min(len(data), pos + rnd.choice((1, 40, 300, 2000, 8000)))
            await source.send.send(Chunk(pos, data[pos:end]))
            pos = end
            await clock.advance(rnd.choice((0.0, 0.05, 0.3, 2.5, 7.0)))
        await clock.advance(2 * GRACE + 1.0)
        tg.cancel_scope.cancel()
    said = [
        (u.transition.state, u.transition.incarnation, u.transition.line)
        if isinstance(u, Transitioned)
        else (u.state, u.verdict.to_json())
        if isinstance(u, Concluded)
        else u
        for u in updates
    ]
    return said, source


async def test_the_follower_asks_for_merged_reads() -> None:
    """The follower sets `merge` on a source's iterator that has it: each read is one item, and the log is judged
    caught up (its verdict given) from the chunks alone."""
    log = FIXTURES / "corpus" / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log"
    data = _read(log)
    said, source = await _follow(data, 1, merging=True)
    assert isinstance(source.reads, Merges)
    assert source.reads.merge
    assert any(isinstance(u, tuple) and u[0] == State.READY and isinstance(u[1], dict) for u in said), said
    unmerged, plain = await _follow(data, 1, merging=False)
    assert plain.reads is not None
    assert source.reads.items < plain.reads.items
    assert said == unmerged


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.stem[:60])
async def test_merged_reads_say_the_same(log: Path) -> None:
    """Every corpus log read live, merged or not: the same transitions and verdicts, in the same order."""
    data = _read(log)
    merged, _ = await _follow(data, 7, merging=True)
    unmerged, _ = await _follow(data, 7, merging=False)
    assert merged == unmerged


def test_a_chunk_is_compared_and_hashed_by_its_offset_and_bytes() -> None:
    # a slotted dataclass, not a frozen one (made once a live line): equal and hashed as the frozen one was
    a = Chunk(3, b"x\n", (1, 2), "c", caught_up=True)
    b = Chunk(3, b"x\n")
    assert a == b
    assert hash(a) == hash(b)
    assert a != Chunk(4, b"x\n")
    assert a != Chunk(3, b"y\n")
    assert {a, b} == {b}
    assert not hasattr(a, "__dict__")
    assert (a.end, a.file, a.cursor, a.caught_up) == (5, (1, 2), "c", True)
