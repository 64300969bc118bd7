"""Tests for `Pushes` in watchdog.follow.sources.ssh, against a real OpenSSH sshd: a live read of a remote log is
handed to `push` in the callback that brings the connection's data (with the host's other logs'), with no wake-up
of the follower's task; what needs the task (a rotation, an item `push` gives back, an error) comes through the
iteration, in order."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import anyio
import pytest
from pushlog import PushLog, append_and_wait, assert_files_whole, follow_pushed, live_read, rotate
from sshd_server import SSHDServer, busy_until_pending, pending

from watchdog.follow.sources.base import CaughtUp, Chunk, Connected, SourceItem
from watchdog.follow.sources.channel import NOT_TAKEN, TAKEN
from watchdog.follow.sources.ssh import SSHSource
from watchdog.follow.sources.sshpool import SSHOptions, SSHPool

pytestmark = [pytest.mark.anyio, pytest.mark.sshd]

FAST = 0.05


@pytest.fixture
async def pool(ssh_options: SSHOptions, anyio_backend: str) -> Any:
    """A connection pool to the test sshd, closed after the test."""
    async with SSHPool(ssh_options) as pool:
        yield pool


# what the SSH source iterates besides its reads: its connection, and a caught-up with no data
_follow = functools.partial(follow_pushed, skip=(Connected, CaughtUp))


def _source(pool: SSHPool, sshd: SSHDServer, path: Path) -> SSHSource:
    return SSHSource(
        pool, sshd.host, str(path), port=sshd.port, user=sshd.user, poll_interval=FAST, stat_interval=FAST
    )


async def testlive_reads_of_a_host_s_logs_are_pushed_outside_their_tasks(
    sshd: SSHDServer, pool: SSHPool, tmp_path: Path
) -> None:
    """Logs of one host appended after they were read: each append is pushed whole and at its offset, from the
    connection's callback (no follower's task runs for it), once the log has been read to its end; every byte
    arrives once, in order."""
    paths = [tmp_path / f"l{i}.log" for i in range(4)]
    logs = []
    async with anyio.create_task_group() as tg:
        for path in paths:
            path.write_bytes(b"started\n")
            log = PushLog(live_read)
            logs.append(log)
            await tg.start(_follow, _source(pool, sshd, path), log)
        for log in logs:
            await log.until(lambda log=log: log.data() == b"started\n")  # type: ignore[misc]
        for round_ in range(3):
            for path in paths:
                with path.open("ab") as out:
                    out.write(b"serving %d\n" % round_)
            for log in logs:
                await log.until(lambda log=log, r=round_: log.data().endswith(b"serving %d\n" % r))  # type: ignore[misc]
        tg.cancel_scope.cancel()
    for log in logs:
        assert log.data() == b"started\nserving 0\nserving 1\nserving 2\n"
        chunks = [item for _, item in log.items if isinstance(item, Chunk)]
        assert [c.offset for c in chunks] == [
            sum(len(c.data) for c in chunks[:k]) for k in range(len(chunks))
        ]
        # (a live read that comes while a status line of the reader's waits for the task goes through the task)
        assert "pushed" in [way for way, _ in log.items[1:]]
        assert set(log.taken_in) == {None}


async def test_a_pushed_remote_follow_gets_every_byte_in_order_across_rotation(
    sshd: SSHDServer, pool: SSHPool, tmp_path: Path
) -> None:
    """A rotation while live reads are pushed: the old file's rest, the restart and the new file come in the order
    they happened, each file's bytes whole, in order, once."""
    path = tmp_path / "rot.log"
    path.write_bytes(b"old 0\n")
    log = PushLog(live_read)
    async with anyio.create_task_group() as tg:
        await tg.start(_follow, _source(pool, sshd, path), log)
        await log.until(lambda: log.data() == b"old 0\n")
        await append_and_wait(log, path, b"old 1\n")
        await rotate(log, path, b"old 2\n", b"new 0\n")
        await append_and_wait(log, path, b"new 1\n")
        tg.cancel_scope.cancel()
    assert_files_whole(log, ["rotated"], [b"old 0\nold 1\nold 2\n", b"new 0\nnew 1\n"])
    assert ("pushed", Chunk(6, b"new 1\n")) in log.items


async def test_what_push_gives_back_or_raises_comes_through_the_iteration(
    sshd: SSHDServer, pool: SSHPool, tmp_path: Path
) -> None:
    """An item `push` does not take wholly is what the iteration gives next, in its place; an error it raises (out
    of the follower's task) is raised by the iteration."""
    path = tmp_path / "x.log"
    path.write_bytes(b"0\n")
    calls: list[SourceItem] = []
    armed = False

    def push(item: SourceItem) -> object:
        if armed:
            calls.append(item)
            if len(calls) == 2:
                raise ValueError("the analyzer failed")
        return item

    async with _source(pool, sshd, path).open_follow() as items:
        items.merge = True  # type: ignore[attr-defined]
        items.push = push  # type: ignore[attr-defined]
        with anyio.fail_after(10):
            while not (isinstance(item := await anext(items), Chunk) and item.caught_up):
                pass
            armed = True
            with path.open("ab") as out:
                out.write(b"1\n")
            while not isinstance(item := await anext(items), Chunk):
                pass
            assert item == Chunk(2, b"1\n")
            assert calls == [item]
            with path.open("ab") as out:
                out.write(b"2\n")
            with pytest.raises(ValueError, match="analyzer failed"):
                await anext(items)


async def test_a_log_s_packets_that_came_in_one_read_are_handed_on_as_one_chunk(
    sshd: SSHDServer, pool: SSHPool, tmp_path: Path
) -> None:
    """Appends that piled up in the connection's socket while the event loop was busy, each its own packet, come
    in one read: they are handed on as one chunk, whole and at its offset (not a chunk each)."""
    path = tmp_path / "piled.log"
    path.write_bytes(b"started\n")
    log = PushLog(live_read)
    lines = [b"serving %d\n" % i for i in range(5)]
    async with anyio.create_task_group() as tg:
        await tg.start(_follow, _source(pool, sshd, path), log)
        await log.until(lambda: log.data() == b"started\n")
        [conn] = pool.connections(sshd.host, port=sshd.port, user=sshd.user)
        sock = conn.get_extra_info("socket")
        # the event loop kept busy: each line sent (its own packet) before the next is written
        for line in lines:
            before = pending(sock)
            with path.open("ab") as out:
                out.write(line)
            busy_until_pending(sock, before + len(line))
        await log.until(lambda: log.data() == b"started\n" + b"".join(lines))
        tg.cancel_scope.cancel()
    chunks = [item for _, item in log.items if isinstance(item, Chunk) and item.offset >= 8]
    assert b"".join(chunk.data for chunk in chunks) == b"".join(lines)
    assert chunks[0].offset == 8
    # one chunk (two where a status line of the reader's came between its packets), not one a packet
    assert len(chunks) <= 2, chunks


async def test_the_reader_s_status_lines_that_only_say_what_is_are_taken_outside_the_task(
    sshd: SSHDServer, pool: SSHPool, tmp_path: Path
) -> None:
    """The reader's status lines come on its stderr at its own times (its process, the stat loop's samples and
    wait). Those that only say what is are taken in the connection's callback, as its appends are: one that comes
    just before an append does not queue that append for the follower's task (it was taken there, and `push` not
    called, when it came first). A line in pieces, the reader's end, a truncation and a rotation begun need the
    task."""
    path = tmp_path / "s.log"
    path.write_bytes(b"0\n")
    inode = path.stat().st_ino
    log = PushLog(live_read)
    async with SSHSource(
        pool, sshd.host, str(path), port=sshd.port, user=sshd.user, poll_interval=FAST, stat_interval=FAST
    ).open_follow() as items:
        items.merge = True  # type: ignore[attr-defined]
        items.push = log.push  # type: ignore[attr-defined]
        follower = items._follower  # type: ignore[attr-defined]
        async with anyio.create_task_group() as tg:
            tg.start_soon(_iterate, items, log)
            await log.until(lambda: log.data() == b"0\n")
            log.items.clear()
            for needs_task in (
                b"W",  # a line in pieces
                b"E\n",
                b"tail: /dev/fd/3: file truncated\n",
                b"S %d 2 0 %d 0 1\n" % (inode, inode + 1),  # the path names another file now
            ):
                assert follower._drive(("err", needs_task, None)) == NOT_TAKEN, needs_task
            assert follower.rotation is None
            assert not follower.out
            for says_what_is in (b"W\n", b"P 4242 4242\n", b"S %d 2 1 %d 2 1\n" % (inode, inode)):
                assert follower._drive(("err", says_what_is, None)) == TAKEN, says_what_is
            assert follower.remote == (4242, 4242)
            # the append that follows the status lines is pushed, not left for the task
            assert follower._drive(("out", b"1\n", None)) == TAKEN
            assert log.items == [("pushed", Chunk(2, b"1\n"))]
            assert follower.offset == 4
            assert follower.rotation is None
            tg.cancel_scope.cancel()


async def _iterate(items: Any, log: PushLog) -> None:
    async for item in items:
        if not isinstance(item, (Connected, CaughtUp)):
            log.iterated(item)
