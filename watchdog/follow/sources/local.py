"""Follow a local file: read to the end, then wait for appends, rotation and truncation (woken by inotify
where there is one, with a slow poll as a safety net; by polling elsewhere)."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Generator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, cast

import anyio

from watchdog.clock import wake_up
from watchdog.exceptions import UsageError
from watchdog.follow.sources.base import (
    CaughtUp,
    Chunk,
    FileMissing,
    FileRestarted,
    RestartReason,
    SourceItem,
)
from watchdog.follow.sources.identity import FileIdentity, last_bytes, local_identity
from watchdog.follow.sources.inotify import Watcher, load_libc
from watchdog.vocabulary import file_kind

DEFAULT_POLL_INTERVAL = 0.25
# With inotify, a quiet file is still looked at this often: on a file system that does not report every change
# (NFS: another machine's writes), and, on a local one, in case the watcher has stopped.
SAFETY_POLL_INTERVAL = 2.0
LOCAL_SAFETY_POLL_INTERVAL = 10.0
# With inotify, a file that changes all the time is read at most this often: its lines come in batches.
BATCH_INTERVAL = 0.02
DEFAULT_READ_SIZE = 1 << 16
# The first bytes of the file, compared at each look at its end (as Vector and Fluent Bit fingerprint a file):
# a log truncated and written again in one go, to the size it had (`: > log` and a relaunch's first lines
# within one poll), has the same inode and size, but not the same first bytes (its banner's times differ).
FINGERPRINT = 256

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
    head: bytes = b""  # its first FINGERPRINT bytes, as read (fewer in a shorter file)
    tail: bytes = b""  # its last FINGERPRINT bytes read (those just before the offset read to)


def _on_local_fs(fd: int) -> bool:
    """Whether the open file `fd` is on a local disk or in memory (Linux `fstatfs`; False when unknown)."""
    libc = load_libc()
    if libc is None:
        return False
    buf = ctypes.create_string_buffer(256)  # struct statfs is 120 bytes on 64-bit Linux
    if libc.fstatfs(fd, buf) != 0:
        return False
    return ctypes.c_long.from_buffer(buf).value in _LOCAL_FS  # f_type comes first, a word wide


@dataclass(frozen=True, slots=True)
class _Request:
    """What the follower's generator needs awaited: a wait (`wait`), or else a call in a worker thread."""

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    wait: bool = False


_PAUSE = _Request(asyncio.sleep, (0,), wait=True)  # a trip round the event loop, nothing else


class _Changed:
    """A wait at the file's end, until inotify says its path changed (or the safety poll): `_Follow` awaits the
    watcher's future itself (`Watcher.wait_for`), with no coroutine of the watcher's between (once a read)."""

    __slots__ = ("loop", "path", "poll_after", "since", "watcher")

    def __init__(
        self, watcher: Watcher, path: str, since: int, poll_after: float, loop: asyncio.AbstractEventLoop
    ) -> None:
        self.watcher, self.path, self.since, self.poll_after, self.loop = (
            watcher,
            path,
            since,
            poll_after,
            loop,
        )


def _in_daemon_thread(fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
    """Call `fn(*args)` in a daemon thread of its own; its result (or error) on the returned future.

    Awaited through `asyncio.shield`, a wait for it can be cancelled while the call goes on: a read hung on a
    network file system (a dead NFS server) never holds up `watch --timeout` or a stop, nor, the thread being a
    daemon one, the interpreter's exit (anyio's worker threads are joined at exit).
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def deliver(ok: bool, value: Any) -> None:
        if future.done():
            return
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)

    def run() -> None:
        try:
            value, ok = fn(*args), True
        except Exception as exc:  # handed to the waiting task, which raises it
            value, ok = exc, False
        try:
            loop.call_soon_threadsafe(deliver, ok, value)
        except RuntimeError:  # the loop is closed: nobody waits for it any more
            _discard(value)

    threading.Thread(target=run, name="watchdog-file-read", daemon=True).start()
    return future


def _discard(value: object) -> None:
    # a file opened for a wait nobody takes the result of any more
    if isinstance(value, _Open):
        os.close(value.fd)


_DRIVEN = (
    object()
)  # the result of a wait's future set by `_Follow._drive`: the generator moved on without the task


class _Follow:
    """Runs a follower's generator: its items are returned, its requests awaited and their results sent back.

    Cancelling a wait for the next item loses nothing: the generator is still where it was, and the next
    `__anext__` waits for the same request's call, still under way or done meanwhile (its result is kept).

    `Pushes`: with `push` set (and `merge`), every item goes to `push` first, and a change inotify reports is served
    in the event loop's callback that reports it (`Watcher.wait_for`'s `drive`), with every other file that changed
    at once, not in the consumer's task: the generator reads on, each item goes to `push`, and the task stays
    asleep until an item or a request needs it (`_drive`).
    """

    def __init__(self, steps: Generator[SourceItem | _Request | _Changed, object, None]) -> None:
        self._steps = steps
        # `Merges`: a read's CaughtUp comes with its last chunk (the generator's way); unset, it comes after it
        self.merge = False
        # `Pushes`: takes an item outside the consumer's task; None: taken, else what the iteration gives instead
        self.push: Callable[[SourceItem], object] | None = None
        self._then: CaughtUp | None = None  # the CaughtUp a chunk just given came with (merge unset)
        self._request: _Request | _Changed | None = None  # made and not yet answered
        self._call: asyncio.Future[Any] | None = None  # the request's call in a worker thread, once made
        self._answer: object = None
        self._answered = False
        self._future: asyncio.Future[object] | None = (
            None  # the task's wait for a change, while `_drive` may run
        )
        # what `_drive` left for the task: an item to give, the generator's end, or an error to raise
        self._driven: tuple[object, bool, BaseException | None] | None = None

    def __aiter__(self) -> _Follow:
        return self

    async def __anext__(self) -> SourceItem:
        then = self._then
        if then is not None:
            self._then = None
            return then
        steps = self._steps
        while True:
            driven = self._driven
            if driven is not None:
                self._driven = None
                out, ended, error = driven
                if error is not None:
                    raise error
                if ended:
                    raise StopAsyncIteration
                if out is not None:
                    return cast("SourceItem", out)
            request = self._request
            if request is not None:
                if isinstance(request, _Changed):
                    watcher = request.watcher
                    drive = self._drive if self.push is not None and self.merge else None
                    future = watcher.wait_for(
                        request.path, request.since, request.poll_after, request.loop, drive
                    )
                    if future is not None:
                        self._future = future
                        try:
                            await future
                        finally:
                            self._future = None
                            watcher.waited(request.path, future, request.poll_after, request.loop)
                        if future.result() is _DRIVEN:
                            continue  # `_drive` ran the generator on: what it left is taken above
                elif request.wait:
                    await request.fn(*request.args)
                elif not self._answered:
                    if self._call is None:
                        self._call = _in_daemon_thread(request.fn, *request.args)
                    # a cancelled wait leaves the call under way: the next one takes its result
                    self._answer = await asyncio.shield(self._call)
                    self._call, self._answered = None, True
                    await anyio.lowlevel.checkpoint()
            answer, self._request, self._answer, self._answered = self._answer, None, None, False
            try:
                step = steps.send(answer)
            except StopIteration:
                raise StopAsyncIteration from None
            if isinstance(step, (_Request, _Changed)):
                self._request = step
                continue
            if not self.merge:
                if type(step) is Chunk and step.caught_up:
                    self._then = CaughtUp(step.end)
                    return Chunk(step.offset, step.data, step.file, step.cursor)
            elif self.push is not None:
                # the items the task reads itself (after a request it awaited) go to `push` first too
                out = self.push(step)
                if out is None:
                    continue
                return cast("SourceItem", out)
            return step

    def _drive(self) -> None:
        # In the event loop, out of the consumer's task (which awaits `_future`): the file of the `_Changed` waited
        # for changed. The generator goes on as `__anext__` would run it, its items handed to `push`, until it waits
        # for a change again (the task sleeps on) or needs the task: a request to await, an item `push` gives back,
        # its end or an error (left in `_driven` for the task, woken).
        future, request = self._future, self._request
        if future is None or future.done() or not isinstance(request, _Changed):
            return  # the task took over meanwhile (woken by its safety poll, or cancelled)
        push = self.push
        assert push is not None
        out: object = None
        ended, error = False, None
        try:
            while True:
                step = self._steps.send(None)
                if isinstance(step, _Changed):
                    if step.watcher.rearm(
                        step.path, step.since, step.poll_after, step.loop, future, self._drive
                    ):
                        self._request = step
                        return  # waits again: the task sleeps on
                    continue  # changed since: look again
                if isinstance(step, _Request):
                    self._request = step
                    break
                out = push(step)
                if out is not None:
                    self._request = None
                    break
        except StopIteration:
            ended = True
        except Exception as exc:  # raised by the task, as the iteration's own would be
            error = exc
        if ended or error is not None:
            self._request = None
        self._driven = (out, ended, error)
        wake_up(future, _DRIVEN)

    async def aclose(self) -> None:
        """Close the generator: its `finally` closes the file and ends the watch (a call still under way
        closes the file it opens once it returns)."""
        call, self._call = self._call, None
        if call is not None:
            call.add_done_callback(
                lambda done: None if done.cancelled() or done.exception() else _discard(done.result())
            )
        if self._answered:
            _discard(self._answer)
        self._steps.close()


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


def _took(current: _Open, pos: int, data: bytes) -> None:
    """Keep the file's first bytes, and its last ones read, from the bytes read at `pos`."""
    if len(current.head) == pos < FINGERPRINT:
        current.head += data[: FINGERPRINT - pos]
    current.tail = last_bytes(current.tail, data, FINGERPRINT)


def _rewritten(current: _Open, pos: int) -> bool:
    """Whether the file's first bytes, or its last ones before `pos` (of those read), are no longer what was
    read: it was cut and written again, perhaps to the same size or beyond (a relaunch within the same second
    prints the same first bytes: its banner's times are the same; its last ones differ)."""
    want = min(FINGERPRINT, pos)
    if not want:
        return False
    if len(current.head) < want:
        # resumed past them (a checkpoint, whose own check compared them): they are as they are now
        current.head = os.pread(current.fd, want, 0)
        return False
    if os.pread(current.fd, want, 0) != current.head[:want]:
        return True
    if not current.tail:  # resumed at `pos` and nothing read since
        return False
    return os.pread(current.fd, len(current.tail), pos - len(current.tail)) != current.tail


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
    gives `FileRestarted("truncated")`, and so does the same file whose first `FINGERPRINT` bytes changed (cut
    and written again within one poll, to the same size or past the offset read: `tail -f` misses that).
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

    def open_follow(
        self, offset: int = 0, cursor: str | None = None
    ) -> AbstractAsyncContextManager[AsyncIterator[SourceItem]]:
        """Follow the file from byte `offset` (a file needs no cursor); see `watchdog.follow.sources.base.Source`."""
        if offset < 0:
            raise ValueError("offset must not be negative")
        return contextlib.aclosing(_Follow(self._steps(offset)))

    def unmodified_for(self) -> float | None:
        """Seconds since the file at the path was last modified (its mtime; 0 for one modified in the future, a
        clock set back); None if there is no file there (see `watchdog.follow.sources.base.Aged`)."""
        try:
            modified = os.stat(self.path).st_mtime
        except OSError:
            return None
        return max(0.0, time.time() - modified)

    async def identify(self, offset: int) -> FileIdentity | None:
        """What the file at the path is, read around `offset` (see `watchdog.follow.sources.identity`); None if there
        is no regular file there."""
        # in a daemon thread, as the reads are: a hung network file system never holds up a stop
        result: FileIdentity | None = await asyncio.shield(
            _in_daemon_thread(local_identity, self.path, offset)
        )
        return result

    def _steps(self, offset: int) -> Generator[SourceItem | _Request | _Changed, object, None]:
        # The follower as a plain generator: it yields the items, and a `_Request` for each wait or worker-thread
        # call, whose result is sent back in (`_Follow` runs them). A local file's reads are done right here.
        current: _Open | None = None
        pending: RestartReason | None = None
        announced_missing = False
        at_end = False  # CaughtUp sent and nothing read since
        pos = offset
        # the watcher's `renames` count when the path was last looked at: while it stays the same (and the file
        # system is local, where inotify sees every change), the path names the same file, with no stat to ask
        named: int | None = None
        watcher = Watcher.get() if self.use_inotify else None
        if watcher is not None and not watcher.watch(self.path):
            watcher = None  # the kernel refused a watch (no directory, no free watch): poll
        loop = asyncio.get_running_loop()  # its clock is anyio's, without anyio's look-up of the backend
        # the one wait request of this follow, its `since` and `poll_after` set at each wait (a wait per read of a
        # growing file: no object made for it)
        changed = _Changed(watcher, self.path, 0, 0.0, loop) if watcher is not None else None
        local_poll = max(self.poll_interval, LOCAL_SAFETY_POLL_INTERVAL)
        batch = min(self.poll_interval, BATCH_INTERVAL)
        try:
            while True:
                if current is None:
                    seen = watcher.generation(self.path) if watcher is not None else 0
                    current = cast("_Open | None", (yield _Request(_open, (self.path,))))
                    if current is None:
                        if not announced_missing:
                            announced_missing = True
                            yield FileMissing(self.path)
                        yield from self._wait(changed, seen, False, loop)
                        continue
                    named = None
                    size = os.fstat(current.fd).st_size
                    if pending is None and pos > size:
                        # Resuming past the end: the file was cut while nobody was reading.
                        pending = "truncated"
                    if pending is not None:
                        yield FileRestarted(pending)
                        pending, pos = None, 0
                local = current.local
                seen = watcher.generation(self.path) if watcher is not None else 0
                data: bytes
                if at_end:
                    # one look per poll of a quiet file: more data, or a restart, or nothing
                    look = (current, pos)
                    data, pending = (
                        self._poll_at_end(*look)
                        if local
                        else cast(
                            "tuple[bytes, RestartReason | None]", (yield _Request(self._poll_at_end, look))
                        )
                    )
                else:
                    read = (current.fd, self.read_size, pos)
                    data = os.pread(*read) if local else cast("bytes", (yield _Request(os.pread, read)))
                if data:
                    # a short read of a regular file ends where the file ended: no second read to find that out,
                    # and the chunk is the read's CaughtUp as well (`_Follow` gives that apart where not merged)
                    caught_up = len(data) < self.read_size
                    chunk = Chunk(pos, data, caught_up=caught_up)
                    _took(current, pos, data)
                    pos += len(data)
                    at_end = False
                    yield chunk
                    if not caught_up:
                        if local:  # a log read in bulk lets other tasks run between its reads
                            yield _PAUSE
                        continue  # there may be more at once
                elif not at_end:
                    caught_up = True
                    yield CaughtUp(pos)
                else:
                    caught_up = False
                if caught_up:
                    at_end = True
                    # after a short read the file ended at `pos` a moment ago, and the bytes just read are
                    # those kept: only whether the path names another file is left to ask (2 syscalls, not 5)
                    end_look = (current, pos, bool(data))
                    if not local:
                        pending = cast(
                            "RestartReason | None", (yield _Request(self._restart_reason, end_look))
                        )
                    elif watcher is None or not data or named != watcher.renames(self.path):
                        if watcher is not None:
                            named = watcher.renames(self.path)  # noted before the look, as `seen` is
                        pending = self._restart_reason(*end_look)
                    else:
                        pending = None  # nothing was created, moved or deleted there since the last look
                if pending == "truncated":
                    yield FileRestarted(pending)
                    pending, pos, at_end, current.head = None, 0, False, b""
                    current.tail = b""
                elif pending is not None:
                    # Whatever the writer added to the old file before it was rotated away.
                    while True:
                        read = (current.fd, self.read_size, pos)
                        data = os.pread(*read) if local else cast("bytes", (yield _Request(os.pread, read)))
                        if not data:
                            break
                        yield Chunk(pos, data)
                        pos += len(data)
                        if local:
                            yield _PAUSE
                    os.close(current.fd)
                    current, at_end = None, False
                elif changed is not None and local:
                    # `_wait`, inline: a wait per read of a growing local file, with no generator made for it
                    changed.since, changed.poll_after = seen, local_poll
                    yield changed
                    now = loop.time()
                    until = self._last_look + batch
                    if until > now:
                        # a deadline, not a duration: a wait cancelled and taken up again does not start over
                        yield _Request(anyio.sleep_until, (until,), wait=True)
                        now = loop.time()
                    self._last_look = now
                else:
                    yield from self._wait(changed, seen, local, loop)
        finally:
            if current is not None:
                os.close(current.fd)
            if watcher is not None:
                watcher.unwatch(self.path)

    def _wait(
        self, changed: _Changed | None, seen: int, local: bool, loop: asyncio.AbstractEventLoop
    ) -> Generator[_Request | _Changed, object, None]:
        # At the end of the file (or while it is missing): until it changes, or the next poll. A file that
        # changes all the time is still looked at once per `BATCH_INTERVAL` at most (its lines come in
        # batches): inotify saves the looks at quiet files, and the wait for the first line after one.
        # The waits are requests of the follower's generator (`yield from`): `_Follow` awaits the watcher's
        # future itself, with no coroutine between (a wait per read of a growing file).
        if changed is None:  # no watcher: a poll
            yield _Request(anyio.sleep, (self.poll_interval,), wait=True)
            return
        safety = LOCAL_SAFETY_POLL_INTERVAL if local else SAFETY_POLL_INTERVAL
        changed.since, changed.poll_after = seen, max(self.poll_interval, safety)
        yield changed
        now = loop.time()
        until = self._last_look + min(self.poll_interval, BATCH_INTERVAL)
        if until > now:
            yield _Request(anyio.sleep_until, (until,), wait=True)  # a deadline, as in `_steps`
            now = loop.time()
        self._last_look = now

    def _poll_at_end(self, current: _Open, pos: int) -> tuple[bytes, RestartReason | None]:
        """At the end of the file: what was written since, or else whether it was truncated or replaced."""
        back = len(current.tail)
        if back and len(current.head) >= min(FINGERPRINT, pos):
            # one read for the last bytes read and what follows them: the check of those and the data at once
            got = os.pread(current.fd, self.read_size + back, pos - back)
            if len(got) > back:
                if (
                    not got.startswith(current.tail)
                    or os.pread(current.fd, len(current.head), 0) != current.head
                ):
                    return b"", "truncated"  # cut and written again past where it was read: not an append
                return got[back:], None
            return b"", self._restart_reason(current, pos)
        data = os.pread(current.fd, self.read_size, pos)  # at the end of a regular file: b""
        if data and _rewritten(current, pos):
            # cut and written again past where it was read: what follows the offset is not an append
            return b"", "truncated"
        return data, None if data else self._restart_reason(current, pos)

    def _restart_reason(self, current: _Open, pos: int, just_read: bool = False) -> RestartReason | None:
        """At the end of the file: has it been truncated (shorter, or other first bytes), or does the path
        name a new file now? `just_read`: a short read just ended at `pos` (not shorter, and its last bytes are
        those read: only the path is looked at)."""
        if not just_read and (os.fstat(current.fd).st_size < pos or _rewritten(current, pos)):
            return "truncated"
        ident = _path_ident(self.path)
        if ident is None or ident == current.ident:
            # Gone with no successor yet: keep reading the old file until one appears.
            return None
        return "rotated" if os.fstat(current.fd).st_nlink > 0 else "replaced"
