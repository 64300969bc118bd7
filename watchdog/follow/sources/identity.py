"""What a followed file is at a byte offset: its device and inode, its size, and its bytes around the offset.

A checkpoint (`watchdog.follow.checkpoint`) holds the analysis of a file's first `offset` bytes. Before it is used
again the file at the path is identified, on its own host, and compared:

- the device and inode say it is the same file, not a new one at the same path (a relaunch, a rotation);
- its size must be at least the offset: a shorter file was truncated (logrotate's copytruncate);
- inodes are reused (ext4 and xfs hand a deleted file's inode to the next file made), and a file may be
  rewritten in place, so its bytes are compared too: the first `IDENTITY_WINDOW` bytes (the launch's banner,
  with its times and arguments, differs between two launches) and the `IDENTITY_WINDOW` bytes just before
  the offset (what the checkpoint read last). The bytes themselves are compared, not a hash of them: 8 KB is
  nothing to read, and a remote host needs no hashing tool.

A file whose inode was reused *and* whose first and last-read 4 KB are byte for byte the same is taken for the
same file; only a generated log (no times in it) can do that.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from watchdog.core.lastbytes import LastBytes

IDENTITY_WINDOW = 4096  # bytes compared at the start of the file, and just before the offset


@dataclass(frozen=True)
class FileIdentity:
    """A file as seen at `offset`: which file it is, how big, and its bytes at the start and before `offset`."""

    device: int
    inode: int
    size: int
    offset: int
    head: bytes  # bytes [0, min(IDENTITY_WINDOW, offset))
    before: bytes  # bytes [max(0, offset - IDENTITY_WINDOW), offset)

    def mismatch(self, other: FileIdentity) -> str | None:
        """Why `other` (the file as it is now) is not the file this was taken of, read to the same offset;
        None when it is."""
        if (other.device, other.inode) != (self.device, self.inode):
            return f"another file at the path (inode {other.inode}, was {self.inode})"
        if other.offset != self.offset:
            return f"identified at offset {other.offset}, not {self.offset}"
        if other.size < self.offset:
            return f"the file is shorter ({other.size} bytes) than the offset {self.offset}: truncated"
        if other.head != self.head:
            return "the file's first bytes differ: replaced"
        if other.before != self.before:
            return "the bytes before the offset differ: rewritten"
        return None


def last_bytes(window: bytes, data: bytes, size: int) -> bytes:
    """The last `size` bytes of `window` followed by `data` (the next bytes), without copying a large `data`
    whole: a reader keeps the bytes just before its offset this way, chunk after chunk."""
    if len(data) >= size:
        return data[-size:]
    return (window + data)[-size:]


class FileWindows:
    """The follower's side: the first and the latest `IDENTITY_WINDOW` bytes of the file it read so far.

    The latest are kept as the pieces read (a live log's line at a time, `LastBytes`): a read costs no copy of
    the 4 KB before it."""

    __slots__ = ("_last", "head", "offset")

    def __init__(self, offset: int = 0, head: bytes = b"", before: bytes = b"") -> None:
        self.offset = offset
        self.head = head
        self._last = LastBytes(IDENTITY_WINDOW, before)

    @property
    def before(self) -> bytes:
        """The last `IDENTITY_WINDOW` bytes read (fewer in a shorter file)."""
        return self._last.value

    @before.setter
    def before(self, value: bytes) -> None:
        self._last.set(value)

    def feed(self, data: bytes) -> None:
        """The next bytes of the file (the ones at `offset`)."""
        if len(self.head) < IDENTITY_WINDOW:
            self.head += data[: IDENTITY_WINDOW - len(self.head)]
        self._last.feed(data)
        self.offset += len(data)

    def matches(self, identity: FileIdentity) -> bool:
        """Whether `identity` shows these bytes at this offset."""
        return (
            identity.offset == self.offset
            and identity.size >= self.offset
            and (identity.head, identity.before) == (self.head, self.before)
        )


@runtime_checkable
class Identifiable(Protocol):
    """A source that can say what its file is at an offset (on the file's own host)."""

    async def identify(self, offset: int) -> FileIdentity | None:
        """The file at the path as it is now, read around `offset`; None when there is no such file."""
        ...


def window_spans(offset: int, window: int = IDENTITY_WINDOW) -> tuple[int, int, int]:
    """(head length, start of the window before the offset, its length) for `offset`, windows of `window` bytes."""
    if offset < 0:
        raise ValueError("offset must not be negative")
    start = max(0, offset - window)
    return min(window, offset), start, offset - start


def local_identity(path: str, offset: int) -> FileIdentity | None:
    """Identify a local file (blocking: run it in a worker thread); None if it is not there or not a file."""
    head_len, start, length = window_spans(offset)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        head = os.pread(fd, head_len, 0) if head_len else b""
        before = os.pread(fd, length, start) if length else b""
    finally:
        os.close(fd)
    return FileIdentity(st.st_dev, st.st_ino, st.st_size, offset, head, before)


_ID = re.compile(rb"^id (\d+) (\d+) (\d+)$")


def parse_identity(output: bytes, offset: int, *, window: int = IDENTITY_WINDOW) -> FileIdentity | None:
    """Read the output of `watchdog.follow.sources.remote.identity_command` run with the same `offset` and `window`;
    None for a missing or unreadable file, or output that is not the script's."""
    line, newline, rest = output.partition(b"\n")
    match = _ID.match(line) if newline else None
    if match is None:
        return None
    head_len = window_spans(offset, window)[0]
    # a file cut while it was read gives fewer bytes than asked for: windows that then match nothing
    return FileIdentity(int(match[1]), int(match[2]), int(match[3]), offset, rest[:head_len], rest[head_len:])
