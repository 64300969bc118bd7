"""Tests for `Pushes` in watchdog.follow.sources.local: the files one inotify read says changed are read in one
pass of the event loop and their items handed to `push`, with no wake-up of the followers' tasks; what `push`
gives back, and what needs a task, still comes through the iteration, in order."""

from __future__ import annotations

import asyncio
from pathlib import Path

import anyio
import pytest
from pushlog import PushLog, append_and_wait, assert_files_whole, follow_pushed, live_read, rotate

from watchdog.follow.sources import inotify as inotify_module
from watchdog.follow.sources.base import Chunk, SourceItem
from watchdog.follow.sources.inotify import Watcher
from watchdog.follow.sources.local import LocalSource

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(Watcher.get() is None, reason="needs Linux inotify"),
]

SLOW_POLL = 30.0  # no safety poll within a test: every look is one inotify asked for


async def _follow_all(tg: anyio.abc.TaskGroup, files: list[Path]) -> list[PushLog]:
    # each file followed (pushed), its first line read, every follower waiting on inotify
    for f in files:  # all there before the first watch: no event of theirs comes late
        f.write_bytes(b"started\n")
    logs = []
    for f in files:
        log = PushLog(live_read)
        logs.append(log)
        await tg.start(follow_pushed, LocalSource(f, poll_interval=SLOW_POLL), log)
        await log.until(lambda log=log: len(log.items) == 1)  # type: ignore[misc]
    await anyio.wait_all_tasks_blocked()
    return logs


async def _append_all(watcher: Watcher, files: list[Path], logs: list[PushLog], data: bytes) -> None:
    # `data` appended to every file at once (the reading thread takes what changed once every file has), and read
    with watcher._lock:
        for f in files:
            with f.open("ab") as out:
                out.write(data)
    for log in logs:
        await log.until(lambda log=log: len(log.items) == 2)  # type: ignore[misc]


async def test_the_files_one_read_says_changed_are_served_in_one_pass_with_no_task_woken(
    tmp_path: Path,
) -> None:
    """Many followed files appended at once: their reads are pushed from the inotify watcher's callback in the
    event loop (no follower's task runs for them), in at most two passes (the first append's read, then one for
    all the others), each file's bytes whole and at its offset."""
    watcher = Watcher.get()
    assert watcher is not None
    files = [tmp_path / f"l{i:02d}.log" for i in range(20)]
    passes: list[int] = []
    real = inotify_module._set_all

    def counted(waiters: list[inotify_module._Waiter], start: int = 0) -> None:
        if start == 0:  # (a pass longer than `SLICE` goes on in another callback: the same pass)
            passes.append(len(waiters))
        real(waiters, start)

    async with anyio.create_task_group() as tg:
        logs = await _follow_all(tg, files)
        assert all(str(f) in watcher._waiting for f in files)
        inotify_module._set_all = counted  # type: ignore[assignment]
        try:
            await _append_all(watcher, files, logs, b"serving 1\nserving 2\n")
        finally:
            inotify_module._set_all = real
        tg.cancel_scope.cancel()
    for log in logs:
        assert log.items[1] == ("pushed", Chunk(8, b"serving 1\nserving 2\n"))
        assert log.calls_in[1] is None  # in the loop's callback, not a task
    assert sum(passes) == len(files)
    assert len(passes) <= 2


async def test_a_pass_longer_than_its_slice_leaves_the_rest_to_the_next_callback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The files one read says changed are served in one callback for at most `SLICE` seconds (and one file
    more): with a slice of 0, each callback serves one file and leaves the rest to the next one (the HTTP server's
    and the other tasks' callbacks come between), and every file is served once, its bytes whole."""
    watcher = Watcher.get()
    assert watcher is not None
    files = [tmp_path / f"l{i:02d}.log" for i in range(8)]
    calls: list[tuple[int, int]] = []
    real = inotify_module._set_all

    def counted(waiters: list[inotify_module._Waiter], start: int = 0) -> None:
        calls.append((len(waiters), start))
        real(waiters, start)

    async with anyio.create_task_group() as tg:
        logs = await _follow_all(tg, files)
        monkeypatch.setattr(inotify_module, "SLICE", 0.0)
        monkeypatch.setattr(inotify_module, "_set_all", counted)
        await _append_all(watcher, files, logs, b"serving 1\n")
        tg.cancel_scope.cancel()
    for log in logs:
        assert log.items[1] == ("pushed", Chunk(8, b"serving 1\n"))
    # each pass's files one a callback: a first read's (maybe of one file), then the others'
    assert sum(1 for _, start in calls if start == 0) <= 2
    assert sorted(calls) == sorted(
        (size, start) for size, first in calls if first == 0 for start in range(size)
    )


async def test_a_pushed_follow_gets_every_byte_in_order_across_rotation_and_truncation(
    tmp_path: Path,
) -> None:
    """Live reads go to `push`; the rest of a rotated file and the restarts come through the iteration, between them
    in the order they happened: each file's bytes whole, in order, once."""
    path = tmp_path / "x.log"
    path.write_bytes(b"old 0\n")
    log = PushLog(live_read)
    async with anyio.create_task_group() as tg:
        await tg.start(follow_pushed, LocalSource(path, poll_interval=SLOW_POLL), log)
        await log.until(lambda: len(log.items) == 1)
        for i in range(1, 4):
            await append_and_wait(log, path, b"old %d\n" % i)
        assert [way for way, _ in log.items] == ["pushed"] * 4
        await rotate(log, path, b"old 4\n", b"new 0\n")
        await append_and_wait(log, path, b"new 1\n")
        with path.open("r+b") as out:  # copytruncate
            out.truncate(0)
            out.write(b"cut 0\n")
        await log.until(lambda: log.data().endswith(b"cut 0\n"))
        await append_and_wait(log, path, b"cut 1\n")
        tg.cancel_scope.cancel()
    assert_files_whole(
        log,
        ["rotated", "truncated"],
        [b"old 0\nold 1\nold 2\nold 3\nold 4\n", b"new 0\nnew 1\n", b"cut 0\ncut 1\n"],
    )
    assert ("pushed", Chunk(6, b"new 1\n")) in log.items


async def test_an_item_push_gives_back_comes_through_the_iteration_and_the_reads_go_on(
    tmp_path: Path,
) -> None:
    """What `push` does not take wholly (here: every other live read) is what the iteration gives next, in its
    place; the follow then waits on, and the next change is pushed again."""
    path = tmp_path / "x.log"
    path.write_bytes(b"0\n")
    taken = [False]

    def every_other(item: SourceItem) -> bool:
        taken[0] = not taken[0]
        return live_read(item) and taken[0]

    log = PushLog(every_other)
    async with anyio.create_task_group() as tg:
        await tg.start(follow_pushed, LocalSource(path, poll_interval=SLOW_POLL), log)
        await log.until(lambda: len(log.items) == 1)
        for i in range(1, 5):
            with path.open("ab") as out:
                out.write(b"%d\n" % i)
            await log.until(lambda: log.data().endswith(b"%d\n" % i))  # noqa: B023
        tg.cancel_scope.cancel()
    assert log.data() == b"0\n1\n2\n3\n4\n"
    assert [way for way, _ in log.items] == ["pushed", "iterated", "pushed", "iterated", "pushed"]


async def test_an_error_in_push_is_raised_by_the_iteration(tmp_path: Path) -> None:
    """An error `push` raises (out of the follower's task) is raised by the follower's iteration, as an error of
    its own handling would be."""
    path = tmp_path / "x.log"
    path.write_bytes(b"0\n")

    def fails(item: SourceItem) -> object:
        raise ValueError("the analyzer failed")

    async with LocalSource(path, poll_interval=SLOW_POLL).open_follow() as items:
        items.merge = True  # type: ignore[attr-defined]
        assert isinstance(await anext(items), Chunk)
        items.push = fails  # type: ignore[attr-defined]

        async def append() -> None:
            await anyio.wait_all_tasks_blocked()
            with path.open("ab") as out:
                out.write(b"1\n")

        async with anyio.create_task_group() as tg:
            tg.start_soon(append)
            with anyio.fail_after(5), pytest.raises(ValueError, match="analyzer failed"):
                await anext(items)


async def test_a_pushed_read_puts_the_safety_poll_off_as_a_new_wait_would(tmp_path: Path) -> None:
    """A wait taken up again after a pushed read keeps its future, and its safety poll counts from that read (not
    from when the task began to wait): a growing log is not looked at again by its task while inotify serves it."""
    watcher = Watcher.get()
    assert watcher is not None
    path = tmp_path / "x.log"
    path.write_bytes(b"0\n")
    log = PushLog(live_read)
    loop = asyncio.get_running_loop()
    async with anyio.create_task_group() as tg:
        await tg.start(follow_pushed, LocalSource(path, poll_interval=SLOW_POLL), log)
        await log.until(lambda: len(log.items) == 1)
        await anyio.wait_all_tasks_blocked()
        ((_, future, _),) = watcher._waiting[str(path)]
        assert watcher._polls[loop][future] < loop.time() + SLOW_POLL
        written = loop.time()
        with path.open("ab") as out:
            out.write(b"1\n")
        await log.until(lambda: len(log.items) == 2)
        assert log.items[1][0] == "pushed"
        ((_, again, _),) = watcher._waiting[str(path)]
        assert again is future
        assert watcher._polls[loop][future] >= written + SLOW_POLL
        tg.cancel_scope.cancel()
