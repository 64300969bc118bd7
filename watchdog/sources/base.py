"""The byte-source interface: chunks at absolute offsets, connection and file events, `Source`.

A source is followed with an async context manager, so that whatever it runs in the background
(a poll loop, a remote `tail`) is stopped when the block is left, normally, by an error or by
cancellation::

    async with source.open_follow(offset) as items:
        async for item in items:
            if isinstance(item, Chunk):
                ...  # item.data starts at byte item.offset of the current file
            elif isinstance(item, FileRestarted):
                ...  # the next chunk starts at offset 0 of a new file

An error the follower cannot recover from (`HostKeyError`, `AuthError`, `UsageError`) is raised
by the iteration, after the items that came before it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Literal, Protocol

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

__all__ = [
    "CaughtUp",
    "Chunk",
    "Connected",
    "Disconnected",
    "FileMissing",
    "FileRestarted",
    "ItemSink",
    "RestartReason",
    "Source",
    "SourceEvent",
    "SourceItem",
    "open_item_stream",
    "send_item",
]

RestartReason = Literal["rotated", "truncated", "replaced"]

# Enough to absorb a burst without holding a slow consumer's memory hostage: the producer blocks
# beyond it, and over SSH the channel's flow control then stops the remote tail.
ITEM_BUFFER = 64


@dataclass(frozen=True)
class Chunk:
    """Bytes read from the followed file; `offset` is the position of `data[0]` in the current file."""

    offset: int
    data: bytes

    @property
    def end(self) -> int:
        """The offset just past the last byte: where the next chunk starts."""
        return self.offset + len(self.data)


@dataclass(frozen=True)
class Connected:
    """The connection to `host` is up (first time, or again after `Disconnected`)."""

    host: str


@dataclass(frozen=True)
class Disconnected:
    """The connection to `host` dropped, or the host refused another channel (sshd's MaxSessions); it is
    being re-established."""

    host: str
    reason: str


@dataclass(frozen=True)
class FileRestarted:
    """The followed path now names a new file; the next chunk starts at its offset 0.

    `reason` is "rotated" (the old file was renamed away and a new one created), "truncated"
    (the same file was cut shorter than what was read, e.g. logrotate's copytruncate) or
    "replaced" (the old file was deleted, or swapped for a new one, e.g. a relaunch).
    """

    reason: RestartReason


@dataclass(frozen=True)
class FileMissing:
    """The log is not there (yet); the follower waits for it to appear."""

    path: str


@dataclass(frozen=True)
class CaughtUp:
    """Everything the file held when last looked at has been delivered: the reader is at its end.

    Sent once each time the reader reaches the end after new bytes (and once at the start for an
    empty file), so a follower knows when what it read is the whole log so far.
    """

    offset: int


SourceEvent = Connected | Disconnected | FileRestarted | FileMissing | CaughtUp
SourceItem = Chunk | SourceEvent
ItemSink = MemoryObjectSendStream[SourceItem]


# Bytes of chunks a producer sends, or a consumer takes, without a trip round the event loop: a live log's few
# new lines and the CaughtUp after them go through at once, a log read in bulk still lets other tasks run.
UNYIELDED_BYTES = 16 * 1024


async def send_item(sink: ItemSink, item: SourceItem) -> None:
    """Send `item`: a small one at once while the consumer has room for it, else by `sink.send`."""
    if not isinstance(item, Chunk) or len(item.data) <= UNYIELDED_BYTES:
        try:
            sink.send_nowait(item)
        except anyio.WouldBlock:
            pass
        else:
            return
    await sink.send(item)


class Source(Protocol):
    """Something whose bytes can be followed from an offset: a local file, a file over SSH."""

    def open_follow(self, offset: int = 0) -> AbstractAsyncContextManager[AsyncIterator[SourceItem]]:
        """Follow the file from byte `offset` of the current file until the block is left.

        Args:
            offset: where to start reading, in the file as it is now (0: from the start).

        Returns:
            An async context manager yielding an async iterator of chunks and events.
        """
        ...


class _Items:
    """The consumer's side: items in order, then the producer's error, if it had one."""

    def __init__(self, receive: MemoryObjectReceiveStream[SourceItem]) -> None:
        self._receive = receive
        self.error: Exception | None = None
        self._unyielded = 0  # bytes of chunks taken since the last trip round the event loop

    def __aiter__(self) -> _Items:
        return self

    async def __anext__(self) -> SourceItem:
        try:
            item: SourceItem | None = None
            if self._unyielded <= UNYIELDED_BYTES:
                with contextlib.suppress(anyio.WouldBlock):
                    item = self._receive.receive_nowait()  # already there: no trip round the event loop
            if item is None:
                item = await self._receive.receive()
                self._unyielded = 0
            if isinstance(item, Chunk):
                self._unyielded += len(item.data)
            return item
        except anyio.EndOfStream:
            if self.error is not None:
                error, self.error = self.error, None
                raise error from error.__cause__
            raise StopAsyncIteration from None


@asynccontextmanager
async def _open_item_stream(
    produce: Callable[[ItemSink], Awaitable[None]],
) -> AsyncIterator[AsyncIterator[SourceItem]]:
    send, receive = anyio.create_memory_object_stream[SourceItem](ITEM_BUFFER)
    items = _Items(receive)

    async def run() -> None:
        async with send:
            try:
                await produce(send)
            except Exception as exc:
                # Handed to the consumer rather than raised here, so the caller sees the
                # HostKeyError itself and not an ExceptionGroup from the task group.
                items.error = exc

    body_error: Exception | None = None
    with receive:
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            try:
                yield items
            except Exception as exc:
                # Kept to re-raise after the task group, which would wrap it in an ExceptionGroup:
                # the caller's `except HostKeyError` must see the error itself.
                body_error = exc
            finally:
                tg.cancel_scope.cancel()
    if body_error is not None:
        raise body_error


def open_item_stream(
    produce: Callable[[ItemSink], Awaitable[None]],
) -> AbstractAsyncContextManager[AsyncIterator[SourceItem]]:
    """Run `produce(sink)` in the background for the duration of the block; yield what it sends.

    The producer ends the stream by returning; an exception it raises is re-raised by the
    consumer's iteration once the items sent before it are consumed. Leaving the block cancels
    the producer, whose `finally` clauses do the cleanup.
    """
    return _open_item_stream(produce)
