"""What a follow that `Pushes` delivered, in order, and by which way: the tests of local and SSH pushes share it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import anyio

from watchdog.follow.sources.base import CaughtUp, Chunk, FileRestarted, Pushes, Source, SourceItem


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


async def append_and_wait(log: PushLog, path: Path, data: bytes) -> None:
    """Append `data` to the followed file `path`, and wait until the follow has delivered it."""
    _append(path, data)
    await log.until(lambda: log.data().endswith(data))


async def rotate(log: PushLog, path: Path, rest: bytes, first: bytes) -> None:
    """Rename `path` to `path.1`, append `rest` to the old file, start a new `path` with `first`, and wait until
    the follow has delivered the new file's first bytes."""
    _rotate_file(path, rest, first)
    await log.until(lambda: log.data().endswith(first))


def _rotate_file(path: Path, rest: bytes, first: bytes) -> None:
    old = path.with_name(path.name + ".1")
    path.rename(old)
    _append(old, rest)
    path.write_bytes(first)


def _append(path: Path, data: bytes) -> None:
    with path.open("ab") as out:
        out.write(data)


def assert_files_whole(log: PushLog, restarts: list[str], expected: list[bytes]) -> None:
    """The chunks delivered, split at each restart (of the reasons `restarts`, in order): each file's bytes are
    `expected`'s, whole, in order, once (each chunk at the offset where the one before it ended)."""
    files: list[list[Chunk]] = [[]]
    seen = []
    for _, item in log.items:
        if isinstance(item, FileRestarted):
            seen.append(item.reason)
            files.append([])
        elif isinstance(item, Chunk):
            files[-1].append(item)
        else:
            assert isinstance(item, CaughtUp), item
    assert seen == restarts
    for chunks, data in zip(files, expected, strict=True):
        assert b"".join(c.data for c in chunks) == data
        assert [c.offset for c in chunks] == [
            sum(len(c.data) for c in chunks[:k]) for k in range(len(chunks))
        ]


async def follow_pushed(
    source: Source, log: PushLog, *, skip: tuple[type, ...] = (), task_status: anyio.abc.TaskStatus[None]
) -> None:
    """Follow `source` with its live reads pushed to `log` (`Pushes`, merged), the rest logged as iterated but for
    the kinds of item in `skip`; started once following."""
    async with source.open_follow() as items:
        assert isinstance(items, Pushes)
        items.merge = True  # type: ignore[attr-defined]  # `Merges`, which `Pushes` goes with
        items.push = log.push
        task_status.started()
        async for item in items:
            if not isinstance(item, skip):
                log.iterated(item)
