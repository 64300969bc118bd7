"""Linux inotify, for local files: wake a follower the moment its file (or its directory) changes.

A follower at the end of a quiet file would otherwise poll: a thread trip every poll per launch, and a
verdict that waits up to one poll interval. With inotify one thread blocks on one descriptor for all the
followers of the process, and wakes (in its event loop) only the follower whose file changed; polling stays
as a slow safety net (file systems that do not report changes, such as NFS).

The directory of each followed file is watched (not the file), so creation, appends, truncation, rotation
and replacement all wake its follower; the kernel gives a directory watched twice one descriptor, shared by
reference count. Without inotify (not Linux, or no free watch) `Watcher.get()` is None and followers poll.
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
from collections import defaultdict

from watchdog.clock import wake_up

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
        # path -> the futures of its waiting followers, each with the event loop it belongs to (plain asyncio
        # futures, not anyio Events: a follower waits once per change of its file, so this is a hot path)
        self._waiting: dict[str, list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]]] = defaultdict(
            list
        )
        self._thread: threading.Thread | None = None
        # path -> how many changes were seen (watched paths only): a follower notes it before it looks at its
        # file, so a change between its look and its wait is not lost
        self._generation: dict[str, int] = {}

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

    def generation(self, path: str) -> int:
        """How many changes of `path` were seen so far: note it before looking at the file."""
        with self._lock:
            return self._generation.get(path, 0)

    async def changed(self, path: str, since: int, poll_after: float | None = None) -> bool:
        """Wait until `path` (absolute, as given to `watch`) or its directory changed after `generation` was
        `since` (at once if it already has), or, with `poll_after`, until that many seconds passed (the caller
        then looks anyway: a safety poll, cheaper than a cancel scope on this hot path); True if it changed."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        entry = (loop, future)
        with self._lock:
            if self._generation.get(path, 0) != since:
                return True
            self._waiting[path].append(entry)
        timer = loop.call_later(poll_after, wake_up, future) if poll_after is not None else None
        try:
            await future
        finally:
            if timer is not None:
                timer.cancel()
            with self._lock:
                waiters = self._waiting.get(path)
                if waiters is not None and entry in waiters:
                    waiters.remove(entry)
                    if not waiters:
                        del self._waiting[path]
        with self._lock:
            return self._generation.get(path, 0) != since

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
            by_loop: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = defaultdict(list)
            for loop, future in woken:
                by_loop[loop].append(future)
            for loop, futures in by_loop.items():  # one wake-up of each event loop per read
                with contextlib.suppress(RuntimeError):  # that event loop has ended
                    loop.call_soon_threadsafe(_set_all, futures)

    def _woken(self, data: bytes) -> list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]]:
        paths: set[str] = set()
        pos = 0
        while pos + _EVENT.size <= len(data):
            wd, mask, _cookie, length = _EVENT.unpack_from(data, pos)
            name = data[pos + _EVENT.size : pos + _EVENT.size + length].rstrip(b"\0")
            pos += _EVENT.size + length
            if mask & _IN_Q_OVERFLOW:
                paths.update(self._generation)  # events were lost: everyone looks again
                continue
            directory = self._names.get(wd)
            if directory is None:
                continue
            if name:
                paths.add(os.path.join(directory, os.fsdecode(name)))
            else:  # the directory itself moved or went away
                paths.update(p for p in self._generation if os.path.dirname(p) == directory)
        for p in paths:
            if p in self._generation:
                self._generation[p] += 1
        return [entry for p in paths for entry in self._waiting.get(p, ())]


def _set_all(futures: list[asyncio.Future[None]]) -> None:
    for future in futures:
        wake_up(future)
