"""Tests for watchdog.follow.sources.local: following a local file through appends, rotation and truncation."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from watchdog.exceptions import UsageError
from watchdog.follow.sources import local as local_module
from watchdog.follow.sources.base import CaughtUp, Chunk, FileMissing, FileRestarted, Merges, SourceItem
from watchdog.follow.sources.inotify import Watcher
from watchdog.follow.sources.local import LocalSource, _Changed

pytestmark = pytest.mark.anyio

FAST = 0.02
# How long a follower at the end of an unchanged file must stay silent: many poll intervals.
QUIET = 0.5


async def next_item(items: AsyncIterator[SourceItem], within: float = 5.0) -> SourceItem:
    """The next item other than CaughtUp (the tests of chunks and file events look past it)."""
    with anyio.fail_after(within):
        while True:
            item = await anext(items)
            if not isinstance(item, CaughtUp):
                return item


async def read_until(items: AsyncIterator[SourceItem], size: int, within: float = 5.0) -> bytes:
    """Collect chunks until `size` bytes of the current file have been read; check offsets."""
    data = b""
    with anyio.fail_after(within):
        while len(data) < size:
            item = await next_item(items)
            assert isinstance(item, Chunk), item
            assert item.offset == len(data)
            data += item.data
    assert len(data) == size
    return data


async def next_event(items: AsyncIterator[SourceItem], within: float = 5.0) -> SourceItem:
    """The next item other than CaughtUp, which the caller expects to be an event."""
    return await next_item(items, within)


async def read_to_caught_up(
    items: AsyncIterator[SourceItem], end: int, start: int = 0, within: float = 5.0
) -> bytes:
    """Exactly: chunks covering bytes `start`..`end` in order, then CaughtUp(end) and nothing between."""
    data = b""
    with anyio.fail_after(within):
        while start + len(data) < end:
            item = await anext(items)
            assert isinstance(item, Chunk), f"{item!r} before byte {end} was delivered"
            assert item.offset == start + len(data)
            data += item.data
        assert start + len(data) == end
        assert await anext(items) == CaughtUp(end)
    return data


def append_now(path: Path, data: bytes) -> None:
    """Append bytes to a file, as a log writer does."""
    with path.open("ab") as file:
        file.write(data)


async def assert_quiet(items: AsyncIterator[SourceItem], window: float = QUIET) -> None:
    """No item at all arrives within `window` seconds (waits for an absence, so it takes the window)."""
    item: SourceItem | None = None
    with anyio.move_on_after(window):
        item = await anext(items)
    assert item is None, f"{item!r} arrived while the file did not change"


async def test_follows_appends(tmp_path: Path) -> None:
    """Bytes already there and bytes appended later arrive in order with absolute offsets."""
    log = tmp_path / "x.log"
    log.write_bytes(b"first line\n")
    async with LocalSource(log, poll_interval=FAST).open_follow() as items:
        assert await read_until(items, 11) == b"first line\n"
        with log.open("ab") as file:
            file.write(b"second\nthi")
            file.flush()
            got = b""
            with anyio.fail_after(5):
                while len(got) < 10:
                    item = await next_item(items)
                    assert isinstance(item, Chunk)
                    assert item.offset == 11 + len(got)
                    got += item.data
            assert got == b"second\nthi"
            file.write(b"rd\n")
        assert await next_item(items) == Chunk(21, b"rd\n")


async def test_starts_at_offset(tmp_path: Path) -> None:
    """Reading starts at the requested byte offset of the current file."""
    log = tmp_path / "x.log"
    log.write_bytes(b"0123456789")
    async with LocalSource(log, poll_interval=FAST).open_follow(4) as items:
        assert await next_item(items) == Chunk(4, b"456789")


async def test_reads_without_waiting_while_data_keeps_coming(tmp_path: Path) -> None:
    """A file larger than one read is read chunk after chunk without the poll interval between."""
    log = tmp_path / "x.log"
    payload = os.urandom(300_000)
    log.write_bytes(payload)
    source = LocalSource(log, poll_interval=30.0, read_size=4096)
    async with source.open_follow() as items:
        assert await read_until(items, len(payload), within=5.0) == payload


async def test_waits_for_missing_file(tmp_path: Path) -> None:
    """A log that does not exist yet gives FileMissing once, then its bytes when it appears."""
    log = tmp_path / "later.log"
    async with LocalSource(log, poll_interval=FAST).open_follow() as items:
        assert await next_event(items) == FileMissing(str(log))
        log.write_bytes(b"hello\n")
        assert await read_until(items, 6) == b"hello\n"


async def test_rotation(tmp_path: Path) -> None:
    """Rename + create: the old file is read to its end, then FileRestarted('rotated') and the new file."""
    log = tmp_path / "x.log"
    log.write_bytes(b"old 1\n")
    async with LocalSource(log, poll_interval=FAST).open_follow() as items:
        assert await read_until(items, 6) == b"old 1\n"
        log.rename(tmp_path / "x.log.1")
        with (tmp_path / "x.log.1").open("ab") as old:
            old.write(b"old 2\n")
        assert await next_item(items) == Chunk(6, b"old 2\n")
        log.write_bytes(b"new 1\n")
        assert await next_event(items) == FileRestarted("rotated")
        assert await read_until(items, 6) == b"new 1\n"


async def test_truncation(tmp_path: Path) -> None:
    """copytruncate: the same file cut shorter gives FileRestarted('truncated') and reading from 0."""
    log = tmp_path / "x.log"
    log.write_bytes(b"a long first incarnation\n")
    async with LocalSource(log, poll_interval=FAST).open_follow() as items:
        await read_until(items, 25)
        os.truncate(log, 0)
        assert await next_event(items) == FileRestarted("truncated")
        with log.open("ab") as file:
            file.write(b"second\n")
        assert await read_until(items, 7) == b"second\n"


async def test_replacement(tmp_path: Path) -> None:
    """A new file moved over the path (old one unlinked) gives FileRestarted('replaced')."""
    log = tmp_path / "x.log"
    log.write_bytes(b"launch 1\n")
    async with LocalSource(log, poll_interval=FAST).open_follow() as items:
        await read_until(items, 9)
        fresh = tmp_path / "fresh"
        fresh.write_bytes(b"launch 2\n")
        os.replace(fresh, log)
        assert await next_event(items) == FileRestarted("replaced")
        assert await read_until(items, 9) == b"launch 2\n"


async def test_deleted_then_recreated(tmp_path: Path) -> None:
    """A log deleted and created again later is a replacement, read from its start."""
    log = tmp_path / "x.log"
    log.write_bytes(b"one\n")
    async with LocalSource(log, poll_interval=FAST).open_follow() as items:
        await read_until(items, 4)
        log.unlink()
        log.write_bytes(b"two\n")
        assert await next_event(items) == FileRestarted("replaced")
        assert await read_until(items, 4) == b"two\n"


async def test_resume_past_end_is_truncation(tmp_path: Path) -> None:
    """Resuming at an offset beyond the file's size means it was truncated meanwhile."""
    log = tmp_path / "x.log"
    log.write_bytes(b"short\n")
    async with LocalSource(log, poll_interval=FAST).open_follow(100) as items:
        assert await next_event(items) == FileRestarted("truncated")
        assert await read_until(items, 6) == b"short\n"


async def test_directory_is_usage_error(tmp_path: Path) -> None:
    """Following something that is not a regular file raises UsageError from the iteration."""
    async with LocalSource(tmp_path, poll_interval=FAST).open_follow() as items:
        with anyio.fail_after(5), pytest.raises(UsageError, match="a directory, not a regular log file"):
            await anext(items)


async def test_errors_leave_the_block_unwrapped(tmp_path: Path) -> None:
    """An error raised in the follow block reaches the caller as itself, not as an ExceptionGroup."""

    async def follow_to_the_end(source: LocalSource) -> None:
        async with source.open_follow() as items:
            async for _ in items:
                pass

    async def fail_in_the_block(source: LocalSource) -> None:
        async with source.open_follow():
            raise KeyError("from the body")

    with pytest.raises(UsageError, match="a directory, not a regular log file"):
        await follow_to_the_end(LocalSource(tmp_path, poll_interval=FAST))
    with pytest.raises(KeyError):
        await fail_in_the_block(LocalSource(tmp_path / "x", poll_interval=FAST))


async def test_caught_up_once_after_existing_bytes(tmp_path: Path) -> None:
    """A file's existing bytes all arrive as chunks, then one CaughtUp(size), and nothing more while it is unchanged."""
    log = tmp_path / "x.log"
    payload = os.urandom(10_000)
    log.write_bytes(payload)
    async with LocalSource(log, poll_interval=FAST, read_size=4096).open_follow() as items:
        assert await read_to_caught_up(items, len(payload)) == payload
        await assert_quiet(items)


async def test_caught_up_again_after_append(tmp_path: Path) -> None:
    """Bytes appended to a followed file arrive as chunks, then CaughtUp with the new size, once."""
    log = tmp_path / "x.log"
    log.write_bytes(b"first\n")
    async with LocalSource(log, poll_interval=FAST).open_follow() as items:
        assert await read_to_caught_up(items, 6) == b"first\n"
        append_now(log, b"second\nthird\n")
        assert await read_to_caught_up(items, 19, start=6) == b"second\nthird\n"
        await assert_quiet(items)


async def test_merged_a_read_is_one_item(tmp_path: Path) -> None:
    """With `merge` set (`Merges`), a read's last chunk is its CaughtUp as well (`caught_up`), with no CaughtUp item
    of its own: a file read in several chunks ends in one that says so; an append is one item; an empty file's
    start, which has no chunk, is still a CaughtUp."""
    log = tmp_path / "x.log"
    payload = os.urandom(10_000)
    log.write_bytes(payload)
    async with LocalSource(log, poll_interval=FAST, read_size=4096).open_follow() as items:
        assert isinstance(items, Merges)
        items.merge = True
        with anyio.fail_after(5):
            got = [await anext(items) for _ in range(3)]
        assert [(c.offset, c.caught_up) for c in got if isinstance(c, Chunk)] == [
            (0, False),
            (4096, False),
            (8192, True),
        ]
        assert b"".join(c.data for c in got if isinstance(c, Chunk)) == payload
        append_now(log, b"second\n")
        with anyio.fail_after(5):
            item = await anext(items)
        assert isinstance(item, Chunk)
        assert item.caught_up
        assert (item.offset, item.data) == (10_000, b"second\n")
        await assert_quiet(items)
    log.write_bytes(b"")
    async with LocalSource(log, poll_interval=FAST).open_follow() as items:
        assert isinstance(items, Merges)
        items.merge = True
        with anyio.fail_after(5):
            assert await anext(items) == CaughtUp(0)
        append_now(log, b"hello\n")
        with anyio.fail_after(5):
            item = await anext(items)
        assert isinstance(item, Chunk)
        assert item.caught_up
        assert item.end == 6


async def test_not_merged_no_chunk_says_caught_up(tmp_path: Path) -> None:
    """Without `merge`, every CaughtUp is an item of its own, after a chunk that does not say it."""
    log = tmp_path / "x.log"
    log.write_bytes(b"first\n")
    async with LocalSource(log, poll_interval=FAST).open_follow() as items:
        with anyio.fail_after(5):
            chunk, then = await anext(items), await anext(items)
        assert isinstance(chunk, Chunk)
        assert not chunk.caught_up
        assert then == CaughtUp(6)


@pytest.mark.parametrize(
    ("content", "offset"),
    [pytest.param(b"", 0, id="empty"), pytest.param(b"already read\n", 13, id="read")],
)
async def test_caught_up_first_when_nothing_to_read(tmp_path: Path, content: bytes, offset: int) -> None:
    """Following an empty file (or from its end) gives CaughtUp(offset) first, then the appended bytes."""
    log = tmp_path / "x.log"
    log.write_bytes(content)
    async with LocalSource(log, poll_interval=FAST).open_follow(offset) as items:
        with anyio.fail_after(5):
            assert await anext(items) == CaughtUp(offset)
        await assert_quiet(items)
        append_now(log, b"hello\n")
        assert await read_to_caught_up(items, offset + 6, start=offset) == b"hello\n"


async def test_caught_up_again_in_a_truncated_file(tmp_path: Path) -> None:
    """A file cut to empty after being read gives FileRestarted('truncated'), then CaughtUp(0), then its new bytes."""
    log = tmp_path / "x.log"
    log.write_bytes(b"first incarnation\n")
    async with LocalSource(log, poll_interval=FAST).open_follow() as items:
        await read_to_caught_up(items, 18)
        os.truncate(log, 0)
        with anyio.fail_after(5):
            assert await anext(items) == FileRestarted("truncated")
            assert await anext(items) == CaughtUp(0)
        await assert_quiet(items)
        append_now(log, b"second\n")
        assert await read_to_caught_up(items, 7) == b"second\n"


_INOTIFY = pytest.mark.skipif(Watcher.get() is None, reason="no Linux inotify here: followers poll")
SLOW_POLL = 30.0  # longer than any deadline below: an item that arrives in time was woken by inotify


@_INOTIFY
async def test_inotify_wakes_the_follower_when_the_file_grows(tmp_path: Path) -> None:
    """With inotify, an append is read at once, not at the next poll (here 30 s away)."""
    log = tmp_path / "x.log"
    log.write_bytes(b"first\n")
    async with LocalSource(log, poll_interval=SLOW_POLL).open_follow() as items:
        assert await read_to_caught_up(items, 6) == b"first\n"
        append_now(log, b"second\n")
        assert await next_item(items, within=5.0) == Chunk(6, b"second\n")


@_INOTIFY
async def test_inotify_wakes_the_follower_when_the_file_appears_or_is_cut(tmp_path: Path) -> None:
    """A missing log's creation, and a truncation, wake its follower at once too."""
    log = tmp_path / "later.log"
    async with LocalSource(log, poll_interval=SLOW_POLL).open_follow() as items:
        assert await anext(items) == FileMissing(str(log))
        log.write_bytes(b"up\n")
        assert await read_until(items, 3) == b"up\n"
        log.write_bytes(b"")
        assert await next_event(items) == FileRestarted("truncated")


@_INOTIFY
async def test_inotify_counts_what_may_rename_a_path_apart_from_appends(tmp_path: Path) -> None:
    """An append changes a path's generation but not its `renames` (its follower asks no stat after a read);
    a file moved onto the path changes both (its follower looks at what the path names)."""
    watcher = Watcher.get()
    assert watcher is not None
    path = tmp_path / "x.log"
    path.write_bytes(b"first\n")
    log = str(path)
    assert watcher.watch(log)
    try:
        seen, named = watcher.generation(log), watcher.renames(log)
        append_now(path, b"second\n")
        with anyio.fail_after(5):
            assert await watcher.changed(log, seen)
        assert watcher.renames(log) == named
        seen = watcher.generation(log)
        (tmp_path / "new.log").write_bytes(b"other\n")
        os.replace(tmp_path / "new.log", log)
        with anyio.fail_after(5):
            assert await watcher.changed(log, seen)
            while watcher.renames(log) == named:  # the move may come in a later read than the first event
                seen = watcher.generation(log)
                await watcher.changed(log, seen, poll_after=0.05)
    finally:
        watcher.unwatch(log)


@_INOTIFY
async def test_a_wait_with_nothing_changed_ends_at_its_own_safety_poll(tmp_path: Path) -> None:
    """A wait's safety poll ends it on time even while another follower of the same event loop waits with a
    later one (the loop's one timer is brought forward), and says nothing changed; the later one waits on."""
    watcher = Watcher.get()
    assert watcher is not None
    quiet, other = str(tmp_path / "quiet.log"), str(tmp_path / "other.log")
    assert watcher.watch(quiet)
    assert watcher.watch(other)
    try:
        results: list[str] = []

        async def wait(path: str, after: float) -> None:
            results.append(
                f"{path} {await watcher.changed(path, watcher.generation(path), poll_after=after)}"
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait, other, SLOW_POLL)
            await anyio.lowlevel.checkpoint()  # the slow wait is made first
            with anyio.fail_after(5):
                await wait(quiet, 0.05)
            assert results == [f"{quiet} False"]
            tg.cancel_scope.cancel()
    finally:
        watcher.unwatch(quiet)
        watcher.unwatch(other)


@_INOTIFY
async def test_the_names_of_an_ended_watch_are_forgotten(tmp_path: Path) -> None:
    """The thread maps an event's (watch, name) to the path once; when the directory's last follower is gone its
    watch ends, and so do those names: the kernel may give the watch's number to another directory."""
    watcher = Watcher.get()
    assert watcher is not None
    path = tmp_path / "x.log"
    path.write_bytes(b"")
    log = str(path)
    assert watcher.watch(log)
    wd = watcher._dirs[str(tmp_path)]
    try:
        seen = watcher.generation(log)
        append_now(path, b"line\n")
        with anyio.fail_after(5):
            assert await watcher.changed(log, seen)
        assert log in {named for (number, _), named in watcher._named.items() if number == wd}
    finally:
        watcher.unwatch(log)
    assert not [key for key in watcher._named if key[0] == wd]


async def test_polls_without_inotify(tmp_path: Path) -> None:
    """Told not to use inotify (or where there is none), a follower polls and still sees appends."""
    log = tmp_path / "x.log"
    log.write_bytes(b"first\n")
    async with LocalSource(log, poll_interval=FAST, use_inotify=False).open_follow() as items:
        assert await read_to_caught_up(items, 6) == b"first\n"
        append_now(log, b"second\n")
        assert await next_item(items) == Chunk(6, b"second\n")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fstatfs file system types are Linux's")
@pytest.mark.parametrize(
    ("local", "reads_in_threads"),
    [pytest.param(True, False, id="local-fs"), pytest.param(False, True, id="network-fs")],
)
async def test_reads_on_a_local_file_system_stay_on_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, local: bool, reads_in_threads: bool
) -> None:
    """A file on a local file system is read on the event loop (only its open goes to a worker thread); on
    any other (NFS, FUSE: a read may block) every read goes to a worker thread. Either way appends arrive."""
    log = tmp_path / "x.log"
    log.write_bytes(b"first\n")
    monkeypatch.setattr(local_module, "_on_local_fs", lambda fd: local)
    calls: list[str] = []
    in_thread = local_module._in_daemon_thread

    def counted(fn: Any, *args: Any) -> Any:
        calls.append(getattr(fn, "__name__", repr(fn)))
        return in_thread(fn, *args)

    monkeypatch.setattr(local_module, "_in_daemon_thread", counted)
    async with LocalSource(log, poll_interval=FAST).open_follow() as items:
        assert await read_to_caught_up(items, 6) == b"first\n"
        append_now(log, b"second\n")
        assert await read_to_caught_up(items, 13, start=6) == b"second\n"
    assert calls[0] == "_open"
    assert (len(calls) > 1) is reads_in_threads


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fstatfs file system types are Linux's")
def test_the_file_system_of_a_log_is_told_local_or_not(tmp_path: Path) -> None:
    """A file on the test's temporary directory (a disk or tmpfs) counts as local; a /proc file does not."""
    log = tmp_path / "x.log"
    log.write_bytes(b"x\n")
    for path, local in ((log, True), (Path("/proc/self/status"), False)):
        fd = os.open(path, os.O_RDONLY)
        try:
            assert local_module._on_local_fs(fd) is local
        finally:
            os.close(fd)


def _fds_open_on(path: Path) -> int:
    """How many descriptors of this process are open on `path`."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == str(path):
                count += 1
        except OSError:
            continue
    return count


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/fd is Linux's")
async def test_a_wait_cancelled_mid_call_loses_nothing_and_leaks_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A caller that gives up waiting for the next item while the file is being opened in a worker thread (a
    slow network file system) loses nothing: the next wait goes on from there, with that same open file, and
    every byte arrives once."""
    log = tmp_path / "x.log"
    log.write_bytes(b"first\n")
    monkeypatch.setattr(local_module, "_on_local_fs", lambda fd: False)
    started, release = threading.Event(), threading.Event()
    real_open = local_module._open

    def slow_open(path: str) -> Any:
        started.set()
        release.wait(10)
        return real_open(path)

    monkeypatch.setattr(local_module, "_open", slow_open)
    async with LocalSource(log, poll_interval=FAST).open_follow() as items:
        scope = anyio.CancelScope()

        async def give_up_during_the_open() -> None:
            await anyio.to_thread.run_sync(started.wait, 10)
            scope.cancel()  # while the open is under way...
            release.set()  # ... which then completes

        async with anyio.create_task_group() as tg:
            tg.start_soon(give_up_during_the_open)
            with scope:
                await anext(items)
        assert scope.cancelled_caught
        assert await read_to_caught_up(items, 6) == b"first\n"
        assert _fds_open_on(log) == 1
        append_now(log, b"second\n")
        assert await read_to_caught_up(items, 13, start=6) == b"second\n"
    assert _fds_open_on(log) == 0


READY_LOG = (
    Path(__file__).parent / "fixtures" / "corpus" / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log"
)


async def test_a_replaced_log_counts_its_lines_from_1_and_starts_at_its_own_time(tmp_path: Path) -> None:
    """A real log replaced by a new file (a relaunch): the new incarnation's line numbers count from the new
    file's first line, and its start is dated by that line, not by the first file's."""
    from watchdog.follow.follower import LaunchFollower, LaunchSpec, Transitioned  # noqa: PLC0415
    from watchdog.follow.sources import parse_target  # noqa: PLC0415

    first = READY_LOG.read_bytes()
    second = first.replace(b"2025-01-23 19:3", b"2025-02-24 08:1")
    log = tmp_path / "server.log"
    log.write_bytes(first)
    spec = LaunchSpec(name="t", target=parse_target(str(log)), engine="sglang")
    follower = LaunchFollower(spec, source=LocalSource(log, poll_interval=FAST))
    lines: dict[int, list[int | None]] = {1: [], 2: []}
    async with anyio.create_task_group() as tg:
        tg.start_soon(follower.run)
        with anyio.fail_after(20), follower.updates:
            async for update in follower.updates:
                if isinstance(update, Transitioned):
                    t = update.transition
                    lines[t.incarnation].append(t.line)
                    if t.incarnation == 1 and t.state.value == "ready":
                        new = tmp_path / "server.log.new"
                        new.write_bytes(second)
                        new.replace(log)  # the relaunch's log takes the path
                    if t.incarnation == 2 and t.state.value == "ready":
                        break
        status = follower.status().to_json()
        tg.cancel_scope.cancel()
    assert lines[2] == lines[1], "the new file's lines are numbered from its own start"
    assert status["incarnation"] == 2
    assert status["timeline"][0]["line"] == 1
    assert status["timeline"][0]["at"].startswith("2025-02-24")


@pytest.mark.parametrize("inotify", [True, False], ids=["inotify", "poll"])
@pytest.mark.parametrize("grow", [0, 40], ids=["same-size", "larger"])
async def test_truncated_and_rewritten_in_one_step_is_a_restart(
    tmp_path: Path, inotify: bool, grow: int
) -> None:
    """`: > log` and the relaunch's first bytes written within one poll (to the same size, or beyond what was
    read): the file's first bytes differ, so it is a restart, read from 0, not an unchanged file or an append."""
    first = b"[2025-01-23 19:35:14] launch 1 banner\n" * 4
    second = b"[2025-02-24 08:10:01] launch 2 banner\n" * 4 + b"x" * (grow - 1) + b"\n" * (grow > 0)
    assert len(second) == len(first) + grow
    log = tmp_path / "x.log"
    log.write_bytes(first)
    async with LocalSource(log, poll_interval=FAST, use_inotify=inotify).open_follow() as items:
        assert await read_to_caught_up(items, len(first)) == first
        with log.open("r+b") as file:  # in one go: cut, then the new launch's bytes
            file.truncate(0)
            file.write(second)
        assert await next_event(items) == FileRestarted("truncated")
        assert await read_to_caught_up(items, len(second)) == second


@pytest.mark.parametrize("inotify", [True, False], ids=["inotify", "poll"])
async def test_rewritten_in_the_same_second_to_the_same_size_with_the_same_banner_is_a_restart(
    tmp_path: Path, inotify: bool
) -> None:
    """A relaunch within the same second writes the same first bytes (its banner's times are the same) and, cut
    and written again in one go, the same size: its last bytes differ, so it is a restart, not an unchanged
    file (it was missed 10 times in 20)."""
    banner = b"[2025-01-23 19:35:14] launch banner: --model-path /models/kimi --tp 8\n" * 8
    first = banner + b"[2025-01-23 19:35:14] RuntimeError: CUDA out of memory!\n"
    second = banner + b"[2025-01-23 19:35:14] INFO: loading weights, shard 1/64\n"
    assert len(first) == len(second)
    log = tmp_path / "x.log"
    log.write_bytes(first)
    async with LocalSource(log, poll_interval=FAST, use_inotify=inotify).open_follow() as items:
        assert await read_to_caught_up(items, len(first)) == first
        with log.open("r+b") as file:
            file.truncate(0)
            file.write(second)
        assert await next_event(items) == FileRestarted("truncated")
        assert await read_to_caught_up(items, len(second)) == second


@_INOTIFY
async def test_a_cancelled_wait_at_the_end_leaves_nothing_with_the_watcher(tmp_path: Path) -> None:
    """A follower's wait at its file's end (the watcher's future, awaited by the source itself), cancelled by a
    stop or a timeout, is taken off the watcher's lists: no future left for the reading thread to wake, no safety
    poll for the loop's timer; the next wait reads what came meanwhile."""
    watcher = Watcher.get()
    assert watcher is not None
    log = tmp_path / "x.log"
    log.write_bytes(b"first\n")
    async with LocalSource(log, poll_interval=SLOW_POLL).open_follow() as items:
        assert await read_to_caught_up(items, 6) == b"first\n"
        with anyio.move_on_after(0.05) as scope:
            await anext(items)
        assert scope.cancelled_caught
        assert str(log) not in watcher._waiting
        assert asyncio.get_running_loop() not in watcher._polls
        append_now(log, b"second\n")
        assert await next_item(items, within=5.0) == Chunk(6, b"second\n")


@_INOTIFY
async def test_a_growing_file_is_waited_for_with_one_request_object(tmp_path: Path) -> None:
    """Each wait at a growing file's end is the follow's one wait request, its `since` set anew (no object made per
    read), and each append after one still wakes the follower and arrives whole."""
    log = tmp_path / "x.log"
    log.write_bytes(b"0\n")
    source = LocalSource(log, poll_interval=SLOW_POLL)
    async with source.open_follow() as items:
        assert await read_to_caught_up(items, 2) == b"0\n"
        requests = []  # held: an object made per wait could reuse a freed one's id
        size = 2
        for i in range(1, 6):
            with anyio.fail_after(10):
                while True:  # reaches its wait at the end, then given up (nothing changed): a loaded machine
                    with anyio.move_on_after(0.01):  # may take more than one try to get there, and may be
                        await anext(items)  # cut off in a read's call in a worker thread on the way
                    if isinstance(items._request, _Changed):  # type: ignore[attr-defined]
                        break
            requests.append(items._request)  # type: ignore[attr-defined]  # the wait pending
            line = b"%d\n" % i
            append_now(log, line)
            assert await read_to_caught_up(items, size + len(line), start=size) == line
            size += len(line)
    assert all(request is requests[0] for request in requests)


@_INOTIFY
async def test_a_batch_wait_cut_short_and_taken_up_again_does_not_start_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pause that batches a busy file's reads is a deadline: a wait for the next item cancelled during it (a
    caller's timeout) and taken up again sleeps only what is left. As a duration each retry slept it anew, and a
    caller retrying more often than the pause never got the line (the CI failure of the one-request test)."""
    monkeypatch.setattr(local_module, "BATCH_INTERVAL", 0.5)
    log = tmp_path / "x.log"
    log.write_bytes(b"0\n")
    async with LocalSource(log, poll_interval=SLOW_POLL).open_follow() as items:
        assert await read_to_caught_up(items, 2) == b"0\n"
        append_now(log, b"1\n")  # the first wait after the start looks at once, and starts the batch's clock
        assert await read_to_caught_up(items, 4, start=2) == b"1\n"
        append_now(log, b"2\n")  # within the batch's 0.5 s: the follower pauses for what is left of it
        got: list[SourceItem] = []
        with anyio.fail_after(5):
            while not got:
                with anyio.move_on_after(0.05):  # ten times shorter than the pause
                    got.append(await anext(items))
    assert got == [Chunk(4, b"2\n")]
