"""A container source followed in a test: what it gave, in order, and a way to wait on it (the Docker and Podman
tests)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from watchdog.follow.sources.base import Chunk, FileRestarted, SourceItem
from watchdog.follow.sources.commands import Output, Runner
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


# the first run prints 10 lines, waits for /c/go, prints 10 more and fails; the run its policy starts then (its file
# system kept: /tmp/ran) prints one line and stays
TWO_RUNS = (
    'if [ ! -e /tmp/ran ]; then touch /tmp/ran; i=0; while [ $i -lt 20 ]; do echo "run 0 line $i"; '
    "i=$((i+1)); [ $i = 10 ] && while [ ! -e /c/go ]; do usleep 10000; done; done; exit 3; "
    "else echo 'run 1 line 0'; exec sleep 1000; fi"
)


class SlowLogs:
    """The source's runner, with its `logs --follow` printing nothing for a while after its run mark: the runtime's
    `logs` slow to start on a loaded host (the rest of the script's output comes as it came)."""

    def __init__(self, runner: Runner) -> None:
        self.runner, self.where = runner, runner.where
        self.commands: list[str] = []  # the name of each script the reader ran
        self.second = anyio.Event()  # the second `logs` starts once it is set (set: at once)
        self.second.set()
        self.asked = anyio.Event()  # the second `logs` was asked for
        self.cut_after: bytes | None = None  # the first `logs` ends right after this line (None: it does not)

    @asynccontextmanager
    async def open(self, argv: list[str]) -> AsyncIterator[Output]:
        self.commands.append(argv[3])
        logs = self.commands.count("watchdog-container-logs") if argv[3] == "watchdog-container-logs" else 0
        if logs == 2:
            self.asked.set()
            await self.second.wait()
        async with self.runner.open(argv) as output:
            if not logs:
                yield output
            elif logs == 1 and self.cut_after is not None:
                yield CutAfter(await HeldAfterMark(output).primed(), self.cut_after)
            else:
                yield await HeldAfterMark(output).primed()


class CutAfter:
    """`logs`'s output ended right after the chunk with `last` in it, as a reader cut at once after a read (no
    quiet after it)."""

    def __init__(self, output: Output, last: bytes) -> None:
        self.output, self.last, self.tail, self.cut = output, last, b"", False

    async def receive(self) -> bytes | None:
        if self.cut:
            return None
        data = await self.output.receive()
        if data:
            self.tail = (self.tail + data)[-4 * len(self.last) :]
            self.cut = self.last in self.tail
        return data

    def ended(self) -> tuple[int | None, str]:
        return self.output.ended()


class HeldAfterMark:
    """`logs`'s output with its run mark (the script's first line) there at once (`primed`: the script's `inspect`
    before it can take longer than a reader waits for a line) and a pause of `HOLD` seconds between the mark and
    what follows it."""

    HOLD = 1.0

    def __init__(self, output: Output) -> None:
        self.output, self.pending = output, b""
        self.first: bytes | None = None  # the mark, read ahead
        self.until: float | None = None  # when what follows the mark comes

    async def primed(self) -> HeldAfterMark:
        data = await self.output.receive()
        mark, _, self.pending = (data or b"").partition(b"\n")
        self.first = mark + b"\n"
        return self

    async def receive(self) -> bytes | None:
        if self.until is None:
            self.until = time.monotonic() + self.HOLD
            return self.first
        # a reader's wait may end the pause: what is left of it is kept for the next
        await anyio.sleep(max(0.0, self.until - time.monotonic()))
        if self.pending:
            data, self.pending = self.pending, b""
            return data
        return await self.output.receive()

    def ended(self) -> tuple[int | None, str]:
        return self.output.ended()
