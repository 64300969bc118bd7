"""Follow a local file: read to the end, then wait for appends, rotation and truncation (woken by inotify
where there is one, with a slow poll as a safety net; by polling elsewhere)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

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
)
from watchdog.sources.inotify import Watcher

__all__ = ["DEFAULT_POLL_INTERVAL", "DEFAULT_READ_SIZE", "LocalSource"]

DEFAULT_POLL_INTERVAL = 0.25
SAFETY_POLL_INTERVAL = 2.0  # with inotify: a quiet file is still looked at this often (NFS, lost events)
DEFAULT_READ_SIZE = 1 << 16


@dataclass
class _Open:
    """The file being read: its descriptor and identity."""

    fd: int
    ident: tuple[int, int]


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
    return _Open(fd=fd, ident=(st.st_dev, st.st_ino))


def _path_ident(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


class LocalSource:
    """A file on this machine, followed by polling `os.stat` and reading what was appended.

    Appends are read as soon as they are seen; while data keeps coming the follower reads again
    at once, and only sleeps `poll_interval` when it has reached the end of the file.

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
            poll_interval: seconds to wait at the end of the file before looking again (with inotify: the
                longest wait; a change wakes the follower at once, and a quiet file is looked at every
                `SAFETY_POLL_INTERVAL` seconds).
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
                            await sink.send(FileMissing(self.path))
                        await self._wait(watcher, seen)
                        continue
                    size = os.fstat(current.fd).st_size
                    if pending is None and pos > size:
                        # Resuming past the end: the file was cut while nobody was reading.
                        pending = "truncated"
                    if pending is not None:
                        await sink.send(FileRestarted(pending))
                        pending, pos = None, 0
                seen = watcher.generation(self.path) if watcher is not None else 0
                if at_end:
                    # one trip to a worker thread per poll of a quiet file: more data, or a restart, or nothing
                    data, pending = await anyio.to_thread.run_sync(self._poll_at_end, current, pos)
                else:
                    data = await anyio.to_thread.run_sync(os.pread, current.fd, self.read_size, pos)
                if data:
                    await sink.send(Chunk(pos, data))
                    pos += len(data)
                    at_end = False
                    continue
                if not at_end:
                    at_end = True
                    await sink.send(CaughtUp(pos))
                    pending = await anyio.to_thread.run_sync(self._restart_reason, current, pos)
                if pending == "truncated":
                    await sink.send(FileRestarted(pending))
                    pending, pos, at_end = None, 0, False
                elif pending is not None:
                    # Whatever the writer added to the old file before it was rotated away.
                    while data := await anyio.to_thread.run_sync(os.pread, current.fd, self.read_size, pos):
                        await sink.send(Chunk(pos, data))
                        pos += len(data)
                    os.close(current.fd)
                    current, at_end = None, False
                else:
                    await self._wait(watcher, seen)
        finally:
            if current is not None:
                os.close(current.fd)
            if watcher is not None:
                watcher.unwatch(self.path)

    async def _wait(self, watcher: Watcher | None, seen: int) -> None:
        # At the end of the file (or while it is missing): until it changes, or the next poll. A file that
        # changes all the time is still looked at once per poll interval at most (its lines come in batches,
        # as when polling): inotify saves the looks at quiet files, and the wait for the first line after one.
        if watcher is None:
            await anyio.sleep(self.poll_interval)
            return
        with anyio.move_on_after(max(self.poll_interval, SAFETY_POLL_INTERVAL)):
            await watcher.changed(self.path, seen)
        rest = self._last_look + self.poll_interval - anyio.current_time()
        if rest > 0:
            await anyio.sleep(rest)
        self._last_look = anyio.current_time()

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
