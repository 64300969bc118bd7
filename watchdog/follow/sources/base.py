"""The byte-source interface: chunks at absolute offsets, connection, stream and process events, `Source`.

A source is followed with an async context manager, so that whatever it runs in the background
(a poll loop, a remote `tail`) is stopped when the block is left, normally, by an error or by
cancellation::

    async with source.open_follow(offset) as items:
        async for item in items:
            if isinstance(item, Chunk):
                ...  # item.data starts at byte item.offset of the current file
            elif isinstance(item, FileRestarted):
                ...  # the next chunk starts at offset 0 of a new file (a new stream)

A stream is what offsets count in: a file; one run of a container; a unit's or a pod container's output since
it began. A source that cannot reopen a stream at a byte offset (a container's log, journald, a pod) puts a
`cursor` on each chunk, from which it resumes just after that chunk's bytes (`open_follow(offset, cursor)`).

An error the follower cannot recover from (`HostKeyError`, `AuthError`, `UsageError`) is raised
by the iteration, after the items that came before it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

RestartReason = Literal["rotated", "truncated", "replaced", "restarted"]


# not frozen: a frozen dataclass's `__init__` sets each field through `object.__setattr__` (0.8 against 0.25 us
# here), and a live log makes one a line; nothing changes a chunk once made (hashed as a frozen one would be)
@dataclass(slots=True, unsafe_hash=True)
class Chunk:
    """Bytes read from the followed file; `offset` is the position of `data[0]` in the current file."""

    offset: int
    data: bytes
    # (device, inode) of the file the bytes were read from, where the source knows it without asking again
    # (SSH: its script's header), or a cursor source's stream id: a checkpoint then names the file without a
    # remote `identify`
    file: tuple[int, int] | None = field(default=None, compare=False)
    # where a cursor source resumes just after these bytes (they end at a line end); None for a file
    cursor: str | None = field(default=None, compare=False)
    # these bytes end the read that reached the end: the chunk is its `CaughtUp(end)` as well, which does not
    # come as an item of its own. Set only for a consumer that asked for it (`Merges`): one item per read, not two
    caught_up: bool = field(default=False, compare=False)

    @property
    def end(self) -> int:
        """The offset just past the last byte: where the next chunk starts."""
        return self.offset + len(self.data)


@dataclass(frozen=True)
class Connected:
    """The connection to `host` is up (first time, or again after `Disconnected`)."""

    host: str

    def __str__(self) -> str:
        """What a person reads: `connected to gpu1`."""
        return f"connected to {self.host}"


@dataclass(frozen=True)
class Disconnected:
    """The connection to `host` dropped, or the host refused another channel (sshd's MaxSessions); it is
    being re-established.

    `since`: for a connection that could not be made, the monotonic time (`time.monotonic`) the failed attempt
    began (a black-holed host is said only when its connect timeout ends: its outage began that long before);
    None: when said.
    """

    host: str
    reason: str
    since: float | None = field(default=None, compare=False)

    def __str__(self) -> str:
        """What a person reads: `connection to gpu1 lost: <reason>; reconnecting` (the reason alone when it
        already says where, as the exception tree's messages do)."""
        if self.reason and self.host in self.reason:
            return f"{self.reason}; reconnecting"
        reason = f": {self.reason}" if self.reason else ""
        return f"connection to {self.host} lost{reason}; reconnecting"


@dataclass(frozen=True)
class FileRestarted:
    """The followed path now names a new file; the next chunk starts at its offset 0.

    `reason` is "rotated" (the old file was renamed away and a new one created), "truncated"
    (the same file was cut shorter than what was read, e.g. logrotate's copytruncate),
    "replaced" (the old file was deleted, or swapped for a new one, e.g. a relaunch; a container or pod
    re-created under the same name) or "restarted" (a container or unit started again: its next run).
    """

    reason: RestartReason

    def __str__(self) -> str:
        """What a person reads: `the log was truncated`."""
        return f"the log was {self.reason}"


@dataclass(frozen=True)
class FileMissing:
    """The log is not there (yet); the follower waits for it to appear."""

    path: str

    def __str__(self) -> str:
        """What a person reads: `/data/log does not exist (yet)`."""
        return f"{self.path} does not exist (yet)"


@dataclass(frozen=True)
class CaughtUp:
    """Everything the file held when last looked at has been delivered: the reader is at its end.

    Sent once each time the reader reaches the end after new bytes (and once at the start for an
    empty file), so a follower knows when what it read is the whole log so far.
    """

    offset: int


@dataclass(frozen=True)
class Ended:
    """The platform says the process of the current stream is gone (a container exited, a unit failed, a pod's
    container terminated): the process evidence of sources that run it. Said once per stream, after its last
    bytes. `exit_code` None: not known; `oom_killed`: the kernel killed it at its `memory_limit` (bytes);
    `restarting`: the platform starts it again (a restart policy): its next run comes as a new stream."""

    detail: str
    exit_code: int | None = None
    oom_killed: bool = False
    memory_limit: int | None = None
    restarting: bool = False

    def __str__(self) -> str:
        """What a person reads: `the process ended: exited with code 1`."""
        return f"the process ended: {self.detail}"


SourceEvent = Connected | Disconnected | FileRestarted | FileMissing | CaughtUp | Ended
SourceItem = Chunk | SourceEvent


# Bytes of chunks a source hands over without a trip round the event loop: a live log's few new lines and the
# CaughtUp after them go through at once, a log read in bulk still lets other tasks run.
UNYIELDED_BYTES = 16 * 1024


@runtime_checkable
class Merges(Protocol):
    """A source's iterator that can give a read's `CaughtUp` with its last chunk (`Chunk.caught_up`), not as an
    item of its own: a follower of many logs then handles one item per read instead of two.

    The consumer sets `merge` before it takes the first item; unset, every `CaughtUp` comes as an item of its own
    (and no chunk says `caught_up`).
    """

    merge: bool


@runtime_checkable
class Pushes(Protocol):
    """A source's iterator that can hand its items to `push`, a plain callable, outside the consumer's task: a
    source that learns of many logs' changes at once (inotify) then serves them all in one pass of the event loop,
    not with a wake-up of each follower's task per read.

    `push(item)` returns None when it took the item wholly; anything else is what the iteration gives the
    consumer in its place, in order (the item itself, or what is left to do with it, in the consumer's task).
    Set by the consumer before it takes the first item, with `merge` (`Merges`); unset (None), every item comes
    through the iteration.
    """

    push: Callable[[SourceItem], object] | None


class Source(Protocol):
    """Something whose bytes can be followed from an offset: a file (local, over SSH), a container's log, ..."""

    def open_follow(
        self, offset: int = 0, cursor: str | None = None
    ) -> AbstractAsyncContextManager[AsyncIterator[SourceItem]]:
        """Follow the stream from byte `offset` of the current one until the block is left.

        Args:
            offset: where to start reading, in the stream as it is now (0: from the start).
            cursor: a cursor source's `Chunk.cursor` to resume after (its bytes end at `offset`); a stream that
                is not there any more is said `FileRestarted("replaced")` and read from its start.

        Returns:
            An async context manager yielding an async iterator of chunks and events.
        """
        ...


@runtime_checkable
class Aged(Protocol):
    """A source that can tell how long its stream has not grown: a file's modification time. A follower that
    first reaches the end of a log quiet that long already counts that quiet (a launch that died before it
    started to follow: an error pending there has waited it out, as if followed all along)."""

    def unmodified_for(self) -> float | None:
        """Seconds since the stream last grew, as of now (0 for one that just did); None: not known."""
        ...


@runtime_checkable
class Streamed(Protocol):
    """A cursor source: it names its current stream, so that a checkpoint's cursor is used only in it."""

    async def stream_id(self) -> tuple[int, int] | None:
        """The current stream's id (as its chunks' `file`); None: there is none (yet)."""
        ...


@runtime_checkable
class KeepsPrevious(Protocol):
    """A cursor source that can still read the stream before its current one: a pod's container restarted by the
    kubelet, whose dead instance's log the API keeps; a container's run restarted by its restart policy, whose
    lines stay in the container's log. A checkpoint of that stream resumes in it (`open_follow` with its cursor):
    its rest and its end (`Ended`) come before the current stream's start (`FileRestarted`), so that a restart
    while the daemon was down loses neither the old instance's last lines nor its verdict."""

    async def previous_stream_id(self, cursor: str | None = None) -> tuple[int, int] | None:
        """The id of the stream before the current one while its rest can be read; None: there is none.

        Args:
            cursor: the checkpoint's cursor, for a source that knows the stream before only from it (a
                container's runtime says only its latest run); one that knows it anyway ignores it.
        """
        ...
