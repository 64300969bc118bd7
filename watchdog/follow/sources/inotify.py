"""Linux inotify, for local files: wake a follower the moment its file (or its directory) changes.

A follower at the end of a quiet file would otherwise poll: a thread trip every poll per launch, and a
verdict that waits up to one poll interval. With inotify one thread blocks on one descriptor for all the
followers of the process, and wakes (in its event loop) only the follower whose file changed; polling stays
as a slow safety net (file systems that do not report changes, such as NFS).

The directory of each followed file is watched (not the file), so creation, appends, truncation, rotation
and replacement all wake its follower; the kernel gives a directory watched twice one descriptor, shared by
reference count. Without inotify (not Linux, or no free watch) `Watcher.get()` is None and followers poll.

A wait may carry a `drive` callback (`Watcher.wait_for`): the files that one read of the descriptor says changed
are then served in one callback of their event loop, which calls each waiter's `drive` in turn (it reads its file
and hands the bytes on, `watchdog.follow.sources.local`), rather than waking each follower's task.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import functools
import os
import struct
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable

from watchdog.clock import wake_up

SLICE = 0.02  # seconds one callback of an event loop serves changed files for, at most (and one file more)

_IN_MODIFY = 0x2
_IN_ATTRIB = 0x4
_IN_CLOSE_WRITE = 0x8
_IN_MOVED_FROM = 0x40
_IN_MOVED_TO = 0x80
_IN_CREATE = 0x100
_IN_DELETE = 0x200
_IN_DELETE_SELF = 0x400
_IN_MOVE_SELF = 0x800
_IN_Q_OVERFLOW = 0x4000
_IN_CLOEXEC = os.O_CLOEXEC
_MASK = (
    _IN_MODIFY
    | _IN_ATTRIB
    | _IN_CLOSE_WRITE
    | _IN_MOVED_FROM
    | _IN_MOVED_TO
    | _IN_CREATE
    | _IN_DELETE
    | _IN_DELETE_SELF
    | _IN_MOVE_SELF
)
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then `len` bytes of name
# What changes only a file's bytes: any other event (created, moved, deleted, attributes) may change what its
# path names, and counts in `Watcher.renames` too.
_CONTENT = _IN_MODIFY | _IN_CLOSE_WRITE

# A waiting follower: its event loop, the future its task awaits, and the callback that serves a change in that
# loop without waking the task (None: the change sets the future's result, True)
_Waiter = tuple[asyncio.AbstractEventLoop, asyncio.Future[object], Callable[[], None] | None]


@functools.cache
def load_libc() -> ctypes.CDLL | None:
    """The C library (for inotify and statfs), None where it cannot be loaded or off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None


class Watcher:
    """One inotify descriptor and reading thread for the process; `changed(path)` waits for `path` to change."""

    def __init__(self, libc: ctypes.CDLL, fd: int) -> None:
        """Use `Watcher.get()`."""
        self._libc = libc
        self._fd = fd
        self._lock = threading.Lock()  # the maps below are read by the reading thread
        self._dirs: dict[str, int] = {}  # directory -> watch descriptor
        self._refs: dict[int, int] = defaultdict(int)  # watch descriptor -> followers using it
        self._names: dict[int, str] = {}  # watch descriptor -> directory
        # path -> its waiting followers (`_Waiter`: plain asyncio futures, not anyio Events: a follower waits once
        # per change of its file, so this is a hot path)
        self._waiting: dict[str, list[_Waiter]] = defaultdict(list)
        self._thread: threading.Thread | None = None
        # path -> how many changes were seen (watched paths only): a follower notes it before it looks at its
        # file, so a change between its look and its wait is not lost
        self._generation: dict[str, int] = {}
        # the safety polls of each event loop's waiting followers: future -> when it is woken anyway, and the one
        # timer that wakes those due (only that loop's thread touches its own: no lock). One timer per loop, not a
        # timer made and cancelled at each wait of each follower (a follower waits once per change of its file).
        self._polls: dict[asyncio.AbstractEventLoop, dict[asyncio.Future[object], float]] = {}
        self._sweeps: dict[asyncio.AbstractEventLoop, asyncio.TimerHandle] = {}
        # path -> how many of those may have changed what the path names (not only the file's bytes)
        self._renames: dict[str, int] = {}
        # (watch descriptor, an event's name bytes as read) -> the watched path they name: an append costs the
        # reading thread a look-up, not a decode and a join (only watched paths: what the thread finds anyway)
        self._named: dict[tuple[int, bytes], str] = {}

    @staticmethod
    @functools.cache
    def get() -> Watcher | None:
        """The process's watcher, or None where inotify is not there to be had (not Linux: no libc here)."""
        if os.environ.get("WATCHDOG_INOTIFY") == "0":
            return None  # WATCHDOG_INOTIFY=0: poll every local file (an escape hatch for odd file systems)
        try:
            libc = load_libc()
            if libc is None:
                return None
            fd = libc.inotify_init1(_IN_CLOEXEC)
        except AttributeError:
            return None
        return Watcher(libc, fd) if fd >= 0 else None

    def watch(self, path: str) -> bool:
        """Start watching the directory of `path`, an absolute path (counted); False if the kernel refuses
        (no such directory, no free watch)."""
        directory = os.path.dirname(path) or "/"
        with self._lock:
            wd = self._dirs.get(directory)
            if wd is None:
                wd = self._libc.inotify_add_watch(self._fd, os.fsencode(directory), _MASK)
                if wd < 0:
                    return False
                self._dirs[directory], self._names[wd] = wd, directory
            self._refs[wd] += 1
            self._generation.setdefault(path, 0)
            self._renames.setdefault(path, 0)
            if self._thread is None:
                self._thread = threading.Thread(target=self._read, name="watchdog-inotify", daemon=True)
                self._thread.start()
        return True

    def unwatch(self, path: str) -> None:
        """Stop watching for `path` (the directory's watch ends with its last follower)."""
        directory = os.path.dirname(path) or "/"
        with self._lock:
            wd = self._dirs.get(directory)
            if wd is None:
                return
            self._refs[wd] -= 1
            if self._refs[wd] <= 0:
                self._libc.inotify_rm_watch(self._fd, wd)
                del self._dirs[directory], self._refs[wd], self._names[wd]
                # the kernel may give the number to another directory
                self._named = {key: path for key, path in self._named.items() if key[0] != wd}

    def generation(self, path: str) -> int:
        """How many changes of `path` were seen so far: note it before looking at the file."""
        return self._generation.get(path, 0)  # one int read under the GIL: no lock on this hot path

    def renames(self, path: str) -> int:
        """How many of the changes of `path` seen so far may have changed what the path names (created, moved,
        deleted: not appends); while it stays the same, the path names the file it named (a local file
        system)."""
        return self._renames.get(path, 0)  # one int read under the GIL: no lock on this hot path

    async def changed(
        self,
        path: str,
        since: int,
        poll_after: float | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> bool:
        """Wait until `path` (absolute, as given to `watch`) or its directory changed after `generation` was
        `since` (at once if it already has), or, with `poll_after`, until that many seconds passed (the caller
        then looks anyway: a safety poll, cheaper than a cancel scope on this hot path); True if it changed.
        `loop`: the running event loop, where the caller has it at hand."""
        loop = loop or asyncio.get_running_loop()
        future = self.wait_for(path, since, poll_after, loop)
        if future is not None:
            try:
                await future
            finally:
                self.waited(path, future, poll_after, loop)
        return self._generation.get(path, 0) != since  # one int read under the GIL

    def wait_for(
        self,
        path: str,
        since: int,
        poll_after: float | None,
        loop: asyncio.AbstractEventLoop,
        drive: Callable[[], None] | None = None,
    ) -> asyncio.Future[object] | None:
        """`changed` without its coroutine, for a caller that awaits the future itself (a follower's wait, once
        per read of a growing file): None if `path` already changed after `since`; else a future done when it
        changes or the safety poll is due, after which (or a cancel) the caller calls `waited`.

        `drive`: called in `loop` when `path` changes, instead of setting the future's result (the future is left
        as it is: the callback serves the change itself, and either sets the future's result, or waits again with
        `rearm`); with the other files that one read of the descriptor says changed, in one callback of the loop.
        """
        future: asyncio.Future[object] = loop.create_future()
        with self._lock:
            if self._generation.get(path, 0) != since:
                return None
            self._waiting[path].append((loop, future, drive))
        if poll_after is not None:
            self._poll_at(loop, future, loop.time() + poll_after)
        return future

    def rearm(
        self,
        path: str,
        since: int,
        poll_after: float | None,
        loop: asyncio.AbstractEventLoop,
        future: asyncio.Future[object],
        drive: Callable[[], None],
    ) -> bool:
        """From a `drive` callback: wait again with the same future and callback for `path` to change after
        `since`, its safety poll `poll_after` seconds from now (as a new wait's); False if it already has changed
        (nothing is registered)."""
        with self._lock:
            if self._generation.get(path, 0) != since:
                return False
            self._waiting[path].append((loop, future, drive))
        if poll_after is not None:
            polls = self._polls.get(loop)
            if polls is not None and future in polls:  # (not swept: its timer is due no later than this)
                polls[future] = loop.time() + poll_after
        return True

    def waited(
        self,
        path: str,
        future: asyncio.Future[object],
        poll_after: float | None,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        """The wait on `future` (from `wait_for`, with the same arguments) has ended, woken or cancelled."""
        if poll_after is not None:
            self._unpoll(loop, future)
        if future.cancelled() or future.result() is not True:
            # not woken by the reading thread (which took it off the list): a safety poll, a cancel, or its `drive`
            # (which may have waited again before it gave up)
            with self._lock:
                waiters = self._waiting.get(path)
                if waiters is not None:
                    waiters[:] = [w for w in waiters if w[1] is not future]
                    if not waiters:
                        del self._waiting[path]

    def _poll_at(self, loop: asyncio.AbstractEventLoop, future: asyncio.Future[object], at: float) -> None:
        polls = self._polls.get(loop)
        if polls is None:
            polls = self._polls[loop] = {}
        polls[future] = at
        sweep = self._sweeps.get(loop)
        if sweep is None or at < sweep.when():
            if sweep is not None:
                sweep.cancel()
            self._sweeps[loop] = loop.call_at(at, self._sweep, loop)

    def _unpoll(self, loop: asyncio.AbstractEventLoop, future: asyncio.Future[object]) -> None:
        polls = self._polls.get(loop)
        if polls is None:
            return  # swept, the last of its loop
        polls.pop(future, None)
        if not polls:  # none left: no timer outlives them (nor the loop, in a test)
            del self._polls[loop]
            self._sweeps.pop(loop).cancel()

    def _sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        # the loop's safety polls that are due: their followers look at their files (nothing woke them)
        del self._sweeps[loop]
        polls = self._polls[loop]
        now = loop.time()
        for future in [future for future, at in polls.items() if at <= now]:
            del polls[future]
            wake_up(future)
        if polls:
            self._sweeps[loop] = loop.call_at(min(polls.values()), self._sweep, loop)
        else:
            del self._polls[loop]

    def _read(self) -> None:
        # the reading thread: blocks on the descriptor, wakes the followers of what changed in their loops
        while True:
            try:
                data = os.read(self._fd, 64 * 1024)
            except InterruptedError:
                continue
            except OSError:
                return
            with self._lock:
                woken = self._woken(data)
            by_loop: dict[asyncio.AbstractEventLoop, list[_Waiter]] = defaultdict(list)
            for waiter in woken:
                by_loop[waiter[0]].append(waiter)
            for loop, waiters in by_loop.items():  # one wake-up of each event loop per read
                with contextlib.suppress(RuntimeError):  # that event loop has ended
                    loop.call_soon_threadsafe(_set_all, waiters)

    def _woken(self, data: bytes) -> list[_Waiter]:
        paths: set[str] = set()
        renamed: set[str] = set()
        pos, size, end, unpack, named = 0, _EVENT.size, len(data), _EVENT.unpack_from, self._named
        while pos + size <= end:
            wd, mask, _cookie, length = unpack(data, pos)
            start = pos + size
            pos = start + length
            if mask & _IN_Q_OVERFLOW:
                paths.update(self._generation)  # events were lost: everyone looks again
                renamed.update(self._generation)
                continue
            if length:  # a name (NUL-padded) in the directory
                key = (wd, data[start:pos])
                path = named.get(key)
                if path is None:
                    directory = self._names.get(wd)
                    if directory is None:
                        continue
                    path = os.path.join(directory, os.fsdecode(key[1].rstrip(b"\0")))
                    if path in self._generation:
                        named[key] = path
                paths.add(path)
                if mask & ~_CONTENT:
                    renamed.add(path)
                continue
            directory = self._names.get(wd)
            if directory is None:
                continue
            # no name: the directory itself moved or went away
            gone = [p for p in self._generation if os.path.dirname(p) == directory]
            paths.update(gone)
            renamed.update(gone)
        for p in renamed:
            if p in self._renames:
                self._renames[p] += 1
        for p in paths:
            if p in self._generation:
                self._generation[p] += 1
        # taken off the lists here: a follower woken by the thread has nothing to undo (no lock to take)
        return [entry for p in paths for entry in self._waiting.pop(p, ())]


def _set_all(waiters: list[_Waiter], start: int = 0) -> None:
    # in the waiters' event loop: the files one read of the descriptor said changed, served in one callback, or in
    # several where they take longer than SLICE (200 launches written at once: each callback a slice of them, the
    # HTTP server's and the other tasks' callbacks in between)
    ends = time.perf_counter() + SLICE
    last = len(waiters) - 1
    for i in range(start, last + 1):
        _loop, future, drive = waiters[i]
        if drive is None:
            wake_up(future, True)  # True: woken by the reading thread, off the list (see `Watcher.changed`)
        elif not future.done():  # (done: cancelled, or its safety poll came first; its task takes over)
            drive()
            if i < last and time.perf_counter() >= ends:
                _loop.call_soon(_set_all, waiters, i + 1)
                return
