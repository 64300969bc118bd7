"""Follow a local file: read to the end, then wait for appends, rotation and truncation (woken by inotify
where there is one, with a slow poll as a safety net; by polling elsewhere)."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TypeVar

import anyio

from watchdog.exceptions import UsageError
from watchdog.options import file_kind
from watchdog.sources.base import (
    CaughtUp,
    Chunk,
    FileMissing,
    FileRestarted,
    ItemSink,
    RestartReason,
    SourceItem,
    open_item_stream,
    send_item,
)
from watchdog.sources.identity import FileIdentity, local_identity
from watchdog.sources.inotify import Watcher

__all__ = ["DEFAULT_POLL_INTERVAL", "DEFAULT_READ_SIZE", "LocalSource"]

DEFAULT_POLL_INTERVAL = 0.25
# With inotify, a quiet file is still looked at this often: on a file system that does not report every change
# (NFS: another machine's writes), and, on a local one, in case the watcher has stopped.
SAFETY_POLL_INTERVAL = 2.0
LOCAL_SAFETY_POLL_INTERVAL = 10.0
# With inotify, a file that changes all the time is read at most this often: its lines come in batches.
BATCH_INTERVAL = 0.02
DEFAULT_READ_SIZE = 1 << 16

_T = TypeVar("_T")

# statfs(2) f_type of the file systems whose reads of a file just written are served from memory: a read there
# takes microseconds, so it is done on the event loop (a worker thread's round trip costs far more). Any other
# (NFS, CIFS, FUSE, ...) may block for as long as its server takes: its reads go to a worker thread.
_LOCAL_FS = frozenset(
    {
        0xEF53,  # ext2, ext3, ext4
        0x58465342,  # xfs
        0x9123683E,  # btrfs
        0x01021994,  # tmpfs
        0x858458F6,  # ramfs
        0x794C7630,  # overlayfs (containers)
        0x2FC12FC1,  # zfs
        0xF2F52010,  # f2fs
        0x52654973,  # reiserfs
        0x3153464A,  # jfs
        0xCA451A4E,  # bcachefs
    }
)


@dataclass
class _Open:
    """The file being read: its descriptor, identity, and whether it is on a local file system."""

    fd: int
    ident: tuple[int, int]
    local: bool = False


def _on_local_fs(fd: int) -> bool:
    """Whether the open file `fd` is on a local disk or in memory (Linux `fstatfs`; False when unknown)."""
    libc = _libc()
    if libc is None:
        return False
    buf = ctypes.create_string_buffer(256)  # struct statfs is 120 bytes on 64-bit Linux
    if libc.fstatfs(fd, buf) != 0:
        return False
    return ctypes.c_long.from_buffer(buf).value in _LOCAL_FS  # f_type comes first, a word wide


@functools.cache
def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None


async def _io(local: bool, fn: Callable[..., _T], *args: object) -> _T:
    # a local file's syscalls on the event loop, any other's in a worker thread (see _LOCAL_FS)
    if local:
        return fn(*args)
    return await anyio.to_thread.run_sync(fn, *args)


def _open(path: str) -> _Open | None:
    """Open `path` for reading; None if it does not exist (yet).

    The open does not block (on a FIFO without a writer a plain open would, past any deadline and
    Ctrl-C), and the type is checked on the opened descriptor: only a regular file is followed.
    O_NONBLOCK changes nothing for a regular file's reads, so it is left set.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from exc
    st = os.fstat(fd)
    kind = file_kind(st.st_mode)
    if kind is not None:
        os.close(fd)
        raise UsageError(f"cannot follow {path}: {kind}, not a regular log file")
    return _Open(fd=fd, ident=(st.st_dev, st.st_ino), local=_on_local_fs(fd))


def _path_ident(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


class LocalSource:
    """A file on this machine, followed by polling `os.stat` and reading what was appended.

    Appends are read as soon as they are seen; while data keeps coming the follower reads again
    at once, and only sleeps `poll_interval` when it has reached the end of the file (with inotify: until
    the file changes). On a local file system (ext4, xfs, tmpfs, ...) the reads are done on the event loop,
    elsewhere (NFS, FUSE, ...) in a worker thread, so that a slow file server never blocks other launches.

    Rotation (the file renamed away and a new one created) is noticed when the path names
    another inode: the old file is read to its end first, then `FileRestarted("rotated")` and the
    new file from offset 0. A new file at the path whose predecessor was deleted or renamed over
    gives `FileRestarted("replaced")`; the same file shorter than the read offset (copytruncate)
    gives `FileRestarted("truncated")`. A truncation followed by more writes than were read
    before the next poll cannot be told from an append (the same limit as `tail -f`).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        use_inotify: bool = True,
        read_size: int = DEFAULT_READ_SIZE,
    ) -> None:
        """Describe the file to follow; nothing is opened until `open_follow`.

        Args:
            path: the log file (it may not exist yet).
            poll_interval: seconds to wait at the end of the file before looking again (with inotify: a
                change wakes the follower at once, and a quiet file is looked at every
                `LOCAL_SAFETY_POLL_INTERVAL` seconds, `SAFETY_POLL_INTERVAL` on a network file system, or
                `poll_interval` if longer).
            use_inotify: be woken by Linux inotify where it works (False: poll only).
            read_size: the largest chunk read at once.
        """
        if poll_interval <= 0:
            raise ValueError("poll_interval must be positive")
        if read_size <= 0:
            raise ValueError("read_size must be positive")
        self.path = os.path.abspath(os.path.expanduser(os.fspath(path)))
        self.poll_interval = poll_interval
        self.read_size = read_size
        self.use_inotify = use_inotify
        self._last_look = float("-inf")  # event-loop time the follower last looked after a wait

    def open_follow(self, offset: int = 0) -> AbstractAsyncContextManager[AsyncIterator[SourceItem]]:
        """Follow the file from byte `offset`; see `watchdog.sources.base.Source`."""
        if offset < 0:
            raise ValueError("offset must not be negative")
        return open_item_stream(lambda sink: self._follow(sink, offset))

    async def identify(self, offset: int) -> FileIdentity | None:
        """What the file at the path is, read around `offset` (see `watchdog.sources.identity`); None if there
        is no regular file there."""
        return await anyio.to_thread.run_sync(local_identity, self.path, offset)

    async def _follow(self, sink: ItemSink, offset: int) -> None:
        current: _Open | None = None
        pending: RestartReason | None = None
        announced_missing = False
        at_end = False  # CaughtUp sent and nothing read since
        pos = offset
        watcher = Watcher.get() if self.use_inotify else None
        if watcher is not None and not watcher.watch(self.path):
            watcher = None  # the kernel refused a watch (no directory, no free watch): poll
        try:
            while True:
                if current is None:
                    seen = watcher.generation(self.path) if watcher is not None else 0
                    current = await anyio.to_thread.run_sync(_open, self.path)
                    if current is None:
                        if not announced_missing:
                            announced_missing = True
                            await send_item(sink, FileMissing(self.path))
                        await self._wait(watcher, seen, local=False)
                        continue
                    size = os.fstat(current.fd).st_size
                    if pending is None and pos > size:
                        # Resuming past the end: the file was cut while nobody was reading.
                        pending = "truncated"
                    if pending is not None:
                        await send_item(sink, FileRestarted(pending))
                        pending, pos = None, 0
                local = current.local
                seen = watcher.generation(self.path) if watcher is not None else 0
                if at_end:
                    # one look per poll of a quiet file: more data, or a restart, or nothing
                    data, pending = await _io(local, self._poll_at_end, current, pos)
                else:
                    data = await _io(local, os.pread, current.fd, self.read_size, pos)
                if data:
                    await send_item(sink, Chunk(pos, data))
                    pos += len(data)
                    at_end = False
                    if len(data) == self.read_size:
                        continue  # there may be more at once
                    # a short read of a regular file ends where the file ended: no second read to find that out
                if not at_end:
                    at_end = True
                    await send_item(sink, CaughtUp(pos))
                    pending = await _io(local, self._restart_reason, current, pos)
                if pending == "truncated":
                    await send_item(sink, FileRestarted(pending))
                    pending, pos, at_end = None, 0, False
                elif pending is not None:
                    # Whatever the writer added to the old file before it was rotated away.
                    while data := await _io(local, os.pread, current.fd, self.read_size, pos):
                        await send_item(sink, Chunk(pos, data))
                        pos += len(data)
                    os.close(current.fd)
                    current, at_end = None, False
                else:
                    await self._wait(watcher, seen, local=local)
        finally:
            if current is not None:
                os.close(current.fd)
            if watcher is not None:
                watcher.unwatch(self.path)

    async def _wait(self, watcher: Watcher | None, seen: int, *, local: bool) -> None:
        # At the end of the file (or while it is missing): until it changes, or the next poll. A file that
        # changes all the time is still looked at once per `BATCH_INTERVAL` at most (its lines come in
        # batches): inotify saves the looks at quiet files, and the wait for the first line after one.
        if watcher is None:
            await anyio.sleep(self.poll_interval)
            return
        safety = LOCAL_SAFETY_POLL_INTERVAL if local else SAFETY_POLL_INTERVAL
        await watcher.changed(self.path, seen, poll_after=max(self.poll_interval, safety))
        now = anyio.current_time()
        rest = self._last_look + min(self.poll_interval, BATCH_INTERVAL) - now
        if rest > 0:
            await anyio.sleep(rest)
            now = anyio.current_time()
        self._last_look = now

    def _poll_at_end(self, current: _Open, pos: int) -> tuple[bytes, RestartReason | None]:
        """At the end of the file: what was written since, or else whether it was truncated or replaced."""
        if os.fstat(current.fd).st_size > pos:
            return os.pread(current.fd, self.read_size, pos), None
        return b"", self._restart_reason(current, pos)

    def _restart_reason(self, current: _Open, pos: int) -> RestartReason | None:
        """At the end of the file: has it been truncated, or does the path name a new file now?"""
        st = os.fstat(current.fd)
        if st.st_size < pos:
            return "truncated"
        ident = _path_ident(self.path)
        if ident is None or ident == current.ident:
            # Gone with no successor yet: keep reading the old file until one appears.
            return None
        return "rotated" if st.st_nlink > 0 else "replaced"
